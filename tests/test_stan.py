"""Stan programs as targets: the compiled model against the JAX translation of eight
schools, names of the constrained draws, JAX transformations, caching and every error a Stan
user meets. The model is compiled at most once per session (then cached on disk)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.datasets.posteriordb import default_posteriordb_dir, load_posterior
from adaptmc.targets.named_draws import flatten_named
from adaptmc.targets.posteriordb import posteriordb_model

EIGHT = default_posteriordb_dir() / "eight_schools-eight_schools_noncentered"
NO_TOOLCHAIN = (importlib.util.find_spec("httpstan") is None
                or shutil.which(os.environ.get("CXX", "g++")) is None)
pytestmark = [
    pytest.mark.skipif(NO_TOOLCHAIN, reason="needs httpstan (pip install 'adaptmc[stan]') and "
                                            "a C++ compiler"),
    pytest.mark.skipif(not EIGHT.is_dir(), reason="../shared/posteriordb not available"),
]


@pytest.fixture(scope="session")
def eight_schools():
    from adaptmc.targets.stan import stan_target

    return stan_target(EIGHT / "model.stan", EIGHT / "data.json.zip")


def _data():
    with zipfile.ZipFile(EIGHT / "data.json.zip") as archive:
        return json.loads(archive.read(archive.namelist()[0]))


def test_log_density_and_gradient_equal_the_jax_translation(eight_schools):
    from adaptmc.targets.stan.check import compare

    points = np.random.default_rng(3).normal(0.0, 1.5, (20, eight_schools.dim))
    translation = posteriordb_model(load_posterior(EIGHT))
    result = compare(eight_schools.info["stan_model"], translation, points)
    assert result.lp_spread() < 1e-9 * (1 + np.max(np.abs(result.stan_lp)))
    assert result.grad_error() < 1e-10


def test_draws_are_constrained_and_named_as_stan_names_them(eight_schools):
    point = np.random.default_rng(4).normal(size=eight_schools.dim)
    values = jax.tree.map(np.asarray, eight_schools.constrain(jnp.asarray(point)))
    assert {k: v.shape for k, v in values.items()} == \
        {"theta_trans": (8,), "mu": (), "tau": (), "theta": (8,)}
    assert values["tau"] == pytest.approx(np.exp(point[9]))  # <lower=0>: exp of the coordinate
    np.testing.assert_allclose(values["theta"], values["theta_trans"] * values["tau"]
                               + values["mu"], rtol=1e-12)
    flat = flatten_named(values, batch_ndim=0)
    assert set(eight_schools.reference.names) <= set(flat)  # theta[1]... as posteriordb's
    assert eight_schools.parameter_names[:2] == ("theta_trans[1]", "theta_trans[2]")
    model = eight_schools.info["stan_model"]
    np.testing.assert_allclose(model.unconstrain(values), point, rtol=1e-10)


def test_draws_are_constrained_on_the_host_without_a_program(eight_schools):
    """The constrain's ``host`` gives what the jitted one gives on a batch of points, and
    the run's draws go through it: `posterior_variables` compiles nothing (a program with
    Stan's host callback is not kept in JAX's cache: every process compiled it again)."""
    from adaptmc.run.idata import posterior_variables, variables_ahead

    points = np.random.default_rng(5).normal(size=(2, 3, eight_schools.dim))
    expected = jax.jit(jax.vmap(jax.vmap(eight_schools.constrain)))(jnp.asarray(points))
    before = set(eight_schools.programs)
    variables_ahead(eight_schools, points.shape, points.dtype)
    got = posterior_variables(eight_schools, points)
    assert set(eight_schools.programs) == before
    assert set(got) == set(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], np.asarray(value))


def test_log_density_under_jit_vmap_and_scan(eight_schools):
    points = jnp.asarray(np.random.default_rng(5).normal(size=(4, eight_schools.dim)))
    model = eight_schools.info["stan_model"]
    expected, expected_grad, _ = model.log_density_gradient(np.asarray(points))
    value, grad = jax.jit(jax.vmap(jax.value_and_grad(eight_schools.logdensity)))(points)
    np.testing.assert_allclose(value, expected, rtol=1e-12)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-12)

    def step(total, point):
        value, grad = jax.value_and_grad(eight_schools.logdensity)(point)
        return total + value, grad

    total, grads = jax.jit(lambda p: jax.lax.scan(step, 0.0, p))(points)
    assert float(total) == pytest.approx(expected.sum(), rel=1e-12)
    np.testing.assert_allclose(grads, expected_grad, rtol=1e-12)
    draws = jax.jit(jax.vmap(jax.vmap(eight_schools.constrain)))(points[None])
    assert draws["theta"].shape == (1, 4, 8)


def test_callable_from_any_thread(eight_schools):
    from concurrent.futures import ThreadPoolExecutor

    model = eight_schools.info["stan_model"]
    points = np.random.default_rng(6).normal(size=(64, 1, eight_schools.dim))
    serial = [model.log_density_gradient(p)[:2] for p in points]
    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(model.log_density_gradient, points))
    for (value, grad), (t_value, t_grad, _) in zip(serial, threaded, strict=True):
        assert value == t_value and np.array_equal(grad, t_grad)


def test_second_build_compiles_nothing(eight_schools, monkeypatch):
    from adaptmc.targets.stan import build

    def no_compiler(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(build, "_start_compiler", no_compiler)
    assert build.build_model(EIGHT / "model.stan").is_file()


def test_data_as_dict_or_json_file(eight_schools, tmp_path):
    from adaptmc.targets.stan import stan_target

    data = _data()
    (tmp_path / "data.json").write_text(json.dumps(data))
    point = np.asarray(eight_schools.initial_position) + 0.3
    expected = float(eight_schools.logdensity(jnp.asarray(point)))
    arrays = {k: np.asarray(v) for k, v in data.items()}
    for given in (arrays, tmp_path / "data.json", str(tmp_path / "data.json")):
        target = stan_target(EIGHT / "model.stan", given)
        assert float(target.logdensity(jnp.asarray(point))) == pytest.approx(expected)


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("sigma"), r"model.stan: no value for 'sigma' \(declared at line 4, "),
    (lambda d: d.update(y=d["y"][:7]), r"variable name=y.*dims declared=\(8\).*found=\(7\)"),
    (lambda d: d.update(J=8.5), r"variable name=J"),
    (lambda d: d.update(sigma=[-1.0] * 8), r"sigma.*is -1, but must be greater than or equal"),
])
def test_bad_data_is_one_clear_line(eight_schools, change, message):
    from adaptmc.targets.stan import stan_target

    data = _data()
    change(data)
    with pytest.raises(ValueError, match=message) as err:
        stan_target(EIGHT / "model.stan", data)
    assert "\n" not in str(err.value) and "model.stan" in str(err.value)


def test_a_model_rejecting_every_initial_point(eight_schools):
    from adaptmc.targets.stan import stan_target

    data = _data()
    data["sigma"][0] = 0.0  # allowed by <lower=0>; normal_lpdf then rejects every point
    with pytest.raises(ValueError, match=r"rejects every initial point.*Scale parameter\[1\] is 0"):
        stan_target(EIGHT / "model.stan", data)


def test_missing_data_file(eight_schools, tmp_path):
    from adaptmc.targets.stan import stan_target

    with pytest.raises(ValueError, match="data file .* not found"):
        stan_target(EIGHT / "model.stan", tmp_path / "nothing.json")


def test_stanc_syntax_error_with_its_line(tmp_path, monkeypatch):
    from adaptmc.targets.stan import StanBuildError, build_model

    monkeypatch.setenv("ADAPTMC_CACHE", str(tmp_path / "cache"))
    program = tmp_path / "bad.stan"
    program.write_text("data { int N; }\nparameters { real x }\nmodel { x ~ normal(0, 1); }\n")
    with pytest.raises(StanBuildError, match=r"bad.stan: line 2, column 20: syntax error: "
                                             r"\";\" expected") as err:
        build_model(program)
    assert "\n" not in str(err.value)
    program.write_text("parameters { real x; }\nmodel { x ~ normall(0, 1); }\n")
    with pytest.raises(StanBuildError, match=r"line 2, column \d+: semantic error: .*normall"):
        build_model(program)


def test_no_compiler(tmp_path, monkeypatch):
    from adaptmc.targets.stan import StanBuildError, build_model

    monkeypatch.setenv("ADAPTMC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    with pytest.raises(StanBuildError, match=r"no C\+\+ compiler: 'no-such-compiler-xyz'"):
        build_model(EIGHT / "model.stan")


def test_another_environment_links_its_own_library(monkeypatch):
    """A library finds TBB through its linking environment's httpstan (its rpath): a model
    built in one virtual environment and loaded from another, the first one deleted, failed
    to load (libtbb.so.2 not found). Objects are shared; the library's name is not."""
    from adaptmc.targets.stan import build

    cxx = build.compiler()
    here = build.shared_parts(cxx)  # toolchain_id (cached) read from this environment
    monkeypatch.setattr(build, "httpstan_dir", lambda: Path("/elsewhere/site-packages/httpstan"))
    there = build.shared_parts(cxx)
    assert there.key != here.key
    assert (there.interface, there.ffi, there.pch) == (here.interface, here.ffi, here.pch)


