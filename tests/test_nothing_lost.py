"""Nothing lost, part three: a resume of a run killed late, a full disk at any write, a run
folder one process owns, checks before the work, damage found without the sidecar, Ctrl-C
as one line, and messages that name the problem."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import time

import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc import io
from adaptmc.cli import main
from adaptmc.run import netcdf, store

MANUAL = ["sample", "--recipe", "manual", "--target", "gauss-2d-v1", "--no-progress",
          "--super-transitions", "4", "--warmup", "1", "--budget", "40", "--chains", "2",
          "--checkpoint-every", "2"]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def posterior(folder) -> np.ndarray:
    return np.asarray(store.read_draws(folder).posterior["x"])


def _draws_run(out, **kwargs):
    """A ``--draws``-like run: frozen after one super-transition, then as many as it takes
    to keep 120 draws per chain (the counters after a resume come from the saved record)."""
    from adaptmc.kernels import hmc
    from adaptmc.kernels.hmc import HMCParams
    from adaptmc.run import run
    from adaptmc.targets import make_target

    target = make_target(lambda x: -0.5 * jnp.sum(x**2), jnp.zeros(2), name="std-normal-2d")
    return run(target, hmc, HMCParams(0.3, 4), num_super_transitions=12, gradient_budget=40,
               num_chains=2, num_warmup=1, adapt_until=1, num_draws=120, progress=False,
               output_dir=out, checkpoint_every=2, **kwargs)


def test_a_draws_run_stopped_late_resumes_bit_identical(tmp_path):
    """Case 1: the checkpoint after a resume of a ``--draws`` run held NumPy integers
    (``Object of type int64 is not JSON serializable``)."""
    reference = _draws_run(tmp_path / "reference")
    out = tmp_path / "run"
    _draws_run(out, stop_after=5)
    _draws_run(out, resume=True, stop_after=4)  # stopped again, at super-transition 9
    resumed = _draws_run(out, resume=True)
    np.testing.assert_array_equal(np.asarray(resumed.idata.posterior["x"]),
                                  np.asarray(reference.idata.posterior["x"]))


# 2. a full disk at any write is one line with the space needed; resume finishes -----------

@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "run"
    assert main([*MANUAL, "--out", str(out)]) == 0
    return out


def _full_at(monkeypatch, call: int) -> None:
    """The ``call``-th checkpoint write (1-based) finds the disk full."""
    write, calls = io.atomic_savez, {"n": 0}

    def savez(path, arrays):
        calls["n"] += 1
        if calls["n"] == call:
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(path, arrays)

    monkeypatch.setattr(io, "atomic_savez", savez)


def test_a_full_disk_at_a_mid_run_checkpoint_is_one_line_and_resumes(
        tmp_path, monkeypatch, capsys, reference):
    out = tmp_path / "run"
    _full_at(monkeypatch, 2)
    capsys.readouterr()
    assert main([*MANUAL, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the disk is full" in err and "MB are free" in err
    assert "super-transition 4" in err and f"adaptmc resume {out}" in err
    monkeypatch.undo()
    assert main(["resume", str(out), "--no-progress"]) == 0
    np.testing.assert_array_equal(posterior(out), posterior(reference))


def test_a_full_disk_at_the_first_checkpoint_writes_nothing(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    _full_at(monkeypatch, 1)
    capsys.readouterr()
    assert main([*MANUAL, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the disk is full" in err and "nothing was written" in err
    assert str(out) in err and ".new-" not in err and list(tmp_path.iterdir()) == []


def test_a_full_disk_at_the_summary_keeps_the_draws_in_one_line(tmp_path, monkeypatch,
                                                                capsys, reference):
    from adaptmc import posterior_plots

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(posterior_plots, "write_posterior_plots", full)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main([*MANUAL, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "its draws are in" in err and "the disk is full" in err
    np.testing.assert_array_equal(posterior(out), posterior(reference))


# 3. a run folder one process owns ----------------------------------------------------------

HOLDER = textwrap.dedent("""
    import sys, time
    from adaptmc.run import lock
    lock.acquire(sys.argv[1])
    print("held", flush=True)
    time.sleep(120)
""")


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock of ``tmp_path / 'run'``."""
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    process = subprocess.Popen([sys.executable, str(script), str(tmp_path / "run")],
                               stdout=subprocess.PIPE, text=True, env=ENV)
    assert process.stdout.readline().strip() == "held"
    yield process
    process.kill()
    process.wait()


