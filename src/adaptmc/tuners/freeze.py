"""Freezing as a tuner wrapper: adapt for a while, then run one setting forever.

``freeze(inner, after)`` passes the first ``after`` super-transitions to ``inner`` (propose
and update); from then on it proposes ``inner.best`` of the inner state reached, computed
once, and never updates ``inner`` again. With a diminishing-adaptation tuner this is the
usual "adapt during burn-in, then sample with a fixed kernel" (the draws after ``after`` are
from a Markov chain with a fixed kernel, so the ordinary ergodic theorems apply; Roberts &
Rosenthal 2007). It is what ``run(..., adapt_until=after)`` does inside the run loop, as a
composable wrapper.

State: ``{"updates": (), "is_frozen": (), "frozen": {name: value}, "present": {name: ()},
"inner": inner state}``; ``frozen`` holds a value for every name of ``inner.names`` and of
``inner.best`` of the initial state (a mass warm-up's ``inverse_mass``), NaN where ``best``
gave none (``present`` says which), so its structure never changes and a checkpoint restores
it.
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
        inner_state = inner.init(key)
        # every name the inner tuner sets or its best gives (a mass warm-up adds inverse_mass)
        keys = tuple(dict.fromkeys((*names, *inner.best(inner_state))))
        return {
            "updates": np.asarray(0),
            "is_frozen": np.asarray(False),
            "frozen": {key: np.asarray(np.nan) for key in keys},
            "present": {key: np.asarray(False) for key in keys},
            "inner": inner_state,
        }

    def propose(key, state):
        if int(state["updates"]) < after:
            proposal, inner_state = inner.propose(key, state["inner"])
            return proposal, {**state, "inner": inner_state}
        if not bool(state["is_frozen"]):
            state = _frozen(inner, state)
        return _frozen_proposal(state), state

    def update(state, proposal, reward, stats):
        updates = int(state["updates"])
        if updates < after:
            state = {**state, "inner": inner.update(state["inner"], proposal, reward, stats)}
        return {**state, "updates": np.asarray(updates + 1)}

    def best(state):
        if bool(state["is_frozen"]):
            return _frozen_proposal(state)
        return inner.best(state["inner"])

    def describe(state):
        return {"wrapper": "freeze", "after": after,
                "inner": describe_inner(inner, state["inner"])}

    return Tuner(f"freeze+{inner.name}", names, init, propose, update, best, describe)


def _frozen(inner: Tuner, state: dict) -> dict:
    """``state`` frozen at ``inner.best`` of its inner state."""
    best = inner.best(state["inner"])
    unknown = set(best) - set(state["frozen"])
    if unknown:
        raise ValueError(f"{inner.name!r}: best gave {sorted(unknown)}, which neither its "
                         "names nor its initial best have")
    return {**state, "is_frozen": np.asarray(True),
            "frozen": {k: np.asarray(best.get(k, np.nan)) for k in state["frozen"]},
            "present": {k: np.asarray(k in best) for k in state["frozen"]}}


def _frozen_proposal(state: dict) -> dict:
    proposal = {}
    for key, value in state["frozen"].items():
        value = np.asarray(value)
        if bool(state["present"][key]):  # scalars as Python numbers (int stays int)
            proposal[key] = value.item() if value.ndim == 0 else value
    return proposal