def test_no_httpstan(monkeypatch):
    from adaptmc.targets.stan import StanBuildError, build

    build.httpstan_dir.cache_clear()
    monkeypatch.setitem(sys.modules, "httpstan", None)
    try:
        with pytest.raises(StanBuildError, match=r"pip install 'adaptmc\[stan\]'"):
            build.httpstan_dir()
    finally:
        build.httpstan_dir.cache_clear()


def test_library_imports_nothing_of_stan():
    code = ("import sys, adaptmc, adaptmc.targets as t; t.get_target('gauss-2d-v1'); "
            "print([m for m in sys.modules if m.split('.')[0] == 'httpstan' "
            "or m.split('.')[:3] == ['adaptmc', 'targets', 'stan']])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")})
    assert done.stdout.strip() == "[]", done.stderr


@pytest.mark.slow
def test_constrain_and_unconstrain_from_a_fresh_thread_on_an_ode_model():
    """Every entry point makes its thread's reverse-mode tape: a model whose constrained
    quantities solve a stiff ODE differentiates inside (CVODES's Jacobian) though it is
    called on doubles, and a thread that had never taken a gradient segfaulted there (nutpie's
    worker threads, a callback's thread)."""
    import threading

    from adaptmc.targets.stan import stan_target

    folder = default_posteriordb_dir() / "one_comp_mm_elim_abs-one_comp_mm_elim_abs"
    model = stan_target(folder / "model.stan", folder / "data.json.zip").info["stan_model"]
    points = np.random.default_rng(3).uniform(-2, 2, (4, model.dim))
    out = {}

    def fresh():
        out["values"] = model.constrain(points, True, False)
        names = [v.name for v in model.variables if v.block == "parameters"]
        out["point"] = model.unconstrain(_named(model, out["values"][0], names))

    worker = threading.Thread(target=fresh)
    worker.start()
    worker.join()
    np.testing.assert_array_equal(out["values"], model.constrain(points, True, False))
    np.testing.assert_allclose(out["point"], points[0], rtol=1e-9, atol=1e-12)


