"""``adaptive_hmc(mams="on")`` (`adaptmc.recipes.mams_sampling`): MAMS samples after the
default's warm-up, its step dual-averaged, every ``k``-th transition kept with ``k`` from
what the run measured. Right on a correlated Gaussian, the thinning rule on numbers, the
command line's flag, every gradient counted, resume bit-identical, bad values refused."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adaptmc
from adaptmc.adaptation import settled as settling
from adaptmc.api import run_plan
from adaptmc.cli import main
from adaptmc.diagnostics import format_summary
from adaptmc.recipes import build
from adaptmc.recipes.adaptive import adaptive_hmc
from adaptmc.recipes.mams_rules import MAX_THIN, adapt_transitions, thinning
from adaptmc.recipes.mams_sampling import ADAPT_TRANSITIONS, MEASURE_TRANSITIONS, MIN_STEPS
from adaptmc.targets import get_target
from adaptmc.targets.base import make_target
from helpers import counting_gaussian, moment_z_scores

DIM = 10
SCALES = np.geomspace(0.2, 5.0, DIM)
COV = np.outer(SCALES, SCALES) * 0.8 ** np.abs(np.subtract.outer(np.arange(DIM),
                                                                   np.arange(DIM)))
MEAN = np.linspace(-2.0, 2.0, DIM)


def correlated_gaussian():
    """A 10-d Gaussian, correlation ``0.8^|i - j|``, sds from 0.2 to 5, mean not zero."""
    precision, mean = jnp.asarray(np.linalg.inv(COV)), jnp.asarray(MEAN)

    def logdensity(x):
        d = x - mean
        return -0.5 * d @ precision @ d

    return make_target(logdensity, jnp.zeros(DIM), name="corr-gauss-10d")


def test_a_mams_run_on_a_correlated_gaussian_is_right_and_records_its_sampler():
    """Means and second moments within 4 MCSE of the truth (4 chains x 1000 draws); the
    record names MAMS and the thinning it chose, the summary's header says so."""
    idata = adaptmc.sample(correlated_gaussian(), chains=4, seed=1, mams="on",
                           progress=False, compile_cache=False)
    draws = np.asarray(idata.posterior["x"].values)
    assert draws.shape == (4, 1000, DIM)
    z_mean, z_var = moment_z_scores(draws, MEAN, np.diag(COV))
    assert np.max(np.abs(z_mean)) < 4, z_mean
    assert np.max(np.abs(z_var)) < 4, z_var
    record = json.loads(idata.attrs["sampler"])
    assert record["sampler"] == "mams" and idata.attrs["kernel"] == "mams"
    assert 1 <= record["thin"] <= MAX_THIN and idata.attrs["thin"] == record["thin"]
    assert record["thin"] == thinning(record["r1"], record["grads_per_transition"],
                                      record["overhead_per_draw"])[1]
    assert record["num_leapfrog"] == max(MIN_STEPS, round(record["measured_length"]
                                                          / record["first_step_size"]))
    assert abs(record["measure_acceptance"] - 0.9) < 0.08, record
    settled = json.loads(idata.attrs["warmup"])["settled"]
    assert settled["ended_early"] and record["adapt_transitions"] == ADAPT_TRANSITIONS // 2
    summary = format_summary(idata)
    assert "sampler MAMS under the warm-up's metric, every" in summary
    # the last measurement's transitions are the first block (every thin-th kept), then
    # thin transitions of num_leapfrog steps per draw; every gradient counted once
    tuning, k, g = idata.tuning, record["thin"], record["num_leapfrog"]
    first = MEASURE_TRANSITIONS // k
    assert int(tuning["num_draws"].values[0]) == first
    assert int(tuning["num_steps"].values[0]) == first * k
    assert int(tuning["num_grads"].values[0]) == 4 * MEASURE_TRANSITIONS * g
    sampled = int(np.sum(tuning["num_grads"].values[~tuning["warmup"].values.astype(bool)]))
    assert sampled == 4 * g * (MEASURE_TRANSITIONS + (1000 - first) * k)
    before = json.loads(idata.attrs["warmup"])["num_grads"] + record["num_grads"]
    assert idata.attrs["total_grad_evals"] == sampled + before + idata.attrs["check_grads"]


