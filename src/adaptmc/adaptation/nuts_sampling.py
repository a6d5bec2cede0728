"""Sampling with NUTS under the warm-up's final metric and step sizes, and NUTS's reward.

The warm-up (`adaptmc.adaptation.early`) already runs NUTS (Hoffman & Gelman 2014, Alg. 6;
the multinomial kernel of `adaptmc.adaptation.compact_nuts`) in one compiled chunk program
whose metric and step sizes are arguments. Sampling with NUTS calls that same program (no
second NUTS is compiled) with dual averaging frozen: every chunk starts from a
dual-averaging state whose update moves the log step by ``sqrt(t) / (gamma (t + t0))``
per transition with ``t = FROZEN_T`` (`adaptmc.adaptation.dual_averaging.da_frozen`),
i.e. by less than ``1e-8`` over a chunk, so each chain samples at the warm-up's final
step (`adaptmc.adaptation.early.final_steps`), jittered by `JITTER` per transition. Draws
past ``draws`` in the last chunk are dropped; their gradients are counted, as every
gradient computed is (`adaptmc.adaptation.chains.chain_grads`).

NUTS's reward (`nuts_reward`) is the bandit's (`adaptmc.objectives.robust_ess_per_grad`,
over the run) measured on NUTS draws under the final metric: those of the warm-up's final
window after its first chunk, where the metric is fixed and only the step size still
adapts (`final_window`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from adaptmc.adaptation.chains import chain_grads
from adaptmc.adaptation.dual_averaging import da_frozen_on_host
from adaptmc.adaptation.early import OUTPUTS, _Chains, final_steps
from adaptmc.adaptation.host_random import split
from adaptmc.adaptation.warmup_programs import CHUNK, chunk_key, chunk_program, padded
from adaptmc.targets.base import compiled

JITTER = 0.1
"""Each sampling transition's step is the chain's final step times ``U(0.9, 1.1)``: a
randomised step keeps trajectories from being nearly periodic (Neal 2011, "MCMC using
Hamiltonian dynamics", Sec. 5.4.2.2), as nutpie's default does (nuts-rs
``StepSizeSettings``): on std-normal-10d, seed 0, a fixed step made NUTS take 16.5
gradients a draw where the jittered one took 8.3 (docs/notes/nutseff.md)."""


class NutsDraws(NamedTuple):
    """What `nuts_sample` made: positions ``(chains, draws, dim)``; logdensity, steps
    (leapfrog steps per transition) and divergent, each ``(chains, draws)``; num_grads:
    gradients computed over all chains (the dropped transitions' included); step_sizes:
    ``(chains,)`` the frozen steps (before jitter); states: where the chains stand;
    acceptance: ``(chains, draws)`` each transition's acceptance statistic."""

    positions: np.ndarray
    logdensity: np.ndarray
    steps: np.ndarray
    divergent: np.ndarray
    num_grads: int
    step_sizes: np.ndarray
    states: object
    acceptance: np.ndarray | None = None


class NutsArm(NamedTuple):
    """What sampling with NUTS after the warm-up needs of it: the target, the final
    metric as the chunk program's arrays (``rank`` directions), its ``target_accept``,
    each chain's final step ``(chains,)`` (`early.final_steps`) and the final window's
    NUTS draws (`final_window`: positions, divergent, gradients) to measure NUTS's reward
    on."""

    target: object
    metric: tuple
    rank: int
    target_accept: float
    step_sizes: np.ndarray
    window: tuple


def nuts_arm(run: _Chains) -> NutsArm:
    """The `NutsArm` of the finished warm-up ``run``."""
    return NutsArm(run.target, padded(run.metric, run.rank), run.rank, run.target_accept,
                   final_steps(run), final_window(run))


def nuts_sample(arm: NutsArm, state, key, draws: int, fold: int | None = None) -> NutsDraws:
    """``draws`` NUTS transitions per chain from ``state`` (the chains'
    `adaptmc.adaptation.compact_nuts.NutsState`: position, log density, gradient) under
    ``arm``'s metric and steps, through the warm-up's own chunk program; ``fold``: the first
    chunk's keys are ``key``'s stream ``fold`` (`host_random.split`), the next chunks'
    follow from them."""
    if int(draws) != draws or draws < 1:
        raise ValueError(f"draws must be an integer >= 1, got {draws}")
    program = compiled(arm.target, chunk_key(arm.target_accept, arm.rank),
                       lambda: chunk_program(arm.target, arm.target_accept))
    out, grads = {name: [] for name in OUTPUTS}, 0
    chains = state.position.shape[0]
    frozen = da_frozen_on_host(arm.step_sizes)
    for _ in range(-(-int(draws) // CHUNK)):
        key, chain_keys = split(key, chains, fold)
        fold = None
        state, _, chunk = program((chain_keys, state, frozen, arm.metric,
                                   np.full(chains, JITTER)))
        for name, value in zip(OUTPUTS, chunk, strict=True):
            out[name].append(np.asarray(value))
        grads += chain_grads(out["steps"][-1])
    cat = {name: np.concatenate(v, axis=1)[:, :draws] for name, v in out.items()}
    return NutsDraws(cat["x"], cat["lp"], cat["steps"], cat["div"], grads, arm.step_sizes,
                     state, cat["acc"])


def recorded_setting(out: NutsDraws) -> dict:
    """The HMC setting a block of NUTS draws ``out`` is recorded under in the run's tuning
    and sample stats: the chains' mean step size and mean leapfrog steps per transition
    (the run layer names no kernel parameter, `adaptmc.run`)."""
    return {"step_size": float(np.mean(out.step_sizes)),
            "num_leapfrog": max(1, int(round(float(np.mean(out.steps)))))}


def nuts_reward(objective, positions: np.ndarray, divergent: np.ndarray,
                num_grads: int) -> float:
    """``objective`` (a reward of `adaptmc.objectives`, e.g. `over_the_run` of the robust
    ESS per gradient) of NUTS draws ``positions: (chains, n, dim)`` that cost
    ``num_grads`` gradients over all chains."""
    return float(objective(np.asarray(positions), {"is_divergent": np.asarray(divergent)},
                           int(num_grads)))


def final_window(run: _Chains) -> tuple[np.ndarray, np.ndarray, int]:
    """``(positions, divergent, gradients)`` of the warm-up's final window (the metric
    fixed, the step size adapting) after its first chunk: NUTS draws under the final
    metric. Dual averaging restarts at the window's start and explores steps up to ten
    times the last one there (``mu = log(10 eps)``, Hoffman & Gelman 2014, Sec. 3.2.1),
    which diverge on most chains: those transitions are not the frozen sampler's."""
    first = run.final_start // CHUNK + 1
    x = np.concatenate(run.out["x"][first:], axis=1)
    div = np.concatenate(run.out["div"][first:], axis=1)
    grads = sum(chain_grads(s) for s in run.out["steps"][first:])
    return x, div, grads
