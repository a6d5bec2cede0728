"""The command line: a run end to end, its summary, and clear errors that write nothing."""

import warnings

import numpy as np
import pytest

from adaptmc.cli import main

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import arviz as az

MANUAL = ["sample", "--recipe", "manual"]  # kernel and tuner set by hand


def test_sample_then_summary(tmp_path, capsys):
    out = tmp_path / "run"
    code = main([*MANUAL, "--target", "gauss-2d-v1", "--step-size", "0.05", "--num-leapfrog",
                 "20", "--super-transitions", "4", "--budget", "400", "--warmup", "1",
                 "--chains", "2", "--out", str(out), "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "robust min ESS per 1000 gradients" in printed and "x[0]" in printed
    for name in ("draws.nc", "summary.txt", "config.json", "checkpoint.npz"):
        assert (out / name).exists(), name
    idata = az.from_netcdf(out / "draws.nc")
    # 2 chains x 3 kept super-transitions x 400 / 20 steps; 4 x 2 x 400 gradients + 2 starts
    # + the checks (each chain's start, the fingerprint's point)
    assert idata.posterior["x"].shape == (2, 60, 2)
    assert idata.attrs["total_grad_evals"] == 4 * 2 * 400 + 2 + 3
    assert set(np.unique(idata.sample_stats["step_size"].values)) == {0.05}
    assert main(["summary", str(out)]) == 0
    again = capsys.readouterr().out
    assert "gradient evaluations (all chains, tuning included) 3,205" in again  # checks: 3


def test_grid_tuner_from_cli(tmp_path, capsys):
    out = tmp_path / "grid"
    code = main([*MANUAL, "--target", "gauss-2d-v2", "--tuner", "grid", "--grid",
                 "step_size=0.1,0.4", "--grid", "num_leapfrog=5,10", "--super-transitions",
                 "6", "--budget", "200", "--warmup", "0", "--chains", "2", "--out", str(out),
                 "--no-progress"])
    assert code == 0
    tuning = az.from_netcdf(out / "draws.nc").tuning
    tried = list(zip(tuning["step_size"].values[:4], tuning["num_leapfrog"].values[:4],
                     strict=True))
    assert sorted(tried) == [(0.1, 5), (0.1, 10), (0.4, 5), (0.4, 10)]
    best = int(np.nanargmax(tuning["reward"].values[:4]))
    # after the grid, the best point is kept
    assert all((s, n) == tried[best] for s, n in zip(tuning["step_size"].values[4:],
                                                     tuning["num_leapfrog"].values[4:],
                                                     strict=True))


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--target", "nope"], "unknown target"),
        (["--target", "gauss-2d-v1", "--step-size", "0"], "--step-size: must be a number in (0,"),
        (["--target", "gauss-2d-v1", "--num-leapfrog", "0"], "--num-leapfrog: must be an integer"),
        (["--target", "gauss-2d-v1", "--kernel", "rwm", "--num-leapfrog", "3"],
         "does not apply"),
        (["--target", "gauss-2d-v1", "--objective", "nope"], "unknown objective"),
        (["--target", "gauss-2d-v1", "--tuner", "gp-ucb", "--max-divergence-rate", "1.5"],
         "argument --max-divergence-rate: must be a number in [0, 1)"),
        (["--target", "gauss-2d-v1", "--tuner", "grid", "--grid", "step_size"],
         "expected NAME=V1"),
        (["--target", "gauss-2d-v1", "--tuner", "grid", "--grid", "foo=1,2"],
         "does not have"),
    ],
)
def test_bad_options_give_one_clear_error_and_write_nothing(tmp_path, capsys, extra, message):
    out = tmp_path / "never"
    code = main([*MANUAL, *extra, "--out", str(out), "--no-progress",
                 "--super-transitions", "2", "--budget", "50"])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and err.count("error:") == 1
    assert not out.exists()


