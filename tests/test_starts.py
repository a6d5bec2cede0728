"""The run's own starts are retried as Stan retries them (`adaptmc.run.starts`): on a target
whose log density is -inf on part of the space, every chain gets a finite start, the same for
a seed, every point evaluated counted in the run record; a start a user gives that is not
finite is one `ValueError`; a run from retried starts resumes to the same draws; where the
default starts are finite, nothing changes."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adaptmc
from adaptmc.kernels import HMCParams, hmc
from adaptmc.objectives import esjd_per_grad
from adaptmc.run import default_positions, run, run_keys
from adaptmc.run.loop import default_starts
from adaptmc.run.starts import STAN_RADIUS, STAN_TRIES, stan_draws
from adaptmc.targets.base import make_target
from adaptmc.tuners import grid

CHAINS = 4
DIM = 3
START = jnp.full(DIM, 0.9)
"""x[0] of a default start is U(0.4, 1.4): some lie where the density is 0 (seed 0: chain 3
of 4)."""


def walled_target(wall=1.0):
    """A standard Gaussian cut at ``x[0] > wall`` (log density -inf there), started at
    `START`, with ``count[0]`` its evaluations (a host callback: once per point)."""
    count = [0]

    def add(_):
        count[0] += 1

    def logdensity(x):
        jax.debug.callback(add, x)
        return jnp.where(x[0] > wall, -jnp.inf, -0.5 * jnp.sum(x**2))

    return make_target(logdensity, START, check=False), count


def test_default_starts_are_retried_to_finite_points_deterministically():
    target, count = walled_target()
    key = run_keys(0, "init")
    made = default_starts(target, CHAINS, key)
    jax.effects_barrier()
    first = np.asarray(default_positions(target, CHAINS, 0, check=False))
    positions = np.asarray(made.positions)
    assert np.all(positions[:, 0] <= 1.0)
    walled = first[:, 0] > 1.0  # the default starts where the density is 0
    assert 0 < np.sum(walled) < CHAINS
    assert all((tried > 0) == wall for tried, wall in zip(made.retries, walled, strict=True))
    assert made.evaluations == CHAINS + sum(made.retries) == count[0]
    for chain, tried in enumerate(made.retries):
        if tried == 0:  # a finite default start is kept as it is
            np.testing.assert_array_equal(positions[chain], first[chain])
        else:  # else the first finite of its Stan draws U(-2, 2)
            draws = np.asarray(stan_draws(key, chain, DIM))
            np.testing.assert_array_equal(positions[chain], draws[tried - 1])
            assert np.all(draws[: tried - 1, 0] > 1.0)
            assert np.all(np.abs(positions[chain]) <= STAN_RADIUS)
    again = default_starts(target, CHAINS, key)
    np.testing.assert_array_equal(np.asarray(again.positions), positions)
    other = default_starts(target, CHAINS, run_keys(1, "init"))
    assert not np.array_equal(np.asarray(other.positions), positions)


def test_finite_default_starts_are_unchanged_and_cost_one_point_each():
    target, count = walled_target(wall=10.0)
    made = default_starts(target, CHAINS, run_keys(0, "init"))
    jax.effects_barrier()
    np.testing.assert_array_equal(np.asarray(made.positions),
                                  np.asarray(default_positions(target, CHAINS, 0, check=False)))
    assert made.retries == (0,) * CHAINS and made.evaluations == count[0] == CHAINS


def test_no_finite_start_in_stans_tries_is_one_clear_error():
    target, count = walled_target(wall=-5.0)  # U(-2, 2) never reaches x[0] <= -5
    with pytest.raises(ValueError, match=r"no start for chain 0 of target 'user': the log "
                       r"density \(here -inf\) or its gradient is not finite at the initial "
                       f"position of chain 0 nor at any of {STAN_TRIES} points drawn U"):
        default_starts(target, CHAINS, run_keys(0, "init"))
    jax.effects_barrier()
    assert count[0] == 1 + STAN_TRIES


def test_sample_retries_its_own_starts_and_counts_every_point():
    target, count = walled_target()
    idata = adaptmc.sample(target, chains=CHAINS, seed=0, progress=False,
                           compile_cache=False, warmup_steps=150, draws=100, tuning=4)
    jax.effects_barrier()
    retries = json.loads(idata.attrs["start_retries"])
    assert sum(retries) > 0
    assert idata.attrs["check_grads"] == 2 * CHAINS + 1 + sum(retries)
    assert count[0] == idata.attrs["total_grad_evals"]
    assert np.all(idata.posterior["x"].values[..., 0] <= 1.0)


@pytest.mark.parametrize("init", [np.full((CHAINS, DIM), 1.5), np.full(DIM, 1.5)],
                         ids=["per-chain", "one-point"])
def test_a_start_given_that_is_not_finite_is_refused_not_replaced(init):
    target, _ = walled_target()
    with pytest.raises(ValueError, match="-inf at the initial position of chain 0; start "
                                         "from a point of positive density$"):
        adaptmc.sample(target, chains=CHAINS, seed=0, progress=False, compile_cache=False,
                       init=init, init_jitter=0.1, warmup_steps=150, draws=100, tuning=4)
    with pytest.raises(ValueError, match="-inf at the initial position of chain 0"):
        run(target, hmc, HMCParams(0.3, 5), num_super_transitions=2, gradient_budget=60,
            num_chains=CHAINS, initial_positions=np.full((CHAINS, DIM), 1.5), progress=False)


def test_a_run_from_retried_starts_resumes_to_the_same_draws(tmp_path):
    target, _ = walled_target()
    kwargs = dict(tuner=grid({"step_size": [0.2, 0.5], "num_leapfrog": [4, 9]}),
                  objective=esjd_per_grad, num_super_transitions=8, gradient_budget=90,
                  num_chains=CHAINS, seed=0, progress=False, checkpoint_every=2, num_warmup=1)
    whole = run(target, hmc, HMCParams(), **kwargs)
    assert sum(json.loads(whole.idata.attrs["start_retries"])) > 0
    out = tmp_path / "run"
    assert run(target, hmc, HMCParams(), output_dir=out, stop_after=5, **kwargs).idata is None
    resumed = run(target, hmc, HMCParams(), output_dir=out, resume=True, **kwargs)
    np.testing.assert_array_equal(resumed.idata.posterior["x"].values,
                                  whole.idata.posterior["x"].values)
    assert resumed.num_grads == whole.num_grads


@pytest.mark.parametrize("jitter", [-1.0, float("nan"), float("inf")])
def test_a_bad_jitter_of_the_runs_own_starts_is_one_error_before_anything_runs(jitter,
                                                                               tmp_path):
    """The run's own starts use ``init_jitter`` (the warm-up's path too): a negative or
    non-finite one is refused in one line, nothing written."""
    from adaptmc.api import run_plan
    from adaptmc.recipes import build
    from adaptmc.targets import get_target

    target = get_target("std-normal-10d")
    plan = build("adaptive-hmc", target, warmup_steps=150, draws=10)
    with pytest.raises(ValueError, match="init_jitter must be a finite number >= 0"):
        run_plan(target, plan, chains=2, seed=0, init_jitter=jitter, progress=False,
                 output_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
