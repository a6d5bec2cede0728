"""Shrinking the box while every setting tried failed: a bandit that cannot freeze blind.

A bandit learns nothing from a window of rewards that are all NaN (every setting it tried
diverged, or kept too few draws): its surrogate is empty and its ``best`` falls back to its
first setting, which failed too. `shrink_on_failure` rebuilds the policy in a smaller box
after every failed super-transition for as long as no reward has scored, and proposes from
that box instead.

The rule follows from why HMC's (and MALA's) leapfrog fails: it is unstable once
``eps omega > 2`` for the fastest frequency ``omega`` of the target (Neal 2011, Sec. 4.2,
5.4.1), so divergence is monotone in the step size: a failure at ``eps_f`` says every step
above ``eps_f`` fails as well, and nothing about the steps below. The shrunk box keeps the
part of the step's range below the smallest step that failed, and at least a factor
`SHRINK_FACTOR` of it::

    [lower, upper] -> [min(lower, eps_f / F), eps_f]

so a failure at the box's lower end moves the whole range a decade down, and a failure
higher up cuts the top off. The other parameters' ranges are kept. The policy starts afresh
in the new box (its first setting drawn by itself, uniform in log scale when the box is
log: on average ``sqrt(F)`` below ``eps_f``), so the failures of the old box, which carry no
reward, do not enter its surrogate. Once any reward scores the box stays as it is: from then
on the surrogate learns where the failures are (a failed setting is never frozen,
`adaptmc.tuners.annealed.best_by_mean`).

State: ``{"seed": (), "shrinks": (), "scored": (), "updates": (), "lower": (d,), "upper":
(d,), "events": (k, 1 + 2 d), "inner": inner state}``; ``events`` holds per shrink the number
of updates seen and the new box's bounds, all of which ``describe`` records (with the box
given), so they reach the run's ``tuning.attrs["tuner_config"]``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from adaptmc.tuners.annealed import rng_from_key
from adaptmc.tuners.base import Tuner, describe_inner
from adaptmc.tuners.box import Box
from adaptmc.tuners.describe import box_config

SHRINK_FACTOR = 10.0
"""``F``: the shrunk step range spans at least a factor ``F`` below the smallest failed step.
Leapfrog's stability limit is ``2 / omega`` while a well-tuned step sits at 0.3-1 times it
(acceptance 0.6-0.9 on Gaussians, Beskos et al. 2013), so a decade below a failure contains
the good steps of every target whose fastest scale lies within a decade of the failure, and
a failure far above the target's scale descends about ``sqrt(F)`` per super-transition (the
fresh policy's first draw is log-uniform in the new range)."""

MAX_SHRINKS = 30
"""At most this many shrinks (30 decades at the lower end): beyond that the step is below
any float's resolution of a position, and the tuner keeps its box."""

MakePolicy = Callable[[Box, dict | None], Tuner]
"""``make(box, initial) -> Tuner``: the policy over ``box`` starting at ``initial`` (None:
its own first draw)."""


def shrink_on_failure(make: MakePolicy, box: Box, *, initial: dict | None = None,
                      name: str = "step_size", factor: float = SHRINK_FACTOR) -> Tuner:
    """The policy ``make(box, initial)``, rebuilt as ``make(shrunk, None)`` after every failed
    super-transition while no reward has scored (see the module docstring).

    Parameters
    ----------
    make
        Builds the policy over a box from a first setting (e.g. ``lambda box, initial:
        gp_ucb(box, initial=initial)``).
    box
        The box given; its ``name`` range must be positive.
    initial
        The first setting in ``box`` (None: the policy's own first draw).
    name
        The parameter whose range shrinks (a step size: failures are monotone in it).
    factor
        ``F > 1`` of the rule ``[lower, upper] -> [min(lower, eps_f / F), eps_f]``.
    """
    if name not in box.names:
        raise ValueError(f"shrink_on_failure shrinks {name!r}, which the box "
                         f"({', '.join(box.names)}) does not have")
    axis = box.names.index(name)
    if not box.lower[axis] > 0:
        raise ValueError(f"the box's {name} range must be positive to shrink, got lower "
                         f"{box.lower[axis]}")
    if not factor > 1:
        raise ValueError(f"factor must be > 1, got {factor}")

    def box_of(state) -> Box:
        return box._replace(lower=np.asarray(state["lower"], float),
                            upper=np.asarray(state["upper"], float))

    def policy(state) -> Tuner:
        return make(box_of(state), initial if int(state["shrinks"]) == 0 else None)

    def inner_init(state) -> object:
        return policy(state).init(int(state["seed"]) + int(state["shrinks"]))

    def init(key):
        state = {"seed": np.asarray(int(rng_from_key(key).integers(2**31))),
                 "shrinks": np.asarray(0), "scored": np.asarray(False),
                 "updates": np.asarray(0),
                 "lower": np.asarray(box.lower, float), "upper": np.asarray(box.upper, float),
                 "events": np.zeros((0, 1 + 2 * box.dim))}
        return {**state, "inner": make(box, initial).init(key)}

    def propose(key, state):
        proposal, inner_state = policy(state).propose(key, state["inner"])
        return proposal, {**state, "inner": inner_state}

    def update(state, proposal, reward, stats):
        inner_state = policy(state).update(state["inner"], proposal, reward, stats)
        state = {**state, "inner": inner_state, "updates": np.asarray(int(state["updates"]) + 1)}
        step = float(proposal.get(name, np.nan))
        lower, upper = state["lower"][axis], state["upper"][axis]
        # an observation outside the box (a warm-up's, passed on by a mass warm-up) is no arm
        # of this box: it neither scores for it nor fails in it
        if bool(state["scored"]) or not lower * (1 - 1e-9) <= step <= upper * (1 + 1e-9):
            return state
        if np.isfinite(reward) and (stats or {}).get("divergences", 0) == 0:
            return {**state, "scored": np.asarray(True)}
        if int(state["shrinks"]) >= MAX_SHRINKS:
            return state
        return _shrunk(state, axis, step, factor, inner_init)

    def best(state):
        return policy(state).best(state["inner"])

    def describe(state):
        events = np.asarray(state["events"], float).reshape(-1, 1 + 2 * box.dim)
        return {"wrapper": "shrink_on_failure", "name": name, "factor": factor,
                "box_given": box_config(box),
                "shrinks": [{"after_updates": int(row[0]),
                             "lower": row[1:1 + box.dim].tolist(),
                             "upper": row[1 + box.dim:].tolist()} for row in events],
                "inner": describe_inner(policy(state), state["inner"])}

    inner_name = make(box, initial).name
    return Tuner(f"shrink+{inner_name}", box.names, init, propose, update, best, describe)


def _shrunk(state: dict, axis: int, step: float, factor: float, inner_init) -> dict:
    """``state`` with the box's ``axis`` range cut to ``[min(lower, step / F), step]``, one
    more shrink recorded and the policy started afresh."""
    lower = np.array(state["lower"], float)
    upper = np.array(state["upper"], float)
    upper[axis] = step
    lower[axis] = min(lower[axis], step / factor)
    event = np.concatenate([[float(state["updates"])], lower, upper])
    state = {**state, "lower": lower, "upper": upper,
             "shrinks": np.asarray(int(state["shrinks"]) + 1),
             "events": np.vstack([np.asarray(state["events"], float).reshape(-1, event.size),
                                  event[None]])}
    return {**state, "inner": inner_init(state)}
