"""Baseline tuners that exercise the interface: fixed parameters and an exhaustive grid."""

from __future__ import annotations

import itertools
import math

import numpy as np

from adaptmc.tuners.base import Tuner


def fixed() -> Tuner:
    """Never changes anything: the kernel runs with the parameters given to the run."""
    return Tuner(
        name="fixed",
        names=(),
        init=lambda key: (),
        propose=lambda key, state: ({}, state),
        update=lambda state, proposal, reward, stats: state,
        best=lambda state: {},
        describe=lambda state: {"policy": "fixed"},
    )


def grid(values: dict[str, list]) -> Tuner:
    """Try every point of the Cartesian product of ``values`` once, one super-transition each
    (in order), then keep the point with the highest reward.

    State: ``rewards: (num_points,)``, NaN where not yet tried, and ``next: ()`` the index of
    the next point to try.
    """
    if not values:
        raise ValueError("grid tuner needs at least one parameter with values")
    names = tuple(values)
    for name, vals in values.items():
        if len(vals) == 0:
            raise ValueError(f"grid for {name!r} is empty")
    points = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values.values())]

    def init(key):
        return {"rewards": np.full(len(points), np.nan), "next": np.asarray(0)}

    def best(state):
        rewards = np.asarray(state["rewards"])
        if np.all(np.isnan(rewards)):
            return dict(points[0])
        return dict(points[int(np.nanargmax(rewards))])

    def propose(key, state):
        nxt = int(state["next"])
        if nxt < len(points):
            return dict(points[nxt]), state
        return best(state), state

    def update(state, proposal, reward, stats):
        nxt = int(state["next"])
        if nxt >= len(points):
            return state
        rewards = np.array(state["rewards"], dtype=float)
        rewards[nxt] = reward if math.isfinite(reward) else -np.inf
        return {"rewards": rewards, "next": np.asarray(nxt + 1)}

    facts = {"policy": "grid", "values": {n: [np.asarray(v, dtype=float).tolist() for v in vals]
                                          for n, vals in values.items()}}
    return Tuner("grid", names, init, propose, update, best, lambda state: facts)
