"""The Bayesian workflow around the draws: precision, pointwise log-likelihood (LOO),
posterior predictive draws, names and diagnostics as the model's language has them."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SRC = Path(__file__).parents[1] / "src"
STAN_PROGRAM = Path(__file__).parent / "data" / "eight_schools_loo.stan"
EIGHT = {"J": 8, "y": [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0],
         "sigma": [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0]}
NO_STAN = (importlib.util.find_spec("httpstan") is None
           or shutil.which(os.environ.get("CXX", "g++")) is None)
needs_stan = pytest.mark.skipif(NO_STAN, reason="needs httpstan and a C++ compiler")
QUICK = dict(chains=2, draws=60, warmup_steps=150, tuning=4, progress=False)

PRECISION_SCRIPT = """
import sys, warnings
import jax
jax.config.update("jax_enable_x64", False)
import numpy as np
import adaptmc
{model}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", RuntimeWarning)
    idata = {call}
dtypes = {{str(v.dtype) for v in idata.posterior.data_vars.values() if v.dtype.kind == "f"}}
print(sorted(dtypes), [str(w.message) for w in caught if w.category is RuntimeWarning])
"""
NUMPYRO_MODEL = """
import numpyro, numpyro.distributions as dist
def model(y):
    mu = numpyro.sample("mu", dist.Normal(0, 5))
    sigma = numpyro.sample("sigma", dist.HalfNormal(2))
    numpyro.sample("y", dist.Normal(mu, sigma), obs=y)
