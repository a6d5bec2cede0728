"""A Stan model's log density inside compiled JAX programs through XLA's FFI: the same
numbers as Stan's own C interface, under jit, vmap and scan, every evaluation counted (the
count against the run record's), and the build's progress line. Compiles only the
eight schools program that tests/test_stan.py compiles (then cached on disk)."""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.datasets.posteriordb import default_posteriordb_dir

EIGHT = default_posteriordb_dir() / "eight_schools-eight_schools_noncentered"
NO_TOOLCHAIN = (importlib.util.find_spec("httpstan") is None
                or shutil.which(os.environ.get("CXX", "g++")) is None)

pytestmark = [
    pytest.mark.skipif(NO_TOOLCHAIN, reason="needs httpstan (pip install 'adaptmc[stan]') and "
                                            "a C++ compiler"),
    pytest.mark.skipif(not EIGHT.is_dir(), reason="../shared/posteriordb not available"),
]


@pytest.fixture(scope="module")
def eight_schools():
    from adaptmc.targets.stan import stan_target

    return stan_target(EIGHT / "model.stan", EIGHT / "data.json.zip")


def _counts(target):
    from adaptmc.targets.stan.ffi import evaluations

    return evaluations(target.info["stan_model"])


def _points(target, count, seed):
    return np.random.default_rng(seed).normal(0.0, 1.5, (count, target.dim))


def test_ffi_gradient_is_stans_own(eight_schools):
    """At several points, one by one and as a batch: the value and gradient through the FFI
    are bit for bit those of the C interface called directly (ctypes); the value alone too."""
    model = eight_schools.info["stan_model"]
    points = _points(eight_schools, 6, 0)
    expected, expected_grad, _ = model.log_density_gradient(points)
    value_and_grad = jax.jit(jax.value_and_grad(eight_schools.logdensity))
    for point, value, grad in zip(points, expected, expected_grad, strict=True):
        got, got_grad = value_and_grad(jnp.asarray(point))
        assert float(got) == value
        np.testing.assert_array_equal(got_grad, grad)
    batch = jax.jit(jax.vmap(jax.value_and_grad(eight_schools.logdensity)))(jnp.asarray(points))
    np.testing.assert_array_equal(batch[0], expected)
    np.testing.assert_array_equal(batch[1], expected_grad)
    np.testing.assert_array_equal(jax.jit(eight_schools.logdensity)(jnp.asarray(points)),
                                  expected)


@pytest.mark.parametrize("propto, jacobian", [(True, False), (False, True), (False, False)])
def test_ffi_with_or_without_constants_and_jacobian(eight_schools, propto, jacobian):
    from adaptmc.targets.stan.ffi import ffi_logdensity

    model = eight_schools.info["stan_model"]
    points = _points(eight_schools, 3, 4)
    expected, expected_grad, _ = model.log_density_gradient(points, propto, jacobian)
    logdensity = ffi_logdensity(model, propto, jacobian)
    value, grad = jax.jit(jax.vmap(jax.value_and_grad(logdensity)))(jnp.asarray(points))
    np.testing.assert_array_equal(value, expected)
    np.testing.assert_array_equal(grad, expected_grad)
    np.testing.assert_array_equal(jax.jit(logdensity)(jnp.asarray(points)), expected)


def test_the_compiled_program_calls_stan_not_python(eight_schools):
    point = jnp.asarray(_points(eight_schools, 1, 1)[0])
    text = jax.jit(jax.value_and_grad(eight_schools.logdensity)).lower(point).as_text()
    assert "adaptmc_stan_" in text and "_gradient" in text and "callback" not in text
    value_only = jax.jit(eight_schools.logdensity).lower(point).as_text()
    assert "_value" in value_only and "_gradient" not in value_only


