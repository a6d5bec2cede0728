"""Mass-matrix adaptation during warm-up, wrapped around any tuner.

During the first ``num_warmup`` super-transitions the wrapper runs the kernel with a fixed
number of steps and a step size found by bracketing on the log scale: double it while a
super-transition's mean acceptance is above the target, halve it while below, then bisect
between the largest step that met the target and the smallest that did not (a super-
transition's mean acceptance over all chains is a precise measurement, so a bracketing
search converges in a few of them where dual averaging, Hoffman & Gelman 2014, needs many
more updates than there are warm-up super-transitions). It also estimates the posterior
covariance from the draws in doubling windows, followed by a terminal fifth of the warm-up
where only the step size adapts, as Stan's warm-up does (Stan Reference
Manual, "HMC algorithm parameters": windows of doubling length, each estimate regularised
toward a small multiple of the identity, ``(n / (n + 5)) C + 1e-3 (5 / (n + 5)) I``). At the
end of each window the estimate becomes the inverse mass matrix and the step-size bracket
is reopened around the step in force.

After warm-up the inverse mass is frozen and the wrapped tuner (a bandit over (eps, L), say)
takes over; it sees only super-transitions run under the final metric, so every reward it
learns from is comparable. With ``warm_start=True`` it also sees the terminal warm-up
super-transitions, which already run under the final metric at the bracketed step size: a
bandit then starts from a measured good setting instead of a uniform draw from the box (on
whitened German credit, one seed, GP-UCB otherwise spent its early adoptions in the corners
of the box and settled at about a quarter of the oracle's ESS per gradient). With the
target whitened, a default box such as eps in [0.01, 1] fits most posteriors.

The run loop passes each super-transition's draws to ``update`` as ``stats["positions"]``
(``(chains, draws, dim)``).
"""

from __future__ import annotations

import math

import numpy as np

from adaptmc.adaptation.bracketing import bracket_step
from adaptmc.adaptation.welford import regularised_covariance, welford_update
from adaptmc.tuners.base import Tuner, describe_inner


def window_ends(num_warmup: int, first: int = 1) -> np.ndarray:
    """Super-transition indices after which a window closes: windows of doubling length
    (1, 2, 4, ...) starting at ``first`` (super-transition 0 is left to the initial
    transient); the last window is stretched to end at the last warm-up super-transition."""
    ends, start, length = [], first, 1
    while start < num_warmup:
        end = min(start + length, num_warmup) - 1
        if num_warmup - 1 - end < 2 * length:  # too little left for another window
            end = num_warmup - 1
        ends.append(end)
        start, length = end + 1, 2 * length
    return np.asarray(ends, dtype=int)


