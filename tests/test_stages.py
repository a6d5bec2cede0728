"""One driver with stages (`adaptmc.run.run`): the default recipe's warm-up is a stage of the
run, checkpointed and resumed like tuning and sampling; `run` takes few parameters; the
path from the command line to a kernel step is short."""

import inspect
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from adaptmc.api import run_plan
from adaptmc.recipes import build
from adaptmc.run import run
from adaptmc.targets import get_target

SRC = Path(__file__).resolve().parents[1] / "src"
OPTIONS = dict(warmup_steps=150, tuning=3, draws=60)  # at most 15 warm-up chunks


def _plan(target):
    return build("adaptive-hmc", target, mams="off", **OPTIONS)  # HMC tuning, NUTS


def _draws(result):
    return np.asarray(result.idata.posterior.to_array().values)


def _warmup_chunks(result) -> int:
    """Chunks the run's warm-up ran: to where its final window started (it settled, or the
    schedule's), then the final window if it ran (not before MAMS)."""
    settled = json.loads(result.idata.attrs["warmup"])["settled"]
    final = settled["max_steps"] - settled["planned_final_start"]
    return (settled["final_start"] + final * settled["final_window"]) // 10


@pytest.mark.parametrize("into_tuning", [False, True])
def test_a_default_run_stopped_in_its_warmup_or_tuning_resumes_bit_identically(
        tmp_path, into_tuning):
    """Stopped (as if killed) after 7 of its warm-up chunks, or 2 super-transitions into
    tuning, the resumed run's draws, rewards and gradient count are the uninterrupted run's,
    and the warm-up is not run again."""
    target = get_target("std-normal-10d")
    kwargs = dict(chains=2, seed=3, progress=False, checkpoint_every=5)
    whole = run_plan(target, _plan(target), **kwargs)
    chunks = _warmup_chunks(whole)
    assert 7 < chunks <= 15
    stop_after = chunks + 2 if into_tuning else 7
    out = tmp_path / "run"
    partial = run_plan(target, _plan(target), output_dir=out, stop_after=stop_after, **kwargs)
    assert partial.idata is None and (out / "warmup.npz").is_file()
    assert (out / "checkpoint.npz").is_file() == into_tuning
    target = get_target("std-normal-10d")  # a new process would build it again
    resumed = run_plan(target, _plan(target), output_dir=out, resume=True, **kwargs)
    np.testing.assert_array_equal(_draws(resumed), _draws(whole))
    np.testing.assert_array_equal(resumed.idata.tuning.reward.values,
                                  whole.idata.tuning.reward.values)
    assert resumed.num_grads == whole.num_grads
    assert json.loads(resumed.idata.attrs["warmup"])["step_size"] == \
        json.loads(whole.idata.attrs["warmup"])["step_size"]


def test_a_damaged_warmup_checkpoint_is_one_clear_error(tmp_path):
    target = get_target("std-normal-10d")
    out = tmp_path / "run"
    run_plan(target, _plan(target), chains=2, progress=False, output_dir=out, stop_after=3,
             checkpoint_every=2)
    (out / "warmup.npz").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="warmup.npz.*damaged"):
        run_plan(target, _plan(target), chains=2, progress=False, output_dir=out,
                 resume=True, checkpoint_every=2)


def test_run_takes_at_most_eight_parameters():
    assert len(inspect.signature(run).parameters) <= 8


KERNEL_STEPS = (("adaptmc/kernels/", "step"), ("adaptmc/adaptation/compact_nuts.py", "nuts_step"))


@pytest.mark.slow  # 12 s
def test_from_the_command_line_to_a_kernel_step_at_most_six_frames(tmp_path, monkeypatch):
    """A profile hook on a tiny real run of the default recipe: between `cmd_sample` and
    every kernel step traced (the warm-up's NUTS and the sampling HMC), at most 6 frames of
    adaptmc's own code (every program traced in the caller's thread: the hook is the
    thread's)."""
    from adaptmc.cli import main
    from adaptmc.targets import base

    monkeypatch.setattr(base, "COMPILE_AHEAD", False)

    depths = {}

    def hook(frame, event, arg):
        if event != "call":
            return
        path = _kernel_step(frame)
        if path is not None:
            depths.setdefault(path, []).append(_adaptmc_frames(frame.f_back))

    sys.setprofile(hook)
    try:
        code = main(["sample", "--target", "std-normal-10d", "--out", str(tmp_path / "run"),
                     "--chains", "2", "--warmup-steps", "150", "--tuning", "3", "--draws", "40",
                     "--mams", "off", "--no-progress", "--no-compile-cache"])
    finally:
        sys.setprofile(None)
    assert code == 0
    assert set(depths) == {path for path, _ in KERNEL_STEPS}
    worst = {path: max(d for d in found if d is not None) for path, found in depths.items()}
    assert all(d <= 6 for d in worst.values()), worst


def _kernel_step(frame) -> str | None:
    """Which of `KERNEL_STEPS` ``frame`` runs (None: none)."""
    code = frame.f_code
    for path, name in KERNEL_STEPS:
        if code.co_name == name and path in code.co_filename.replace(os.sep, "/"):
            return path
    return None


def _adaptmc_frames(frame) -> int | None:
    """adaptmc frames from ``frame`` up to `cmd_sample` (excluded); None when the call
    does not come from `cmd_sample` or comes from within a kernel step (a ``step`` of an
    integrator)."""
    count = 0
    while frame is not None:
        if _kernel_step(frame) is not None:
            return None
        name = frame.f_code.co_filename.replace(os.sep, "/")
        if frame.f_code.co_name == "cmd_sample":
            return count
        if "/src/adaptmc/" in name:
            count += 1
        frame = frame.f_back
    return None


@pytest.mark.slow
def test_a_cli_run_killed_in_its_warmup_resumes_bit_identically(tmp_path):
    """SIGKILL an `adaptmc sample` of the default recipe in the middle of its warm-up (after
    its first warm-up checkpoint), `adaptmc resume` it: the draws are those of an
    uninterrupted run of the same seed."""
    args = ["--target", "std-normal-10d", "--chains", "2", "--seed", "4", "--warmup-steps", "400",
            "--tuning", "3", "--draws", "60", "--no-progress", "--checkpoint-every", "2"]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    cli = [sys.executable, "-c", "import sys; from adaptmc.cli import main; sys.exit(main())"]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    subprocess.run([*cli, "sample", *args, "--out", str(whole)], env=env, check=True,
                   capture_output=True)
    proc = subprocess.Popen([*cli, "sample", *args, "--out", str(killed)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while not (killed / "warmup.npz").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # a few chunks later: killed between two warm-up checkpoints
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "checkpoint.npz").exists(), "killed too late: the warm-up had ended"
    resumed = subprocess.run([*cli, "resume", str(killed)], env=env, capture_output=True,
                             text=True)
    assert resumed.returncode == 0, (sorted(p.name for p in killed.iterdir()), resumed.stderr)
    import arviz as az

    a = az.from_netcdf(whole / "draws.nc").posterior.to_array().values
    b = az.from_netcdf(killed / "draws.nc").posterior.to_array().values
    np.testing.assert_array_equal(a, b)
