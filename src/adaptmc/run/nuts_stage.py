"""NUTS under the warm-up's metric as the sampling stage of a run, and the choice of it over
the tuned, frozen HMC (issue #42: the kernel that wins, never worse than NUTS).

When tuning ends (its last super-transition, or the stop rule), `choose_sampler` compares
NUTS's reward with the frozen setting's, both the run's objective (the bandit's reward,
`adaptmc.objectives.over_the_run` of the robust ESS per gradient): NUTS's measured on the
warm-up's final window (`adaptmc.adaptation.nuts_sampling.final_window`), the frozen
setting's the mean reward the bandit measured at it. The higher samples. Both are read from
what a checkpoint holds (the warm-up's arrays, the tuning record), so a resumed run chooses
as the uninterrupted one did.

`NutsSample` is a `SuperTransitions` stage whose step runs up to `BLOCK` NUTS transitions
per chain (`adaptmc.adaptation.nuts_sampling.nuts_sample`: the warm-up's compiled chunk
program, dual averaging frozen) in place of a super-transition, recorded, checkpointed and
summarised as one: its draws go to the posterior, its gradients (every one computed) and
divergences to the sample stats, the key of block ``i`` is ``fold_in(key, i)``.
"""

from __future__ import annotations

import time

import numpy as np

from adaptmc.adaptation.compact_nuts import NutsState
from adaptmc.adaptation.nuts_sampling import nuts_reward, nuts_sample, recorded_setting
from adaptmc.run.transitions import Progress, Setup, SuperTransitions, _account, _frozen

BLOCK = 100
"""NUTS transitions per chain of one recorded block (one super-transition's index)."""


class NutsSample(SuperTransitions):
    """Sampling with NUTS under ``arm`` (`adaptmc.adaptation.nuts_sampling.NutsArm`) until
    ``num_draws`` draws per chain are kept."""

    name = "sample"

    def __init__(self, setup: Setup, progress: bool, loop, arm):
        super().__init__(setup, progress, loop)
        self.arm = arm

    def step(self, state: Progress) -> Progress:
        setup, index = self.setup, state.index
        n = min(BLOCK, setup.phases.kept_missing(state))
        states = state.states
        tick = time.perf_counter()
        out = nuts_sample(self.arm, NutsState(states.position, states.logdensity,
                                             states.logdensity_grad), setup.key, n, fold=index)
        wall_s = time.perf_counter() - tick
        state.states = states._replace(
            position=out.states.position, logdensity=out.states.logdensity,
            logdensity_grad=out.states.logdensity_grad,
            momentum=np.full(np.shape(states.momentum), np.nan))
        state.params = _frozen(setup, state)._replace(**recorded_setting(out))
        _account(setup, state, state.frozen, _draws(out, setup.num_chains), n, (wall_s, 0.0))
        return state


def _draws(out, chains: int):
    """``(positions, stats, logdensity, totals)`` of NUTS draws as a super-transition's:
    every `adaptmc.run.loop.STEP_FIELDS` statistic (NaN where the chunk program does not
    report it), per-chain totals of gradients (every one computed: those of the dropped
    transitions of a last chunk too), divergences and summed acceptance statistic (as a
    super-transition's loop sums it, `adaptmc.run.loop`)."""
    steps = np.asarray(out.steps)
    moved = np.concatenate([np.ones((chains, 1), bool),
                            np.any(np.diff(out.positions, axis=1) != 0, axis=2)], axis=1)
    nan = np.full(steps.shape, np.nan)
    # a probability: an average of min(1, exp(-dH)) can round to 1 + 2^-23
    acceptance = nan if out.acceptance is None else \
        np.clip(np.asarray(out.acceptance, dtype=float), 0.0, 1.0)
    stats = {"acceptance_rate": acceptance, "accepted": moved,
             "is_divergent": np.asarray(out.divergent), "energy_error": nan,
             "num_grads": steps, "energy": nan}
    grads = np.full(chains, out.num_grads // chains)
    grads[: out.num_grads % chains] += 1
    totals = (grads, np.sum(out.divergent, axis=1).astype(np.int32), np.sum(acceptance, axis=1))
    return np.asarray(out.positions), stats, np.asarray(out.logdensity), totals


def frozen_reward(setup: Setup, state: Progress) -> float:
    """The mean reward the bandit measured at the setting it froze (NaN if never)."""
    params = _frozen(setup, state)
    record = state.record
    same = np.asarray(record["warmup"], bool)
    for name in setup.tuner.names:
        value = float(np.mean(getattr(params, name)))
        same &= np.isclose(np.asarray(record[f"param/{name}"], float), value)
    rewards = np.asarray(record["reward"], float)[same]
    rewards = rewards[np.isfinite(rewards)]
    return float(np.mean(rewards)) if rewards.size else float("nan")


def choose_sampler(setup: Setup, state: Progress, arm, force: bool) -> dict:
    """``{"sampler": "nuts" or "hmc", "nuts_reward", "hmc_reward", "thinned"}``: NUTS
    when its reward is the higher (a NaN loses) or ``force``; HMC when draws are thinned
    (NUTS blocks do not thin; ``thinned`` says so)."""
    nuts = float("nan") if setup.objective is None else \
        nuts_reward(setup.objective, *arm.window)
    hmc = frozen_reward(setup, state)
    wins = force or (np.isfinite(nuts) and not nuts <= hmc)
    return {"sampler": "nuts" if wins and setup.thin == 1 else "hmc",
            "nuts_reward": nuts, "hmc_reward": hmc, "thinned": bool(wins and setup.thin != 1)}
