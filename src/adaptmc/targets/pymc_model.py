"""A PyMC model as a `Target`, through PyMC's JAX export.

PyMC gives each free random variable a value variable in an unconstrained space (its default
transform, e.g. ``log`` for a positive scale) and the model's log density over the value
variables, transforms' log-Jacobians included (``model.logp()``); PyTensor's JAX backend
turns that graph into a JAX function (``pymc.sampling.jax.get_jaxified_graph``, the export
PyMC's own JAX NUTS samplers use). PyMC is an optional dependency (``pip install
adaptmc[pymc]``), imported inside the function.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from adaptmc.targets.base import Array, Target, make_target


def from_pymc(model: Any, name: str | None = None) -> Target:
    """The posterior of a PyMC model over its value variables (unconstrained space).

    Parameters
    ----------
    model
        A ``pymc.Model`` with continuous free random variables.
    name
        The target's name; default the model's name, or ``"pymc-model"`` when it has none.

    Returns
    -------
    Target
        ``logdensity`` is ``model.logp()`` (the joint log density, Jacobians included) as a
        JAX function of the flattened value variables (sorted by name, as ``ravel_pytree``
        flattens a dict);
        ``parameter_names`` are the value variables' names (``tau_log__``, ``theta[3]``);
        the start is ``model.initial_point()``; ``constrain(position)`` gives the free
        random variables in their own space (each transform's backward map) and the
        model's Deterministics, named as the model names them; ``info`` carries the model
        and its observations (`adaptmc.targets.observations.pymc_observations`).

    Raises
    ------
    ValueError
        If the model has a discrete free variable or none at all.

    Notes
    -----
    Importing ``pymc.sampling.jax`` sets JAX's 64-bit mode to match PyTensor's ``floatX``
    (``float64`` by default): the whole process then computes in double precision.
    """
    from pymc.sampling.jax import get_jaxified_graph

    from adaptmc.targets.observations import pymc_observations, pymc_pointwise

    values = _continuous_values(model)
    logp_graph = get_jaxified_graph(inputs=values, outputs=[model.logp()])
    free = list(model.free_RVs) + list(model.deterministics)
    constrain_graph = get_jaxified_graph(inputs=values, outputs=model.replace_rvs_by_values(free))
    point = model.initial_point()
    initial = {v.name: jnp.asarray(np.asarray(point[v.name])) for v in values}
    order = [v.name for v in values]

    def logdensity(params: dict[str, Array]) -> Array:
        return logp_graph(*(params[n] for n in order))[0]

    def constrain(params: dict[str, Array]) -> dict[str, Array]:
        out = constrain_graph(*(params[n] for n in order))
        return {rv.name: x for rv, x in zip(free, out, strict=True)}

    target = make_target(logdensity, initial, name=name or model.name or "pymc-model",
                         info={"source": "pymc", "model": model,
                               "observations": pymc_observations(model)},
                         constrain=constrain)
    if model.observed_RVs:
        target.info["pointwise"] = pymc_pointwise(model, order, target.unravel)
    return target


def _continuous_values(model: Any) -> list:
    """The model's value variables; `ValueError` when there is none or one is discrete."""
    values = list(model.value_vars)
    if not values:
        raise ValueError("the PyMC model has no free random variables")
    discrete = [v.name for v in values if v.dtype.startswith(("int", "uint", "bool"))]
    if discrete:
        raise ValueError(f"PyMC variables {discrete} are discrete; adaptmc samples continuous "
                         "parameters only (marginalise them out or observe them)")
    return values
