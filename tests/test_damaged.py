"""Damaged run folders: resume and summary check what they read and name the file and the
field that is wrong."""

from __future__ import annotations

import json

import pytest

from adaptmc import io
from adaptmc.cli import main
from adaptmc.run import netcdf

SMALL = ["--no-progress", "--super-transitions", "4", "--warmup", "1", "--budget", "40",
         "--chains", "2", "--checkpoint-every", "2"]


def sample(out, target="gauss-2d-v1", *extra) -> int:
    return main(["sample", "--recipe", "manual", "--target", target, *SMALL, *extra,
                 "--out", str(out)])


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("finished") / "run"
    assert sample(out) == 0
    return out


def unfinished(out, monkeypatch, target="gauss-2d-v1"):
    """A run folder with its checkpoints and chunks and no draws.nc (its final write
    failed), ready to resume."""
    def fail(tmp, idata, describe):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(netcdf, "_write_netcdf", fail)
        assert sample(out, target) == 2
    assert (out / io.CHECKPOINT).is_file() and not (out / io.DRAWS).exists()
    return out


def error_of(argv, capsys) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_summary_of_a_missing_folder_says_it_does_not_exist(tmp_path, capsys):
    err = error_of(["summary", str(tmp_path / "missing")], capsys)
    assert "does not exist" in err and "not finished" not in err


def test_rows_must_be_positive(finished, capsys):
    assert "--rows: must be an integer >= 1" in error_of(
        ["summary", str(finished), "--rows", "-1"], capsys)


def test_a_flipped_byte_in_the_draws_is_detected(tmp_path, finished, capsys):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(finished, copy)
    data = bytearray((copy / io.DRAWS).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / io.DRAWS).write_bytes(bytes(data))
    err = error_of(["summary", str(copy)], capsys)
    assert "draws.nc" in err and "checksum" in err


def test_a_draws_file_without_a_posterior_is_named(tmp_path, capsys):
    import numpy as np
    import xarray as xr

    folder = tmp_path / "run"
    folder.mkdir()
    xr.Dataset({"lp": (("chain", "draw"), np.zeros((2, 3)))}).to_netcdf(
        folder / io.DRAWS, group="sample_stats", engine="h5netcdf")
    err = error_of(["summary", str(folder)], capsys)
    assert "has no posterior group" in err and "sample_stats" in err


@pytest.mark.parametrize("other, message", [
    ("std-normal-10d", "'chain/0' has shape (2, 10), this run's is (2, 2)"),
    ("gauss-2d-v2", "was written by another run"),
])
def test_a_checkpoint_of_another_target_is_named(tmp_path, monkeypatch, capsys, other,
                                                 message):
    mine = unfinished(tmp_path / "mine", monkeypatch)
    theirs = unfinished(tmp_path / "theirs", monkeypatch, target=other)
    (mine / io.CHECKPOINT).write_bytes((theirs / io.CHECKPOINT).read_bytes())
    err = error_of(["resume", str(mine), "--no-progress"], capsys)
    assert "checkpoint.npz" in err and message in err


def test_a_stray_file_in_chunks_is_named(tmp_path, monkeypatch, capsys):
    out = unfinished(tmp_path / "run", monkeypatch)
    (out / io.CHUNKS / "notes.npz").write_bytes(b"my notes")
    err = error_of(["resume", str(out), "--no-progress"], capsys)
    assert "notes.npz" in err and "not a chunk" in err


@pytest.mark.parametrize("field, value, message", [
    ("step_size", "abc", "cli.step_size must be a number"),
    ("chains", 0, "cli.chains must be an integer in [1,"),
    ("recipe", "nope", "cli.recipe 'nope' is not a recipe"),
    ("float32", "yes", "cli.float32 must be true or false"),
])
def test_bad_config_values_are_named(tmp_path, monkeypatch, capsys, field, value, message):
    out = unfinished(tmp_path / "run", monkeypatch)
    config = json.loads((out / io.CONFIG).read_text())
    config["cli"][field] = value
    (out / io.CONFIG).write_text(json.dumps(config))
    err = error_of(["resume", str(out), "--no-progress"], capsys)
    assert "config.json" in err and message in err
