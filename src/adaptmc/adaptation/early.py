"""A warm-up that learns the metric early and often, then picks the metric that fits.

NUTS (`adaptmc.adaptation.compact_nuts`, parameters at call time) per chain, in chunks of `CHUNK`
transitions; between chunks, on the host, the inverse mass is re-estimated from the draws
*and gradients* of the chains (pooled about each chain's own mean,
`metric_choice.within_chains`), as nutpie does (Seyboldt, Carlson & Carpenter,
"Preconditioning HMC by minimising Fisher divergence"; nuts-rs ``adapt_strategy.rs``):

1. **Start**: the inverse mass ``diag(1 / |grad(x_0)|)`` (nutpie's), and each chain's first
   step from Hoffman & Gelman's heuristic (2014, Alg. 4) under it.
2. **Early and often**: two estimators, a foreground one whose estimate is used and a
   background one that collects; the metric is re-estimated from the foreground's draws
   after every chunk, and once the background holds ``switch`` draws they swap (the
   foreground's old draws are dropped). ``switch`` is `CHUNK` over the early phase, so a
   chain started far out, or under a metric that is badly wrong, runs at most a few chunks
   under it; after that it doubles at every swap (growing windows), and a chain that
   arrived late swaps them at once (`settled.arrived_late`). The early phase runs
   at least `EARLY_MIN_SHARE` of the warm-up and ends at the first chunk after it where the
   chains agree (`adaptmc.adaptation.settled.chains_agree`: their log densities' split
   R-hat over the last 30 transitions, no chain far from the others), `EARLY_SHARE` at
   most.
   The estimate is the low-rank-plus-diagonal one of `adaptmc.adaptation.low_rank` (the
   diagonal ``sqrt(var(x) / var(grad))`` and up to `warmup_rank` directions of the Fisher
   divergence's minimiser), so a correlated posterior is preconditioned from the first
   windows on, not after a stage under a diagonal metric. A chunk in which most
   transitions diverge under a newer estimate sends the chains back to the last metric and
   step sizes a chunk ran well under (`_Chains.keep_or_revert`).
3. **Step size**: dual averaging (Hoffman & Gelman 2014, Alg. 5) per chain throughout,
   restarted from its averaged step at every swap.
4. **Choice** (`adaptmc.adaptation.metric_choice`): before the last `FINAL_SHARE` of the
   warm-up, the diagonal, low-rank and dense metrics fitted to one half of the last
   foreground window are judged on the other half (condition left after preconditioning,
   cost per leapfrog step); the chosen one is fitted to the whole window.
5. **Final window**: the chosen metric held fixed and the step size alone adapted; its
   trajectory lengths give the tuner its range of ``L``. It starts as soon as the warm-up
   has settled (`adaptmc.adaptation.settled`), ``num_steps`` is the most it runs. NUTS
   samples (`adaptmc.adaptation.nuts_sampling`) at the steps where the window's transitions
   say the acceptance statistic meets its target (`final_steps`,
   `adaptmc.adaptation.final_step`), not at dual averaging's averaged steps, which a window
   this short leaves well below it; the tuner starts from the averaged step. A kernel that
   adapts its own step after the warm-up (MAMS) needs no final window: the warm-up then
   ends at its start (``final_window=False``), the averaged step as it stands.

Every transition runs in one compiled program per target and shape, whose metric (a
low-rank-plus-diagonal one padded to `warmup_rank` directions) and step sizes are arguments:
a diagonal or dense metric is the same program with other arrays. Gradients are counted as
computed: one per chain at the start, those of the first-step heuristic and each NUTS
transition's ``num_integration_steps``; on an accelerator, where the chains run in lockstep,
every step of the longest chain costs every chain's gradient (`lockstep`).
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import numpy as np

from adaptmc.adaptation import final_step, metric_choice, settled
from adaptmc.adaptation.chains import chain_grads, regroup_far_chains
from adaptmc.adaptation.compact_nuts import NutsState
from adaptmc.adaptation.dual_averaging import da_final_step_size_on_host, da_init_on_host
from adaptmc.adaptation.host_random import split
from adaptmc.adaptation.low_rank import LowRankInverseMass, low_rank_dense
from adaptmc.adaptation.schedule import (  # noqa: F401 (the warm-up's names)
    DENSE_MAX_DIM,
    EARLY_MIN_SHARE,
    EARLY_SHARE,
    FINAL_SHARE,
    METRICS,
    check_warmup,
    early_min,
    final_length,
    schedule,
    warmup_rank,
)
from adaptmc.adaptation.warmup_programs import (
    CHUNK,
    chunk_key,
    chunk_program,
    compile_chunk_ahead,
    first_on_host,
    padded,
)
from adaptmc.targets.base import compiled


class EarlyWarmup(NamedTuple):
    """What `early_warmup` measured.

    positions: ``(chains, dim)`` where the chains stand; step_size: the median of the chains'
    averaged steps (dual averaging's, the tuner's start; NUTS samples at `final_steps`);
    inverse_mass: ``(dim,)``, ``(dim, dim)`` or a `LowRankInverseMass`; metric: ``"diag"``,
    ``"dense"`` or ``"low-rank"``; trajectory_steps: ``(chains, n)`` NUTS leapfrog steps per
    transition of the final window; draws: ``(chains, n, dim)`` its positions; logdensity:
    ``(chains, steps)``; num_grads: gradients over all chains; divergences; rhat_lp: split
    R-hat of the log density over the final window; stages: what ran; choice: what each
    candidate metric measured; num_updates: metric estimates; wall_s, compile_s: seconds;
    final_state: the chains' `NutsState` where they stand (position, log density and
    gradient, as the warm-up's program computed them).
    """

    positions: np.ndarray
    step_size: float
    inverse_mass: np.ndarray | LowRankInverseMass
    metric: str
    trajectory_steps: np.ndarray
    draws: np.ndarray
    logdensity: np.ndarray
    num_grads: int
    divergences: int
    rhat_lp: float
    stages: tuple[str, ...]
    choice: dict
    num_updates: int
    wall_s: float
    compile_s: float
    far_chains: dict | None = None
    final_state: NutsState | None = None


def chunk_ahead(target, positions, key, rank: int, target_accept: float) -> None:
    """Start compiling the warm-up's chunk program for chains at positions like ``positions:
    (chains, dim)`` from a key like ``key`` (arrays or their ``jax.ShapeDtypeStruct``) in
    a thread of its own (`compile_chunk_ahead`): it compiles on another core while the
    run computes its starts and their first steps."""
    if chunk_key(target_accept, rank) not in target.programs:
        compile_chunk_ahead(target, target_accept, rank, positions, key)


class _Chains:
    """The warm-up's running state on the host: chain states, dual averaging, the metric,
    every transition's outputs so far and where the schedule stands (`advance` runs a chunk,
    `adapt` acts on it); everything a checkpoint needs (`chains_to_arrays`)."""

    def __init__(self, target, positions, key, rank, target_accept, num_steps, metric,
                 final_window=True):
        self.target, self.rank, self.key = target, rank, key
        self.final_window = final_window
        self.compile_s, self.calls, self.started = 0.0, 0, time.perf_counter()
        chains = positions.shape[0]
        chunk_ahead(target, positions, key, rank, target_accept)  # if not started before
        logdensity, grad, inverse_mass, steps, trials = first_on_host(target, key, positions)
        self.da = da_init_on_host(steps, 10.0)
        self.state = NutsState(positions, logdensity, grad)
        # pooled over chains by the geometric mean: a scale, not a location
        diag = np.exp(np.mean(np.log(np.asarray(inverse_mass)), axis=0))
        self.metric = LowRankInverseMass(diag, np.zeros((positions.shape[1], 0)), np.zeros(0))
        self.num_grads = chains + int(np.sum(trials))  # each chain its own, on the host
        self.out = {name: [] for name in OUTPUTS}
        self.target_accept = target_accept
        self.trusted = None
        self.asked, self.num_steps = metric, int(num_steps)
        early_end, final_start = schedule(self.num_steps)
        self.counters = {"index": 0, "foreground": 0, "background": 0, "late_switch": 2 * CHUNK,
                         "updates": 0, "reverts": 0,
                         "kind": "diag" if metric == "diag" else "low-rank",
                         "final_start": final_start, "num_chunks": -(-self.num_steps // CHUNK),
                         "early_end": early_end,
                         "last_steps": None, "settled": None}
        self.choice, self.bar = {}, None

    final_start = property(lambda self: self.counters["final_start"])  # settled: earlier
    early_end = property(lambda self: self.counters["early_end"])  # chains agree: earlier
    num_chunks = property(lambda self: self.counters["num_chunks"])

    def advance(self) -> None:
        """One chunk of `CHUNK` transitions per chain under the current metric."""
        cache_key = chunk_key(self.target_accept, self.rank)
        programs = self.target.programs
        self.key, keys = split(self.key, self.state.position.shape[0])
        if cache_key not in programs or ("ahead", cache_key) in programs:
            tick = time.perf_counter()
            ahead = ("ahead", cache_key) in programs  # compiling since the start
            program = compiled(self.target, cache_key,  # waits for `compile_chunk_ahead`
                               lambda: chunk_program(self.target, self.target_accept))
            if not ahead:
                program.lower(self._rows(keys)).compile()
            self.compile_s += time.perf_counter() - tick
        self.state, self.da, out = programs[cache_key](self._rows(keys))
        for name, value in zip(self.out, out, strict=True):
            self.out[name].append(np.asarray(value))
        self.num_grads += chain_grads(self.out["steps"][-1])
        self.calls += 1

    def _rows(self, keys):
        """The chunk program's argument: per chain its key, state, dual averaging and no
        step jitter; the (shared) metric's arrays."""
        chains = keys.shape[0]
        return keys, self.state, self.da, padded(self.metric, self.rank), np.zeros(chains)

    def adapt(self) -> None:
        """After a chunk: keep or revert, re-estimate the metric, swap the estimators when
        the background holds ``switch`` draws, and choose the final metric at the final
        window's start (the module docstring's steps 2-4)."""
        c = self.counters
        reverted = self.keep_or_revert()
        c["reverts"] += reverted
        c["index"] += 1
        now = c["index"] * CHUNK
        if now < self.final_start:
            late = now > self.early_end and settled.late_in(self, now)
            if late:  # its way in dropped before the metric is estimated again
                self.swap(now, grow=False)
            if not reverted:
                self.metric = metric_choice.estimate(*self.window(c["foreground"], now),
                                                     c["kind"], self.rank, self.metric)
                c["updates"] += 1
            if early_min(self.num_steps) <= now < self.early_end and self.chains_agree(now):
                c["early_end"] = now
            switch = CHUNK if now <= self.early_end else c["late_switch"]
            ended = now > self.early_end and settled.end_if_settled(self, now, CHUNK)
            if not (late or ended) and now - c["background"] >= switch \
                    and now + switch <= self.final_start:
                self.swap(now, grow=now > self.early_end)
        if now == self.final_start:
            c["kind"], self.choice = _choose(self, c["foreground"], now, self.asked, self.rank)
            if self.final_window:
                self.restart_step_size()
            else:  # the kernel after it adapts its own step, from the averaged one
                c["num_chunks"] = c["index"]
        _show(self.bar, self, c["kind"])

    def done(self) -> bool:
        return self.counters["index"] >= self.num_chunks

    def chains_agree(self, now: int) -> bool:
        """Whether the chains' last `settled.AGREE_WINDOW` transitions before ``now`` say
        they have arrived and agree (`settled.chains_agree`): the early phase may end."""
        start = now - settled.AGREE_WINDOW
        lp = np.concatenate(self.out["lp"][start // CHUNK: now // CHUNK], axis=1)
        return settled.chains_agree(self.window(start, now)[0], lp)

    def swap(self, now: int, grow: bool) -> None:
        """Background to foreground, a new background from ``now``; ``grow``: doubling."""
        c = self.counters
        c["foreground"], c["background"] = c["background"], now
        c["late_switch"] *= 2 if grow else 1
        self.restart_step_size()

    def window(self, start: int, stop: int):
        """Pooled ``(draws, grads)``, both ``(chains, n, dim)``, of transitions
        ``[start, stop)``."""
        x = np.concatenate(self.out["x"][start // CHUNK: stop // CHUNK], axis=1)
        g = np.concatenate(self.out["g"][start // CHUNK: stop // CHUNK], axis=1)
        return x, g

    def restart_step_size(self) -> None:
        """Dual averaging restarted from each chain's averaged step."""
        self.da = da_init_on_host(da_final_step_size_on_host(self.da), 10.0)

    def keep_or_revert(self) -> bool:
        """After a chunk: when most of its transitions diverged under a metric newer than
        the last one a chunk ran well under, go back to that metric and its step sizes
        (True); else trust the current ones (False). An estimate from a few draws of chains
        still on their way in can be badly wrong, and dual averaging would then shrink the
        step by orders of magnitude, making the next trajectories as long as NUTS allows."""
        diverged = np.mean(self.out["div"][-1]) >= 0.5
        if diverged and self.trusted is not None and self.metric is not self.trusted[0]:
            self.metric, steps = self.trusted
            self.da = da_init_on_host(steps, 10.0)
            return True
        if not diverged:
            self.trusted = (self.metric, da_final_step_size_on_host(self.da))
        return False


OUTPUTS = ("x", "g", "lp", "steps", "div", "acc", "eps")


def start_chains(target, positions, key, *, num_steps: int = 500, metric: str = "auto",
                 target_accept: float = 0.8, progress: bool | None = None,
                 final_window: bool = True) -> _Chains:
    """The warm-up's chains at ``positions: (chains, dim)``, checked, before any chunk;
    ``final_window=False``: the warm-up ends where its final window would start (the metric
    chosen), for a kernel that adapts its own step after it (`run_final_window` runs the
    window later if NUTS is to sample after all)."""
    check_warmup(num_steps, metric)
    positions = np.asarray(positions)  # on the host: the programs take it as it is
    positions = positions.astype(jax.dtypes.canonicalize_dtype(positions.dtype))
    rank = warmup_rank(positions.shape[1], metric)
    run = _Chains(target, positions, key, rank, target_accept, num_steps, metric,
                  final_window)
    run.bar = _bar(run.num_chunks * CHUNK, progress)
    return run


def chains_result(run: _Chains) -> EarlyWarmup:
    """The `EarlyWarmup` of finished chains (the progress bar closed)."""
    if run.bar is not None:
        run.bar.close()
    run.choice.update(reverted=run.counters["reverts"], settled=settled.record(run))
    far = regroup_far_chains(run, read_from(run))
    return _result(run, run.counters["kind"], run.choice, run.counters["updates"],
                   read_from(run) * CHUNK, run.started)._replace(far_chains=far)


def read_from(run: _Chains) -> int:
    """The first chunk of the window the result reads (far chains, R-hat, trajectories):
    the final window's, or where it was not run as many transitions before its start."""
    first = run.final_start // CHUNK
    return first if run.num_chunks > first else max(0, first - final_length(run.num_steps) // CHUNK)


def run_final_window(run: _Chains) -> _Chains:
    """The final window of ``run``, a warm-up that ended without it (``final_window=False``):
    its chunks run now, from where the chains stand (NUTS samples after all)."""
    run.final_window, run.bar = True, None  # its bar closed with the warm-up's result
    run.restart_step_size()
    run.counters["num_chunks"] = run.counters["index"] + final_length(run.num_steps) // CHUNK
    while not run.done():
        run.advance()
        run.adapt()
    return run


def early_warmup(target, positions, key, *, num_steps: int = 500, metric: str = "auto",
                 target_accept: float = 0.8, progress: bool | None = None) -> EarlyWarmup:
    """Warm ``positions: (chains, dim)`` up on ``target`` for ``num_steps`` NUTS transitions
    per chain (see the module docstring). ``metric``: ``"auto"`` (chosen by what each
    buys), or one of ``"diag"``, ``"dense"``, ``"low-rank"`` (then only the choice is
    forced). ``progress``: a bar over the transitions (None: when the output is a
    terminal). `adaptmc.adaptation.early_stage.EarlyWarmupStage` is the same warm-up,
    resumable, as a stage of a run."""
    run = start_chains(target, positions, key, num_steps=num_steps, metric=metric,
                       target_accept=target_accept, progress=progress)
    while not run.done():
        run.advance()
        run.adapt()
    return chains_result(run)


def final_steps(run: _Chains) -> np.ndarray:
    """``(chains,)`` the steps to sample with after the warm-up ``run``: fitted to its
    final window's steps and acceptance statistics (`final_step.final_step_sizes`)."""
    first = run.final_start // CHUNK
    acceptance = np.concatenate(run.out["acc"][first:], axis=1)
    steps = np.concatenate(run.out["eps"][first:], axis=1)
    return final_step.final_step_sizes(da_final_step_size_on_host(run.da),
                                       steps, acceptance, run.target_accept)


def _choose(run: _Chains, start: int, stop: int, metric: str, rank: int):
    """The final metric from transitions ``[start, stop)`` (`metric_choice.choose_final`),
    set on ``run``; returns its kind and what was measured."""
    kind, run.metric, measured = metric_choice.choose_final(
        *run.window(start, stop), run.target, metric, rank)
    return kind, {**measured, "window": [start, stop]}


def _bar(total: int, progress: bool | None):
    if progress is False:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="draw", desc="warm-up", dynamic_ncols=True,
                disable=None if progress is None else False, leave=False)


def _show(bar, run: _Chains, kind: str) -> None:
    if bar is None:
        return
    bar.update(CHUNK)
    step = float(np.median(np.exp(np.asarray(run.da.log_step_size))))
    bar.set_postfix({"eps": f"{step:.3g}", "metric": kind, "rank": run.metric.rank,
                     "grads": f"{run.num_grads:,}"}, refresh=False)


def _result(run: _Chains, kind: str, choice: dict, updates: int, final_start: int,
            started: float) -> EarlyWarmup:
    """The warm-up's `EarlyWarmup` from its run state."""
    from adaptmc.diagnostics import rhat

    first = final_start // CHUNK
    steps = np.concatenate(run.out["steps"][first:], axis=1)
    lp_all = np.concatenate(run.out["lp"], axis=1)
    last_lp = lp_all[:, final_start:, None]
    chains = steps.shape[0]
    metric = run.metric
    if kind == "diag":
        inverse_mass = np.asarray(metric.diag)
    elif kind == "dense":
        inverse_mass = low_rank_dense(metric)
    else:
        inverse_mass = metric
    return EarlyWarmup(
        positions=np.asarray(run.state.position),
        step_size=float(np.median(da_final_step_size_on_host(run.da))),
        inverse_mass=inverse_mass, metric=kind, trajectory_steps=steps,
        draws=np.concatenate(run.out["x"][first:], axis=1), logdensity=lp_all,
        num_grads=run.num_grads,
        divergences=int(sum(np.sum(d) for d in run.out["div"])),
        rhat_lp=float(rhat(last_lp)[0]) if chains > 1 else 1.0,
        stages=("early", "windows", kind), choice=choice, num_updates=updates,
        wall_s=time.perf_counter() - started, compile_s=run.compile_s,
        final_state=NutsState(*(np.asarray(a) for a in run.state)))