def test_every_evaluation_counted_under_jit_vmap_and_scan(eight_schools):
    points = jnp.asarray(_points(eight_schools, 4, 2))
    grad_fn = jax.value_and_grad(eight_schools.logdensity)
    before = _counts(eight_schools)
    jax.block_until_ready(jax.jit(jax.vmap(grad_fn))(points))
    after_vmap = _counts(eight_schools)
    assert after_vmap["gradients"] - before["gradients"] == 4
    assert after_vmap["values"] == before["values"]

    def step(total, point):
        value, grad = grad_fn(point)
        return total + value + eight_schools.logdensity(point + grad * 1e-3), None

    chains = jnp.stack([points, points + 0.1])  # (steps, chains, dim) scanned over steps

    def run(starts):
        return jax.lax.scan(lambda c, p: step(c, p), 0.0, starts)[0]

    jax.block_until_ready(jax.jit(jax.vmap(run, in_axes=1))(chains))
    after_scan = _counts(eight_schools)
    assert after_scan["gradients"] - after_vmap["gradients"] == 8
    assert after_scan["values"] - after_vmap["values"] == 8


def test_float32_positions_take_the_host_callback(eight_schools):
    point = _points(eight_schools, 1, 3)[0]
    model = eight_schools.info["stan_model"]
    expected = model.log_density_gradient(point[None])[0][0]
    value = eight_schools.logdensity(jnp.asarray(point, jnp.float32))
    assert value.dtype == jnp.float32 and float(value) == pytest.approx(expected, rel=1e-5)


def test_counter_equals_the_run_records_gradients(eight_schools):
    """A short HMC run: Stan evaluated the gradients the run record counts (one per chain
    at the start, then what each step reports, and its checks: each chain's starting point
    and the run's fingerprint probe, one each)."""
    import adaptmc

    chains = 2
    before = _counts(eight_schools)
    idata = adaptmc.sample(eight_schools, recipe="manual", kernel="hmc", step_size=0.2,
                           num_leapfrog=5, super_transitions=3, budget=60, warmup=1,
                           chains=chains, seed=0, progress=False, compile_cache=False)
    after = _counts(eight_schools)
    assert idata.attrs["total_grad_evals"] == chains * (1 + 3 * 60) + chains + 1
    assert after["gradients"] - before["gradients"] == idata.attrs["total_grad_evals"]
    assert after["values"] == before["values"]


def test_build_progress_line():
    from adaptmc.targets.stan.build import announce

    stream = io.StringIO()
    with announce("arK-arK/model.stan", True, stream=stream):
        pass
    assert stream.getvalue().splitlines() == [
        "building Stan program arK-arK/model.stan (first time on this machine: also the "
        "shared parts) ...",
        "building Stan program arK-arK/model.stan (first time on this machine: also the "
        "shared parts) ... built in 0 s"]
    stream = io.StringIO()
    with pytest.raises(RuntimeError), announce("x.stan", False, stream=stream):
        raise RuntimeError
    assert stream.getvalue().splitlines()[-1] == "building Stan program x.stan ... failed after 0 s"


def test_a_cached_program_builds_silently(eight_schools, capsys):
    from adaptmc.targets.stan.build import build_model

    assert build_model(EIGHT / "model.stan").is_file()
    assert capsys.readouterr().err == ""


PROGRAM = """
import logging, sys, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
logging.basicConfig(level=logging.WARNING)
logging.getLogger("jax._src.compiler").setLevel(logging.DEBUG)
from adaptmc.targets.stan import stan_target
target = stan_target(sys.argv[2], sys.argv[3])
grads = jax.jit(jax.vmap(jax.value_and_grad(target.logdensity), in_axes=0))
print(repr(float(grads(jnp.full((3, target.dim), 0.25))[1].sum())))
"""


@pytest.mark.slow
def test_a_second_process_loads_the_compiled_program(eight_schools, tmp_path):
    """The program names its model by an id, not a pointer: a second process finds it in
    JAX's compilation cache, and it calls that process's model."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    args = [sys.executable, "-c", PROGRAM, str(tmp_path / "jax"), str(EIGHT / "model.stan"),
            str(EIGHT / "data.json.zip")]
    first, second = (subprocess.run(args, capture_output=True, text=True, env=env)
                     for _ in range(2))
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "cache hit for 'jit_logdensity'" in second.stderr
    assert first.stdout == second.stdout