"""


def _precision_run(model: str, call: str) -> str:
    script = PRECISION_SCRIPT.format(model=model, call=call)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_numpyro_draws_are_float64_with_jax_x64_off():
    line = _precision_run(NUMPYRO_MODEL, "adaptmc.sample(model, np.array([0.3, -1.2, 2.0, 0.7]), "
                          f"seed=1, **{QUICK!r})")
    assert line == "['float64'] []"


@needs_stan
def test_stan_draws_are_float64_with_jax_x64_off():
    line = _precision_run("", f"adaptmc.sample({str(STAN_PROGRAM)!r}, data={EIGHT!r}, seed=1, "
                          f"**{QUICK!r})")
    assert line == "['float64'] []"


def test_float32_when_asked():
    import jax.numpy as jnp

    import adaptmc
    from adaptmc.options import OptionError

    target = (lambda x: -0.5 * jnp.sum(x**2), jnp.zeros(2))
    try:
        idata = adaptmc.sample(target, float32=True, **QUICK)
        draws = idata.posterior["x"].values
        np.testing.assert_array_equal(draws.astype(np.float32), draws)  # computed in float32
    finally:
        import jax

        jax.config.update("jax_enable_x64", True)
    with pytest.raises(OptionError, match="float32"):
        adaptmc.sample(target, float32="yes", **QUICK)


def _regression_data(seed: int = 0, n: int = 30):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return x, 1.0 + 2.0 * x + rng.normal(scale=0.5, size=n)


def numpyro_regression(x, y=None):
    import numpyro
    import numpyro.distributions as dist

    alpha = numpyro.sample("alpha", dist.Normal(0, 5))
    beta = numpyro.sample("beta", dist.Normal(0, 5))
    sigma = numpyro.sample("sigma", dist.HalfNormal(2))
    numpyro.sample("y", dist.Normal(alpha + beta * x, sigma), obs=y)


def _loo_checks(idata, n: int, observed: str = "y"):
    import arviz as az

    assert idata.log_likelihood[observed].shape == (2, QUICK["draws"], n)
    loo = az.loo(idata)
    assert np.isfinite(loo.elpd_loo) and loo.n_data_points == n
    assert az.compare({"a": idata, "b": idata}).shape[0] == 2


def test_loo_on_a_numpyro_model():
    pytest.importorskip("numpyro")
    import adaptmc

    x, y = _regression_data()
    idata = adaptmc.sample(numpyro_regression, x, y, seed=2, **QUICK)
    _loo_checks(idata, len(y))
    np.testing.assert_array_equal(idata.observed_data["y"].values, y)
    np.testing.assert_array_equal(idata.constant_data["x"].values, x)
    # the pointwise values are NumPyro's own, at the stored draws
    from numpyro.infer import log_likelihood

    draws = {k: idata.posterior[k].values for k in ("alpha", "beta", "sigma")}
    expected = log_likelihood(numpyro_regression, draws, x, y, batch_ndims=2)["y"]
    np.testing.assert_allclose(idata.log_likelihood["y"].values, expected, rtol=1e-12)


def test_loo_on_a_pymc_model():
    pm = pytest.importorskip("pymc")
    import adaptmc

    x, y = _regression_data(1)
    with pm.Model() as model:
        xs = pm.Data("x", x)
        alpha = pm.Normal("alpha", 0, 5)
        beta = pm.Normal("beta", 0, 5)
        sigma = pm.HalfNormal("sigma", 2)
        pm.Normal("y", alpha + beta * xs, sigma, observed=y)
    idata = adaptmc.sample(model, seed=3, **QUICK)
    _loo_checks(idata, len(y))
    np.testing.assert_array_equal(idata.observed_data["y"].values, y)
    np.testing.assert_array_equal(idata.constant_data["x"].values, x)


def test_loo_on_a_jax_log_density_with_a_pointwise_function():
    import jax.numpy as jnp
    from jax.scipy.stats import norm

    import adaptmc
    from adaptmc.targets import make_target

    x, y = _regression_data(2)

    def pointwise(params):
        return norm.logpdf(y, params["alpha"] + params["beta"] * x, 0.5)

    def logdensity(params):
        return jnp.sum(pointwise(params)) + jnp.sum(norm.logpdf(params["alpha"], 0, 5)) \
            + norm.logpdf(params["beta"], 0, 5)

    target = make_target(logdensity, {"alpha": 0.0, "beta": 0.0}, log_likelihood=pointwise,
                         observed_data={"y": y}, constant_data={"x": x})
    idata = adaptmc.sample(target, seed=4, **QUICK)
    _loo_checks(idata, len(y))


@pytest.fixture(scope="module")
def stan_idata():
    """One short run of the eight-schools program with ``log_lik``, ``y_rep`` and a discrete
    generated quantity (compiled once, then cached on disk)."""
    if NO_STAN:
        pytest.skip("needs httpstan and a C++ compiler")
    import adaptmc

    return adaptmc.sample(str(STAN_PROGRAM), data=EIGHT, seed=5, **QUICK)


def test_loo_on_a_stan_program_with_log_lik(stan_idata):
    _loo_checks(stan_idata, 8, observed="log_lik")
    assert "log_lik" not in stan_idata.posterior


def test_stan_replicated_data_has_the_observed_shape(stan_idata):
    replicated = stan_idata.posterior_predictive["y_rep"]
    assert replicated.shape == (2, QUICK["draws"]) + stan_idata.observed_data["y"].shape
    assert "y_rep" not in stan_idata.posterior
    np.testing.assert_array_equal(stan_idata.constant_data["sigma"].values, EIGHT["sigma"])


def test_posterior_predictive_of_a_numpyro_model_has_the_observed_shape():
    pytest.importorskip("numpyro")
    import adaptmc

    x, y = _regression_data()
    idata = adaptmc.sample(numpyro_regression, x, y, seed=2, **QUICK)
    idata = adaptmc.sample_posterior_predictive(idata, numpyro_regression, x, seed=1)
    drawn = idata.posterior_predictive["y"]
    assert drawn.shape == (2, QUICK["draws"]) + idata.observed_data["y"].shape
    # each draw's replicate is centred on that draw's regression line
    line = idata.posterior["alpha"].values[..., None] + idata.posterior["beta"].values[
        ..., None] * x
    residual = (drawn.values - line) / idata.posterior["sigma"].values[..., None]
    assert abs(residual.mean()) < 5 / np.sqrt(residual.size) and 0.9 < residual.std() < 1.1


def test_pymc_sample_posterior_predictive_reads_adaptmc_output():
    pm = pytest.importorskip("pymc")
    import adaptmc

    x, y = _regression_data(1)
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0, 5)
        sigma = pm.HalfNormal("sigma", 2)
        pm.Normal("y", alpha + x, sigma, observed=y)
    idata = adaptmc.sample(model, seed=3, **QUICK)
    idata = adaptmc.sample_posterior_predictive(idata, model, seed=1)
    assert idata.posterior_predictive["y"].shape == (2, QUICK["draws"], len(y))


def numpyro_logistic(x, y=None):
    import numpyro
    import numpyro.distributions as dist

    beta = numpyro.sample("beta", dist.Normal(0, 2).expand([x.shape[1]]).to_event(1))
    numpyro.sample("y", dist.Bernoulli(logits=x @ beta), obs=y)


def _logistic_data(n: int = 40):
    rng = np.random.default_rng(7)
    x = np.column_stack([np.ones(n), rng.normal(size=n)])
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(x @ np.array([0.3, 1.5]))))).astype(float)
    return x, y


PREDICTIVE = dict(chains=2, draws=40, warmup_steps=150, tuning=3, progress=False,
                  objective="predictive", heldout=0.25, mams="off")  # HMC tuning


def test_predictive_reward_reads_held_out_observations_only():
    """A held-out label leaves the training posterior and changes the reward; a training
    label changes the posterior and leaves the reward's function of the draws."""
    pytest.importorskip("numpyro")
    from adaptmc.heldout import heldout_indices, predictive_setup
    from adaptmc.targets.numpyro_model import from_numpyro

    x, y = _logistic_data()
    held = heldout_indices(len(y), 0.25, seed=0)
    train = np.setdiff1d(np.arange(len(y)), held)
    points = np.random.default_rng(1).normal(size=(3, 5, 2))
    made = {}
    for label, flip in (("base", None), ("held", held[0]), ("train", train[0])):
        labels = y.copy()
        if flip is not None:
            labels[flip] = 1 - labels[flip]
        target, objective, record = predictive_setup(
            from_numpyro(numpyro_logistic, x, labels), 0.25, seed=0)
        assert record == {"heldout_indices": held.tolist()}
        density = np.array([float(target.logdensity(p)) for p in points.reshape(-1, 2)])
        made[label] = density, objective(points, {}, 1)
    np.testing.assert_allclose(made["held"][0], made["base"][0], rtol=1e-12)
    assert made["held"][1] != made["base"][1]
    assert not np.allclose(made["train"][0], made["base"][0])
    assert made["train"][1] == made["base"][1]


