"""The tuners the recipes build by name: `TUNERS`, a plain dict ``name -> TunerEntry``.

A tuner that searches a box (a bandit, ``box=True``) is made as ``make(box, schedule=...,
initial=...)`` over the kernel's tunables; any other as ``make(settings)``, ``settings``
holding the recipe's ``grid``, ``step_size`` and ``target_accept``. A new tuner is one module
and one entry here; the command line's ``--tuner`` choices and help come from this dict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from adaptmc.tuners.base import Tuner
from adaptmc.tuners.fixed import fixed, grid
from adaptmc.tuners.policies import gp_ucb, hedge, parametric, random_search, sir
from adaptmc.tuners.step_size import dual_averaging_tuner


class TunerEntry(NamedTuple):
    """make: the constructor (module docstring); help: one line; box: whether it searches a
    box of the kernel's tunables (a bandit)."""

    make: Callable[..., Tuner]
    help: str
    box: bool = True


def _fixed(settings: dict) -> Tuner:
    return fixed()


def _grid(settings: dict) -> Tuner:
    if not settings.get("grid"):
        raise ValueError("the grid tuner needs values, e.g. {'num_leapfrog': [5, 10]}")
    return grid(settings["grid"])


def _dual_averaging(settings: dict) -> Tuner:
    start = settings.get("step_size")
    return dual_averaging_tuner(0.1 if start is None else start,
                                target_accept=settings.get("target_accept", 0.8))


TUNERS: dict[str, TunerEntry] = {
    "fixed": TunerEntry(_fixed, "as given", box=False),
    "grid": TunerEntry(_grid, "each point of --grid, then the best", box=False),
    "gp-ucb": TunerEntry(gp_ucb, "GP-UCB bandit"),
    "parametric": TunerEntry(parametric, "parametric bandit"),
    "hedge": TunerEntry(hedge, "GP-Hedge"),
    "sir": TunerEntry(sir, "SIR policy"),
    "random": TunerEntry(random_search, "uniform in the box"),
    "dual-averaging": TunerEntry(_dual_averaging, "step size to --target-accept", box=False),
}


def bandit_tuners() -> tuple[str, ...]:
    """The names of `TUNERS` that search a box."""
    return tuple(name for name, entry in TUNERS.items() if entry.box)
