"""Targets: flat log densities with gradients, and the built-ins by name.

`BUILTIN_TARGETS` is a plain dict from name to a function that builds the target;
`get_target` also accepts a user's ``module:function`` returning a `Target` (or a
``(logdensity_fn, initial_params)`` pair). `from_numpyro` and `from_pymc` turn a NumPyro or
PyMC model into a `Target`; `as_target` picks among all of these for one object.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from adaptmc.spec import load_object
from adaptmc.targets.base import Reference, Target, check_position, make_target
from adaptmc.targets.funnel import banana, funnel
from adaptmc.targets.gaussians import correlated_2d, gaussian, gp_gaussian_51d, neal_100d
from adaptmc.targets.logistic import logistic_dataset, logistic_regression
from adaptmc.targets.numpyro_model import from_numpyro
from adaptmc.targets.posteriordb import posteriordb_target, posteriordb_targets
from adaptmc.targets.pymc_model import from_pymc

BUILTIN_TARGETS: dict[str, Callable[[], Target]] = {
    "neal-100d": neal_100d,
    "gauss-2d-v1": lambda: correlated_2d(1.0),
    "gauss-2d-v2": lambda: correlated_2d(2.0),
    "gp-gauss-51d": gp_gaussian_51d,
    "std-normal-10d": lambda: gaussian([0.0] * 10, 1.0, name="std-normal-10d"),
    "funnel-10d": lambda: funnel(10),
    "banana": banana,
    **{
        f"logistic-{name}": (lambda name=name: logistic_dataset(name))
        for name in ("australian", "german", "heart", "pima", "ripley", "caravan")
    },
    **posteriordb_targets(),
}


def get_target(spec: str, data: Any = None) -> Target:
    """A built-in target by name, ``package.module:function`` for a user's target, or a
    Stan program's ``.stan`` file with its ``data`` (`adaptmc.targets.stan.stan_target`).

    The user's function takes no arguments and returns a `Target` or a pair
    ``(logdensity_fn, initial_params)`` that `make_target` turns into one.
    """
    if str(spec).endswith(".stan"):
        from adaptmc.targets.stan import stan_target  # imported only for a Stan program

        return stan_target(spec, data)
    if data is not None:
        raise ValueError(f"data is for a Stan program (a .stan file), not for {spec!r}")
    if spec in BUILTIN_TARGETS:
        return BUILTIN_TARGETS[spec]()
    if ":" not in spec:
        raise ValueError(
            f"unknown target {spec!r}; built-ins: {', '.join(sorted(BUILTIN_TARGETS))}; "
            "or give 'module:function' for your own"
        )
    made = load_object(spec, "target")()
    if isinstance(made, Target):
        check_position(made, made.initial_position, "initial position")
        return made
    if isinstance(made, tuple) and len(made) == 2:
        _check_numbers(spec, made[1])
        return make_target(made[0], made[1], name=spec.partition(":")[2])
    raise ValueError(
        f"{spec} must return a Target or a (logdensity_fn, initial_params) pair, "
        f"got {type(made).__name__}"
    )


def _check_numbers(spec: str, initial_params: Any) -> None:
    """``initial_params`` of a user's pair: an array or a pytree of arrays of numbers."""
    import jax
    import numpy as np

    for leaf in jax.tree.leaves(initial_params):
        kind = "U" if isinstance(leaf, str | bytes) else np.asarray(leaf).dtype.kind
        if kind not in "biuf":
            raise ValueError(f"{spec} returned (logdensity_fn, initial_params) whose "
                             f"initial_params are not numbers: {leaf!r:.60}")


def as_target(obj: Any, *args: Any, name: str | None = None, **kwargs: Any) -> Target:
    """Whatever a user hands to ``adaptmc.sample``, as a `Target`.

    Parameters
    ----------
    obj
        One of: a `Target` (returned as it is); a ``str``, a built-in name or
        ``module:function`` (`get_target`); the path of a Stan program (``.stan``), whose
        data is the keyword ``data`` (`adaptmc.targets.stan.stan_target`); a pair
        ``(logdensity_fn, initial_params)`` (`make_target`); a ``pymc.Model``
        (`from_pymc`); a NumPyro model function, told by running it once under NumPyro's
        ``seed`` and ``trace`` handlers with ``*args`` and ``**kwargs`` and finding a sample
        site (`from_numpyro`, with the same arguments).
    *args, **kwargs
        The NumPyro model's arguments (its data), or a Stan program's ``data=`` (a dict or
        a ``.json``/``.json.zip`` path); not accepted for the other kinds.
    name
        The target's name, for a pair or a model (a `Target` or a name keeps its own).

    Raises
    ------
    ValueError
        If ``obj`` is none of these, or arguments come with a kind that takes none.
    """
    if isinstance(obj, str | os.PathLike) and str(obj).endswith(".stan"):
        from adaptmc.targets.stan import stan_target  # imported only for a Stan program

        return stan_target(obj, *args, name=name, **kwargs)
    if isinstance(obj, Target | str | tuple) or _is_pymc_model(obj):
        if args or kwargs:
            raise ValueError(
                f"model arguments are for a NumPyro model only; got them with a "
                f"{type(obj).__name__} (bind data into the log density instead)"
            )
        if isinstance(obj, Target):
            return obj
        if isinstance(obj, str):
            return get_target(obj)
        if _is_pymc_model(obj):
            return from_pymc(obj, name=name)
        if len(obj) == 2 and callable(obj[0]):
            return make_target(obj[0], obj[1], name=name or "user")
    if callable(obj) and _is_numpyro_model(obj, args, kwargs):
        return from_numpyro(obj, *args, name=name, **kwargs)
    raise ValueError(
        f"cannot make a target from a {type(obj).__name__}: give a Target, a built-in name "
        "or 'module:function', a (logdensity_fn, initial_params) pair, a pymc.Model or a "
        "NumPyro model function (with its data as further arguments)"
    )


def _is_pymc_model(obj: Any) -> bool:
    pymc = sys.modules.get("pymc")  # a pymc.Model exists only once pymc is imported
    return pymc is not None and isinstance(obj, pymc.Model)


def _is_numpyro_model(model: Callable, args: tuple, kwargs: dict) -> bool:
    """Whether ``model(*args, **kwargs)``, run once under NumPyro's ``seed`` and ``trace``
    handlers, records a sample site; `ValueError` with the model's own error if it fails."""
    if sys.modules.get("numpyro") is None:  # a NumPyro model imports numpyro to sample
        return False
    from numpyro import handlers

    try:
        trace = handlers.trace(handlers.seed(model, rng_seed=0)).get_trace(*args, **kwargs)
    except Exception as err:
        raise ValueError(
            f"{getattr(model, '__name__', model)!r} is callable, so it was run as a NumPyro "
            f"model with the arguments given, and failed: {type(err).__name__}: {err}"
        ) from err
    return any(site["type"] == "sample" for site in trace.values())


__all__ = [
    "BUILTIN_TARGETS",
    "Reference",
    "Target",
    "as_target",
    "banana",
    "check_position",
    "correlated_2d",
    "from_numpyro",
    "from_pymc",
    "funnel",
    "gaussian",
    "get_target",
    "gp_gaussian_51d",
    "logistic_dataset",
    "logistic_regression",
    "make_target",
    "neal_100d",
    "posteriordb_target",
]
