"""The run loop: exact gradient counting, checkpoint/resume, divergences, bad input."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc import make_target
from adaptmc.kernels import HMCParams, Kernel, MALAParams, RWMParams, Tunable, hmc, mala, rwm
from adaptmc.objectives import esjd_per_grad
from adaptmc.run import run
from adaptmc.targets import correlated_2d, funnel, gaussian
from adaptmc.tuners import grid

TARGET = correlated_2d(2.0)


@pytest.mark.parametrize(
    "kernel, params, per_step",
    [(hmc, HMCParams(0.2, 7), 7), (mala, MALAParams(0.5), 1), (rwm, RWMParams(0.5), 1)],
)
@pytest.mark.parametrize("thin", [1, 3])
def test_gradient_evaluations_counted_exactly(kernel, params, per_step, thin):
    chains, budget, num_st = 3, 100, 4
    result = run(TARGET, kernel, params, num_super_transitions=num_st, gradient_budget=budget,
                 num_chains=chains, seed=1, progress=False, thin=thin)
    steps = budget // per_step
    checks = chains + 1  # each chain's start checked, the fingerprint's point
    expected = chains * (1 + num_st * steps * per_step) + checks  # initial point + every step
    assert result.num_grads == expected
    assert result.idata.attrs["total_grad_evals"] == expected
    assert result.idata.attrs["check_grads"] == checks
    tuning = result.idata.tuning
    assert int(tuning.num_grads.sum()) == expected - chains - checks
    assert result.idata.posterior.x.shape == (chains, num_st * (steps // thin), 2)
    if thin == 1:
        assert int(result.idata.sample_stats.n_grad_evals.sum()) == expected - chains - checks


def test_grid_tuner_counts_every_tuning_gradient_and_keeps_best():
    tuner = grid({"step_size": [0.05, 0.4, 0.8], "num_leapfrog": [3, 10]})
    result = run(TARGET, hmc, HMCParams(), tuner=tuner, objective=esjd_per_grad,
                 num_super_transitions=9, gradient_budget=60, num_chains=2, seed=2,
                 progress=False)
    tuning = result.idata.tuning
    per_st = [2 * (60 // int(L)) * int(L) for L in tuning.num_leapfrog.values]
    assert result.num_grads == 2 + sum(per_st) + 3  # starts, checks and fingerprint
    tried = list(zip(tuning.step_size.values[:6], tuning.num_leapfrog.values[:6], strict=True))
    assert len(set(tried)) == 6
    best = int(np.nanargmax(tuning.reward.values[:6]))
    assert all(tuning.step_size.values[6:] == tuning.step_size.values[best])


def _finite_draws(result):
    return np.all(np.isfinite(result.idata.posterior.x.values))


def test_nan_energy_mid_run_is_a_counted_divergence():
    """A log density that is NaN beyond x = 1.5: proposals there are rejected divergences."""

    def logdensity(x):
        return jnp.where(x[0] < 1.5, -0.5 * jnp.sum(x**2), jnp.nan)

    target = make_target(logdensity, jnp.zeros(2), name="nan-cliff")
    result = run(target, hmc, HMCParams(0.5, 8), num_super_transitions=5, gradient_budget=80,
                 num_chains=4, seed=3, progress=False, init_jitter=0.1)
    stats = result.idata.sample_stats
    divergences = int(stats.diverging.sum())
    assert divergences > 0
    assert int(result.idata.tuning.divergences.sum()) == divergences
    assert _finite_draws(result)
    assert np.all(result.idata.posterior.x.values[..., 0] < 1.5)
    assert np.all(stats.acceptance_rate.values[stats.diverging.values] == 0)


def test_inf_log_density_in_funnel_neck_is_a_rejected_divergence():
    """Large leapfrog steps on the funnel overflow into the neck (an infinite energy). Such a
    step must be counted as divergent and rejected: the chain stays where it was, at a finite
    log density, while the steps that are accepted move it. (Fixed-step HMC does not sample
    the funnel's neck, so its moments are not tested here. Some seeds accept no move in
    these six super-transitions: 25 of seeds 0-29 exercise both paths at cf56eb9, 20 since
    the host's random streams, docs/notes/cold-compile.md; seed 5 here.)"""
    target = funnel(5)
    result = run(target, hmc, HMCParams(1.0, 20), num_super_transitions=6, gradient_budget=200,
                 num_chains=2, seed=5, progress=False)
    stats = result.idata.sample_stats
    diverging, accepted = stats.diverging.values, stats.accepted.values
    assert np.isinf(stats.energy_error.values).any()  # the overflow path is exercised
    assert diverging.any() and accepted.any()
    assert not np.any(diverging & accepted)
    post = result.idata.posterior
    positions = np.concatenate([post.v.values[..., None], post.x.values], axis=-1)
    moved = np.any(positions[:, 1:] != positions[:, :-1], axis=-1)
    np.testing.assert_array_equal(moved, accepted[:, 1:])  # rejected: exactly where it was
    lp = stats.lp.values
    assert np.all(np.isfinite(lp))
    expected = jax.jit(jax.vmap(target.logdensity))(jnp.asarray(positions.reshape(-1, 5)[::17]))
    np.testing.assert_allclose(lp.reshape(-1)[::17], np.asarray(expected), rtol=1e-12)


def _posterior(result):
    return result.idata.posterior.x.values


def test_resume_after_stop_gives_identical_draws(tmp_path):
    kwargs = dict(tuner=grid({"step_size": [0.2, 0.5], "num_leapfrog": [4, 9]}),
                  objective=esjd_per_grad, num_super_transitions=8, gradient_budget=90,
                  num_chains=3, seed=5, progress=False, checkpoint_every=2, num_warmup=1)
    whole = run(TARGET, hmc, HMCParams(), **kwargs)
    out = tmp_path / "run"
    partial = run(TARGET, hmc, HMCParams(), output_dir=out, stop_after=5, **kwargs)
    assert partial.idata is None
    assert not (out / "draws.nc").exists()
    resumed = run(TARGET, hmc, HMCParams(), output_dir=out, resume=True, **kwargs)
    np.testing.assert_array_equal(_posterior(resumed), _posterior(whole))
    np.testing.assert_array_equal(resumed.idata.tuning.reward.values,
                                  whole.idata.tuning.reward.values)
    assert resumed.num_grads == whole.num_grads
    assert (out / "draws.nc").exists()


def test_resume_ignores_a_chunk_written_after_the_last_checkpoint(tmp_path):
    kwargs = dict(num_super_transitions=6, gradient_budget=50, num_chains=2, seed=6,
                  progress=False, checkpoint_every=2)
    whole = run(TARGET, hmc, HMCParams(0.3, 5), **kwargs)
    out = tmp_path / "run"
    run(TARGET, hmc, HMCParams(0.3, 5), output_dir=out, stop_after=4, **kwargs)
    # a kill between writing a chunk and its checkpoint leaves a stale chunk behind
    (out / "chunks" / "000002.npz").write_bytes(b"garbage")
    resumed = run(TARGET, hmc, HMCParams(0.3, 5), output_dir=out, resume=True, **kwargs)
    np.testing.assert_array_equal(_posterior(resumed), _posterior(whole))


def test_resume_refuses_a_different_run(tmp_path):
    out = tmp_path / "run"
    run(TARGET, hmc, HMCParams(0.3, 5), num_super_transitions=4, gradient_budget=50,
        num_chains=2, seed=7, progress=False, output_dir=out, stop_after=2)
    with pytest.raises(ValueError, match="differs"):
        run(TARGET, hmc, HMCParams(0.3, 5), num_super_transitions=4, gradient_budget=50,
            num_chains=2, seed=8, progress=False, output_dir=out, resume=True)


def test_killed_process_resumes_to_the_uninterrupted_draws(tmp_path):
    """SIGKILL a CLI run at an arbitrary moment after its first checkpoint, resume it, and
    compare with an uninterrupted run of the same command."""
    args = ["--recipe", "manual", "--target", "gauss-2d-v2", "--kernel", "hmc",
            "--step-size", "0.3", "--num-leapfrog", "6", "--super-transitions", "40",
            "--budget", "3000",
            "--chains", "2", "--warmup", "2", "--seed", "9", "--checkpoint-every", "1",
            "--no-progress"]
    cli = [sys.executable, "-m", "adaptmc.cli", "sample"]
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    proc = subprocess.Popen(cli + args + ["--out", str(killed)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    ckpt = killed / "checkpoint.npz"
    while time.time() < deadline and proc.poll() is None:
        if ckpt.exists():
            meta = json.loads(bytes(np.load(ckpt)["meta"]).decode())
            if meta["next"] >= 3:
                break
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.skip("run finished before it could be killed")
    time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "draws.nc").exists()
    # resumed and uninterrupted in this process: the killed one was its own process, and a
    # fresh interpreter would only add its start-up (imports, ~3 s each)
    from adaptmc.cli import main

    assert main(["resume", str(killed), "--no-progress"]) == 0
    assert main(["sample", *args, "--out", str(whole)]) == 0
    import arviz as az

    a = az.from_netcdf(str(killed / "draws.nc"))
    b = az.from_netcdf(str(whole / "draws.nc"))
    np.testing.assert_array_equal(a.posterior.x.values, b.posterior.x.values)
    np.testing.assert_array_equal(a.sample_stats.energy_error.values,
                                  b.sample_stats.energy_error.values)
    assert a.attrs["total_grad_evals"] == b.attrs["total_grad_evals"]


def test_bad_initial_point_is_a_clear_error():
    with pytest.raises(ValueError, match="log density .* is -inf"):
        make_target(lambda x: jnp.where(x[0] > 0, 0.0, -jnp.inf), jnp.zeros(2))
    with pytest.raises(ValueError, match="gradient .* not finite"):
        make_target(lambda x: jnp.sum(jnp.sqrt(x)), jnp.zeros(2))
    with pytest.raises(ValueError, match="scalar"):
        make_target(lambda x: x, jnp.zeros(2))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(params=HMCParams(step_size=0.0)), "step_size must be positive"),
        (dict(params=HMCParams(step_size=-1.0)), "step_size must be positive"),
        (dict(params=HMCParams(num_leapfrog=0)), "num_leapfrog must be an integer >= 1"),
        (dict(params=HMCParams(num_leapfrog=2.5)), "num_leapfrog must be an integer >= 1"),
        (dict(params=HMCParams(jitter=1.5)), "jitter"),
        (dict(params=HMCParams(inverse_mass=jnp.array([[1.0, 2.0], [2.0, 1.0]]))),
         "positive definite"),
        (dict(params=HMCParams(inverse_mass=jnp.array([[1.0, 0.5], [0.0, 1.0]]))),
         "symmetric positive definite"),
        (dict(params=HMCParams(inverse_mass=jnp.array([1.0, np.nan]))),
         "inverse_mass must be positive"),
        (dict(params=MALAParams()), "must be HMCParams"),
        (dict(params=HMCParams(inverse_mass=jnp.ones(3))), r"inverse_mass has shape \(3,\)"),
        (dict(params=HMCParams(inverse_mass=jnp.eye(3))), "inverse_mass has shape"),
        (dict(num_chains=0), "num_chains must be an integer >= 1"),
        (dict(gradient_budget=5, params=HMCParams(num_leapfrog=10)), "more than the"),
        (dict(initial_positions=np.zeros((4, 3))), "initial_positions must have shape"),
        (dict(initial_positions=np.full((4, 2), np.nan)), "not finite|is nan"),
        (dict(num_warmup=10), "num_warmup must be smaller"),
    ],
)
def test_bad_run_arguments_raise_before_writing(tmp_path, kwargs, message):
    out = tmp_path / "never"
    base = dict(params=HMCParams(), num_super_transitions=10, gradient_budget=100,
                num_chains=4, progress=False, output_dir=out)
    base.update(kwargs)
    params = base.pop("params")
    with pytest.raises((ValueError, TypeError), match=message):
        run(TARGET, hmc, params, **base)
    assert not out.exists()


