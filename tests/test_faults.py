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
from adaptmc.run import netcdf, store

MANUAL = ["sample", "--recipe", "manual", "--target", "gauss-2d-v1", "--no-progress",
          "--super-transitions", "4", "--warmup", "1", "--budget", "40", "--chains", "2",
          "--checkpoint-every", "2"]


def posterior(folder) -> np.ndarray:
    return np.asarray(store.read_draws(folder).posterior["x"])


def test_a_full_disk_at_the_final_write_is_one_line_and_resumes(tmp_path, monkeypatch,
                                                                 capsys):
    reference = tmp_path / "reference"
    assert main([*MANUAL, "--out", str(reference)]) == 0
    write = netcdf._write_netcdf

    def full(tmp, idata, describe):
        tmp.write_bytes(b"\0" * 1000)  # a partial file, as a real write leaves
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(netcdf, "_write_netcdf", full)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main([*MANUAL, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the disk is full" in err and "MB" in err
    assert f"adaptmc resume {out}" in err
    assert sorted(p.name for p in out.iterdir()) == [".adaptmc", "checkpoint.npz", "chunks",
                                                     "config.json"]
    monkeypatch.setattr(netcdf, "_write_netcdf", write)
    assert main(["resume", str(out), "--no-progress"]) == 0
    np.testing.assert_array_equal(posterior(out), posterior(reference))


def test_too_little_free_space_is_refused_before_writing(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    monkeypatch.setattr(netcdf, "_draws_bytes", lambda run_dir: 10**15)
    assert main([*MANUAL, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "not enough free space" in err and "MB more" in err
    assert not (out / io.DRAWS).exists() and (out / io.CHECKPOINT).exists()


SHIM = textwrap.dedent("""
    import sys
    from adaptmc import options
    from adaptmc.run import netcdf
    options.free_disk = lambda path: 10**12   # the up-front estimate would refuse the run
    netcdf._draws_bytes = lambda run_dir: 0     # and the check before the final write
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


RAISER = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np
    from adaptmc.targets import make_target

    CALLS = {"n": 0, "fail_at": None}

    def density(x):
        CALLS["n"] += 1
        if CALLS["fail_at"] is not None and CALLS["n"] >= CALLS["fail_at"]:
            raise RuntimeError("the solver did not converge")
        return np.asarray(-0.5 * np.sum(np.asarray(x) ** 2), dtype=x.dtype)

    @jax.custom_jvp
    def logdensity(x):
        return jax.pure_callback(density, jax.ShapeDtypeStruct((), x.dtype), x,
                                 vmap_method="sequential")

    @logdensity.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return logdensity(x), jnp.dot(-x, t)

    def make():
        return make_target(logdensity, jnp.zeros(2), name="raiser")
""")


@pytest.fixture
def raiser(tmp_path, monkeypatch):
    (tmp_path / "raiser_r31.py").write_text(RAISER)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("raiser_r31")
    yield module
    sys.modules.pop("raiser_r31", None)


def _raiser_run(module, out, **kwargs):
    from adaptmc.kernels import hmc
    from adaptmc.kernels.hmc import HMCParams
    from adaptmc.run import run

    return run(module.make(), hmc, HMCParams(0.5, 3), num_super_transitions=4,
               gradient_budget=30, num_chains=2, progress=False, output_dir=out,
               checkpoint_every=1, **kwargs)


def test_a_log_density_that_raises_is_one_error_with_the_values_saved(tmp_path, raiser):
    from adaptmc.run.faults import FAILURE, TargetError

    reference = _raiser_run(raiser, tmp_path / "reference")
    calls = raiser.CALLS["n"]
    raiser.CALLS.update(n=0, fail_at=calls // 2)  # in the middle of the run
    out = tmp_path / "run"
    with pytest.raises(TargetError) as caught:
        _raiser_run(raiser, out)
    message = str(caught.value)
    assert message.startswith("the target's log density raised RuntimeError: the solver did "
                              "not converge at ") and "raiser_r31.py" in message
    assert "in density" in message and str(out / FAILURE) in message
    saved = __import__("json").loads((out / FAILURE).read_text())
    assert saved["function"] == "density" and np.asarray(saved["values"]).shape == (1, 2)
    assert saved["super_transition"] >= 1 and (out / io.CHECKPOINT).is_file()
    raiser.CALLS.update(fail_at=None)  # the model fixed: the resume skips nothing
    resumed = _raiser_run(raiser, out, resume=True)
    np.testing.assert_array_equal(np.asarray(resumed.idata.posterior["x"]),
                                  np.asarray(reference.idata.posterior["x"]))


def test_the_command_line_tells_a_raising_log_density_in_one_line(tmp_path, raiser, capsys):
    raiser.CALLS.update(n=0, fail_at=1)
    out = tmp_path / "run"
    argv = ["sample", "--recipe", "manual", "--target", "raiser_r31:make", "--no-progress",
            "--super-transitions", "3", "--budget", "30", "--chains", "2", "--out", str(out)]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "raiser_r31.py" in err and "CpuCallback" not in err
    assert "nothing was written" in err and "called with [[" in err and not out.exists()


def test_stale_temporaries_are_removed_on_resume(tmp_path):
    import jax.numpy as jnp

    from adaptmc.kernels import hmc
    from adaptmc.kernels.hmc import HMCParams
    from adaptmc.run import run
    from adaptmc.targets import make_target

    target = make_target(lambda x: -0.5 * jnp.sum(x**2), jnp.zeros(2), name="std-normal-2d")
    out = tmp_path / "run"

    def go(**kwargs):
        return run(target, hmc, HMCParams(0.3, 4), num_super_transitions=4, gradient_budget=40,
                   num_chains=2, progress=False, output_dir=out, checkpoint_every=1, **kwargs)

    go(stop_after=2)  # as if killed after two checkpoints
    stale = [out / ".checkpoint.npz.abc123.tmp", out / "draws.nc.tmp",
             out / "chunks" / ".000001.npz.x.tmp"]
    for path in stale:
        path.write_bytes(b"partial")
    go(resume=True)
    assert not [p for p in stale if p.exists()] and (out / io.DRAWS).is_file()


def test_a_warmup_that_ends_where_the_density_is_infinite_does_not_blame_the_start():
    """Positions a recipe's warm-up ended at (``prior_grads > 0``) that the run finds
    non-finite are named as such, not as the chains' initial positions."""
    import jax.numpy as jnp
    import pytest

    from adaptmc.kernels import HMCParams, hmc
    from adaptmc.run import run
    from adaptmc.targets import make_target

    target = make_target(lambda x: jnp.where(x[0] > 5.0, jnp.inf, -0.5 * jnp.sum(x ** 2)),
                         jnp.zeros(2))
    ended = jnp.asarray([[6.0, 0.0], [0.0, 0.0]])  # chain 0 ended in the +inf region
    with pytest.raises(ValueError, match="at the end of the warm-up of chain 0"):
        run(target, hmc, HMCParams(step_size=0.1, num_leapfrog=2), num_super_transitions=1,
            gradient_budget=10, num_chains=2, initial_positions=ended, prior_grads=100,
            progress=False)