def test_existing_folder_needs_force(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep").write_text("x")
    code = main(["sample", "--target", "gauss-2d-v1", "--out", str(out), "--no-progress"])
    assert code == 2 and "already exists" in capsys.readouterr().err
    assert (out / "keep").exists()


def test_unknown_option_is_refused(capsys):
    assert main(["sample", "--target", "gauss-2d-v1", "--out", "x", "--bogus", "1"]) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --bogus" in err and err.count("\n") == 1


def test_bad_module_function_specs_are_clear_errors():
    from adaptmc.spec import load_object

    with pytest.raises(ValueError, match="expected 'module:function'"):
        load_object("nocolon", "target")
    with pytest.raises(ValueError, match="has no 'nope'"):
        load_object("adaptmc.run:nope", "objective")
    with pytest.raises(ValueError, match="is not callable"):
        load_object("adaptmc.run:STEP_FIELDS", "objective")


def test_gadmala_from_cli_starts_from_the_heuristic_step(tmp_path, capsys):
    """Without --step-size, gadMALA's initial factor comes from Hoffman & Gelman's heuristic
    at the start (the posteriordb start of kidiq has gradients near 1e5: h far below 0.1),
    and the chain moves."""
    out = tmp_path / "gad"
    code = main([*MANUAL, "--target", "pdb-kidiq-kidscore_momiq", "--kernel", "gadmala",
                 "--warmup", "2", "--super-transitions", "4", "--budget", "100",
                 "--chains", "2", "--out", str(out), "--no-progress"])
    assert code == 0
    text = capsys.readouterr().out
    step = float(text.split("initial factor L = ")[1].split(" I")[0])
    assert step < 0.01
    import arviz as az

    idata = az.from_netcdf(out / "draws.nc")
    assert float(idata.sample_stats["accepted"].mean()) > 0.5  # at h = 0.1: none accepted


def test_a_users_target_module_in_the_current_folder(tmp_path, monkeypatch, capsys):
    """``--target module:function`` finds a module in the folder the command runs in, and
    a function returning ``(logdensity_fn, initial_params)`` gives named draws."""
    (tmp_path / "my_model_for_cli.py").write_text(
        "import jax.numpy as jnp\n"
        "def posterior():\n"
        "    return (lambda p: -0.5 * jnp.sum((p['mu'] - 1.0) ** 2), {'mu': jnp.zeros(2)})\n")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    code = main([*MANUAL, "--target", "my_model_for_cli:posterior", "--num-leapfrog", "5",
                 "--step-size", "0.5", "--super-transitions", "6", "--budget", "200",
                 "--warmup", "1", "--chains", "2", "--out", str(out), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    idata = az.from_netcdf(out / "draws.nc")
    assert idata.posterior["mu"].shape[2] == 2


def test_init_file_sets_the_starts_and_is_recorded_for_resume(tmp_path, capsys):
    """``--init`` with ``--init-jitter 0``: every chain starts at the file's point (the
    run's starts, recorded in the config with the file's values); a (chains, dim) file
    sets each chain's start; the same starts from Python's ``init``."""
    import json

    import adaptmc
    from adaptmc.run import starting_positions
    from adaptmc.targets import get_target

    point = tmp_path / "start.txt"
    point.write_text("3.0 -2.0\n")
    out = tmp_path / "run"
    args = [*MANUAL, "--target", "gauss-2d-v1", "--step-size", "0.05", "--num-leapfrog",
            "5", "--super-transitions", "2", "--budget", "50", "--warmup", "0", "--chains",
            "2", "--no-progress", "--init", str(point), "--init-jitter", "0"]
    assert main([*args, "--out", str(out)]) == 0
    saved = json.loads((out / "config.json").read_text())["cli"]
    assert saved["init_values"] == [3.0, -2.0] and saved["init_jitter"] == 0.0
    point.write_text("9 9\n")  # a changed file does not change a resumed run's starts
    target = get_target("gauss-2d-v1")
    np.testing.assert_array_equal(starting_positions(target, 2, 0, [3.0, -2.0], 0.0),
                                  [[3.0, -2.0], [3.0, -2.0]])
    jittered = np.asarray(starting_positions(target, 2, 0, [3.0, -2.0], 0.1))
    assert np.all(np.abs(jittered - [3.0, -2.0]) <= 0.1) and jittered[0, 0] != jittered[1, 0]
    per_chain = tmp_path / "starts.npy"
    np.save(per_chain, np.array([[1.0, 1.0], [-1.0, 0.5]]))
    idata_cli = tmp_path / "per-chain"
    assert main([*args[:-4], "--init", str(per_chain), "--out", str(idata_cli)]) == 0
    cli = az.from_netcdf(idata_cli / "draws.nc").posterior["x"].values
    api = adaptmc.sample(target, recipe="manual", kernel="hmc", step_size=0.05,
                         num_leapfrog=5, super_transitions=2, budget=50, warmup=0, chains=2,
                         seed=0, progress=False, init=np.array([[1.0, 1.0], [-1.0, 0.5]]))
    np.testing.assert_array_equal(cli, api.posterior["x"].values)


@pytest.mark.parametrize("content, extra, message", [
    ("1 2 3\n", [], "init must have shape (2,)"),
    ("1 nan\n", [], "expected finite real numbers"),
    ("one two\n", [], "expected real numbers"),
    ("0 0\n", ["--init-jitter", "-1"], "argument --init-jitter: must be a number in [0,"),
    (None, [], "no such file"),
])
def test_bad_init_gives_one_clear_error_and_writes_nothing(tmp_path, capsys, content, extra,
                                                          message):
    path = tmp_path / "start.txt"
    if content is not None:
        path.write_text(content)
    out = tmp_path / "never"
    code = main([*MANUAL, "--target", "gauss-2d-v1", "--init", str(path), *extra, "--out",
                 str(out), "--no-progress", "--super-transitions", "2", "--budget", "50",
                 "--warmup", "0"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and err.count("error:") == 1
    assert not out.exists()

