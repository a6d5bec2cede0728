"""A NumPyro model as a `Target`, through NumPyro's own utilities.

NumPyro maps every latent sample site to an unconstrained space with the bijection of its
support (``biject_to``) and gives the potential energy there, Jacobians included
(``numpyro.infer.util.initialize_model``); the `Target` is minus that potential over the
flattened unconstrained sites. NumPyro is imported inside the functions, so adaptmc imports
without it (``pip install adaptmc[peers]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from adaptmc.targets.base import Array, Target, make_target

INIT_SEED = 0
"""The PRNG seed of NumPyro's initialisation strategy: the same model gives the same start."""


def from_numpyro(model: Callable[..., Any], *model_args: Any, name: str | None = None,
                 init: dict[str, Any] | Callable | None = None, **model_kwargs: Any) -> Target:
    """The posterior of a NumPyro model over its unconstrained latent sites.

    Parameters
    ----------
    model
        A NumPyro model: a function calling ``numpyro.sample``; observed sites carry
        ``obs=``.
    *model_args, **model_kwargs
        The model's arguments (the data), bound once: the `Target` is the posterior given them.
    name
        The target's name; default the model function's ``__name__``.
    init
        Where to start: a dict ``{site: value}`` in the constrained space (NumPyro's
        ``init_to_value``; sites left out start from NumPyro's default), or a NumPyro init
        strategy such as ``numpyro.infer.init_to_median``. Default NumPyro's
        ``init_to_uniform``, drawn with the fixed seed `INIT_SEED`.

    Returns
    -------
    Target
        ``logdensity(position) = -potential_energy(unravel(position))``: the log joint density
        of the latent sites mapped to the unconstrained space, with the log-Jacobians of the
        bijections (Carpenter et al. 2017, Stan, sec. "Transformations of constrained
        variables"). Flat positions ravel the unconstrained site dict (sites in sorted name
        order); ``parameter_names`` are the site names with indices (``theta[3]``), and
        ``constrain(position)`` gives the latent sample sites in their own space, named as
        the model names them, with its deterministic sites (no observed sites); ``info``
        carries the model, its arguments and its observations (`adaptmc.targets.
        observations.numpyro_observations`: pointwise log-likelihood for LOO).

    Raises
    ------
    ValueError
        If a latent site is discrete (the kernels move continuous positions only).
    """
    from numpyro import handlers
    from numpyro.infer.util import constrain_fn

    from adaptmc.targets.observations import numpyro_observations, numpyro_pointwise

    seeded = handlers.seed(model, rng_seed=INIT_SEED)
    trace = handlers.trace(seeded).get_trace(*model_args, **model_kwargs)
    _check_continuous(trace)
    potential, unconstrained = _initialized(model, model_args, model_kwargs, init)

    def constrain(params: dict[str, Array]) -> dict[str, Array]:
        return constrain_fn(model, model_args, model_kwargs, params, return_deterministic=True)

    observations = numpyro_observations(model, model_args, model_kwargs, trace)
    target = make_target(lambda params: -potential(params), unconstrained,
                         name=name or getattr(model, "__name__", "numpyro-model"),
                         info={"source": "numpyro", "model": model, "model_args": model_args,
                               "model_kwargs": model_kwargs, "observations": observations},
                         constrain=constrain)
    target.info["pointwise"] = numpyro_pointwise(model, model_args, model_kwargs,
                                                 target.constrain)
    return target


def _initialized(model, model_args: tuple, model_kwargs: dict, init):
    """``(potential_fn, unconstrained start)`` of NumPyro's ``initialize_model`` under the
    ``init`` of `from_numpyro`."""
    from numpyro.infer.util import init_to_uniform, init_to_value, initialize_model

    strategy = init_to_uniform if init is None else \
        init_to_value(values=init) if isinstance(init, dict) else init
    info = initialize_model(jax.random.key(INIT_SEED), model, init_strategy=strategy,
                            model_args=model_args, model_kwargs=model_kwargs,
                            dynamic_args=False)
    return info.potential_fn, info.param_info.z


def _check_continuous(trace: dict) -> None:
    """Raise `ValueError` naming the first latent sample site with a discrete support."""
    for site_name, site in trace.items():
        if site["type"] != "sample" or site["is_observed"]:
            continue
        if site["fn"].support.is_discrete:
            raise ValueError(
                f"NumPyro site {site_name!r} is a discrete latent variable; adaptmc samples "
                "continuous parameters only (marginalise it out or observe it)"
            )
