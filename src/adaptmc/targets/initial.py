"""Starting values as a user writes them: ``{name: value}`` in the model's constrained space
(``{"tau": 2.0}``, as NumPyro's ``init_to_value`` and PyMC's ``initvals`` take them), mapped
to the target's unconstrained flat position; parameters not named start where the target
starts."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def unconstrained_point(target: Any, values: dict) -> np.ndarray:
    """The ``(dim,)`` unconstrained position of the named constrained ``values``: through
    Stan's own ``unconstrain``, NumPyro's ``unconstrain_fn``, the PyMC transforms' forward
    maps, a built-in target's ``info["unconstrain"]``, or (a JAX log density without
    ``constrain``) the parameters themselves.
    `ValueError` naming an unknown parameter or a value outside its support."""
    start = _named_start(target)
    if not start:
        raise ValueError("init: the target's parameters have no names (a flat array); give "
                         "the unconstrained point as an array")
    unknown = sorted(set(values) - set(start))
    if unknown:
        raise ValueError(f"init names {unknown}; the model's parameters are "
                         f"{sorted(start)}")
    merged = {**start, **{k: np.asarray(v, dtype=float) for k, v in values.items()}}
    for name, value in merged.items():
        if np.shape(value) != np.shape(start[name]):
            raise ValueError(f"init {name!r} has shape {np.shape(value)}; expected "
                             f"{np.shape(start[name])}")
    try:
        point = np.asarray(_unconstrain(target, merged), dtype=float)
    except ValueError as err:
        raise ValueError(f"init: {err} (a value outside its parameter's support?)") from None
    if point.shape != (target.dim,) or not np.all(np.isfinite(point)):
        raise ValueError("init: a value lies outside its parameter's support (its "
                         "unconstrained value is not finite)")
    return point


def unconstrained_draws(target: Any, values: dict) -> np.ndarray:
    """``(chains, draws, dim)`` unconstrained positions of a run's constrained, named draws
    ``values: {name: (chains, draws, *shape)}`` (its posterior), each draw mapped back as
    `unconstrained_point` maps a start; transformed parameters and generated quantities in
    ``values`` are ignored. `KeyError` naming a parameter ``values`` lacks."""
    names = list(_named_start(target, jax.eval_shape))  # names alone: no program
    arrays = {name: np.asarray(values[name], dtype=float) for name in names}
    chains, draws = np.shape(arrays[names[0]])[:2]
    out = np.empty((chains, draws, target.dim))
    for c in range(chains):
        for d in range(draws):
            out[c, d] = _unconstrain(target, {k: v[c, d] for k, v in arrays.items()})
    return out


def _unconstrain(target, merged: dict):
    info = target.info
    if "stan_model" in info:
        return info["stan_model"].unconstrain(merged)
    if info.get("source") == "numpyro":
        from numpyro.infer.util import unconstrain_fn

        return _ravel(unconstrain_fn(info["model"], info["model_args"],
                                     info["model_kwargs"], merged))
    if info.get("source") == "pymc":
        return _ravel(_pymc_unconstrain(info["model"], merged))
    if "unconstrain" in info:  # a built-in translation of a Stan program (posteriordb)
        return info["unconstrain"](merged)
    return _ravel(merged)


def _named_start(target, call=None) -> dict[str, np.ndarray]:
    """The target's start by parameter name, constrained (sampled parameters only);
    ``call``: ``jax.eval_shape`` for their shapes alone (no program compiled)."""
    info = target.info
    if "stan_model" in info:
        model = info["stan_model"]
        names = [v.name for v in model.variables if v.block == "parameters"]
        if call is not None:  # the names are the model's
            return dict.fromkeys(names)
        named = target.constrain(target.initial_position)
        return {name: np.asarray(named[name]) for name in names}
    call = call or (lambda f, x: f(x))
    as_array = np.asarray if call is not jax.eval_shape else (lambda v: v)
    unconstrained = call(target.unravel, target.initial_position)
    if target.constrain is None:
        return {k: as_array(v) for k, v in unconstrained.items()} \
            if isinstance(unconstrained, dict) else {}
    named = call(target.constrain, target.initial_position)
    if "unconstrain" in info:  # its constrained quantities are its named parameters
        return {k: as_array(v) for k, v in named.items()}
    if info.get("source") == "pymc":
        model = info["model"]
        return {rv.name: as_array(named[rv.name]) for rv in model.free_RVs}
    return {k: as_array(named[k]) for k in unconstrained if k in named}


def _pymc_unconstrain(model, values: dict) -> dict:
    """PyMC's value variables (``tau_log__``) of the free variables' ``values``."""
    out = {}
    for rv in model.free_RVs:
        value_var = model.rvs_to_values[rv]
        transform = model.rvs_to_transforms.get(rv)
        value = values[rv.name]
        out[value_var.name] = value if transform is None else \
            np.asarray(transform.forward(value, *rv.owner.inputs).eval())
    return out


def _ravel(values: dict) -> np.ndarray:
    from jax.flatten_util import ravel_pytree

    return np.asarray(ravel_pytree({k: np.asarray(v, float) for k, v in values.items()})[0])
