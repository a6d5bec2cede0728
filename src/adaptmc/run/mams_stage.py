"""MAMS as the sampling stage of a run (`adaptmc.recipes.mams_sampling`).

`MamsSample` is a `SuperTransitions` stage whose step runs one block of MAMS transitions
per chain through MAMS's one compiled program (`adaptmc.kernels.mams_chunk`: the program
that tuned MAMS's step and trajectory length, its dual averaging off) in place of a
super-transition, every ``thin``-th transition kept: at most the super-transition's kept
draws (its budget over the gradients of ``thin`` transitions) and no more than the run
still needs; its first block, where ``arm.first`` holds transitions already run under the
arm (MAMS's last measurement), keeps those (`first_draws`) and runs nothing. It is
recorded, checkpointed and summarised as a super-transition: its draws go to the posterior,
its gradients (every transition's), divergences and summed acceptance probabilities to the
sample stats; the key of block ``i`` is the run's key folded with ``i``, so a resumed run
makes the draws of an uninterrupted one.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from adaptmc.kernels.mams_chunk import CAPACITY, ChunkOut, da_fixed, run_chunk
from adaptmc.run.transitions import Progress, Setup, SuperTransitions, _account, _frozen


class MamsArm(NamedTuple):
    """What sampling with MAMS needs: the metric's padded arrays
    (`adaptmc.kernels.mams_chunk.as_padded`), the isokinetic step ``eps``, the steps per
    transition (its gradients), the step's jitter and the acceptance rate its averaging
    aimed at; ``first``: None, or transitions already run under this arm, from the chains'
    states the sampling starts from to where they stand (MAMS's last measurement), whose
    every ``thin``-th draw the sampling keeps first (`first_draws`)."""

    metric: tuple
    eps: float
    steps: int
    jitter: float
    target_accept: float
    first: ChunkOut | None = None


class MamsSample(SuperTransitions):
    """Sampling with MAMS under ``arm`` until ``num_draws`` draws per chain are kept."""

    name = "sample"

    def __init__(self, setup: Setup, progress: bool, loop, arm: MamsArm):
        super().__init__(setup, progress, loop)
        self.arm = arm

    def step(self, state: Progress) -> Progress:
        setup, arm = self.setup, self.arm
        if arm.first is not None and setup.phases.kept_missing(state) == setup.phases.num_draws:
            count, draws = first_draws(arm.first, setup.thin, setup.phases.num_draws)
            state.params = _frozen(setup, state)
            summary, reward = _account(setup, state, state.frozen, draws, count, (0.0, 0.0))
            if self.show:
                self._progress(state, state.params, summary, reward)
            return state
        per_block = setup.gradient_budget // arm.steps // setup.thin
        kept = max(1, min(per_block, CAPACITY, setup.phases.kept_missing(state)))
        count = kept * setup.thin
        tick = time.perf_counter()
        out = run_chunk(setup.target, setup.key, state.states, arm.metric,
                        da_fixed(arm.eps), count=count, fixed_steps=arm.steps,
                        thin=setup.thin, jitter=arm.jitter, target_accept=arm.target_accept,
                        fold=state.index)
        wall_s = time.perf_counter() - tick
        state.states = out.states
        state.params = _frozen(setup, state)
        totals = (out.grads.astype(np.int64), out.divergences.astype(np.int32),
                  out.acceptance_sum)
        summary, reward = _account(setup, state, state.frozen,
                                   (out.positions, _stats(out), out.logdensity, totals),
                                   count, (wall_s, 0.0))
        if self.show:
            self._progress(state, state.params, summary, reward)
        return state


def _stats(out: ChunkOut) -> dict:
    """The sample stats of a chunk's kept draws."""
    steps = np.broadcast_to(out.steps.astype(np.int32), out.acceptance.shape)
    return {"acceptance_rate": np.clip(out.acceptance, 0.0, 1.0), "accepted": out.accepted,
            "is_divergent": out.divergent, "energy_error": out.energy_error,
            "num_grads": np.array(steps), "energy": np.full(out.acceptance.shape, np.nan)}


def first_draws(out: ChunkOut, thin: int, most: int) -> tuple[int, tuple]:
    """``(transitions, (positions, stats, log densities, totals))``: the draws a sampling
    keeps of ``out`` (a chunk run with every transition kept, under the sampling's arm):
    every ``thin``-th transition, at most ``most`` draws per chain, recorded as a
    super-transition of those transitions (their acceptance and divergences; the
    gradients of every transition ``out`` ran, all computed)."""
    kept = min(out.positions.shape[1] // thin, most)
    count = kept * thin
    pick = slice(thin - 1, count, thin)
    chosen = out._replace(positions=out.positions[:, pick], logdensity=out.logdensity[:, pick],
                          acceptance=out.acceptance[:, pick], accepted=out.accepted[:, pick],
                          divergent=out.divergent[:, pick],
                          energy_error=out.energy_error[:, pick], steps=out.steps[pick])
    totals = (out.grads.astype(np.int64),
              np.sum(out.divergent[:, :count], axis=1).astype(np.int32),
              np.sum(out.acceptance[:, :count], axis=1))
    return count, (chosen.positions, _stats(chosen), chosen.logdensity, totals)
