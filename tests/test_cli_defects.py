"""The small defects of the command line: each one a test."""

from __future__ import annotations

import time

from adaptmc.cli import main

MANUAL = ["sample", "--recipe", "manual", "--target", "gauss-2d-v1", "--no-progress",
          "--super-transitions", "3", "--warmup", "1", "--budget", "40"]


def test_zero_chains_are_refused_before_the_warm_up(tmp_path, capsys):
    started = time.perf_counter()
    assert main(["sample", "--target", "gauss-2d-v1", "--chains", "0",
                 "--out", str(tmp_path / "never")]) == 2
    out, err = capsys.readouterr()
    assert "--chains: must be an integer in [1," in err and "warm-up" not in out
    assert time.perf_counter() - started < 5 and not list(tmp_path.iterdir())


def test_one_chain_runs_with_a_note_and_no_library_warnings(tmp_path, capsys, caplog):
    assert main([*MANUAL, "--chains", "1", "--out", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert err.count("R-hat compares chains and needs at least 2") == 1
    for leak in ("All-NaN", "RuntimeWarning", "Shape validation", "UserWarning"):
        assert leak not in err and leak not in caplog.text, leak


def test_float32_with_a_module_turning_on_float64_is_refused(tmp_path, monkeypatch, capsys):
    (tmp_path / "x64_model_r31.py").write_text(
        "import jax\nimport jax.numpy as jnp\njax.config.update('jax_enable_x64', True)\n"
        "def make():\n    return (lambda x: -0.5 * jnp.sum(x**2), jnp.zeros(2))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "never"
    argv = [a if a != "gauss-2d-v1" else "x64_model_r31:make" for a in MANUAL]
    assert main([*argv, "--float32", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--float32" in err and "jax_enable_x64" in err and not out.exists()


def test_a_module_not_on_the_path_says_where_to_run_from(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = [a if a != "gauss-2d-v1" else "my_model_nowhere:make" for a in MANUAL]
    assert main([*argv, "--out", str(tmp_path / "never")]) == 2
    err = capsys.readouterr().err
    assert "no module 'my_model_nowhere'" in err and "run from the folder that holds" in err
    assert "PYTHONPATH" in err and err.count("\n") == 1


def test_resuming_a_finished_run_says_so_before_any_work(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*MANUAL, "--out", str(out)]) == 0
    capsys.readouterr()
    started = time.perf_counter()
    assert main(["resume", str(out)]) == 2
    out_text, err = capsys.readouterr()
    assert "has finished" in err and "warm-up" not in out_text
    assert time.perf_counter() - started < 5