def test_existing_output_folder_is_refused_and_kept(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="already exists"):
        run(TARGET, hmc, HMCParams(), num_super_transitions=2, gradient_budget=50,
            num_chains=1, progress=False, output_dir=out)
    assert (out / "precious.txt").read_text() == "keep me"
    with pytest.raises(FileExistsError, match="not written by adaptmc"):  # issue 13
        run(TARGET, hmc, HMCParams(), num_super_transitions=2, gradient_budget=50,
            num_chains=1, progress=False, output_dir=out, force=True)
    assert (out / "precious.txt").read_text() == "keep me"


def test_nan_in_data_is_refused():
    from adaptmc.targets import logistic_regression

    x = np.ones((5, 2))
    x[2, 1] = np.nan
    with pytest.raises(ValueError, match="features contains NaN"):
        logistic_regression(x, np.array([0, 1, 0, 1, 1.0]))
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        logistic_regression(np.ones((3, 2)), np.array([0, 2, 1.0]))
    with pytest.raises(ValueError, match="must be"):
        logistic_regression(np.ones((3, 2)), np.array([0, 1.0]))
    with pytest.raises(ValueError, match="covariance"):
        gaussian(np.zeros(2), np.ones((3, 3)))


def test_warmup_draws_go_to_warmup_groups():
    result = run(TARGET, hmc, HMCParams(0.3, 5), num_super_transitions=4, gradient_budget=50,
                 num_chains=2, num_warmup=1, seed=10, progress=False)
    assert result.idata.warmup_posterior.x.shape == (2, 10, 2)
    assert result.idata.posterior.x.shape == (2, 30, 2)
    assert math.isclose(float(result.idata.tuning.warmup.values.sum()), 1)


