"""Targets: flat log densities with gradients, and the built-ins by name.

`BUILTIN_TARGETS` is a plain dict from name to a function that builds the target, or to a
``module:function`` string for a target built in a higher layer (the robot-arm BNN lives in
`adaptmc.models`, which imports this package), loaded when asked for; `get_target` also
accepts a user's ``module:function`` returning a `Target` (or a
``(logdensity_fn, initial_params)`` pair).
"""

from __future__ import annotations

from collections.abc import Callable

from adaptmc.spec import load_object
from adaptmc.targets.base import Reference, Target, check_position, make_target
from adaptmc.targets.funnel import banana, funnel
from adaptmc.targets.gaussians import correlated_2d, gaussian, gp_gaussian_51d, neal_100d
from adaptmc.targets.logistic import logistic_dataset, logistic_regression
from adaptmc.targets.posteriordb import posteriordb_target, posteriordb_targets

BUILTIN_TARGETS: dict[str, Callable[[], Target] | str] = {
    "neal-100d": neal_100d,
    "gauss-2d-v1": lambda: correlated_2d(1.0),
    "gauss-2d-v2": lambda: correlated_2d(2.0),
    "gp-gauss-51d": gp_gaussian_51d,
    "std-normal-10d": lambda: gaussian([0.0] * 10, 1.0, name="std-normal-10d"),
    "funnel-10d": lambda: funnel(10),
    "banana": banana,
    "bnn-robot-arm": "adaptmc.models.robot_arm:robot_arm_target",
    **{
        f"logistic-{name}": (lambda name=name: logistic_dataset(name))
        for name in ("australian", "german", "heart", "pima", "ripley", "caravan")
    },
    **posteriordb_targets(),
}


def get_target(spec: str) -> Target:
    """A built-in target by name, or ``package.module:function`` for a user's target.

    The user's function takes no arguments and returns a `Target` or a pair
    ``(logdensity_fn, initial_params)`` that `make_target` turns into one.
    """
    if spec in BUILTIN_TARGETS:
        builder = BUILTIN_TARGETS[spec]
        return (load_object(builder, "target") if isinstance(builder, str) else builder)()
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
        return make_target(made[0], made[1], name=spec.partition(":")[2])
    raise ValueError(
        f"{spec} must return a Target or a (logdensity_fn, initial_params) pair, "
        f"got {type(made).__name__}"
    )


__all__ = [
    "BUILTIN_TARGETS",
    "Reference",
    "Target",
    "banana",
    "check_position",
    "correlated_2d",
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