@pytest.mark.parametrize("command", ["sample", "resume"])
def test_a_second_process_on_a_held_folder_is_refused_at_once(tmp_path, holder, capsys,
                                                               reference, command):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(reference, out)
    before = sorted(p.name for p in out.iterdir())
    argv = [*MANUAL, "--out", str(out), "--force"] if command == "sample" else \
        ["resume", str(out), "--no-progress"]
    started = time.perf_counter()
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert time.perf_counter() - started < 5  # before any warm-up or compilation
    assert err.count("\n") == 1 and f"in use by process {holder.pid}" in err
    assert "started" in err and sorted(p.name for p in out.iterdir()) == before


def test_the_api_is_refused_too(tmp_path, holder):
    from adaptmc.run.lock import FolderBusy

    with pytest.raises(FolderBusy, match=f"process {holder.pid}"):
        _draws_run(tmp_path / "run")


def test_a_stale_lock_of_a_killed_process_is_taken_over(tmp_path, holder, reference):
    from adaptmc.run import lock

    holder.kill()  # as kill -9: its lock file stays, naming a dead process
    holder.wait()
    assert lock.lock_path(tmp_path / "run").is_file()
    assert main([*MANUAL, "--out", str(tmp_path / "run")]) == 0
    np.testing.assert_array_equal(posterior(tmp_path / "run"), posterior(reference))
    assert not lock.lock_path(tmp_path / "run").exists()  # removed by its last holder


def test_a_lock_is_held_once_per_process_and_removed_at_the_end(tmp_path):
    from adaptmc.run import lock

    with lock.owning(tmp_path / "run"):
        with lock.owning(tmp_path / "run"):
            assert lock.lock_path(tmp_path / "run").is_file()
        assert lock.lock_path(tmp_path / "run").is_file()
    assert list(tmp_path.iterdir()) == []


# 4. checks before the work: writable, not a mount point ------------------------------------