@pytest.mark.slow  # 27-34 s; the README's two blocks run predictive tuning fast
def test_predictive_tuning_through_the_api_and_the_cli(tmp_path):
    pytest.importorskip("numpyro")
    import adaptmc
    from adaptmc.heldout import heldout_indices
    from adaptmc.run.store import read_draws

    x, y = _logistic_data()
    idata = adaptmc.sample(numpyro_logistic, x, y, seed=0, **PREDICTIVE)
    held = heldout_indices(len(y), 0.25, seed=0)
    assert json.loads(idata.attrs["heldout"]) == {"heldout_indices": held.tolist()}
    assert idata.tuning.attrs["objective"] == "heldout_log_predictive_density"
    assert np.any(np.isfinite(idata.tuning["reward"].values))
    module = tmp_path / "logistic_model.py"
    np.savez(tmp_path / "data.npz", x=x, y=y)
    module.write_text(
        "import numpy as np\nimport numpyro\nimport numpyro.distributions as dist\n"
        "from adaptmc.targets.numpyro_model import from_numpyro\n"
        "def model(x, y=None):\n"
        "    beta = numpyro.sample('beta', dist.Normal(0, 2).expand([2]).to_event(1))\n"
        "    numpyro.sample('y', dist.Bernoulli(logits=x @ beta), obs=y)\n"
        "def target():\n"
        f"    data = np.load({str(tmp_path / 'data.npz')!r})\n"
        "    return from_numpyro(model, data['x'], data['y'])\n")
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "adaptmc", "sample", "--target", "logistic_model:target",
         "--objective", "predictive", "--heldout", "0.25", "--mams", "off", "--chains", "2",
         "--draws", "40",
         "--warmup-steps", "150", "--tuning", "3", "--out", str(out), "--no-progress"],
        capture_output=True, text=True, cwd=tmp_path, timeout=900,
        env={**os.environ, "PYTHONPATH": f"{SRC}:{tmp_path}"})
    assert done.returncode == 0, done.stderr[-3000:]
    cli = read_draws(out)
    assert cli.tuning.attrs["objective"] == "heldout_log_predictive_density"
    np.testing.assert_array_equal(cli.tuning["reward"].values, idata.tuning["reward"].values)


