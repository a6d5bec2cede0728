"""NUTS under the warm-up's metric as the default recipe's sampling arm
(`adaptmc.run.nuts_stage`, the recipe option ``nuts``): exactly ``draws`` draws, every
gradient counted, the choice and both rewards recorded, NUTS chosen where fixed-L HMC is
poor and HMC where it wins, and a run stopped in NUTS sampling resumes bit-identically."""

from __future__ import annotations

import json

import jax
import numpy as np

from adaptmc.api import run_plan
from adaptmc.recipes import build
from adaptmc.targets import get_target

OPTIONS = dict(warmup_steps=150, tuning=3, draws=230)
KWARGS = dict(chains=2, seed=3, progress=False, checkpoint_every=2)


def _run(target, nuts, **more):
    plan = build("adaptive-hmc", target, nuts=nuts, mams="off", **{**OPTIONS, **more})
    return run_plan(target, plan, **KWARGS)


def _draws(result):
    return np.asarray(result.idata.posterior.to_array().values)


def test_nuts_sampling_keeps_draws_and_counts_gradients_as_the_run_record_sums():
    target = get_target("std-normal-10d")
    result = _run(target, "always")
    choice = json.loads(result.idata.attrs["sampler"])
    assert choice["sampler"] == "nuts"
    assert result.idata.posterior.sizes["draw"] == OPTIONS["draws"]
    stats = result.idata.sample_stats
    sampling = int(stats["n_grad_evals"].values.sum())
    tuning = result.idata.tuning
    # every gradient is in the total: the super-transitions' (tuning and NUTS blocks alike)
    assert int(np.sum(tuning["num_grads"].values)) >= sampling
    assert result.num_grads == result.idata.attrs["total_grad_evals"]
    z = _draws(result).reshape(-1, target.dim)
    assert np.all(np.abs(z.mean(axis=0)) < 0.25) and np.all(np.abs(z.std(axis=0) - 1) < 0.25)
    # NUTS's acceptance statistic is recorded (sampled at the step fitted to 0.8)
    acceptance = stats["acceptance_rate"].values
    assert np.all((acceptance >= 0) & (acceptance <= 1))
    assert 0.6 < float(np.mean(acceptance)) < 0.95
    # and so is each NUTS block's mean in the tuning record (a sum over its transitions
    # divided by them, as a super-transition's)
    nuts_blocks = tuning["acceptance_rate"].values[~tuning["warmup"].values]
    assert np.all((0.6 < nuts_blocks) & (nuts_blocks < 0.95))


def test_the_choice_records_both_rewards_and_picks_hmc_where_it_wins():
    """On a standard normal a tuned fixed-L HMC (L of 3-5 at a large step) can be ahead of
    NUTS per gradient: the frozen HMC samples and both rewards are recorded. (Two chains,
    three tuning super-transitions: a noisy choice; HMC won on 4 of seeds 0-7 at cf56eb9,
    on 3 of them (0-2) since the host's random streams, seed 0 by 14.3 against 4.4:
    docs/notes/cold-compile.md.)"""
    target = get_target("std-normal-10d")
    plan = build("adaptive-hmc", target, nuts="choose", **OPTIONS)
    result = run_plan(target, plan, **{**KWARGS, "seed": 0})
    choice = json.loads(result.idata.attrs["sampler"])
    assert np.isfinite(choice["nuts_reward"]) and np.isfinite(choice["hmc_reward"])
    assert choice["sampler"] == "hmc", choice
    assert choice["hmc_reward"] > choice["nuts_reward"]
    from adaptmc.run_facts import notes

    lines = [n for n in notes(dict(result.idata.attrs), 2) if "sampled with" in n]
    assert lines == [f"note: sampled with the frozen HMC setting (reward, robust ESS per 1000 "
                     f"gradients of the run: NUTS {choice['nuts_reward']:.4g}, HMC "
                     f"{choice['hmc_reward']:.4g})"]