def test_the_step_adapts_over_half_its_transitions_only_after_a_warmup_that_settled():
    """Half of `ADAPT_TRANSITIONS` where the warm-up ended early and no chain was far; all
    of them where it ran to its end, where a far chain was regrouped, or unrecorded."""
    assert adapt_transitions(150, {"ended_early": True}, None) == 75
    assert adapt_transitions(150, {"ended_early": False}, None) == 150
    assert adapt_transitions(150, {"ended_early": True}, {"moved": [2]}) == 150
    assert adapt_transitions(150, None, None) == 150


@pytest.mark.parametrize(("r1", "g", "overhead", "expected"), [
    (0.25, 4.0, 16.0, (4.0, 4)),     # sqrt(16 / (4 x 0.25))
    (0.5, 2.0, 2.25, (1.5, 2)),      # rounds half to even: 1.5 -> 2
    (1.0, 10.0, 0.5, (math.sqrt(0.05), 1)),  # at least 1
    (0.01, 1.0, 100.0, (100.0, MAX_THIN)),   # at most MAX_THIN
])
def test_the_thinning_rule_on_numbers(r1, g, overhead, expected):
    k_star, k = thinning(r1, g, overhead)
    assert k_star == pytest.approx(expected[0]) and k == expected[1]


def test_the_thinning_rule_maximises_the_modelled_draws_per_gradient():
    """``k*`` is the maximum of ``E(k) = k r1 / ((1 + k r1) (W' + k g))``."""
    r1, g, overhead = 0.3, 3.0, 7.0
    k_star, _ = thinning(r1, g, overhead)
    grid = np.linspace(0.05, 20, 4000)
    efficiency = grid * r1 / ((1 + grid * r1) * (overhead + grid * g))
    assert grid[np.argmax(efficiency)] == pytest.approx(k_star, abs=0.01)


@pytest.mark.parametrize("r1", [float("nan"), 0.0, -1.0, float("inf")])
def test_a_failed_measurement_keeps_every_transition(r1):
    assert thinning(r1, 3.0, 5.0)[1] == 1


@pytest.mark.parametrize("ended_early", [True, False])
def test_mams_counts_every_gradient_it_computes(ended_early, monkeypatch):
    """The run record's total against a counter around the log density, after a warm-up
    that settled (MAMS's step averaged over half its transitions) and after the same
    warm-up recorded as having run to its end (all of them, `mams_rules.adapt_transitions`):
    the warm-up's record is what chooses."""
    if not ended_early:
        record = settling.record
        monkeypatch.setattr(settling, "record",
                            lambda run: {**record(run), "ended_early": False})
    logdensity, count = counting_gaussian(jnp.array([0.1, 1.0, 10.0, 3.0]))
    target = make_target(logdensity, jnp.ones(4), check=False)
    idata = adaptmc.sample(target, chains=2, seed=0, progress=False, compile_cache=False,
                           warmup_steps=150, draws=120, mams="on")
    jax.effects_barrier()
    assert count[0] == idata.attrs["total_grad_evals"]
    warm = json.loads(idata.attrs["warmup"])
    assert warm["sampler"]["num_grads"] > 0  # the adaptation's, counted before the draws
    assert warm["settled"]["ended_early"] is ended_early
    assert warm["sampler"]["adapt_transitions"] == ADAPT_TRANSITIONS // (2 if ended_early else 1)


def test_a_resumed_mams_run_counts_what_it_computes_again(tmp_path):
    """Stopped in its sampling and resumed: both calls' evaluations are the record's total
    plus the resumed call's ``resume_grads``, MAMS's adaptation (redone) included."""
    logdensity, count = counting_gaussian(jnp.array([0.1, 1.0, 10.0, 3.0]))
    target = make_target(logdensity, jnp.ones(4), check=False)

    def call(**kwargs):
        plan = build("adaptive-hmc", target, warmup_steps=150, draws=230, mams="on")
        result = run_plan(target, plan, chains=2, seed=0, progress=False, **kwargs)
        jax.effects_barrier()
        return result

    whole = call().idata.attrs
    settled = json.loads(whole["warmup"])["settled"]
    assert settled["final_window"] is False  # MAMS adapts its own step
    chunks = settled["final_start"] // 10
    count[0] = 0
    out = tmp_path / "run"
    assert call(output_dir=out, stop_after=chunks + 1, checkpoint_every=1).idata is None
    attrs = call(output_dir=out, resume=True, checkpoint_every=1).idata.attrs
    assert attrs["total_grad_evals"] == whole["total_grad_evals"]
    assert attrs["resume_grads"] > json.loads(whole["sampler"])["num_grads"]
    assert count[0] == attrs["total_grad_evals"] + attrs["resume_grads"]


