"""A tuner in one file (tests/test_extending.py registers it with one entry,
``TUNERS["corners"] = ENTRY``): tries the lower corner, the centre and the upper corner of
its box, one super-transition each, then proposes the one with the highest reward."""

from __future__ import annotations

import numpy as np

from adaptmc.tuners import Box, Tuner, TunerEntry


def corners(box: Box, *, schedule=None, initial=None) -> Tuner:
    lower, upper = np.asarray(box.lower, float), np.asarray(box.upper, float)
    points = np.stack([lower, (lower + upper) / 2, upper])
    points = np.where(np.asarray(box.integer), np.round(points), points)

    def setting(index) -> dict:
        return {name: float(points[int(index), k]) for k, name in enumerate(box.names)}

    def propose(key, state):
        tried = int(state["next"])
        index = tried if tried < 3 else int(np.nanargmax(state["rewards"]))
        return setting(index), state

    def update(state, proposal, reward, stats):
        tried = int(state["next"])
        if tried >= 3:
            return state
        rewards = np.array(state["rewards"])
        rewards[tried] = reward if np.isfinite(reward) else -np.inf
        return {"rewards": rewards, "next": np.array(tried + 1)}

    def best(state):
        return setting(int(np.argmax(np.nan_to_num(state["rewards"], nan=-np.inf))))

    return Tuner("corners", box.names, lambda key: {"rewards": np.full(3, np.nan),
                                                     "next": np.array(0)},
                 propose, update, best)


ENTRY = TunerEntry(corners, "the box's lower corner, centre and upper corner, then the best")
