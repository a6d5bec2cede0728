"""Bench rows for NUTS under the learned metric as an arm of the default recipe (issue #42),
measured before it is wired into the run: the default run (`adaptive-hmc`, through
`adaptmc.api.run_plan` as its row runs it), its warm-up repeated (deterministic: the same
key and starts, checked by its gradient count), and

- ``adaptmc-nuts-after-tuning``: when tuning has ended, NUTS samples (`nuts_sample`:
  ``draws`` draws under the final metric) instead of the frozen HMC; gradients: the whole
  default run's before its sampling, plus NUTS's. Recorded in ``params``: NUTS's reward
  (the bandit's, `over_the_run` of the robust ESS per gradient) on the warm-up's final
  window (`adaptmc.adaptation.nuts_sampling.final_window`) and on the first `PILOT` draws,
  and the frozen setting's (the mean reward the bandit measured at it), so that a choice
  rule is evaluated against the default row of the same run (HMC's outcome);
- ``adaptmc-nuts-after-warmup``: no tuning, NUTS samples right after the warm-up.
"""

from __future__ import annotations

import json
import time

import numpy as np

from adaptmc_lab.bench.config import BenchConfig, SamplerOutput, initial_positions


def _warmup(target, seed: int, config: BenchConfig, starts):
    """The default recipe's warm-up chains, finished (far chains regrouped), as its run
    makes them."""
    from adaptmc.adaptation.early import chains_result, start_chains
    from adaptmc.run.plan import run_keys

    run = start_chains(target, starts, run_keys(seed, "warmup"),
                       num_steps=max(150, config.num_warmup), progress=False)
    while not run.done():
        run.advance()
        run.adapt()
    return run, chains_result(run)


def _frozen_reward(idata) -> float:
    """The mean reward the bandit measured at the setting it froze (that of the last
    super-transition)."""
    tuning = idata.tuning
    names = [n for n in tuning.data_vars if n.startswith("param/")] or \
        [n for n in ("step_size", "num_leapfrog") if n in tuning.data_vars]
    values = {n: np.asarray(tuning[n].values) for n in names}
    rewards = np.asarray(tuning["reward"].values)
    warm = np.asarray(tuning["warmup"].values).astype(bool)
    frozen = {n: v[-1] for n, v in values.items()}
    same = warm & np.all([np.isclose(v, frozen[n]) for n, v in values.items()], axis=0)
    measured = rewards[same]
    measured = measured[np.isfinite(measured)]
    return float(np.mean(measured)) if measured.size else float("nan")


PILOT = 100
"""NUTS draws per chain of the pilot whose reward is measured (the sampling phase's first:
kept when NUTS is chosen)."""


def nuts_arm_sampler(after_tuning: bool):
    def sampler(target, seed: int, config: BenchConfig) -> SamplerOutput:
        from adaptmc.adaptation.nuts_sampling import final_window, nuts_arm, nuts_sample
        from adaptmc.run.plan import run_keys

        starts = initial_positions(target, seed, config.num_chains, config.init_jitter)
        tick = time.perf_counter()
        run, warm = _warmup(target, seed, config, starts)
        before, params = warm.num_grads + config.num_chains, {}  # + the start gradients
        if after_tuning:
            result, record = _default_run(target, seed, config, starts)
            if record["num_grads"] != warm.num_grads:
                raise RuntimeError("the repeated warm-up is not the run's")
            before = result.num_grads - int(
                result.idata.sample_stats["n_grad_evals"].values.sum())
        out = nuts_sample(nuts_arm(run), run.state, run_keys(seed, "root"), config.num_samples)
        reward = _reward(before / config.num_chains / config.num_samples)
        pilot = (out.positions[:, :PILOT], out.divergent[:, :PILOT],
                 int(out.steps[:, :PILOT].sum()))
        params = {"nuts_window": reward(*final_window(run)), "nuts_pilot": reward(*pilot),
                  "pilot_grads": float(pilot[2]), "before_grads": float(before)}
        if after_tuning:
            params["hmc_reward"] = _frozen_reward(result.idata)
        return SamplerOutput(out.positions, before, out.num_grads,
                             time.perf_counter() - tick, 0.0, int(out.divergent.sum()),
                             params)

    sampler.__name__ = "nuts_after_tuning" if after_tuning else "nuts_after_warmup"
    return sampler


def _reward(overhead: float):
    """The bandit's reward (robust ESS per 1000 gradients over the run, ``overhead``
    gradients per chain per kept draw before the first) of NUTS draws."""
    from adaptmc.adaptation.nuts_sampling import nuts_reward
    from adaptmc.objectives import over_the_run, robust_ess_per_grad

    objective = over_the_run(robust_ess_per_grad, overhead)
    return lambda x, div, grads: nuts_reward(objective, x, div, grads)


def _default_run(target, seed: int, config: BenchConfig, starts):
    from adaptmc.api import run_plan
    from adaptmc.recipes import build
    from adaptmc_lab.bench.samplers import recipe_options

    plan = build("adaptive-hmc", target, seed=seed, **recipe_options("adaptive-hmc", config))
    result = run_plan(target, plan, chains=config.num_chains, seed=seed,
                      initial_positions=starts, progress=False)
    return result, json.loads(result.idata.attrs["warmup"])


NUTS_ARM_ROWS = {
    "adaptmc-nuts-after-tuning": nuts_arm_sampler(True),
    "adaptmc-nuts-after-warmup": nuts_arm_sampler(False),
}
