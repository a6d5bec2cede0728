"""The annealed-adoption machinery the bandit policies share: their state, the record of an
arm pull, the adoption rule and the choice of the best setting.

Each super-transition is an arm pull: the tuner proposes a kernel setting from the box, the
run loop spends one super-transition's gradient budget with it, and the objective's reward
comes back (Wang, Mohamed & de Freitas 2013).

Annealing. After super-transition ``i`` a tuner takes a new proposal with probability
``p_i = schedule(i)`` and otherwise repeats its current setting; as ``p_i -> 0`` adaptation
diminishes (Wang 2012, Algorithm 3). The GP sees each distinct setting once (`gp.gp_fit`
merges repeats), so its cost is bounded by the number of adoptions, about ``sum_i p_i``.

State (a dict of NumPy arrays, fixed keys, growing shapes; checkpointed leaf by leaf):
``points: (n, d)`` the settings run, in box units; ``rewards: (n,)`` raw rewards (NaN: failed);
``adopted: (n,)`` whether each was a new proposal; ``current: (d,)`` the setting in force;
``adopting: ()`` whether the pending proposal is new; plus per-policy entries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np

from adaptmc.tuners.box import (
    Box,
    as_proposal,
    from_proposal,
    from_unit,
    to_unit,
    unit_snapper,
)
from adaptmc.tuners.describe import box_config
from adaptmc.tuners.gp import unique_points
from adaptmc.tuners.schedules import Schedule, schedule_config
from adaptmc.tuners.surrogate import log_scale

ANNEAL_RATE = 0.05
"""Default ``lambda`` of the adoption schedule ``p_i = exp(-lambda (i - 1))`` (Wang 2012,
Algorithm 3). About ``1 / lambda`` settings are ever adopted: 20 with 0.05, of which about 15
in the first 30 super-transitions (``p_30 = 0.23``, ``p_60 = 0.05``). The earlier 0.01 still
adopted with ``p = 0.23`` after 150 super-transitions, so most of a run's draws came from
exploratory settings."""

NewPoint = Callable[[np.random.Generator, dict, int, float], tuple[np.ndarray, dict]]


def rng_from_key(key) -> np.random.Generator:
    """A NumPy generator seeded from a JAX key (typed or raw) or an integer."""
    if isinstance(key, int | np.integer):
        return np.random.default_rng(int(key))
    data = jax.random.key_data(key) if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) \
        else key
    return np.random.default_rng(np.asarray(data, dtype=np.uint32).ravel())


def check_box(box: Box) -> Box:
    """``box`` itself; anything but a `Box` raises (a bandit has no default box: the
    kernel's tunables give one, `adaptmc.tuners.box_from_tunables`)."""
    if not isinstance(box, Box):
        raise TypeError(f"box must be a Box (see adaptmc.tuners.make_box), got {type(box)}")
    return box


def snapper(box: Box):
    """``u -> snap_unit(box, u)`` (`adaptmc.tuners.box.unit_snapper`) when the box has
    integer parameters, else None."""
    return unit_snapper(box) if box.integer.any() else None


def base_state(box: Box, extra: dict | None = None) -> dict:
    """The empty state of an annealed policy, plus its ``extra`` entries."""
    state = {
        "points": np.zeros((0, box.dim)),
        "rewards": np.zeros(0),
        "adopted": np.zeros(0, dtype=bool),
        "current": np.full(box.dim, np.nan),
        "adopting": np.asarray(True),
    }
    state.update(extra or {})
    return state


def record(box: Box, state: dict, proposal: dict, reward: float, stats: dict) -> dict:
    """Append one arm pull; a divergent super-transition counts as a failure (NaN)."""
    reward = float(reward)
    if (stats or {}).get("divergences", 0) > 0:
        reward = float("nan")
    x = from_proposal(box, proposal)
    return {
        **state,
        "points": np.vstack([np.asarray(state["points"]).reshape(-1, box.dim), x[None]]),
        "rewards": np.append(np.asarray(state["rewards"], dtype=float), reward),
        "adopted": np.append(np.asarray(state["adopted"], dtype=bool), bool(state["adopting"])),
        "current": x,
    }


def record_update(box: Box):
    """``update(state, proposal, reward, stats)`` of a policy that only records."""
    return lambda state, proposal, reward, stats: record(box, state, proposal, reward, stats)


def annealed_propose(box: Box, schedule: Schedule, initial: dict | None, new_point: NewPoint):
    """``propose`` for an annealed policy: the first setting is ``initial`` (default: uniform
    in the box); after step ``i`` a new one ``new_point(rng, state, i, p_i) -> (x, updates)``
    is taken with probability ``p_i``, else the current one is kept."""
    first = None if initial is None else from_proposal(box, initial)

    def propose(key, state):
        rng = rng_from_key(key)
        num_done = len(state["rewards"])
        updates = {}
        if num_done == 0:
            x = from_unit(box, rng.random(box.dim)) if first is None else first
            adopt = True
        else:
            p = float(schedule(num_done))
            adopt = bool(rng.random() < p)
            if adopt:
                x, updates = new_point(rng, state, num_done, p)
            else:
                x = np.asarray(state["current"], dtype=float)
        state = {**state, **updates, "current": np.asarray(x, dtype=float),
                 "adopting": np.asarray(adopt)}
        return as_proposal(box, x), state

    return propose


def scored_settings(box: Box, state: dict) -> np.ndarray:
    """``(k, d)``: the distinct settings tried whose every super-transition scored (none
    diverged or failed), in box units, in the order first tried."""
    if not len(state["rewards"]):
        return np.zeros((0, box.dim))
    points, raw_means, _ = unique_points(state["points"], state["rewards"])
    return points[np.isfinite(raw_means)]


def best_by_mean(box: Box, state: dict, predict_mean, initial: dict | None) -> dict:
    """Among the settings tried whose every super-transition scored (none diverged or failed),
    the one with the highest posterior mean (robust to a lucky noisy reward); ``initial`` (or
    the box centre) before any, or when every setting tried failed: a setting that diverged
    is never frozen. ``predict_mean(u: (m, d)) -> (m,)``."""
    points = scored_settings(box, state)
    if not len(points):
        if initial is not None:
            return dict(initial)
        return as_proposal(box, from_unit(box, np.full(box.dim, 0.5)))
    means = predict_mean(to_unit(box, points))
    return as_proposal(box, points[int(np.argmax(means))])


class Posterior(NamedTuple):
    """What a bandit believes about the reward over its box (``Tuner.posterior``).

    box: the box it searches now; predict: ``u: (m, d) -> (mean, sd)``, each ``(m,)``, of
    the latent reward normalised to ``[0, 1]`` (`adaptmc.tuners.surrogate.normalise_rewards`)
    at points of the box's unit cube; measured: ``(k, d)`` the unit points of the settings
    `best_by_mean` chooses among (`scored_settings`); low, high: the raw rewards that
    normalise to 0 and 1 (the finite rewards' minimum and maximum; their logs when ``log``,
    the rewards compared on the log scale)."""

    box: Box
    predict: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    measured: np.ndarray
    low: float
    high: float
    log: bool = False


def bandit_posterior(box: Box, state: dict, predict, log: bool = False) -> Posterior | None:
    """The `Posterior` of an annealed policy's ``state`` under the surrogate ``predict``
    (fitted to that state, on the log scale if ``log``); None before any reward scored."""
    rewards = log_scale(state["rewards"]) if log else np.asarray(state["rewards"], dtype=float)
    finite = rewards[np.isfinite(rewards)]
    if not finite.size:
        return None
    measured = to_unit(box, scored_settings(box, state))
    return Posterior(box, predict, measured, float(finite.min()), float(finite.max()), log)


def policy_facts(policy: str, box: Box, schedule: Schedule, initial: dict | None,
                 **facts) -> dict:
    """The JSON-able facts every annealed policy records (``Tuner.describe``): its name, box,
    schedule and first setting, plus ``facts``."""
    first = None if initial is None else {
        k: int(v) if isinstance(v, int | np.integer) else float(v) for k, v in initial.items()}
    return {"policy": policy, "box": box_config(box), **schedule_config(schedule),
            "initial": first, **facts}