def test_stan_labels_are_one_based_and_generated_quantities_are_not_judged(stan_idata):
    from adaptmc.diagnostics import convergence_warnings, format_summary, summary_in_blocks

    table = summary_in_blocks(stan_idata)
    assert "theta[1]" in table.index and "theta[8]" in table.index
    assert "theta[0]" not in table.index
    assert stan_idata.posterior["theta"].dims[2] == "theta_dim_0"  # as az.from_cmdstanpy
    assert "best" in table.index and not table.loc["best", "judged"]
    # the discrete generated quantity, however badly it mixes, raises no warning
    assert not any("best" in w for w in convergence_warnings(stan_idata, table))
    assert "best" not in " ".join(json.loads(stan_idata.attrs["warnings"]))
    assert "best" in format_summary(stan_idata, max_rows=100)
    parameters = summary_in_blocks(stan_idata, parameters_only=True)  # what the run judges
    assert "best" not in parameters.index and parameters["judged"].all()
    assert parameters.equals(table[table["judged"]])


def test_a_badly_mixing_generated_quantity_would_be_judged_as_a_parameter(stan_idata):
    """The same draws with ``best`` made to disagree between chains: counted as a
    parameter it warns; named in the ``derived`` attribute it does not."""
    from adaptmc.diagnostics import convergence_warnings, summary_in_blocks

    copy = stan_idata.copy()
    noise = np.random.default_rng(0).normal(size=copy.posterior["best"].shape)
    copy.posterior["best"] = copy.posterior["best"] * 0 + noise + 5.0 * np.arange(2)[:, None]
    copy.posterior.attrs["derived"] = "[]"
    assert any("(best)" in w for w in convergence_warnings(copy, summary_in_blocks(copy)))
    copy.posterior.attrs["derived"] = json.dumps(["best"])
    assert not any("best" in w for w in convergence_warnings(copy, summary_in_blocks(copy)))


def test_init_as_named_constrained_values():
    pytest.importorskip("numpyro")
    from adaptmc.targets.initial import unconstrained_point
    from adaptmc.targets.numpyro_model import from_numpyro

    x, y = _regression_data()
    target = from_numpyro(numpyro_regression, x, y)
    point = unconstrained_point(target, {"sigma": 2.5, "beta": -1.0})
    named = target.constrain(point)
    assert float(named["sigma"]) == pytest.approx(2.5) and float(named["beta"]) == -1.0
    assert float(named["alpha"]) == pytest.approx(float(target.constrain(
        target.initial_position)["alpha"]))
    with pytest.raises(ValueError, match="gamma"):
        unconstrained_point(target, {"gamma": 1.0})
    with pytest.raises(ValueError, match="init: .*support"):
        unconstrained_point(target, {"sigma": -1.0})


def test_init_dict_through_the_api_and_target_accept(tmp_path):
    pytest.importorskip("numpyro")
    import adaptmc

    x, y = _regression_data()
    idata = adaptmc.sample(numpyro_regression, x, y, seed=2, init={"sigma": 0.5},
                           init_jitter=0.0, target_accept=0.95, **QUICK)
    assert np.isfinite(idata.posterior["sigma"].values).all()


def test_target_accept_reaches_the_default_recipes_warmup(monkeypatch):
    import jax

    import adaptmc
    from adaptmc.adaptation import early_stage
    from adaptmc.options import OptionError
    from adaptmc.recipes import build
    from adaptmc.targets import get_target

    seen = {}

    def stop(*args, **kwargs):
        seen.update(kwargs)
        raise RuntimeError("stop")

    monkeypatch.setattr(early_stage, "start_chains", stop)
    target = get_target("gauss-2d-v1")
    plan = build("adaptive-hmc", target, target_accept=0.95)
    with pytest.raises(RuntimeError, match="stop"):
        plan.warmup.start(target, np.zeros((2, target.dim)), jax.random.key(0))
    assert seen["target_accept"] == 0.95 and plan.options["target_accept"] == 0.95
    with pytest.raises(OptionError, match="target_accept"):
        adaptmc.sample(target, target_accept=1.5, progress=False)