def test_the_choice_picks_nuts_where_fixed_l_hmc_is_poor(monkeypatch):
    """A forced bad HMC: the rewards the bandit measured scaled down a hundredfold (as a
    box of poor fixed-L settings would give): NUTS samples, and its draws are kept."""
    from adaptmc.run import nuts_stage

    frozen_reward = nuts_stage.frozen_reward
    monkeypatch.setattr(nuts_stage, "frozen_reward",
                        lambda setup, state: frozen_reward(setup, state) / 100)
    target = get_target("std-normal-10d")
    result = _run(target, "choose")
    choice = json.loads(result.idata.attrs["sampler"])
    assert choice["sampler"] == "nuts", choice
    assert result.idata.posterior.sizes["draw"] == OPTIONS["draws"]


def _warmup_chunks(result) -> int:
    settled = json.loads(result.idata.attrs["warmup"])["settled"]
    final = settled["max_steps"] - settled["planned_final_start"]
    return (settled["final_start"] + final * settled["final_window"]) // 10


def test_a_run_stopped_in_nuts_sampling_resumes_bit_identically(tmp_path):
    target = get_target("std-normal-10d")
    whole = _run(target, "always")
    adapted = int(whole.idata.tuning.attrs["adapted"])
    out = tmp_path / "run"
    plan = build("adaptive-hmc", target, nuts="always", mams="off", **OPTIONS)
    # stopped after the first NUTS block (100 of 230 draws)
    partial = run_plan(target, plan, output_dir=out,
                       stop_after=_warmup_chunks(whole) + adapted + 1, **KWARGS)
    assert partial.idata is None
    target = get_target("std-normal-10d")
    plan = build("adaptive-hmc", target, nuts="always", mams="off", **OPTIONS)
    resumed = run_plan(target, plan, output_dir=out, resume=True, **KWARGS)
    np.testing.assert_array_equal(_draws(resumed), _draws(whole))
    assert resumed.num_grads == whole.num_grads
    assert resumed.idata.attrs["sampler"] == whole.idata.attrs["sampler"]


def test_a_run_sampling_with_nuts_counts_every_gradient_it_computes():
    """The run record's total against a counter around the log density (as
    `tests/test_gradient_count.py` counts the default recipe's)."""
    import adaptmc
    from test_gradient_count import CHAINS, START_CHECKS, counting_target

    target, count = counting_target()
    idata = adaptmc.sample(target, chains=CHAINS, seed=0, progress=False,
                           compile_cache=False, warmup_steps=150, draws=105, tuning=4,
                           nuts="always", mams="off")
    jax.effects_barrier()
    assert json.loads(idata.attrs["sampler"])["sampler"] == "nuts"
    assert idata.posterior.sizes["draw"] == 105
    assert count[0] == idata.attrs["total_grad_evals"]
    assert idata.attrs["check_grads"] == START_CHECKS


def test_a_thinned_default_run_says_that_untuned_hmc_sampled_in_place_of_nuts():
    """NUTS blocks do not thin: a default run with ``thin`` > 1 and no tuning samples with
    the warm-up's HMC setting, and its record and summary say so (never silently)."""
    import adaptmc
    from adaptmc.diagnostics import format_summary

    idata = adaptmc.sample("std-normal-10d", chains=2, seed=0, progress=False, draws=100,
                           warmup_steps=150, thin=2, mams="off")
    record = json.loads(idata.attrs["sampler"])
    assert record["sampler"] == "hmc" and record["thinned"]
    assert "NUTS, which would have sampled, does not thin" in format_summary(idata)
    plain = adaptmc.sample("std-normal-10d", chains=2, seed=0, progress=False, draws=100,
                           warmup_steps=150, mams="off")
    assert not json.loads(plain.attrs["sampler"])["thinned"]
    assert "does not thin" not in format_summary(plain)