def test_a_tuner_proposing_a_wrong_shape_is_refused_clearly():
    tuner = grid({"inverse_mass": [np.ones(3)]})
    with pytest.raises(ValueError, match=r"inverse_mass has shape \(3,\)"):
        run(TARGET, hmc, HMCParams(), tuner=tuner, objective=esjd_per_grad,
            num_super_transitions=2, gradient_budget=50, num_chains=1, progress=False)


class _ScaleParams(NamedTuple):
    """A toy RWM parametrised without a step_size: scale (real), moves (integer, steps per
    draw) and adapt (not tunable)."""

    scale: float = 0.5
    moves: int = 1
    adapt: float = 0.0


def _toy_step(key, state, target, params):
    return rwm.step(key, state, target, RWMParams(params.scale))


def _toy_kernel(tunables):
    return Kernel("rwm-scale", rwm.init, _toy_step, lambda params: 1,
                  lambda params, dim=None: None, _ScaleParams, tunables)


@pytest.mark.parametrize("recorded", [False, True])
def test_a_kernel_without_step_size_runs_and_records_only_its_tunables(recorded):
    """The run loop knows no kernel's parameter names: a kernel whose tunables are ``scale``
    and ``moves`` gets no step_size / n_steps columns, its integer tunable is rounded, and
    its stat columns (when it names them) hold the values in force."""
    kernel = _toy_kernel((
        Tunable("scale", bounds=(0.1, 2.0), label="s", stat="scale" if recorded else None),
        Tunable("moves", integer=True, bounds=(1, 5), stat="moves" if recorded else None),
    ))
    tuner = grid({"scale": [0.3, 0.9], "moves": [2.6]})
    result = run(TARGET, kernel, tuner=tuner, objective=esjd_per_grad, num_super_transitions=4,
                 gradient_budget=20, num_chains=2, seed=12, progress=True)
    stats = result.idata.sample_stats
    assert "step_size" not in stats and "n_steps" not in stats
    tuning = result.idata.tuning
    np.testing.assert_array_equal(tuning.moves.values, 3)  # 2.6 rounded: an integer tunable
    if recorded:
        assert stats.moves.dtype == np.int32 and np.all(stats.moves.values == 3)
        per_st = stats.scale.values[0].reshape(4, 20)
        np.testing.assert_allclose(per_st[:, 0], tuning.scale.values)
        assert np.all(per_st == per_st[:, :1])
    else:
        assert "scale" not in stats and "moves" not in stats
    assert list(stats.data_vars)[:6] == ["acceptance_rate", "accepted", "diverging",
                                         "energy_error", "n_grad_evals", "lp"]


