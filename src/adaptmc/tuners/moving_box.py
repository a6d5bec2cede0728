"""A bandit's box that moves with what the rewards showed: it shrinks below settings that
failed, and it extends past an edge where the best setting sits.

`moving_box` wraps a policy-maker ``make(box, initial) -> Tuner`` (the policy's box is what
changes, so the wrapper rebuilds the policy over the box in its state) with two rules.

**Shrink on failure.** A bandit learns nothing from a window of rewards that are all NaN
(every setting it tried diverged, or kept too few draws): its surrogate is empty and its
``best`` falls back to its first setting, which failed too. Leapfrog is unstable once
``eps omega > 2`` for the fastest frequency ``omega`` of the target (Neal 2011, Sec. 4.2,
5.4.1), so divergence is monotone in the step size: a failure at ``eps_f`` says every step
above ``eps_f`` fails as well, and nothing about the steps below. While no reward has
scored, every failure in the box cuts the step's range to the part below the smallest step
that failed, keeping at least a factor `SHRINK_FACTOR` of it::

    [lower, upper] -> [min(lower, eps_f / F), eps_f]

so a failure at the lower end moves the range a decade down and a failure higher up cuts
the top off. The policy starts afresh in the new box (its first setting its own draw,
log-uniform in a log box: on average ``sqrt(F)`` below ``eps_f``); the failures, which carry
no reward, do not enter its surrogate. Once a reward scores, the box no longer shrinks: the
surrogate learns where the failures are, and a failed setting is never frozen
(`adaptmc.tuners.annealed.best_by_mean`).

**Extend at an edge.** A box built before tuning (from a warm-up's measurements, or by
hand) can cut off the reward's optimum. After ``extend_after`` updates (mid-tuning), if the
policy's best setting lies at an edge of the box (within `EDGE` of the axis's span, the
criterion of the run's edge warning), that edge moves outward by half the axis's span in
log scale (a factor ``sqrt(upper / lower)``), within ``limits``, and the policy keeps its
observations and goes on tuning in the larger box: the settings beyond the edge are
measured rather than assumed worse.

State: ``{"seed": (), "shrinks": (), "scored": (), "updates": (), "lower": (d,), "upper":
(d,), "events": (k, 2 + 2 d), "inner": inner state}``; ``events`` holds per move the number
of updates seen, the rule (0 shrink, 1 extend) and the new bounds; ``describe`` records
them with the box given, so they reach the run's ``tuning.attrs["tuner_config"]``.
``posterior`` is the policy's over the box in force (None when the policy has none).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from adaptmc.tuners.annealed import rng_from_key
from adaptmc.tuners.base import Tuner, describe_inner
from adaptmc.tuners.box import Box, from_proposal, to_unit
from adaptmc.tuners.describe import box_config

SHRINK_FACTOR = 10.0
"""``F``: a shrunk step range spans at least a factor ``F`` below the smallest failed step.
Leapfrog's stability limit is ``2 / omega`` while a well-tuned step sits at 0.3-1 times it
(acceptance 0.6-0.9 on Gaussians, Beskos et al. 2013), so a decade below a failure holds the
good steps of any target whose fastest scale lies within a decade of the failure, and a
failure far above the target's scale descends about ``sqrt(F)`` per super-transition."""

MAX_SHRINKS = 30
"""At most this many shrinks (30 decades at the lower end), then the box stays."""

EDGE = 0.02
"""A setting within this fraction of an axis's span (in the axis's own scale) of a bound lies
at that edge (as in `adaptmc.diagnostics.tuning_notes`)."""

RULES = ("shrink", "extend")

MakePolicy = Callable[[Box, dict | None], Tuner]
"""``make(box, initial) -> Tuner``: the policy over ``box`` starting at ``initial`` (None:
its own first draw)."""


