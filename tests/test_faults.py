"""Faults: a full disk at the final ``draws.nc`` write is one clear error that keeps the
checkpoint and resumes bit-identically; a log density that raises is reported once with the
user's frame and the values saved; stale temporaries are cleaned on resume."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from adaptmc import io
from adaptmc.cli import main
from adaptmc.run import store

MANUAL = ["sample", "--recipe", "manual", "--target", "gauss-2d-v1", "--no-progress",
          "--super-transitions", "4", "--warmup", "1", "--budget", "40", "--chains", "2",
          "--checkpoint-every", "2"]


def posterior(folder) -> np.ndarray:
    return np.asarray(store.read_draws(folder).posterior["x"])


def test_a_full_disk_at_the_final_write_is_one_line_and_resumes(tmp_path, monkeypatch,
                                                                 capsys):
    reference = tmp_path / "reference"
    assert main([*MANUAL, "--out", str(reference)]) == 0
    write = store._write_netcdf

    def full(tmp, idata, describe):
        tmp.write_bytes(b"\0" * 1000)  # a partial file, as a real write leaves
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store, "_write_netcdf", full)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main([*MANUAL, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the disk is full" in err and "MB" in err
    assert f"adaptmc resume {out}" in err
    assert sorted(p.name for p in out.iterdir()) == [".adaptmc", "checkpoint.npz", "chunks",
                                                     "config.json"]
    monkeypatch.setattr(store, "_write_netcdf", write)
    assert main(["resume", str(out), "--no-progress"]) == 0
    np.testing.assert_array_equal(posterior(out), posterior(reference))


def test_too_little_free_space_is_refused_before_writing(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    monkeypatch.setattr(store, "_draws_bytes", lambda run_dir: 10**15)
    assert main([*MANUAL, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "not enough free space" in err and "MB more" in err
    assert not (out / io.DRAWS).exists() and (out / io.CHECKPOINT).exists()


SHIM = textwrap.dedent("""
    import sys
    from adaptmc import options
    from adaptmc.run import store
    options.free_disk = lambda path: 10**12   # the up-front estimate would refuse the run
    store._draws_bytes = lambda run_dir: 0     # and the check before the final write
    from adaptmc.cli import main
    sys.exit(main())
""")


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0, reason="needs mount")
def test_a_real_full_disk_at_the_final_write_does_not_crash(tmp_path):
    """On a 14 MB tmpfs the chunks fit and ``draws.nc`` does not: HDF5 fails mid-write."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=14m", "tmpfs", str(disk)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (tmp_path / "shim.py").write_text(SHIM)
        argv = [sys.executable, str(tmp_path / "shim.py"), "sample", "--recipe", "manual",
                "--target", "gauss-2d-v1", "--no-progress", "--super-transitions", "20",
                "--budget", "2000", "--num-leapfrog", "1", "--out", str(disk / "run")]
        done = subprocess.run(argv, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and "the disk is full" in done.stderr
        assert sorted(p.name for p in (disk / "run").iterdir()) == [
            ".adaptmc", "checkpoint.npz", "chunks", "config.json"]
    finally:
        subprocess.run(["umount", str(disk)], check=False)
