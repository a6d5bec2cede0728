"""Issue 13: nothing lost, nothing run that the user did not ask for. One test per numbered
defect: output folders (1), validation before writing (2), warm-up feasibility (3), resume
trust (4), one clear error line (5), streamed draws (6), bench failures and cache keys (7)."""

from __future__ import annotations

import os

import jax.numpy as jnp
import numpy as np
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
    from adaptmc_lab.cli import main as lab_main

    code = lab_main(["reproduce", "hmc-sensitivity", "--quick", "--out", str(out), "--force"])
    assert code == 2 and "not written by adaptmc" in capsys.readouterr().err
    assert (out / "draft.docx").exists()


def test_bench_refuses_an_out_folder_with_foreign_files(tmp_path):
    from adaptmc_lab.bench.distributed import open_bench_dir

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
    (["--tuner", "gp-ucb", "--adapt-until", "-5"], "--adapt-until: must be"),
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


# 4. resume trusts nothing in its folder ---------------------------------------------------

def _stopped(out, **kwargs):
    return _run(out, num_super_transitions=4, checkpoint_every=1, stop_after=2, **kwargs)


def test_resume_imports_no_code_named_by_the_folder(tmp_path, monkeypatch, capsys):
    sentinel = tmp_path / "ran"
    (tmp_path / "shipped_r13.py").write_text(
        f"open({str(sentinel)!r}, 'w').write('x')\ndef make():\n    raise SystemExit\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "received"
    out.mkdir()
    cli = {"target": "shipped_r13:make", "recipe": "manual", "seed": 0, "chains": 2,
           "thin": None, "checkpoint_every": 1, "float32": False}
    io.write_json(out / io.CONFIG, {"fingerprint": {}, "cli": cli})
    assert main(["resume", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--trust-code" in err and "shipped_r13:make" in err
    assert not sentinel.exists()


def test_resume_refuses_an_edited_target_or_another_objective(tmp_path):
    from adaptmc.objectives import esjd_per_grad

    out = tmp_path / "run"
    _stopped(out, objective=esjd_per_grad)
    edited = make_target(lambda x: -0.5 * jnp.sum(x**2) / 1.5, jnp.zeros(2),
                         name="std-normal-2d")
    with pytest.raises(ValueError, match="target_digest"):
        run(edited, hmc, HMCParams(0.3, 4), num_super_transitions=4, gradient_budget=40,
            num_chains=2, progress=False, output_dir=out, resume=True, checkpoint_every=1,
            objective=esjd_per_grad)
    with pytest.raises(ValueError, match="objective"):
        _run(out, num_super_transitions=4, checkpoint_every=1, resume=True)


@pytest.mark.parametrize("damage, message", [
    (lambda out: _truncate(out / io.CHECKPOINT), "checkpoint.npz' is damaged"),
    (lambda out: _truncate(io.chunk_path(out, 0)), "000000.npz' is damaged"),
    (lambda out: np.save(out / io.CHECKPOINT, np.array([{}], dtype=object)),
     "checkpoint.npz' is damaged"),
    (lambda out: (out / io.CONFIG).write_text("{\"fingerp"), "config.json' is damaged"),
])
def test_damaged_run_folders_give_one_clear_error(tmp_path, damage, message):
    out = tmp_path / "run"
    _stopped(out)
    if "000000" in message:
        import shutil

        shutil.copy(io.chunk_path(out, 0), tmp_path / "c.npz")
    damage(out)
    if (out / (io.CHECKPOINT + ".npy")).exists():
        (out / (io.CHECKPOINT + ".npy")).replace(out / io.CHECKPOINT)
    with pytest.raises(ValueError, match=message) as info:
        _run(out, num_super_transitions=4, checkpoint_every=1, resume=True)
    assert "allow_pickle" not in str(info.value)


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_resume_with_a_config_missing_a_key_is_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*MANUAL, "--out", str(out)]) == 0
    config = __import__("json").loads((out / io.CONFIG).read_text())
    del config["cli"]["chains"]
    io.write_json(out / io.CONFIG, config)
    capsys.readouterr()
    assert main(["resume", str(out)]) == 2
    err = capsys.readouterr().err
    assert "missing chains" in err and "Traceback" not in err


def test_a_truncated_draws_file_is_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    _run(out)
    _truncate(out / io.DRAWS)
    assert main(["summary", str(out)]) == 2
    err = capsys.readouterr().err
    assert "draws.nc' is damaged" in err and err.count("\n") == 1


# 5. one clear line, never a traceback (exit 2); --debug shows it -------------------------

def test_a_user_target_raising_anything_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "user_target_r13.py").write_text(
        "def make():\n    raise RuntimeError('the data file is half written')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    args = [a if a != "gauss-2d-v1" else "user_target_r13:make" for a in MANUAL]
    out = tmp_path / "never"
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "RuntimeError: the data file is half written" in err
    assert "Traceback" not in err and err.count("\n") == 1 and not out.exists()
    assert main([*args, "--out", str(out), "--debug"]) == 2
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--seed", str(2**70)], "--seed: must be"),
    (["--inverse-mass", "BROKEN"], "damaged"),
])
def test_bad_values_are_one_line(tmp_path, capsys, extra, message):
    broken = tmp_path / "m.npy"
    np.save(broken, np.ones(2))
    _truncate(broken)
    extra = [str(broken) if e == "BROKEN" else e for e in extra]
    assert main([*MANUAL, *extra, "--out", str(tmp_path / "never")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs permissions")
def test_a_read_only_parent_folder_is_one_line(tmp_path, capsys):
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        assert main([*MANUAL, "--out", str(parent / "run")]) == 2
    finally:
        parent.chmod(0o755)
    err = capsys.readouterr().err
    assert "PermissionError" in err and err.count("\n") == 1


# 6. draws stream to disk; one copy in the run folder; the buffer cap holds -----------------

def test_a_finished_run_folder_keeps_one_copy_of_the_draws(tmp_path):
    out = tmp_path / "run"
    on_disk = _run(out, num_super_transitions=5, checkpoint_every=2, num_warmup=1)
    in_memory = _run(None, num_super_transitions=5, checkpoint_every=2, num_warmup=1)
    assert not (out / io.CHUNKS).exists() and (out / io.DRAWS).exists()
    np.testing.assert_array_equal(on_disk.idata.posterior.x.values,
                                  in_memory.idata.posterior.x.values)
    np.testing.assert_array_equal(on_disk.idata.warmup_sample_stats.lp.values,
                                  in_memory.idata.warmup_sample_stats.lp.values)


def test_a_stopped_run_holds_no_draws_in_memory(tmp_path):
    from adaptmc.run.transitions import SuperTransitions

    seen = []
    original = SuperTransitions.save

    def spy(self, state):
        original(self, state)
        seen.append(len(state.chunks) + len(state.pending))

    SuperTransitions.save = spy
    try:
        _run(tmp_path / "run", num_super_transitions=6, checkpoint_every=2)
    finally:
        SuperTransitions.save = original
    assert seen and max(seen) == 0


def test_the_draw_buffer_cap_holds_after_rounding():
    from adaptmc.run.loop import SuperTransitionLoop

    big = make_target(lambda x: -0.5 * jnp.sum(x**2), jnp.zeros(1000))
    # 24 MiB of draws wanted, a power of two above it is 32 MiB: fine; 200 MiB -> 256 MiB ok
    loop = SuperTransitionLoop(big, hmc, 4, max_kept=5000)
    assert loop.bytes_per_draw * loop.capacity(5000) <= loop.MAX_BUFFER_BYTES
    # 160 MiB of draws: rounding would make 256 MiB + ... over the cap -> exact size instead
    loop = SuperTransitionLoop(big, hmc, 4, max_kept=5243)
    for kept in (1, 5243, 9000, 20000):
        capacity = loop.capacity(kept)
        assert capacity >= kept
        assert loop.bytes_per_draw * capacity <= max(loop.MAX_BUFFER_BYTES,
                                                     loop.bytes_per_draw * kept)


# 7. a failing bench cell is recorded; caches know the target's definition ----------------

def test_a_failing_bench_cell_is_recorded_and_the_others_finish(tmp_path, monkeypatch):
    from adaptmc_lab import bench
    from adaptmc_lab.bench.samplers import SAMPLERS

    def boom(target, seed, config):
        raise RuntimeError("worker ran out of patience")

    monkeypatch.setitem(SAMPLERS, "boom", boom)
    # 100 warm-up iterations: after 20, NUTS's step diverged on every draw (ESS 0)
    config = bench.BenchConfig(num_chains=2, num_warmup=100, num_samples=40)
    cells = [bench.Cell("std-normal-10d", "boom", 0),
             bench.Cell("std-normal-10d", "blackjax-nuts", 0)]
    results = bench.run_cells(cells, config, tmp_path / "bench", retries=1)
    assert results[0]["failed"] and "RuntimeError: worker ran out" in results[0]["error"]
    assert results[1]["min_ess"] > 0
    bench.write_report(results, tmp_path / "bench", "adaptmc-lab bench")
    text = (tmp_path / "bench" / "results.md").read_text()
    assert "Failed cells" in text and "worker ran out of patience" in text
    assert "| std-normal-10d | blackjax-nuts" in text
    assert not (tmp_path / "bench" / "cells" / f"{cells[0].key}.json").exists()


def test_a_cached_cell_of_an_edited_target_is_computed_again(tmp_path):
    from dataclasses import asdict

    from adaptmc_lab import bench

    config = bench.BenchConfig(num_chains=2, num_warmup=100, num_samples=40)
    cell = bench.Cell("std-normal-10d", "blackjax-nuts", 0)
    (tmp_path / "cells").mkdir()
    stale = {"cell": cell._asdict(), "key": cell.key, "config": asdict(config),
             "target_digest": "from-an-older-target", "min_ess": -1.0}
    io.write_json(tmp_path / "cells" / f"{cell.key}.json", stale)
    logged = []
    (result,) = bench.run_cells([cell], config, tmp_path, log=logged.append)
    assert not any(line.startswith("cached") for line in logged)
    assert result["min_ess"] > 0 and result["target_digest"] != "from-an-older-target"
    (again,) = bench.run_cells([cell], config, tmp_path, log=logged.append)
    assert any(line.startswith("cached") for line in logged)


def test_a_cached_reference_of_an_edited_target_is_not_reused(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from adaptmc.targets import gaussian
    from adaptmc_lab.bench import references

    def exact_draws(target, seed, *, num_chains, num_warmup, num_draws):
        """Exact draws in place of the NUTS run (two compilations of NUTS, 15 s): what is
        tested is the cache's key; the NUTS reference itself is tested in test_bench.py
        (`test_nuts_reference_recovers_a_gaussian_and_is_cached`)."""
        rng = np.random.default_rng(seed)
        sd = np.sqrt(np.diag(target.info["cov"]))
        draws = target.info["mean"] + sd * rng.standard_normal((num_chains, num_draws, 2))
        return SimpleNamespace(positions=draws)

    monkeypatch.setattr("adaptmc_lab.baselines.nuts", exact_draws)
    kwargs = dict(num_chains=4, num_warmup=200, num_draws=500, seed=1, directory=tmp_path)
    first = references.nuts_reference(gaussian(np.zeros(2), np.ones(2), name="g"), **kwargs)
    edited = references.nuts_reference(gaussian(np.full(2, 3.0), np.ones(2), name="g"),
                                       **kwargs)
    assert len(list(tmp_path.glob("reference-g-*.json"))) == 2
    assert np.all(np.abs(edited.mean - first.mean) > 2)


def test_the_summary_in_blocks_matches_the_whole_summary():
    import warnings

    from adaptmc.diagnostics import posterior_array, summary_in_blocks, summary_table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz as az
    x = np.random.default_rng(13).normal(size=(2, 50, 3, 2))
    idata = az.from_dict(posterior={"a": x, "b": x[..., 0, 0], "c": x[..., 0]})
    blocks = summary_in_blocks(idata, max_bytes=1000)
    whole = summary_table(*posterior_array(idata))
    assert list(blocks.index) == list(whole.index)
    assert blocks["judged"].all()  # parameters all: none a generated quantity
    np.testing.assert_allclose(blocks[list(whole.columns)].values, whole.values)