def test_init_dict_for_a_pymc_model():
    pm = pytest.importorskip("pymc")
    from adaptmc.targets.initial import unconstrained_point
    from adaptmc.targets.pymc_model import from_pymc

    with pm.Model() as model:
        pm.HalfNormal("tau", 2)
        pm.Uniform("p", 0, 1)
    target = from_pymc(model)
    named = target.constrain(unconstrained_point(target, {"tau": 3.0, "p": 0.25}))
    assert float(named["tau"]) == pytest.approx(3.0) and float(named["p"]) == pytest.approx(0.25)


def _readme_block(heading: str) -> str:
    text = (Path(__file__).parents[1] / "README.md").read_text()
    section = text[text.index(heading):]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_readme_workflow_block_runs(monkeypatch, capsys):
    """The README's LOO / posterior predictive / predictive tuning block, verbatim, at small
    sizes."""
    pytest.importorskip("numpyro")
    import functools

    import adaptmc

    small = dict(chains=2, draws=100, warmup_steps=150, tuning=4, progress=False)
    monkeypatch.setattr(adaptmc, "sample", functools.partial(adaptmc.sample, **small))
    scope: dict = {}
    exec(_readme_block("## LOO, posterior predictive checks"), scope)
    assert scope["idata"].posterior_predictive["y"].shape == (2, 100, 100)
    assert np.any(np.isfinite(scope["tuned"].tuning["reward"].values))
    assert "elpd_loo" in capsys.readouterr().out


def test_readme_command_line_block_runs(tmp_path):
    """The README's predictive tuning and ``adaptmc predict`` commands, verbatim but for
    small sizes appended to ``sample``, with ``mymodel:posterior`` a NumPyro logistic
    regression (its ``posterior()`` a `from_numpyro` target)."""
    pytest.importorskip("numpyro")
    import shlex

    import xarray as xr

    text = (Path(__file__).parents[1] / "README.md").read_text()
    section = text[text.index("## LOO, posterior predictive checks"):]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert [c.split()[:2] for c in commands] == [["adaptmc", "sample"], ["adaptmc", "predict"]]
    x, y = _logistic_data()
    np.savez(tmp_path / "data.npz", x=x, y=y)
    (tmp_path / "mymodel.py").write_text(
        "import numpy as np\nimport numpyro\nimport numpyro.distributions as dist\n"
        "from adaptmc.targets.numpyro_model import from_numpyro\n"
        "def model(x, y=None):\n"
        "    beta = numpyro.sample('beta', dist.Normal(0, 2).expand([2]).to_event(1))\n"
        "    numpyro.sample('y', dist.Bernoulli(logits=x @ beta), obs=y)\n"
        "def posterior():\n"
        f"    data = np.load({str(tmp_path / 'data.npz')!r})\n"
        "    return from_numpyro(model, data['x'], data['y'])\n")
    env = {**os.environ, "PYTHONPATH": f"{SRC}:{tmp_path}"}
    small = ["--chains", "2", "--draws", "40", "--warmup-steps", "150", "--tuning", "3",
             "--no-progress"]
    for command in commands:
        words = shlex.split(command)[1:] + (small if "sample" in command else [])
        done = subprocess.run([sys.executable, "-m", "adaptmc", *words], capture_output=True,
                              text=True, cwd=tmp_path, env=env, timeout=900)
        assert done.returncode == 0, (command, done.stderr[-3000:])
    from adaptmc.run.store import read_draws

    run = tmp_path / "runs" / "pred"
    assert read_draws(run).tuning.attrs["objective"] == "heldout_log_predictive_density"
    assert xr.open_dataset(run / "posterior_predictive.nc")["y"].shape == (2, 40, len(y))
    # without --target, the model's code named in the run's record is not run unasked
    refused = subprocess.run([sys.executable, "-m", "adaptmc", "predict", str(run)],
                             capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)
    assert refused.returncode != 0 and "--trust-code" in refused.stderr