def moving_box(make: MakePolicy, box: Box, *, initial: dict | None = None,
               name: str = "step_size", factor: float = SHRINK_FACTOR,
               extend_after: int | None = None,
               limits: dict[str, tuple[float, float]] | None = None) -> Tuner:
    """The policy ``make(box, initial)`` in a box that shrinks while every reward fails and
    extends once, after ``extend_after`` updates (None: never), past an edge where the best
    setting lies (see the module docstring). ``make`` builds the policy over a box from a
    first setting (e.g. ``lambda box, initial: gp_ucb(box, initial=initial)``); ``initial``
    is the first setting in ``box`` (None: the policy's own first draw); ``name`` the
    parameter whose range shrinks (a step size: failures are monotone in it; its range in
    ``box`` must be positive); ``factor`` the ``F > 1`` of the shrink rule ``[lower, upper]
    -> [min(lower, eps_f / F), eps_f]``; ``limits`` the ``{name: (low, high)}`` no extension
    passes (default: integers stay >= 1 where the box given has them so; every bound stays
    positive)."""
    axis = _checked_axis(box, name, factor, extend_after)
    floor, ceiling = _limits(box, limits or {})

    def policy(state) -> Tuner:
        moved = box._replace(lower=np.asarray(state["lower"], float),
                             upper=np.asarray(state["upper"], float))
        return make(moved, initial if int(state["shrinks"]) == 0 else None)

    def init(key):
        return _initial_state(key, box, make(box, initial))

    def propose(key, state):
        proposal, inner_state = policy(state).propose(key, state["inner"])
        return proposal, {**state, "inner": inner_state}

    def update(state, proposal, reward, stats):
        inner_state = policy(state).update(state["inner"], proposal, reward, stats)
        updates = int(state["updates"]) + 1
        state = {**state, "inner": inner_state, "updates": np.asarray(updates)}
        state = _after_reward(state, float(proposal.get(name, np.nan)), reward, stats, axis,
                              factor, policy)
        if extend_after is not None and updates == extend_after and bool(state["scored"]):
            state = _extended(state, box, policy, floor, ceiling)
        return state

    def best(state):
        return policy(state).best(state["inner"])

    def describe(state):
        return {"wrapper": "moving_box", "name": name, "factor": factor,
                "extend_after": extend_after, "box_given": box_config(box),
                "moves": _moves(state, box),
                "inner": describe_inner(policy(state), state["inner"])}

    def posterior(state):  # the policy's, over the box as it has moved
        return policy(state).posterior(state["inner"])

    made = make(box, initial)
    return Tuner(f"moving-box+{made.name}", box.names, init, propose, update, best, describe,
                 posterior=None if made.posterior is None else posterior)


def _initial_state(key, box: Box, policy: Tuner) -> dict:
    state = {"seed": np.asarray(int(rng_from_key(key).integers(2**31))),
             "shrinks": np.asarray(0), "scored": np.asarray(False),
             "updates": np.asarray(0), "lower": np.asarray(box.lower, float),
             "upper": np.asarray(box.upper, float), "events": np.zeros((0, 2 + 2 * box.dim))}
    return {**state, "inner": policy.init(key)}


def _moves(state: dict, box: Box) -> list[dict]:
    """The box's moves so far, for ``describe``."""
    events = np.asarray(state["events"], float).reshape(-1, 2 + 2 * box.dim)
    return [{"after_updates": int(row[0]), "rule": RULES[int(row[1])],
             "lower": row[2:2 + box.dim].tolist(), "upper": row[2 + box.dim:].tolist()}
            for row in events]


def _checked_axis(box: Box, name: str, factor: float, extend_after: int | None) -> int:
    """The axis of ``name`` in ``box``, after one clear error for any argument
    `moving_box` cannot use."""
    if name not in box.names:
        raise ValueError(f"moving_box shrinks {name!r}, which the box "
                         f"({', '.join(box.names)}) does not have")
    axis = box.names.index(name)
    if not box.lower[axis] > 0:
        raise ValueError(f"the box's {name} range must be positive to shrink, got lower "
                         f"{box.lower[axis]}")
    if not factor > 1:
        raise ValueError(f"factor must be > 1, got {factor}")
    if extend_after is not None and extend_after < 1:
        raise ValueError(f"extend_after must be >= 1, got {extend_after}")
    return axis