OPTIONS = dict(warmup_steps=150, draws=230, mams="on")
KWARGS = dict(chains=2, seed=3, progress=False, checkpoint_every=1)


def test_a_mams_run_stopped_in_its_sampling_or_warmup_resumes_bit_identically(tmp_path):
    target = get_target("std-normal-10d")
    whole = run_plan(target, build("adaptive-hmc", target, **OPTIONS), **KWARGS)
    settled = json.loads(whole.idata.attrs["warmup"])["settled"]
    assert settled["final_window"] is False  # MAMS adapts its own step
    chunks = settled["final_start"] // 10
    draws = np.asarray(whole.idata.posterior.to_array().values)
    for stop_after in (chunks + 1, 4):  # after the first sampling block; in the warm-up
        out = tmp_path / f"run{stop_after}"
        partial = run_plan(target, build("adaptive-hmc", target, **OPTIONS), output_dir=out,
                           stop_after=stop_after, **KWARGS)
        assert partial.idata is None
        assert (out / "checkpoint.npz").is_file() == (stop_after > chunks)
        fresh = get_target("std-normal-10d")  # as a new process would build it
        resumed = run_plan(fresh, build("adaptive-hmc", fresh, **OPTIONS), output_dir=out,
                           resume=True, **KWARGS)
        np.testing.assert_array_equal(np.asarray(resumed.idata.posterior.to_array().values),
                                      draws)
        assert resumed.num_grads == whole.num_grads
        assert resumed.idata.attrs["sampler"] == whole.idata.attrs["sampler"]


def test_the_command_line_samples_with_mams(tmp_path, capsys):
    code = main(["sample", "--target", "std-normal-10d", "--out", str(tmp_path / "run"),
                 "--chains", "2", "--warmup-steps", "150", "--draws", "40", "--mams", "on",
                 "--no-progress", "--no-compile-cache"])
    assert code == 0
    assert "sampler MAMS under the warm-up's metric" in capsys.readouterr().out
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["options"]["mams"] == "on"


def test_bad_values_are_one_clear_error(capsys):
    target = get_target("std-normal-10d")
    with pytest.raises(ValueError, match="mams must be one of auto, off, on, got 'yes'"):
        adaptive_hmc(target, mams="yes")
    with pytest.raises(ValueError, match="mams"):
        build("adaptive-hmc", target, mams=True)
    assert main(["sample", "--target", "std-normal-10d", "--mams", "maybe"]) == 2
    assert "argument --mams: invalid choice: 'maybe'" in capsys.readouterr().err
    one_d = make_target(lambda x: -0.5 * jnp.sum(x**2), jnp.zeros(1))
    with pytest.raises(ValueError, match="dimension >= 2"):
        adaptmc.sample(one_d, mams="on", progress=False, compile_cache=False)


def test_auto_samples_with_mams_unless_an_option_of_hmcs_tuning_is_given():
    """``mams="auto"`` is MAMS on a target of dimension >= `mams_rules.MIN_DIM` (3), NUTS
    after the same warm-up below it; a tuning option given (tuning, objective, ...) asks for
    HMC's tuning, so it is not silently ignored; with ``mams="on"`` such an option is one
    clear error. The default is ``"auto"``."""
    normal = lambda d: make_target(lambda x: -0.5 * jnp.sum(x ** 2), jnp.zeros(d),  # noqa: E731
                                   name=f"normal-{d}d", check=False)
    assert adaptive_hmc(normal(3)).kernel.name == "mams"
    assert adaptive_hmc(normal(2)).kernel.name != "mams"
    assert adaptive_hmc(normal(2), mams="on").kernel.name == "mams"
    target = get_target("std-normal-10d")
    assert adaptive_hmc(target, mams="auto").kernel.name == "mams"
    assert adaptive_hmc(target, mams="auto", tuning=3).kernel.name == "hmc"
    assert adaptive_hmc(target, mams="auto", objective="esjd").kernel.name == "hmc"
    assert adaptive_hmc(target).kernel.name == "mams"
    assert adaptive_hmc(target, tuning=3).kernel.name == "hmc"
    with pytest.raises(ValueError, match="does not read tuning"):
        adaptive_hmc(target, mams="on", tuning=3)


