"""A refused or failed run never deletes or changes a finished run folder, and leaves no
stub: the new run is written to a staged sibling that replaces the old folder only once its
first checkpoint exists."""

from __future__ import annotations

import hashlib

import pytest

from adaptmc.cli import main

SMALL = ["--target", "gauss-2d-v1", "--no-progress", "--super-transitions", "3",
         "--warmup", "1", "--chains", "2"]
GRADIENT_ADAPTIVE = ["sample", "--recipe", "gradient-adaptive", *SMALL, "--budget", "40"]
MANUAL = ["sample", "--recipe", "manual", *SMALL]


def snapshot(folder) -> dict:
    """Every file below ``folder`` (hidden ones included) and its bytes' digest."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    parent = tmp_path_factory.mktemp("finished")
    assert main([*GRADIENT_ADAPTIVE, "--out", str(parent / "run")]) == 0
    return parent / "run"


BAD = [
    [*GRADIENT_ADAPTIVE, "--keep-adapting", "-1"],
    [*GRADIENT_ADAPTIVE, "--keep-adapting", "nan"],
    [*GRADIENT_ADAPTIVE, "--keep-adapting", "inf"],
    [*MANUAL, "--budget", "1000000000000000"],
]


@pytest.mark.parametrize("command", BAD, ids=["-1", "nan", "inf", "budget"])
def test_a_refused_run_with_force_keeps_the_finished_run(finished, command, capsys):
    before = snapshot(finished)
    assert {"draws.nc", "checkpoint.npz", "summary.txt", "config.json"} <= set(before)
    assert main([*command, "--out", str(finished), "--force"]) == 2
    assert "error" in capsys.readouterr().err
    assert snapshot(finished) == before
    assert [p.name for p in finished.parent.iterdir()] == ["run"]  # no staged sibling left


@pytest.mark.parametrize("command", BAD, ids=["-1", "nan", "inf", "budget"])
def test_a_refused_run_leaves_no_stub(tmp_path, command):
    assert main([*command, "--out", str(tmp_path / "new")]) == 2
    assert list(tmp_path.iterdir()) == []


def test_a_run_failing_before_its_first_checkpoint_keeps_the_old_one(finished, monkeypatch):
    """Whatever fails after the checks (here: the first checkpoint's write) the old folder
    stays as it was until the new run's first checkpoint is in place."""
    from adaptmc.run import store

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    before = snapshot(finished)
    monkeypatch.setattr(store, "write_checkpoint", full_disk)
    assert main([*GRADIENT_ADAPTIVE, "--out", str(finished), "--force"]) == 2
    assert snapshot(finished) == before
    assert [p.name for p in finished.parent.iterdir()] == ["run"]


def test_force_replaces_once_the_new_run_is_checkpointed(tmp_path):
    out = tmp_path / "run"
    assert main([*GRADIENT_ADAPTIVE, "--out", str(out)]) == 0
    before = snapshot(out)
    assert main([*GRADIENT_ADAPTIVE, "--seed", "1", "--out", str(out), "--force"]) == 0
    after = snapshot(out)
    assert after.keys() == before.keys() and after["draws.nc"] != before["draws.nc"]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_ctrl_c_before_the_first_checkpoint_advises_no_resume(tmp_path, monkeypatch, capsys):
    from adaptmc.run.transitions import SuperTransitions

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(SuperTransitions, "step", interrupt)
    out = tmp_path / "new"
    assert main([*MANUAL, "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "adaptmc resume" not in err and "nothing was written" in err
    assert not out.exists() and list(tmp_path.iterdir()) == []
