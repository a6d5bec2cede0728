"""JSON-able facts about a tuner, for the run's record (``Tuner.describe``).

A tuner's ``describe(state) -> dict`` returns what is needed to read its record afterwards:
the search box (`box_config`), the surrogate's hyperparameters
(`adaptmc.tuners.surrogate.GPConfig` and ``NIGConfig``), the adoption schedule
(`adaptmc.tuners.schedules.schedule_config`). A wrapper (mass warm-up, `freeze`) describes
itself and nests its inner tuner's facts under ``"inner"``; `innermost` walks down to the
policy's own facts. Everything is plain JSON (numbers, strings, lists, dicts), so the run can
store it as a string attribute of its netCDF tuning group.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from adaptmc.tuners.box import Box


def box_config(box: Box) -> dict:
    """``{"names", "lower", "upper", "integer", "log"}`` as lists (JSON-able)."""
    log = np.zeros(box.dim, bool) if box.log is None else box.log
    return {
        "names": list(box.names),
        "lower": [float(v) for v in box.lower],
        "upper": [float(v) for v in box.upper],
        "integer": [bool(v) for v in box.integer],
        "log": [bool(v) for v in log],
    }


def box_from_config(config: Mapping) -> Box:
    """The `Box` that `box_config` described."""
    return Box(
        tuple(config["names"]),
        np.asarray(config["lower"], dtype=float),
        np.asarray(config["upper"], dtype=float),
        np.asarray(config["integer"], dtype=bool),
        np.asarray(config.get("log", [False] * len(config["names"])), dtype=bool),
    )


def innermost(facts: Mapping | None) -> Mapping | None:
    """The facts of the innermost tuner: follow ``"inner"`` through the wrappers."""
    while facts is not None and facts.get("inner") is not None:
        facts = facts["inner"]
    return facts


def find_wrapper(facts: Mapping | None, wrapper: str) -> Mapping | None:
    """The facts of the first wrapper named ``wrapper`` on the way in, or None."""
    while facts is not None:
        if facts.get("wrapper") == wrapper:
            return facts
        facts = facts.get("inner")
    return None
