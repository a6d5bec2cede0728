"""Freezing as a tuner wrapper: adapt for a while, then run one setting forever.

``freeze(inner, after)`` passes the first ``after`` super-transitions to ``inner`` (propose
and update); from then on it proposes ``inner.best`` of the inner state reached, computed
once, and never updates ``inner`` again. With a diminishing-adaptation tuner this is the
usual "adapt during burn-in, then sample with a fixed kernel" (the draws after ``after`` are
from a Markov chain with a fixed kernel, so the ordinary ergodic theorems apply; Roberts &
Rosenthal 2007). It is what ``run(..., adapt_until=after)`` does inside the run loop, as a
composable wrapper.

State: ``{"updates": (), "frozen": {name: value}, "is_frozen": (), "inner": inner state}``;
``frozen`` holds a value for every name of ``inner.names`` (NaN where ``best`` gave none,
``present: (k,)`` says which), so its structure never changes and a checkpoint restores it.
"""

from __future__ import annotations

import numpy as np

from adaptmc.tuners.base import Tuner, describe_inner


def freeze(inner: Tuner, after: int) -> Tuner:
    """Wrap ``inner`` so that after ``after`` updates it proposes ``inner.best`` forever.

    Parameters
    ----------
    inner
        Any tuner (a policy or another wrapper).
    after
        Updates passed to ``inner`` before freezing, ``>= 0`` (0: ``inner.best`` of its
        initial state from the start).
    """
    after = int(after)
    if after < 0:
        raise ValueError(f"freeze needs after >= 0, got {after}")
    names = tuple(inner.names)

    def init(key):
        return {
            "updates": np.asarray(0),
            "is_frozen": np.asarray(False),
            "frozen": {name: np.asarray(np.nan) for name in names},
            "present": np.zeros(len(names), dtype=bool),
            "inner": inner.init(key),
        }

    def frozen_proposal(state) -> dict:
        proposal = {}
        for name, keep in zip(names, np.asarray(state["present"]), strict=True):
            value = np.asarray(state["frozen"][name])
            if keep:  # Python numbers for scalars (int stays int), arrays as they are
                proposal[name] = value.item() if value.ndim == 0 else value
        return proposal

    def propose(key, state):
        if int(state["updates"]) < after:
            proposal, inner_state = inner.propose(key, state["inner"])
            return proposal, {**state, "inner": inner_state}
        if not bool(state["is_frozen"]):
            best = inner.best(state["inner"])
            state = {
                **state,
                "is_frozen": np.asarray(True),
                "frozen": {n: np.asarray(best.get(n, np.nan)) for n in names},
                "present": np.array([n in best for n in names]),
            }
        return frozen_proposal(state), state

    def update(state, proposal, reward, stats):
        updates = int(state["updates"])
        if updates < after:
            state = {**state, "inner": inner.update(state["inner"], proposal, reward, stats)}
        return {**state, "updates": np.asarray(updates + 1)}

    def best(state):
        if bool(state["is_frozen"]):
            return frozen_proposal(state)
        return inner.best(state["inner"])

    def describe(state):
        return {"wrapper": "freeze", "after": after,
                "inner": describe_inner(inner, state["inner"])}

    return Tuner(f"freeze+{inner.name}", names, init, propose, update, best, describe)