def _limits(box: Box, limits: dict) -> tuple[np.ndarray, np.ndarray]:
    """Bounds no extension passes: ``limits`` where given, else 1 for integer parameters
    whose box starts at 1 or above, else the smallest positive float, and no upper limit."""
    unknown = set(limits) - set(box.names)
    if unknown:
        raise ValueError(f"limits name {sorted(unknown)}, which the box does not have")
    floor = np.where(box.integer & (box.lower >= 1), 1.0, np.finfo(float).tiny)
    ceiling = np.full(box.dim, np.inf)
    for i, key in enumerate(box.names):
        if key in limits:
            floor[i], ceiling[i] = float(limits[key][0]), float(limits[key][1])
    return floor, ceiling


def _record(state: dict, rule: str, lower: np.ndarray, upper: np.ndarray) -> dict:
    event = np.concatenate([[float(state["updates"]), float(RULES.index(rule))], lower, upper])
    events = np.asarray(state["events"], float).reshape(-1, event.size)
    return {**state, "lower": lower, "upper": upper, "events": np.vstack([events, event[None]])}


def _after_reward(state: dict, step: float, reward: float, stats: dict, axis: int,
                  factor: float, policy) -> dict:
    """The shrink rule: a scored reward in the box ends it; a failure at ``step`` in the box
    before any cuts the ``axis`` range to ``[min(lower, step / F), step]`` and restarts the
    policy."""
    lower, upper = state["lower"][axis], state["upper"][axis]
    # an observation outside the box (a warm-up's, passed on by a mass warm-up) is no arm
    # of this box: it neither scores for it nor fails in it
    if bool(state["scored"]) or not lower * (1 - 1e-9) <= step <= upper * (1 + 1e-9):
        return state
    if np.isfinite(reward) and (stats or {}).get("divergences", 0) == 0:
        return {**state, "scored": np.asarray(True)}
    if int(state["shrinks"]) >= MAX_SHRINKS:
        return state
    new_lower = np.array(state["lower"], float)
    new_upper = np.array(state["upper"], float)
    new_upper[axis] = step
    new_lower[axis] = min(new_lower[axis], step / factor)
    state = _record(state, "shrink", new_lower, new_upper)
    state = {**state, "shrinks": np.asarray(int(state["shrinks"]) + 1)}
    fresh = policy(state)
    return {**state, "inner": fresh.init(int(state["seed"]) + int(state["shrinks"]))}


def _extended(state: dict, box: Box, policy, floor: np.ndarray, ceiling: np.ndarray) -> dict:
    """The extend rule: each edge within `EDGE` of the policy's best setting moves outward by
    half its axis's log span (integers rounded outward), within ``[floor, ceiling]``."""
    current = policy(state)
    moved = box._replace(lower=np.asarray(state["lower"], float),
                         upper=np.asarray(state["upper"], float))
    best = to_unit(moved._replace(log=np.ones(box.dim, bool)),
                   from_proposal(moved, current.best(state["inner"])))
    lower, upper = moved.lower.copy(), moved.upper.copy()
    reach = np.sqrt(upper / lower)
    low_edge, high_edge = best <= EDGE, best >= 1 - EDGE
    lower = np.where(low_edge, np.minimum(lower, np.maximum(lower / reach, floor)), lower)
    upper = np.where(high_edge, np.maximum(upper, np.minimum(upper * reach, ceiling)), upper)
    lower = np.where(box.integer, np.floor(lower), lower)
    upper = np.where(box.integer, np.ceil(upper), upper)
    if np.array_equal(lower, moved.lower) and np.array_equal(upper, moved.upper):
        return state
    return _record(state, "extend", lower, upper)
