"""Gradients counted are gradients computed: the run record's total equals a counter around
the log density, for the default recipe end to end (a JAX log density and a Stan program
with its own counters), for a resumed run (its ``resume_grads``), and the warm-up's count
when its chains run in lockstep."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adaptmc
from adaptmc.adaptation import chains, early
from adaptmc.datasets.posteriordb import default_posteriordb_dir
from adaptmc.diagnostics import format_summary
from adaptmc.run_facts import gradient_shares
from adaptmc.targets.base import make_target
from helpers import counting_gaussian

SCALES = jnp.array([0.1, 1.0, 10.0, 3.0])
CHAINS = 4
START_CHECKS = 2 * CHAINS + 1
"""Evaluations outside the sampler, counted in the record's ``check_grads``: each chain's
start checked before the warm-up and after it, and the run's fingerprint."""


def counting_target():
    """A Gaussian whose log density adds one to ``count[0]`` per evaluation
    (`helpers.counting_gaussian`)."""
    logdensity, count = counting_gaussian(SCALES)
    return make_target(logdensity, jnp.ones(4), check=False), count


def test_default_recipe_counts_every_gradient_it_computes():
    target, count = counting_target()
    idata = adaptmc.sample(target, chains=CHAINS, seed=0, progress=False,
                           compile_cache=False, warmup_steps=150, draws=100, tuning=4,
                           mams="off")  # HMC tuning's shares (MAMS's: test_mams_sampling)
    jax.effects_barrier()
    assert count[0] == idata.attrs["total_grad_evals"]
    assert idata.attrs["check_grads"] == START_CHECKS
    shares = gradient_shares(idata, idata.attrs)
    # the warm-up's own and the checks (the chains' first states after it are the warm-up
    # chunk's last: no gradient of their own)
    assert shares["warm-up"] == json.loads(idata.attrs["warmup"])["num_grads"] + START_CHECKS
    assert sum(shares.values()) == idata.attrs["total_grad_evals"]
    assert "gradients: warm-up " in format_summary(idata)


@pytest.mark.parametrize("where", ["warm-up", "tuning"])
def test_a_resumed_run_counts_what_it_computes_again(tmp_path, where):
    """A run stopped (as if killed) and resumed: both calls' evaluations are the record's
    total, the uninterrupted run's, plus the resumed call's ``resume_grads`` (the checks,
    the warm-up's fresh start and the chains' first states computed again)."""
    from adaptmc.api import run_plan
    from adaptmc.recipes import DEFAULT_RECIPE, build

    target, count = counting_target()

    def call(**kwargs):
        plan = build(DEFAULT_RECIPE, target, seed=0, warmup_steps=150, draws=100, tuning=4,
                     mams="off")
        result = run_plan(target, plan, chains=CHAINS, seed=0, progress=False, **kwargs)
        jax.effects_barrier()
        return result

    whole = call().idata.attrs
    count[0] = 0
    # the warm-up's chunks of 10 (it ends once settled), then tuning's blocks
    settled = json.loads(whole["warmup"])["settled"]
    chunks = (settled["final_start"] + settled["max_steps"]
              - settled["planned_final_start"]) // 10
    stop_after = 3 if where == "warm-up" else chunks + 2
    out = tmp_path / "run"
    assert call(output_dir=out, stop_after=stop_after).idata is None
    attrs = call(output_dir=out, resume=True).idata.attrs
    assert attrs["total_grad_evals"] == whole["total_grad_evals"]
    assert attrs["resume_grads"] > 0
    assert count[0] == attrs["total_grad_evals"] + attrs["resume_grads"]


def test_lockstep_warmup_counts_the_longest_chain_for_every_chain(monkeypatch):
    """In lockstep a NUTS transition evaluates every chain at every step of the longest:
    the count is at least that, and at most what was computed."""
    monkeypatch.setattr(chains, "lockstep", lambda: True)
    target, count = counting_target()
    start = jax.random.normal(jax.random.key(1), (CHAINS, 4)) * 3
    warm = early.early_warmup(target, start, jax.random.key(0), num_steps=100,
                              progress=False)
    jax.effects_barrier()
    own = CHAINS + int(np.sum(warm.trajectory_steps))
    assert own < warm.num_grads <= count[0]
    assert count[0] <= 1.1 * warm.num_grads


EIGHT = default_posteriordb_dir() / "eight_schools-eight_schools_noncentered"
NO_TOOLCHAIN = (importlib.util.find_spec("httpstan") is None
                or shutil.which(os.environ.get("CXX", "g++")) is None)


@pytest.mark.skipif(NO_TOOLCHAIN or not EIGHT.is_dir(), reason="needs httpstan and a C++ "
                    "compiler")
def test_stan_program_counts_every_gradient_the_library_computes():
    """The counters inside the compiled Stan program (every chain's evaluation through XLA's
    FFI, `adaptmc.targets.stan.ffi.evaluations`) against the run record."""
    from adaptmc.targets.stan import stan_target
    from adaptmc.targets.stan.ffi import evaluations

    target = stan_target(EIGHT / "model.stan", EIGHT / "data.json.zip")
    before = evaluations(target.info["stan_model"])
    idata = adaptmc.sample(target, chains=CHAINS, seed=0, progress=False,
                           compile_cache=False, warmup_steps=150, draws=100, tuning=4)
    jax.effects_barrier()
    after = evaluations(target.info["stan_model"])
    points = sum(after.values()) - sum(before.values())
    assert after["values"] == before["values"]  # no value alone: every point a gradient
    assert points == idata.attrs["total_grad_evals"]
    assert idata.attrs["check_grads"] == START_CHECKS