def _named(model, flat: np.ndarray, names: list[str]) -> dict:
    """The parameters ``names`` of one constrained draw ``flat`` (Stan's flat order)."""
    named, start = {}, 0
    for variable in model.variables:
        size = int(np.prod(variable.shape, dtype=int))
        if variable.name in names:
            named[variable.name] = flat[start:start + size].reshape(variable.shape, order="F")
        start += size
    return named


@pytest.mark.slow
def test_cli_eight_schools_means_within_a_quarter_sd(tmp_path):
    """`adaptmc sample --target model.stan --data data.json.zip`: every mean within 0.25
    reference sd."""
    from adaptmc.run.store import read_draws

    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "adaptmc", "sample", "--target", str(EIGHT / "model.stan"),
         "--data", str(EIGHT / "data.json.zip"), "--out", str(out), "--no-progress"],
        capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")})
    assert done.returncode == 0, done.stderr
    posterior = read_draws(out).posterior
    flat = flatten_named({k: posterior[k].values for k in posterior.data_vars}, batch_ndim=2)
    reference = load_posterior(EIGHT)
    for name, draws in reference.reference_draws.items():
        error = abs(flat[name].mean() - reference.reference_mean[name]) / draws.std()
        assert error < 0.25, (name, error)


@pytest.mark.slow
def test_generated_quantities_optional(tmp_path):
    """Generated quantities are stored unless ``generated_quantities=False``; the same point
    gives the same random draws."""
    from adaptmc.targets.stan import stan_target

    program = tmp_path / "gq.stan"
    program.write_text("parameters { real mu; matrix<lower=0>[2, 3] s; }\n"
                       "model { mu ~ normal(0, 1); to_vector(s) ~ exponential(1); }\n"
                       "generated quantities { real y = normal_rng(mu, 1); }\n")
    target = stan_target(program)
    point = jnp.asarray(np.random.default_rng(8).normal(size=target.dim))
    values = target.constrain(point)
    assert {k: v.shape for k, v in values.items()} == {"mu": (), "s": (2, 3), "y": ()}
    np.testing.assert_allclose(values["s"], np.exp(np.asarray(point[1:]).reshape(3, 2).T))
    assert float(values["y"]) == float(target.constrain(point)["y"])
    assert target.parameter_names == ("mu", "s[1,1]", "s[2,1]", "s[1,2]", "s[2,2]", "s[1,3]",
                                      "s[2,3]")
    assert set(stan_target(program, generated_quantities=False).constrain(point)) == {"mu", "s"}


@pytest.mark.slow
def test_api_sample_with_data_as_dict():
    import adaptmc

    data = {k: np.asarray(v) for k, v in _data().items()}
    idata = adaptmc.sample(str(EIGHT / "model.stan"), data=data, draws=300, progress=False)
    posterior = idata.posterior
    assert set(posterior.data_vars) == {"theta_trans", "mu", "tau", "theta"}
    assert posterior["theta"].shape[2:] == (8,) and float(posterior["tau"].min()) > 0
