"""A full disk at every write of a run is one line saying what is kept, where, and how many MB
are needed and free (`adaptmc.disk`); nothing half written is left where a resume reads, and
the resume finishes with the draws of an uninterrupted run. JAX's persistent-cache warnings
never reach the command line's user."""

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
from adaptmc.run import netcdf, store
from test_faults import RAISER, _raiser_run

MANUAL = ["sample", "--recipe", "manual", "--target", "gauss-2d-v1", "--no-progress",
          "--super-transitions", "4", "--warmup", "1", "--budget", "40", "--chains", "2",
          "--checkpoint-every", "2"]
WARMUP = ["sample", "--target", "gauss-2d-v1", "--no-progress", "--chains", "2"]


def full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def posterior(folder) -> np.ndarray:
    return np.asarray(store.read_draws(folder).posterior["x"])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "run"
    assert main([*MANUAL, "--out", str(out)]) == 0
    return out


def one_line(capsys, *needles) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the disk is full" in err, err
    assert "MB are free" in err and "it needs about" in err, err
    for needle in needles:
        assert needle in err, err
    return err


def test_a_full_disk_at_the_config_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(io, "_fill", full)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main([*MANUAL, "--out", str(out)]) == 2
    one_line(capsys, "config.json", "nothing was written", str(out))
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_at_the_warm_up_checkpoint_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(io, "atomic_savez", full)  # warmup.npz is the run's first checkpoint
    out = tmp_path / "run"
    capsys.readouterr()
    assert main([*WARMUP, "--out", str(out)]) == 2
    one_line(capsys, "warm-up's checkpoint", "nothing was written", str(out))
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_at_the_draws_checksum_resumes(tmp_path, monkeypatch, capsys, reference):
    write = io.atomic_write_bytes

    def checksum_full(path, data, *args):
        if path.name == netcdf.CHECKSUM:
            full()
        return write(path, data, *args)

    monkeypatch.setattr(io, "atomic_write_bytes", checksum_full)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main([*MANUAL, "--out", str(out)]) == 2
    one_line(capsys, "draws.nc", f"adaptmc resume {out}")
    assert sorted(p.name for p in out.iterdir()) == [".adaptmc", "checkpoint.npz", "chunks",
                                                     "config.json"]
    monkeypatch.undo()
    assert main(["resume", str(out), "--no-progress"]) == 0
    np.testing.assert_array_equal(posterior(out), posterior(reference))


def test_a_full_disk_at_a_plot_is_finished_by_resume(tmp_path, monkeypatch, capsys, reference):
    """The second plot finds the disk full after writing part of its image: no part is left,
    no summary.txt; the resume writes the summary and the plots from the draws, running
    nothing again."""
    from matplotlib.figure import Figure

    savefig, calls = Figure.savefig, []

    def second_full(fig, fh, **kwargs):
        calls.append(fh)
        if len(calls) == 2:
            fh.write(b"\x89PNG")
            raise OSError(errno.ENOSPC, "No space left on device")
        return savefig(fig, fh, **kwargs)

    monkeypatch.setattr(Figure, "savefig", second_full)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main([*MANUAL, "--out", str(out)]) == 2
    one_line(capsys, f"its draws are in {out}/draws.nc", f"adaptmc resume {out}")
    assert sorted(p.name for p in out.iterdir() if p.is_file() and p.suffix != ".png") == [
        ".adaptmc", "checkpoint.npz", "config.json", "draws.nc", "draws.sha256"]
    assert [p.name for p in out.glob("*.png")] == ["trace.png"]
    monkeypatch.undo()
    draws = (out / io.DRAWS).stat()
    assert main(["resume", str(out), "--no-progress"]) == 0
    assert "robust min ESS" in capsys.readouterr().out
    assert (out / io.DRAWS).stat().st_mtime_ns == draws.st_mtime_ns  # read, not run again

    def table(folder):
        text = (folder / "summary.txt").read_text().splitlines()
        return [line for line in text if "wall" not in line and "compile" not in line]

    assert table(out) == table(reference)
    assert sorted(p.name for p in out.glob("*.png")) == \
        sorted(p.name for p in reference.glob("*.png"))
    np.testing.assert_array_equal(posterior(out), posterior(reference))
    assert main(["resume", str(out)]) == 2  # now finished: nothing to resume
    assert "has finished" in capsys.readouterr().err


