"""When the warm-up has settled: the test that lets it go to its final window early.

The warm-up (`adaptmc.adaptation.early`) runs at most its ``num_steps`` transitions. After
its early phase, at each chunk boundary, it asks three questions of what it has run, and
goes to the final, step-size-only window as soon as all three say yes:

1. **The metric has settled**: the estimates from two successive, disjoint windows (the
   foreground's ``[fg, bg)`` and the background's ``[bg, now)``, nutpie's two estimators)
   agree. With ``M_a^{-1} = L_a L_a^T`` and ``M_b^{-1}`` their inverse masses, the
   singular values ``s`` of ``L_a^{-1} L_b`` are the ratios of the scales the two assign to
   each direction; a common factor is absorbed by the step size, so what matters is their
   spread ``max s / min s``: HMC's cost per effective draw grows like the square root of the
   condition left after preconditioning (Neal 2011, Sec. 4.2; Betancourt 2017, Sec. 4.2),
   which running under ``M_a`` where ``M_b`` is right raises by at most that spread. Settled
   when it is at most `METRIC_SPREAD`.
2. **The step size has settled**: dual averaging's averaged step (Hoffman & Gelman 2014,
   Alg. 5) moved by at most `STEP_CHANGE` (relative, median over chains) over the last
   chunk, which is at least `MIN_SINCE_SWAP` transitions after its last restart.
3. **The chains agree**: the rank-normalised split R-hat of the log density over
   ``[fg, now)`` (Vehtari et al. 2021) is at most `RHAT_LP` and no chain is far from the
   others (`adaptmc.adaptation.chains.far_chains`).

Each window holds at least `MIN_WINDOW` transitions per chain. A hard posterior (a funnel, a
start far out, chains in different modes) fails one of them and gets the full warm-up.
"""

from __future__ import annotations

import numpy as np

from adaptmc.adaptation import metric_choice
from adaptmc.adaptation.chains import far_chains
from adaptmc.adaptation.dual_averaging import da_final_step_size_on_host
from adaptmc.adaptation.low_rank import LowRankInverseMass
from adaptmc.adaptation.metric_choice import whitening_factors
from adaptmc.adaptation.schedule import schedule

METRIC_SPREAD = 1.5
"""The largest spread of scale ratios between two successive metric estimates still called
settled: the later one could make a leapfrog step's work per effective draw at most this
much cheaper, and estimates from windows of a few hundred pooled draws differ by about a
quarter from noise alone (measured: 1.05-1.3 on posteriordb regressions, 2-8 on a funnel)."""

STEP_CHANGE = 0.1
"""The largest relative change of the averaged step size over the last chunk."""

RHAT_LP = 1.05
"""The largest split R-hat of the log density over the current window."""

MIN_WINDOW = 20
"""Transitions per chain each of the two compared windows holds at least."""

MIN_SINCE_SWAP = 30
"""Transitions since the last swap (dual averaging's restart) before the step is judged."""

AGREE_WINDOW = 30
"""Transitions per chain over which `chains_agree` judges whether the early phase may end."""

AGREE_RHAT = 1.1
"""The largest split R-hat of the log density over `AGREE_WINDOW` transitions for the chains
to agree: Gelman & Rubin's (1992) customary 1.1. Over so short a window, chains at
stationarity measure 1.0-1.2 (pooled posteriordb regressions), a chain still climbing in
2 and more; the settling test that ends the warm-up (`RHAT_LP`, longer windows) still
judges the chains after it."""

DENSE_SPREAD_MAX_DIM = 1000
"""Above this dimension the spread is judged on the diagonal scales only (``O(dim^3)``)."""


def metric_spread(a: LowRankInverseMass, b: LowRankInverseMass) -> float:
    """``max s / min s`` over the singular values ``s`` of ``L_a^{-1} L_b``, for inverse
    masses ``M^{-1} = L L^T`` (`metric_choice.whitening_factors`): 1 when ``b`` is ``a``
    times a constant. Above `DENSE_SPREAD_MAX_DIM` dimensions, the diagonals' spread."""
    dim = np.shape(a.diag)[0]
    if dim > DENSE_SPREAD_MAX_DIM:
        s = np.sqrt(np.asarray(b.diag, dtype=float) / np.asarray(a.diag, dtype=float))
    else:
        inverse_a, _ = whitening_factors(a)
        _, transpose_b = whitening_factors(b)
        l_b = transpose_b(np.eye(dim))  # L_b^T applied to the unit rows: L_b's rows
        s = np.linalg.svd(inverse_a(l_b.T).T, compute_uv=False)
    return float(np.max(s) / np.min(s))


def chains_agree(x: np.ndarray, lp: np.ndarray) -> bool:
    """Whether chains that ran ``x: (chains, n, dim)``, ``lp: (chains, n)`` have arrived and
    agree: the rank-normalised split R-hat of the log density (Vehtari et al. 2021; a chain
    still climbing in splits from its own second half) is at most `RHAT_LP` and no chain is
    far from the others (`adaptmc.adaptation.chains.far_chains`). The early warm-up's
    windows of ``CHUNK`` transitions serve chains on their way in; once they agree, the
    growing windows may start."""
    from adaptmc.diagnostics import rhat

    agree = len(lp) < 2 or float(rhat(lp[:, :, None])[0]) <= AGREE_RHAT
    return bool(agree and not far_chains(x, lp))


