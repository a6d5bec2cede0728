"""Tuners that set kernel parameters between super-transitions."""

from adaptmc.tuners.bandit import (
    dual_averaging_tuner,
    gp_ucb,
    hedge,
    normalise_rewards,
    parametric,
    random_search,
    sir,
)
from adaptmc.tuners.base import Tuner
from adaptmc.tuners.box import Box, box_from_tunables, make_box, parse_box
from adaptmc.tuners.fixed import fixed, grid
from adaptmc.tuners.schedules import SCHEDULES, constant, exponential, geometric, polynomial

__all__ = [
    "SCHEDULES",
    "Box",
    "Tuner",
    "box_from_tunables",
    "constant",
    "dual_averaging_tuner",
    "exponential",
    "fixed",
    "geometric",
    "gp_ucb",
    "grid",
    "hedge",
    "make_box",
    "normalise_rewards",
    "parametric",
    "parse_box",
    "polynomial",
    "random_search",
    "sir",
]