def test_hmc_keeps_its_per_draw_step_size_and_n_steps():
    tuner = grid({"step_size": [0.2, 0.4], "num_leapfrog": [3, 5]})
    result = run(TARGET, hmc, HMCParams(), tuner=tuner, objective=esjd_per_grad,
                 num_super_transitions=4, gradient_budget=30, num_chains=2, seed=13,
                 progress=False)
    stats = result.idata.sample_stats
    assert list(stats.data_vars) == ["acceptance_rate", "accepted", "diverging", "energy_error",
                                     "n_grad_evals", "lp", "energy", "step_size", "n_steps",
                                     "super_transition"]
    assert stats.n_steps.dtype == np.int32
    first = stats.super_transition.values[0] == 0
    tuning = result.idata.tuning
    assert np.all(stats.step_size.values[0][first] == tuning.step_size.values[0])
    assert np.all(stats.n_steps.values[0][first] == tuning.num_leapfrog.values[0])


def test_the_run_layer_and_the_box_know_no_hmc_parameter_names():
    """run/ asks the kernel for its tunables, box.py takes them from the kernel: neither may
    name HMC's parameters (not even in comments)."""
    src = Path(__file__).resolve().parents[1] / "src" / "adaptmc"
    files = [*sorted((src / "run").glob("*.py")), src / "tuners" / "box.py"]
    assert len(files) >= 6
    for path in files:
        text = path.read_text()
        for name in ("num_leapfrog", "step_size"):
            assert name not in text, f"{path.name} names {name}"


def test_posterior_variables_come_from_constrain_when_the_target_has_it():
    from types import SimpleNamespace

    from adaptmc.run.idata import posterior_variables

    positions = np.random.default_rng(14).normal(size=(2, 3, 3))
    constrained = SimpleNamespace(constrain=lambda x: {"sigma": jnp.exp(x[0]), "beta": x[1:]})
    variables = posterior_variables(constrained, positions)
    assert set(variables) == {"sigma", "beta"}
    np.testing.assert_allclose(variables["sigma"], np.exp(positions[..., 0]))
    np.testing.assert_allclose(variables["beta"], positions[..., 1:])
    plain = posterior_variables(TARGET, positions[..., :2])  # no constrain: the pytree
    assert list(plain) == ["x"] and plain["x"].shape == (2, 3, 2)