def test_a_mount_point_is_refused_before_the_warm_up(tmp_path, monkeypatch, capsys, reference):
    import shutil

    empty, out = tmp_path / "empty", tmp_path / "mnt"
    empty.mkdir()
    shutil.copytree(reference, out)
    before = sorted(p.name for p in tmp_path.iterdir())
    monkeypatch.setattr(io, "_is_mount_point", lambda path: path in (empty, out))
    for folder, extra in ((empty, []), (out, ["--force"])):
        capsys.readouterr()
        assert main(["sample", "--target", "gauss-2d-v1", "--out", str(folder), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is a mount point" in err and str(folder / "run") in err
        assert sorted(p.name for p in tmp_path.iterdir()) == before  # no .mnt.old-* left


def test_a_read_only_place_is_refused_before_the_warm_up(tmp_path, monkeypatch, capsys):
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(io.tempfile, "mkstemp", read_only)
    capsys.readouterr()
    started = time.perf_counter()
    assert main(["sample", "--target", "gauss-2d-v1", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert time.perf_counter() - started < 5
    assert err.count("\n") == 1 and "Read-only file system" in err and "choose a folder" in err


# 5. damage found without the sidecar; a deleted draws.nc named -----------------------------

def test_a_flipped_byte_is_found_with_the_sidecar_deleted(tmp_path, reference, capsys):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    assert json.loads((copy / io.CONFIG).read_text())["draws_sha256"] == \
        netcdf.sha256(copy / io.DRAWS)
    (copy / netcdf.CHECKSUM).unlink()
    data = bytearray((copy / io.DRAWS).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / io.DRAWS).write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["summary", str(copy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "draws.nc" in err and "checksum" in err


@pytest.mark.parametrize("command", ["resume", "summary"])
def test_a_finished_run_whose_draws_were_deleted_says_so(tmp_path, reference, capsys,
                                                         command):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    (copy / io.DRAWS).unlink()
    capsys.readouterr()
    assert main([command, str(copy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "had finished, but its draws.nc was deleted" in err
    assert "chunks" not in err


def test_the_api_names_a_deleted_draws_file(tmp_path):
    out = tmp_path / "run"
    _draws_run(out)
    (out / io.DRAWS).unlink()
    with pytest.raises(ValueError, match="had finished, but its draws.nc was deleted"):
        _draws_run(out, resume=True)


def test_a_config_of_an_empty_object_is_named(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / io.CONFIG).write_text("{}")
    capsys.readouterr()
    assert main(["resume", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no fingerprint" in err and "command line" not in err


# 7. messages that name the problem ---------------------------------------------------------

def test_a_garbage_zip_of_stan_data_is_named(tmp_path):
    from adaptmc.targets.stan.model import data_json

    garbage = tmp_path / "garbage.json.zip"
    garbage.write_bytes(b"not a zip at all")
    with pytest.raises(ValueError, match="garbage.json.zip.*cannot be read"):
        data_json(str(garbage))
    with pytest.raises(ValueError, match="data must be a dict.*got a int"):
        data_json(5)


def test_a_target_returning_a_pair_without_numbers_is_named(tmp_path, monkeypatch, capsys):
    (tmp_path / "pair_r39.py").write_text(
        "def make():\n    return (lambda x: -x @ x, 'not an array')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    capsys.readouterr()
    assert main(["sample", "--target", "pair_r39:make", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "initial_params are not numbers: 'not an array'" in err
    sys.modules.pop("pair_r39", None)


@pytest.mark.parametrize(("options", "message"), [
    ({"data": 5}, "data must be a dict, JSON text or the path"),
    ({"recipe": "manual", "inverse_mass": "abc"}, "inverse_mass must be a number or an array"),
    ({"recipe": "manual", "tuner": "gp-ucb", "box": "step_size=1:2"},
     "box must be a dict .*command line.s form"),
    ({"recipe": "manual", "tuner": "gp-ucb", "box": {"step_size": (2, 1)}}, "low < high"),
    ({"recipe": "manual", "tuner": "grid", "grid": "num_leapfrog=5"}, "grid must be a dict"),
])
def test_the_api_names_a_bad_structured_value(options, message):
    import adaptmc
    from adaptmc.options import OptionError

    with pytest.raises(OptionError, match=message):
        adaptmc.sample("gauss-2d-v1", progress=False, **options)


# 6. Ctrl-C: one line at every moment, never swallowed --------------------------------------

GC_CALLBACK_INTERRUPT = """
import gc, sys, time
from adaptmc.cli.interrupts import deferring_sigint, handle_sigint
seen = []
def callback(phase, info):
    if phase == "start" and not seen:
        seen.append(phase)
        handle_sigint(2, sys._getframe())  # a signal arriving here: must not raise
gc.callbacks.append(callback)
try:
    with deferring_sigint():
        gc.collect()
        for _ in range(1000):  # the deferred interrupt arrives 50 ms later
            time.sleep(0.01)
    print("lost")
except KeyboardInterrupt:
    print("raised", seen)
"""


def test_ctrl_c_inside_a_gc_callback_is_not_lost():
    """In a process of its own (a signal reaches the main thread, where pytest's workers
    may not run the test)."""
    done = subprocess.run([sys.executable, "-c", GC_CALLBACK_INTERRUPT], capture_output=True,
                          text=True, timeout=120, env=ENV)
    assert done.stdout.strip() == "raised ['start']", done.stdout + done.stderr


def test_ctrl_c_at_the_final_write_is_one_line(tmp_path, monkeypatch, capsys):
    import gc

    import h5netcdf

    def interrupted(tmp, idata, describe):
        tmp.write_bytes(b"\0" * 100)
        half = h5netcdf.File.__new__(h5netcdf.File)  # as one interrupted while it opened
        half._filename = str(tmp)
        raise KeyboardInterrupt

    monkeypatch.setattr(netcdf, "_write_netcdf", interrupted)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main([*MANUAL, "--out", str(out)]) == 130
    gc.collect()
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "Exception ignored" not in err
    assert f"adaptmc resume {out}" in err and not (out / "draws.nc.tmp").exists()


def test_ctrl_c_after_a_new_run_finished_does_not_mention_a_previous_one(tmp_path, monkeypatch,
                                                                        capsys):
    from adaptmc import posterior_plots

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(posterior_plots, "write_posterior_plots", interrupt)
    out = tmp_path / "killme"
    capsys.readouterr()
    assert main([*MANUAL, "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "previous run" not in err and "the run had finished" in err


@pytest.mark.slow
def test_ctrl_c_while_the_command_imports_is_one_line(tmp_path):
    import signal

    command = os.path.join(os.path.dirname(sys.executable), "adaptmc")
    for delay in (0.3, 0.8, 1.5):
        process = subprocess.Popen([command, "targets"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=ENV)
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        assert "Traceback" not in err and err.strip().count("\n") <= 0, err


def test_a_ctrl_c_python_would_drop_is_sent_again_and_other_unraisables_are_shown():
    """`adaptmc._start`'s unraisable hook: a KeyboardInterrupt Python drops ("Exception
    ignored", as inside importlib's module-lock callback) reaches SIGINT's handler again
    shortly after; any other goes to Python's own hook."""
    import signal
    import types

    from adaptmc import _start

    got = []
    previous = signal.signal(signal.SIGINT, lambda *_: got.append(time.monotonic()))
    try:
        shown = []
        original, sys.__unraisablehook__ = sys.__unraisablehook__, shown.append
        try:
            _start._send_dropped_interrupt_again(types.SimpleNamespace(exc_value=ValueError()))
        finally:
            sys.__unraisablehook__ = original
        assert len(shown) == 1 and not got
        tick = time.monotonic()
        _start._send_dropped_interrupt_again(
            types.SimpleNamespace(exc_value=KeyboardInterrupt()))
        while not got and time.monotonic() - tick < 5:
            time.sleep(0.01)
        assert got and got[0] - tick >= 0.04
    finally:
        signal.signal(signal.SIGINT, previous)


# 8. a log density returning NaN mid-run is named ------------------------------------------

def test_a_log_density_returning_nan_is_named_in_the_warning():
    from adaptmc.diagnostics import convergence_warnings, non_finite_energies
    from adaptmc.kernels import hmc
    from adaptmc.kernels.hmc import HMCParams
    from adaptmc.run import run
    from adaptmc.targets import make_target

    target = make_target(lambda x: jnp.where(x[0] > 1.0, jnp.nan, -0.5 * jnp.sum(x**2)),
                         jnp.zeros(2), name="nan-region")
    result = run(target, hmc, HMCParams(0.5, 4), num_super_transitions=4, gradient_budget=80,
                 num_chains=2, num_warmup=1, progress=False, seed=3)
    count = non_finite_energies(result.idata)
    assert count > 0 and count == int(result.idata.sample_stats["diverging"].values.sum())
    warning = [w for w in convergence_warnings(result.idata) if "divergent" in w][0]
    assert f"{count} of them where the log density or its gradient was NaN" in warning


# 9. the lab's commands refuse nonsense in one line, writing nothing -----------------------

@pytest.mark.parametrize(("argv", "message"), [
    (["bench", "--seeds", "0"], "--seeds: must be an integer in [1,"),
    (["bench", "--chains", "0"], "--chains: must be an integer in [1, 65536]"),
    (["bench", "--budget", "0"], "--budget: must be an integer in [1,"),
    (["bench", "--workers", "-1"], "--workers: must be an integer in [0,"),
    (["bench", "--targets", ""], "--targets: must be comma-separated names"),
    (["bench", "--samplers", "a,,b"], "--samplers: must be comma-separated names"),
    (["reproduce", "dexter", "--seed", "-1"], "--seed: must be an integer in [0,"),
    (["bogus"], "invalid choice: 'bogus'"),
])
def test_the_lab_refuses_nonsense_in_one_line(tmp_path, capsys, argv, message):
    from adaptmc_lab.cli import main as lab

    out = tmp_path / "out"
    capsys.readouterr()
    assert lab([*argv, *([] if argv == ["bogus"] else ["--out", str(out)])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "usage:" not in err
    assert not out.exists()


def test_adaptmc_refuses_a_bad_command_line_in_one_line(capsys):
    assert main(["sample", "--target", "x", "--out", "y", "--chains", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage:" not in err


# the slow tier: a real kill -9, a real small filesystem, a real mount point ---------------

DRAWS = ["sample", "--recipe", "manual", "--target", "gauss-2d-v1", "--no-progress",
         "--draws", "4000", "--warmup", "1", "--adapt-until", "1", "--budget", "40",
         "--chains", "2", "--checkpoint-every", "2"]


@pytest.mark.slow
def test_a_draws_run_killed_late_resumes_bit_identical(tmp_path):
    """Case 1 as the user met it: ``kill -9`` of a ``--draws`` run far into it, then
    ``adaptmc resume`` (whose second checkpoint wrote NumPy integers)."""
    import signal

    reference = tmp_path / "reference"
    assert main([*DRAWS, "--out", str(reference)]) == 0
    out = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "adaptmc", *DRAWS, "--out", str(out)],
                               env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while len(list((out / io.CHUNKS).glob("*.npz"))) < 60 and time.time() < deadline:
        assert process.poll() is None, process.stderr.read()
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (out / io.DRAWS).exists()
    assert main(["resume", str(out), "--no-progress"]) == 0
    np.testing.assert_array_equal(posterior(out), posterior(reference))


def _mounted(folder, options: str) -> bool:
    folder.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                          capture_output=True).returncode == 0


needs_mount = pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0,
                                 reason="mounting a tmpfs needs root")

FILLER = textwrap.dedent("""
    import os, sys, threading, time
    from pathlib import Path
    out = Path(sys.argv[sys.argv.index("--out") + 1])
    watch, delay = os.environ["FILL_WHEN"], float(os.environ["FILL_DELAY"])

    def fill():  # another program fills the disk once the watched file appears
        while not (out / watch).exists():
            time.sleep(0.002)
        time.sleep(delay)
        try:
            with open(out.parent / "filler", "wb") as fh:
                while True:
                    fh.write(b"0" * 65536)
        except OSError:
            pass

    threading.Thread(target=fill, daemon=True).start()
    from adaptmc.cli import main
    sys.exit(main())
""")


@pytest.mark.slow
@needs_mount
@pytest.mark.parametrize(("watch", "delay"), [("draws.nc.tmp", 0.0), ("draws.nc.tmp", 0.3),
                                              ("draws.nc.tmp", 1.0), ("checkpoint.npz", 0.0)])
def test_a_real_disk_filling_during_a_write_is_one_line_and_resumes(tmp_path, watch, delay):
    """On a 20 MB tmpfs, another program fills the disk once ``draws.nc.tmp`` (or the first
    checkpoint) appears: one line with the space needed, never a crash; once the space is
    freed, the resume finishes with the draws of an uninterrupted run."""
    disk = tmp_path / "disk"
    if not _mounted(disk, "size=20m"):
        pytest.skip("cannot mount a tmpfs here")
    try:
        (tmp_path / "filler.py").write_text(FILLER)
        argv = ["sample", "--recipe", "manual", "--target", "gauss-2d-v1", "--no-progress",
                "--super-transitions", "10", "--budget", "2000", "--num-leapfrog", "1",
                "--checkpoint-every", "2"]
        done = subprocess.run([sys.executable, str(tmp_path / "filler.py"), *argv, "--out",
                               str(disk / "run")], capture_output=True, text=True,
                              env={**ENV, "FILL_WHEN": watch, "FILL_DELAY": str(delay)})
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and "the disk is full" in done.stderr
        assert "MB" in done.stderr and "Traceback" not in done.stderr
        (disk / "filler").unlink()
        assert main(["resume", str(disk / "run"), "--no-progress"]) == 0
        assert main([*argv, "--out", str(tmp_path / "reference")]) == 0
        np.testing.assert_array_equal(posterior(disk / "run"),
                                      posterior(tmp_path / "reference"))
    finally:
        subprocess.run(["umount", str(disk)], check=False)


@pytest.mark.slow
@needs_mount
def test_a_real_mount_point_and_a_read_only_one_are_refused_before_work(tmp_path, reference,
                                                                        capsys):
    import shutil

    mount, read_only = tmp_path / "mnt", tmp_path / "ro"
    if not _mounted(mount, "size=20m") or not _mounted(read_only, "size=1m,ro"):
        pytest.skip("cannot mount a tmpfs here")
    try:
        for child in reference.iterdir():  # a finished run at the mount point
            (shutil.copytree if child.is_dir() else shutil.copy2)(child, mount / child.name)
        for out, extra, message in ((mount, ["--force"], "is a mount point"),
                                    (read_only / "run", [], "Read-only file system")):
            before = sorted(p.name for p in tmp_path.iterdir())
            capsys.readouterr()
            started = time.perf_counter()
            assert main([*MANUAL, "--out", str(out), *extra]) == 2
            err = capsys.readouterr().err
            assert time.perf_counter() - started < 10 and err.count("\n") == 1, err
            assert message in err and sorted(p.name for p in tmp_path.iterdir()) == before
        assert main(["summary", str(mount)]) == 0  # the finished run untouched
    finally:
        subprocess.run(["umount", str(mount)], check=False)
        subprocess.run(["umount", str(read_only)], check=False)