def test_pair_plot_marks_divergences_and_skips_generated_quantities(stan_idata, tmp_path,
                                                                    monkeypatch):
    from adaptmc import posterior_plots

    copy = stan_idata.copy()
    diverging = np.zeros(copy.sample_stats["diverging"].shape, bool)
    diverging[0, :5] = True
    copy.sample_stats["diverging"] = (copy.sample_stats["diverging"].dims, diverging)
    seen = {}
    real = posterior_plots._subset

    def spy(draws, names, chosen, stats=None):
        seen.setdefault("names", []).append([names[i] for i in chosen])
        seen.setdefault("stats", []).append(stats)
        return real(draws, names, chosen, stats)

    monkeypatch.setattr(posterior_plots, "_subset", spy)
    written = posterior_plots.write_posterior_plots(copy, tmp_path)
    assert "pair.png" in [p.name for p in written]  # drawn where draws diverged
    assert int(seen["stats"][-1]["diverging"].sum()) == 5
    assert not any(name.startswith("best") for names in seen["names"] for name in names)


@pytest.mark.slow  # 40 s; the README's command-line block runs predict fast
def test_cli_predict_writes_posterior_predictive_draws(tmp_path):
    pytest.importorskip("numpyro")
    import xarray as xr

    x, y = _regression_data()
    np.savez(tmp_path / "data.npz", x=x, y=y)
    (tmp_path / "regression_model.py").write_text(
        "import numpy as np\nimport numpyro\nimport numpyro.distributions as dist\n"
        "from adaptmc.targets.numpyro_model import from_numpyro\n"
        "def model(x, y=None):\n"
        "    a = numpyro.sample('a', dist.Normal(0, 5))\n"
        "    s = numpyro.sample('s', dist.HalfNormal(2))\n"
        "    numpyro.sample('y', dist.Normal(a + 2 * x, s), obs=y)\n"
        "def target():\n"
        f"    data = np.load({str(tmp_path / 'data.npz')!r})\n"
        "    return from_numpyro(model, data['x'], data['y'])\n")
    env = {**os.environ, "PYTHONPATH": f"{SRC}:{tmp_path}"}
    out = tmp_path / "run"
    command = [sys.executable, "-m", "adaptmc"]
    done = subprocess.run(
        [*command, "sample", "--target", "regression_model:target", "--chains", "2",
         "--draws", "50", "--warmup-steps", "150", "--tuning", "3", "--out", str(out),
         "--no-progress"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    refused = subprocess.run([*command, "predict", str(out)], capture_output=True, text=True,
                             cwd=tmp_path, env=env, timeout=900)
    assert refused.returncode != 0 and "--trust-code" in refused.stderr
    done = subprocess.run([*command, "predict", str(out), "--target",
                           "regression_model:target"], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    drawn = xr.open_dataset(out / "posterior_predictive.nc")
    assert drawn["y"].shape == (2, 50, len(y))


LOGISTIC_PROGRAM = Path(__file__).parent / "data" / "logistic_loo.stan"


@needs_stan
def test_predictive_tuning_of_a_stan_program_reads_its_held_out_data():
    """The same program given the held-out data scores the draws: a held-out label changes
    the reward of the same draws, the training posterior is the program's own data."""
    from adaptmc.heldout import predictive_setup
    from adaptmc.targets.stan import stan_target

    x, y = _logistic_data()
    data = {"N": 30, "K": 2, "x": x[:30], "y": y[:30].astype(int)}
    held = {"N": 10, "K": 2, "x": x[30:], "y": y[30:].astype(int)}
    target = stan_target(LOGISTIC_PROGRAM, data)
    points = np.random.default_rng(1).normal(size=(2, 4, 2))
    train, objective, _ = predictive_setup(target, held, seed=0)
    assert train is target
    flipped = {**held, "y": held["y"].copy()}
    flipped["y"][0] = 1 - flipped["y"][0]
    other = predictive_setup(target, flipped, seed=0)[1]
    assert objective(points, {}, 1) != other(points, {}, 1)
    # the reward is the held-out log predictive density of these draws
    from scipy.special import expit, logsumexp

    logits = points.reshape(-1, 2) @ held["x"].T
    pointwise = np.where(held["y"] == 1, np.log(expit(logits)), np.log(expit(-logits)))
    expected = np.mean(logsumexp(pointwise, axis=0) - np.log(pointwise.shape[0]))
    assert objective(points, {}, 1) == pytest.approx(expected, rel=1e-10)
    with pytest.raises(ValueError, match="held-out data"):
        predictive_setup(target, 0.2, seed=0)
