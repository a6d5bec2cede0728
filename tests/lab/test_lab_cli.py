"""The lab's command line: the experiments' registry and ``adaptmc-lab reproduce``'s checks."""

import pytest

from adaptmc_lab.cli import main


def test_every_experiment_is_a_function_taking_the_run_options():
    import inspect

    from adaptmc_lab.experiments import EXPERIMENTS

    for name, function in EXPERIMENTS.items():
        params = inspect.signature(function).parameters
        assert {"out", "quick", "force", "seed", "sizes"} <= set(params), name


def test_listing_the_experiments_imports_none():
    import subprocess
    import sys

    code = ("import sys, adaptmc_lab.cli; "
            "print(any(m.startswith('adaptmc_lab.experiments.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("args, message", [
    (["dexter", "--set", "foo=1"], "not a size"),
    (["dexter", "--set", "gradient_budget=0.5"], "expected a positive integer"),
    (["dexter", "--set", "gradient_budget"], "expected NAME=VALUE"),
    (["hmc-cost", "--set", "num_steps=10"], "takes no --set sizes"),
])
def test_reproduce_sizes_are_checked_before_anything_is_written(tmp_path, capsys, args,
                                                                message):
    out = tmp_path / "never"
    code = main(["reproduce", *args, "--out", str(out), "--no-compile-cache"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("error:") == 1
    assert not out.exists()


def test_reproduce_sizes_replace_the_dexter_config(monkeypatch, tmp_path):
    """``--set`` fields land in the configuration the experiment runs."""
    from adaptmc_lab.experiments import dexter

    seen = {}
    monkeypatch.setattr(dexter, "run_experiment",
                        lambda config, seed, out: seen.update(config=config) or {"table": ""})
    code = main(["reproduce", "dexter", "--quick", "--set", "num_super_transitions=7", "--set",
                 "gradient_budget=123", "--out", str(tmp_path / "d"), "--no-compile-cache"])
    assert code == 0
    assert seen["config"] == dexter.QUICK._replace(num_super_transitions=7, gradient_budget=123)


def test_every_posteriordb_posterior_is_a_stan_target_of_the_lab():
    """``stan-<posterior>`` names each shipped posterior's Stan program and data (the bench
    runs it beside ``pdb-<posterior>``); other names are not taken."""
    from adaptmc.datasets.posteriordb import default_posteriordb_dir
    from adaptmc_lab.targets import stan_posterior_files

    folders = [p.name for p in default_posteriordb_dir().iterdir() if p.is_dir()]
    assert len(folders) == 22
    for name in folders:
        model, data = stan_posterior_files(f"stan-{name}")
        assert model.endswith(f"{name}/model.stan") and data.endswith("data.json.zip")
    assert stan_posterior_files("stan-nothing") is None
    assert stan_posterior_files("pdb-arK-arK") is None


@pytest.mark.parametrize("float32", [False, True])
def test_reproduce_is_float64_unless_asked_whatever_jax_flag(monkeypatch, tmp_path, float32):
    """``adaptmc-lab reproduce`` runs in float64 with JAX's x64 flag off (as ``adaptmc
    sample``), in float32 with ``--float32``."""
    import jax

    from adaptmc_lab import experiments

    seen = {}
    monkeypatch.setitem(experiments.EXPERIMENTS, "robot-arm",
                        lambda out, **kw: seen.update(x64=jax.config.read("jax_enable_x64")))
    jax.config.update("jax_enable_x64", float32)  # the opposite of what is asked
    try:
        code = main(["reproduce", "robot-arm", "--out", str(tmp_path / "r"),
                     "--no-compile-cache", *(["--float32"] if float32 else [])])
    finally:
        jax.config.update("jax_enable_x64", True)  # the suite's setting (conftest)
    assert code == 0 and seen == {"x64": not float32}


def test_reproduce_float32_refused_where_the_experiment_is_float64(tmp_path, capsys):
    out = tmp_path / "never"
    code = main(["reproduce", "hmc-cost", "--float32", "--out", str(out), "--no-compile-cache"])
    err = capsys.readouterr().err
    assert code == 2 and "computes in float64 only" in err and err.count("error:") == 1
    assert not out.exists()