def terminal_length(num_warmup: int) -> int:
    """Super-transitions at the end of a ``num_warmup`` warm-up that adapt only the step
    size, under the final metric (Stan's terminal window; a fifth, at least one)."""
    return max(1, num_warmup // 5)


def mass_adaptation(inner: Tuner, dim: int, num_warmup: int, *, dense: bool = False,
                    initial_step_size: float = 0.1, warmup_num_leapfrog: int = 10,
                    target_accept: float = 0.8, warm_start: bool = False) -> Tuner:
    """Wrap ``inner`` with warm-up mass-matrix and step-size adaptation (see module): the
    first ``num_warmup`` super-transitions (at least 3; give the run the same ``num_warmup``
    so their draws are not kept) estimate the inverse mass of a ``dim``-dimensional target
    (``dense``: a dense covariance, else its diagonal); then ``inner`` acts (it must not set
    ``inverse_mass`` itself). ``warm_start``: pass the terminal warm-up super-transitions
    (final metric) to ``inner.update`` as observations of ``(step_size, num_leapfrog)``; only
    for tuners whose ``update`` records any setting it is given (the policies of
    `adaptmc.tuners.policies`), not ``grid`` or ``dual_averaging_tuner``, whose updates
    assume their own proposal, and only when ``inner`` tunes nothing but step size and
    leapfrog steps."""
    _check_mass_args(inner, dim, num_warmup, warm_start)
    terminal = terminal_length(num_warmup)
    ends = window_ends(num_warmup - terminal)
    names = tuple(dict.fromkeys(("step_size", "num_leapfrog", *inner.names)))

    def init(key):
        return _initial_state(inner.init(key), dim, dense, initial_step_size)

    def propose(key, state):
        if int(state["index"]) < num_warmup:
            proposal = {"step_size": math.exp(float(state["log_step"])),
                        "num_leapfrog": warmup_num_leapfrog}
        else:
            proposal, inner_state = inner.propose(key, state["inner"])
            state = {**state, "inner": inner_state}
            proposal.setdefault("step_size", _final_step_size(state))
        return {**proposal, "inverse_mass": state["inverse_mass"]}, state

    def update(state, proposal, reward, stats):
        index = int(state["index"])
        if index >= num_warmup:
            inner_proposal = {k: v for k, v in proposal.items() if k != "inverse_mass"}
            inner_state = inner.update(state["inner"], inner_proposal, reward, stats)
            return {**state, "index": np.asarray(index + 1), "inner": inner_state}
        if warm_start and index >= num_warmup - terminal:  # final metric: an observation
            observed = {k: proposal[k] for k in inner.names}
            state = {**state, "inner": inner.update(state["inner"], observed, reward, stats)}
        return _warmup_update(state, stats, index in ends, dim, dense, target_accept)

    def best(state):
        proposal = inner.best(state["inner"]) if int(state["index"]) > num_warmup else {}
        proposal.setdefault("step_size", _final_step_size(state))
        return {**proposal, "inverse_mass": state["inverse_mass"]}

    facts = {"wrapper": "mass_adaptation", "dim": dim, "num_warmup": num_warmup,
             "dense": dense, "initial_step_size": float(initial_step_size),
             "warmup_num_leapfrog": warmup_num_leapfrog, "target_accept": target_accept,
             "warm_start": warm_start, "terminal": terminal}

    def describe(state):
        return {**facts, "inner": describe_inner(inner, state["inner"])}

    return Tuner(f"mass+{inner.name}", names, init, propose, update, best, describe)


def _check_mass_args(inner: Tuner, dim: int, num_warmup: int, warm_start: bool) -> None:
    if num_warmup < 3:
        raise ValueError("mass adaptation needs num_warmup >= 3 super-transitions")
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    if "inverse_mass" in inner.names:
        raise ValueError(f"tuner {inner.name!r} already sets inverse_mass")
    if warm_start and not set(inner.names) <= {"step_size", "num_leapfrog"}:
        raise ValueError(f"warm_start needs a tuner of step_size and num_leapfrog only; "
                         f"{inner.name!r} tunes {', '.join(inner.names)}")


def _initial_state(inner_state, dim: int, dense: bool, initial_step_size: float) -> dict:
    count, mean, m2 = _fresh_accumulator(dim, dense)
    return {
        "index": np.asarray(0),
        "count": count,
        "mean": mean,
        "m2": m2,
        "inverse_mass": np.eye(dim) if dense else np.ones(dim),
        "log_step": np.asarray(math.log(initial_step_size)),
        "bracket": np.array([-np.inf, np.inf]),  # log steps that met / missed the target
        "inner": inner_state,
    }


def _fresh_accumulator(dim: int, dense: bool):
    shape = (dim, dim) if dense else (dim,)
    return np.asarray(0.0), np.zeros(dim), np.zeros(shape)


def _final_step_size(state) -> float:
    """The largest step that met the target (or the current one if none did)."""
    low = float(state["bracket"][0])
    return math.exp(low if np.isfinite(low) else float(state["log_step"]))


def _warmup_update(state: dict, stats: dict, window_closes: bool, dim: int, dense: bool,
                   target_accept: float) -> dict:
    """One warm-up super-transition: a bracketing move of the step size, its draws added to
    the covariance estimate, and at the end of a window the estimate becomes the inverse mass
    (the bracket reopened around the step in force)."""
    index = int(state["index"])
    rate = stats.get("acceptance_rate", float("nan"))
    rate = 0.0 if not math.isfinite(rate) else rate
    log_step, bracket = bracket_step(float(state["log_step"]), state["bracket"],
                                     rate >= target_accept)
    count, mean, m2 = state["count"], state["mean"], state["m2"]
    inverse_mass = state["inverse_mass"]
    positions = stats.get("positions")
    if index >= 1 and positions is not None:
        draws = np.asarray(positions, dtype=float).reshape(-1, dim)
        count, mean, m2 = welford_update(float(count), mean, m2, draws, dense)
    if window_closes and float(count) > 2:
        inverse_mass = regularised_covariance(float(count), m2)
        count, mean, m2 = _fresh_accumulator(dim, dense)
        # the metric changed: reopen the bracket around the step in force
        log_step = float(bracket[0]) if np.isfinite(bracket[0]) else log_step
        bracket = np.array([-np.inf, np.inf])
    return {
        **state,
        "index": np.asarray(index + 1),
        "count": np.asarray(count),
        "mean": mean,
        "m2": m2,
        "inverse_mass": inverse_mass,
        "log_step": np.asarray(log_step),
        "bracket": bracket,
    }