def walled_gaussian():
    """``(target, count)``: a 3-d standard Gaussian walled off beyond ``x0 = 1`` (log
    density ``-inf`` there), counting its evaluations, started at 0.9 by the wall."""
    logdensity, count = counting_gaussian(jnp.ones(3))
    walled = lambda x: jnp.where(x[0] > 1.0, -jnp.inf, logdensity(x))  # noqa: E731
    return make_target(walled, jnp.full(3, 0.9), name="walled", check=False), count


def test_where_the_log_density_has_a_wall_mams_gives_way_to_nuts(tmp_path):
    """A trajectory across the wall is rejected whatever its step, so MAMS's dual averaging
    drives the step toward zero (0.84 to 0.0015 and 526 steps per transition without a
    floor: 1.2M gradients). At `STEP_FLOOR` of its first step the run samples with NUTS
    instead: a few thousand gradients spent on MAMS, counted, and named in the record; a
    run stopped in its warm-up resumes to the same draws."""
    target, count = walled_gaussian()
    options = dict(chains=4, seed=0, progress=False)
    plan = lambda: build("adaptive-hmc", target, mams="on", warmup_steps=150, draws=60)  # noqa: E731
    whole = run_plan(target, plan(), **options)
    jax.effects_barrier()
    attrs = whole.idata.attrs
    assert count[0] == attrs["total_grad_evals"] < 40_000
    assert json.loads(attrs["sampler"])["sampler"] == "nuts"
    tried = json.loads(attrs["warmup"])["mams"]
    assert not tried["used"] and tried["step_size"] < tried["floor"]
    assert 0 < tried["num_grads"] < 20_000
    draws = np.asarray(whole.idata.posterior["x"].values)
    assert np.all(draws[..., 0] <= 1.0)
    summary = format_summary(whole.idata)
    assert "sampler NUTS under the warm-up's metric" in summary
    assert f"note: MAMS not used: its step fell to {tried['step_size']:.3g}" in summary
    out = tmp_path / "run"
    stopped = run_plan(target, plan(), output_dir=out, stop_after=4, checkpoint_every=1,
                       **options)
    assert stopped.idata is None
    resumed = run_plan(target, plan(), output_dir=out, resume=True, checkpoint_every=1,
                       **options)
    np.testing.assert_array_equal(np.asarray(resumed.idata.posterior["x"].values), draws)
    assert resumed.num_grads == whole.num_grads


def _chunk(n=150, chains=2, dim=3, steps=4):
    """A `ChunkOut` of ``n`` transitions, every one kept, with numbered draws."""
    from adaptmc.kernels.mams_chunk import ChunkOut

    t = np.arange(n, dtype=float)
    positions = np.broadcast_to(t[None, :, None], (chains, n, dim)).copy()
    acceptance = np.tile(np.linspace(0.5, 1.0, n), (chains, 1))
    divergent = np.zeros((chains, n), bool)
    divergent[0, -1] = True  # the last transition's: kept only when every one is
    return ChunkOut(None, np.zeros(5), positions, -t * np.ones((chains, 1)), acceptance,
                    np.ones((chains, n), bool), divergent, np.zeros((chains, n)),
                    np.full(n, steps), np.full(chains, n * steps), divergent.sum(1),
                    acceptance.sum(1))


@pytest.mark.parametrize(("thin", "most", "kept"), [(1, 1000, 150), (3, 1000, 50),
                                                     (4, 1000, 37), (2, 20, 20)])
def test_the_measurements_draws_kept_are_every_thin_th_and_count_every_gradient(
        thin, most, kept):
    """`first_draws`: transitions ``thin, 2 thin, ...`` (as the sampling's program keeps
    them), at most ``most``; acceptance and divergences over the transitions those span,
    every gradient the measurement computed."""
    from adaptmc.run.mams_stage import first_draws

    out = _chunk()
    count, (positions, stats, logdensity, totals) = first_draws(out, thin, most)
    assert count == kept * thin and positions.shape == (2, kept, 3)
    assert np.array_equal(positions[0, :, 0], np.arange(thin - 1, kept * thin, thin))
    assert np.array_equal(logdensity[0], -positions[0, :, 0])
    assert stats["num_grads"].shape == (2, kept) and np.all(stats["num_grads"] == 4)
    assert np.array_equal(totals[0], [150 * 4, 150 * 4])
    assert totals[1][0] == (1 if count == 150 else 0)
    assert totals[2] == pytest.approx(out.acceptance[:, :count].sum(1))