def test_a_full_disk_at_the_lock_file_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(os, "ftruncate", full)  # only the lock file is truncated
    out = tmp_path / "run"
    capsys.readouterr()
    assert main([*MANUAL, "--out", str(out)]) == 2
    one_line(capsys, "lock file", "nothing was written")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def raiser(tmp_path, monkeypatch):
    """test_faults's log density that raises once asked to (``CALLS["fail_at"]``)."""
    import importlib

    (tmp_path / "raiser_r47.py").write_text(RAISER)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("raiser_r47")
    sys.modules.pop("raiser_r47", None)


def test_a_full_disk_at_the_failure_record_tells_the_values_in_the_line(tmp_path, raiser,
                                                                        monkeypatch):
    """The log density raised and its record (failure.json) finds the disk full: the one
    error is still the log density's, with its values in the line."""
    from adaptmc.run.faults import FAILURE, TargetError

    _raiser_run(raiser, tmp_path / "reference")
    raiser.CALLS.update(n=0, fail_at=raiser.CALLS["n"] // 2)
    write = io.write_json

    def failure_full(path, obj, *args, **kwargs):
        if os.path.basename(path) == FAILURE:
            full()
        return write(path, obj, *args, **kwargs)

    monkeypatch.setattr(io, "write_json", failure_full)
    out = tmp_path / "run"
    with pytest.raises(TargetError) as caught:
        _raiser_run(raiser, out)
    message = str(caught.value)
    assert message.startswith("the target's log density raised RuntimeError")
    assert f"failure.json could not be written in {str(out)!r}, the disk is full" in message
    assert "MB are free" in message and "called with [[" in message
    assert not (out / FAILURE).exists() and (out / io.CHECKPOINT).is_file()


def test_a_full_disk_at_the_posterior_predictive_draws_leaves_no_part(tmp_path, monkeypatch):
    import xarray as xr

    from adaptmc.cli.outputs import write_predictive

    def half(self, path, *args, **kwargs):
        with open(path, "wb") as fh:
            fh.write(b"\x89HDF" * 1000)
        full()

    group = xr.Dataset({"y": (("chain", "draw"), np.zeros((2, 50)))})
    monkeypatch.setattr(xr.Dataset, "to_netcdf", half)
    path = tmp_path / "posterior_predictive.nc"
    with pytest.raises(io.WriteError, match="the disk is full.*MB are free.*adaptmc predict"):
        write_predictive(group, path)
    assert list(tmp_path.iterdir()) == []


def test_the_summary_and_plots_are_shared_as_open_makes_them(reference):
    mask = os.umask(0)
    os.umask(mask)
    for name in ("summary.txt", "trace.png"):
        assert (reference / name).stat().st_mode & 0o777 == 0o666 & ~mask


CACHE_FULL = textwrap.dedent("""
    import errno, sys
    from jax._src import compilation_cache

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    compilation_cache.put_executable_and_time = full  # every cache write finds a full disk
    from adaptmc.cli import main
    sys.exit(main())
""")


@pytest.mark.slow  # 14-17 s
def test_compile_cache_write_warnings_do_not_reach_the_terminal(tmp_path):
    """A full cache folder: the run compiles as without a cache, and says nothing of it."""
    (tmp_path / "shim.py").write_text(CACHE_FULL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
           "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, str(tmp_path / "shim.py"), *MANUAL, "--out",
                           str(tmp_path / "run")], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr
