"""Issue 13: nothing lost, nothing run that the user did not ask for. One test per numbered
defect: output folders (1), validation before writing (2), warm-up feasibility (3), resume
trust (4), one clear error line (5), streamed draws (6), bench failures and cache keys (7)."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from adaptmc import io
from adaptmc.cli import main
from adaptmc.kernels import hmc
from adaptmc.kernels.hmc import HMCParams
from adaptmc.run import run
from adaptmc.targets import make_target

TARGET = make_target(lambda x: -0.5 * jnp.sum(x**2), jnp.zeros(2), name="std-normal-2d")
MANUAL = ["sample", "--recipe", "manual", "--target", "gauss-2d-v1", "--no-progress",
          "--super-transitions", "3", "--warmup", "1", "--budget", "40",
          "--chains", "2"]


def _run(out, **kwargs):
    base = dict(num_super_transitions=2, gradient_budget=40, num_chains=2, progress=False,
                output_dir=out)
    base.update(kwargs)
    return run(TARGET, hmc, HMCParams(0.3, 4), **base)


# 1. --force deletes only adaptmc runs ---------------------------------------------------

def test_force_never_deletes_the_current_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "thesis.tex").write_text("years of work")
    code = main([*MANUAL, "--out", ".", "--force"])
    assert code == 2 and "current folder" in capsys.readouterr().err
    assert (tmp_path / "thesis.tex").read_text() == "years of work"
    parent = tmp_path / "sub"
    parent.mkdir()
    monkeypatch.chdir(parent)
    assert main([*MANUAL, "--out", "..", "--force"]) == 2
    assert (tmp_path / "thesis.tex").exists()


def test_force_refuses_a_folder_not_written_by_adaptmc(tmp_path):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not written by adaptmc"):
        _run(out, force=True)
    assert (out / "precious.txt").read_text() == "keep me"


def test_force_refuses_a_run_folder_holding_foreign_files(tmp_path):
    out = tmp_path / "run"
    _run(out)
    (out / "my-analysis.ipynb").write_text("{}")
    with pytest.raises(FileExistsError, match="my-analysis.ipynb"):
        _run(out, force=True)
    assert (out / "my-analysis.ipynb").exists()


def test_force_replaces_a_run_folder_and_the_message_says_what(tmp_path):
    out = tmp_path / "run"
    _run(out)
    with pytest.raises(FileExistsError, match=r"would delete .*config\.json.*draws\.nc"):
        _run(out)
    before = (out / io.CONFIG).stat().st_mtime_ns
    _run(out, force=True, seed=3)
    assert (out / io.DRAWS).exists() and (out / io.CONFIG).stat().st_mtime_ns != before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries


def test_reproduce_force_refuses_a_foreign_folder(tmp_path, capsys):
    out = tmp_path / "fig"
    out.mkdir()
    (out / "draft.docx").write_text("x")
    code = main(["reproduce", "hmc-sensitivity", "--quick", "--out", str(out), "--force"])
    assert code == 2 and "not written by adaptmc" in capsys.readouterr().err
    assert (out / "draft.docx").exists()


def test_bench_refuses_an_out_folder_with_foreign_files(tmp_path):
    from adaptmc.bench.distributed import open_bench_dir

    out = tmp_path / "mine"
    out.mkdir()
    (out / "data.csv").write_text("1")
    with pytest.raises(FileExistsError, match="did not write"):
        open_bench_dir(out)
    assert open_bench_dir(tmp_path / "fresh").joinpath(io.MARKER).is_file()


# 2. every check before anything is written or deleted -----------------------------------

def _raising_objective(positions, stats, num_grads):
    raise KeyError("reward column")


@pytest.mark.parametrize("extra, message", [
    (["--tuner", "gp-ucb", "--box", "num_leapfrog=0:3"], "num_leapfrog must be"),
    (["--tuner", "gp-ucb", "--adapt-until", "-5"], "adapt_until must"),
    (["--tuner", "grid", "--grid", "step_size=0.1,x"], "with numbers"),
    (["--inverse-mass", "nan"], "inverse_mass"),
])
def test_bad_options_with_force_keep_the_old_run(tmp_path, capsys, extra, message):
    out = tmp_path / "run"
    _run(out)
    before = sorted(p.name for p in out.rglob("*"))
    code = main([*MANUAL, *extra, "--out", str(out), "--force"])
    assert code == 2 and message in capsys.readouterr().err
    assert sorted(p.name for p in out.rglob("*")) == before
    assert (out / io.DRAWS).exists()


def test_an_objective_that_raises_is_caught_before_writing(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match="objective '_raising_objective' failed.*KeyError"):
        _run(out, objective=_raising_objective)
    assert not out.exists()
    assert not list(tmp_path.iterdir())


# 3. no silent garbage: at least one step per super-transition in every phase ------------

@pytest.mark.parametrize("extra, message", [
    (["--adapt-mass", "diag", "--budget", "6", "--num-leapfrog", "3", "--warmup", "3",
      "--super-transitions", "6"],
     "first proposal one step costs 10"),
    (["--tuner", "gp-ucb", "--box", "step_size=0:0.5"], "step_size must be positive"),
    (["--tuner", "gp-ucb", "--adapt-until", "100"], "adapt_until must"),
])
def test_infeasible_warmups_and_boxes_are_refused(tmp_path, capsys, extra, message):
    args = list(MANUAL)
    if "--budget" in extra:
        del args[args.index("--budget"):args.index("--budget") + 2]
    out = tmp_path / "never"
    assert main([*args, *extra, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_box_beyond_the_budget_is_refused_by_run(tmp_path):
    from adaptmc.tuners import gp_ucb, make_box

    box = make_box({"step_size": (0.1, 1.0), "num_leapfrog": (1, 30)},
                   integer=("num_leapfrog",))
    with pytest.raises(ValueError, match="num_leapfrog=30.*costs 30 gradients"):
        _run(tmp_path / "never", tuner=gp_ucb(box), gradient_budget=20)
    assert not (tmp_path / "never").exists()