def arrived_late(x: np.ndarray, lp: np.ndarray, split: int) -> bool:
    """Whether a chain that ran ``x: (chains, n, dim)``, ``lp: (chains, n)`` (the
    foreground's window, its background's from transition ``split`` on) was far from the
    others over the window (`adaptmc.adaptation.chains.far_chains`: still on its way in)
    but is no longer over the background's, which holds at least `MIN_WINDOW` transitions.
    The metric's estimate pools each chain about its own mean
    (`metric_choice.within_chains`), so a chain crossing the window inflates the scales
    along its path; the warm-up then swaps its windows at once (the foreground's draws
    dropped), as the issue's rule asks: a chain far from the others is never averaged into
    the metric silently."""
    if split < 1 or x.shape[1] - split < MIN_WINDOW:
        return False
    return bool(far_chains(x, lp)) and not far_chains(x[:, split:], lp[:, split:])


def late_in(run, now: int) -> bool:
    """`arrived_late` over the foreground's window of the warm-up ``run``
    (`adaptmc.adaptation.early._Chains`) before transition ``now``."""
    fg, bg = run.counters["foreground"], run.counters["background"]
    return arrived_late(run.window(fg, now)[0],
                        np.concatenate(run.out["lp"], axis=1)[:, fg:now], bg - fg)


def settled_measures(x, g, lp, steps, previous_steps, *, fg: int, bg: int, now: int,
                     rank: int, kind: str = "low-rank") -> dict | None:
    """What the test reads at transition ``now`` (module docstring): ``x, g: (chains, now,
    dim)`` draws and gradients so far, ``lp: (chains, now)``, ``steps, previous_steps:
    (chains,)`` the averaged step sizes after this chunk and the one before; ``fg, bg``
    where the foreground and background windows start; ``kind, rank``: the estimates'
    (`metric_choice.estimate`, as the warm-up makes them). None while a window is too short
    or the step was restarted too recently to judge; ``metric_spread`` None when the step
    size or the chains already say no (its two metric fits are the test's costly part)."""
    if bg - fg < MIN_WINDOW or now - bg < max(MIN_WINDOW, MIN_SINCE_SWAP) \
            or previous_steps is None:
        return None
    from adaptmc.diagnostics import rhat

    change = np.abs(np.log(np.asarray(steps) / np.asarray(previous_steps)))
    window_lp = lp[:, fg:now]
    measures = {"at": int(now), "metric_spread": None,
                "step_change": float(np.expm1(np.median(change))),
                "rhat_lp": float(rhat(window_lp[:, :, None])[0]) if len(lp) > 1 else 1.0,
                "far_chains": [int(c) for c, _ in far_chains(x[:, fg:now], window_lp)]}
    if measures["step_change"] <= STEP_CHANGE and measures["rhat_lp"] <= RHAT_LP \
            and not measures["far_chains"]:  # the two metric fits only when they can decide
        a = metric_choice.estimate(x[:, fg:bg], g[:, fg:bg], kind, rank, None)
        b = metric_choice.estimate(x[:, bg:now], g[:, bg:now], kind, rank, None)
        measures["metric_spread"] = metric_spread(a, b)
    return measures


def is_settled(measures: dict | None) -> bool:
    """Whether `settled_measures` says the warm-up has settled."""
    return measures is not None and measures["metric_spread"] is not None \
        and measures["metric_spread"] <= METRIC_SPREAD \
        and measures["step_change"] <= STEP_CHANGE and measures["rhat_lp"] <= RHAT_LP \
        and not measures["far_chains"]


def end_if_settled(run, now: int, chunk: int) -> bool:
    """At transition ``now`` of the warm-up ``run`` (`adaptmc.adaptation.early._Chains`,
    in chunks of ``chunk`` transitions): when it has settled, move its final window to start
    at ``now`` (its last chunks dropped) and say so (True). The latest measures stay in
    ``run.counters["settled"]`` (a checkpoint's and the run record's), and the averaged
    step sizes in ``run.counters["last_steps"]`` (the next call's previous ones)."""
    c = run.counters
    x, g = run.window(0, now)
    steps = np.asarray(da_final_step_size_on_host(run.da))
    measures = settled_measures(
        x, g, np.concatenate(run.out["lp"], axis=1), steps, c["last_steps"],
        fg=c["foreground"], bg=c["background"], now=now, rank=run.rank, kind=c["kind"])
    c["settled"] = measures or c["settled"]
    c["last_steps"] = steps.tolist()
    if not is_settled(measures):
        return False
    c["num_chunks"] -= (c["final_start"] - now) // chunk
    c["final_start"] = now
    return True


def record(run) -> dict:
    """What the test decided for the warm-up ``run``, for the run's record: where the early
    phase ended (`chains_agree`), the final window's first transition, the schedule's
    (``num_steps`` at most), whether it ended early, whether the final window ran and the
    last measures (`settled_measures`; None if never judged)."""
    planned = schedule(run.num_steps)[1]
    return {"early_end": int(run.early_end), "final_start": int(run.final_start),
            "planned_final_start": int(planned), "ended_early": bool(run.final_start < planned),
            "max_steps": int(run.num_steps),
            "final_window": bool(run.final_window),
            "measures": run.counters["settled"]}
