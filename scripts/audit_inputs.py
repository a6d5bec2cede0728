"""Audit: the classes of bad input and faults, run against the command line, the Python API
and the lab's commands; prints pass/fail counts per class (exit status 1 if any fails). The
bad values of every option come from its declaration (`adaptmc.options.invalid_examples`:
the library's options, and the lab's, declared with the same `adaptmc.options.Option`).

    PYTHONPATH=src python scripts/audit_inputs.py [--verbose]

Every check asserts one clear error line (or the documented result) and that nothing was
lost or left behind: a finished run folder byte-identical, no stub folder, no temporary.
"""

from __future__ import annotations

import contextlib
import hashlib
import io as text_io
import json
import math
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import adaptmc  # noqa: E402
from adaptmc import options  # noqa: E402
from adaptmc.cli import main  # noqa: E402
from adaptmc.declarations import declarations, recipe_declarations  # noqa: E402
from adaptmc.options import OptionError, flag  # noqa: E402
from adaptmc.recipes import RECIPES, recipe_options  # noqa: E402
from adaptmc.run import netcdf  # noqa: E402

SMALL = ["--target", "gauss-2d-v1", "--no-progress", "--super-transitions", "4",
         "--warmup", "1", "--chains", "2", "--budget", "40", "--checkpoint-every", "2"]
MANUAL = ["sample", "--recipe", "manual", *SMALL]
GRADIENT_ADAPTIVE = ["sample", "--recipe", "gradient-adaptive", *SMALL]
TARGET = (lambda x: -0.5 * jax.numpy.sum(x**2), jax.numpy.zeros(2))
RESULTS: dict[str, list] = defaultdict(list)


def cli(argv) -> tuple[int, str]:
    """``adaptmc ARGV`` in this process: ``(exit status, stderr)``."""
    err = text_io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(text_io.StringIO()):
        code = main([str(a) for a in argv])
    return code, err.getvalue()


def check(kind: str, name: str, passed: bool, detail: str = "") -> None:
    RESULTS[kind].append((name, bool(passed), detail))


def refused(kind, name, argv, words, folder: Path) -> None:
    """``argv`` exits 2 with one line holding ``words`` and leaves ``folder`` empty."""
    code, err = cli(argv)
    ok = code == 2 and err.count("\n") == 1 and words in err and not list(folder.iterdir())
    check(kind, name, ok, err.strip())


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def recipe_taking(name: str) -> str:
    recipe_names = {o.name for o in recipe_declarations()}
    if name not in recipe_names:
        return "manual"
    return next(r for r in ("manual", *RECIPES) if name in recipe_options(r))


def audit_data_loss(root: Path) -> None:
    kind = "1 finished run kept (--force with bad values)"
    run = root / "finished" / "run"
    assert cli([*GRADIENT_ADAPTIVE, "--out", run])[0] == 0
    before = snapshot(run)
    for extra in (["--keep-adapting", "-1"], ["--keep-adapting", "nan"],
                  ["--keep-adapting", "inf"], ["--budget", "1000000000000000"],
                  ["--warmup-steps", "1000000000"], ["--chains", "0"]):
        command = GRADIENT_ADAPTIVE if "--keep-adapting" in extra else MANUAL
        argv = [*command, *extra, "--out", run, "--force"]
        if "--warmup-steps" in extra:
            argv = ["sample", "--target", "gauss-2d-v1", *extra, "--out", run, "--force"]
        code, err = cli(argv)
        same = snapshot(run) == before and [p.name for p in run.parent.iterdir()] == ["run"]
        check(kind, " ".join(extra), code == 2 and same and flag(extra[0][2:]) in err, err)
        new = root / "fresh"
        new.mkdir()
        refused("2 no stub folder (without --force)", " ".join(extra),
                [a if a != run else new / "run" for a in argv if a != "--force"],
                extra[0], new)
        new.rmdir()


def audit_declared(root: Path) -> None:
    """Every declared option, every invalid example: CLI and API."""
    folder = root / "declared"
    folder.mkdir()
    for option in declarations().values():
        for value in options.invalid_examples(option):
            text = "abc" if value == "2" else repr(value) if isinstance(value, float) \
                else str(value)
            argv = ["sample", "--recipe", recipe_taking(option.name), "--target",
                    "gauss-2d-v1", "--no-progress", "--out", folder / "never",
                    f"{flag(option.name)}={text}"]
            refused("3 every CLI option x bad values", f"{flag(option.name)}={text}", argv,
                    flag(option.name), folder)
            if not option.api:
                continue
            try:
                adaptmc.sample(TARGET, recipe=recipe_taking(option.name), progress=False,
                               output_dir=folder / "never", **{option.name: value})
                check("4 every adaptmc.sample keyword x bad values",
                      f"{option.name}={value!r}", False, "accepted")
            except OptionError as err:
                check("4 every adaptmc.sample keyword x bad values",
                      f"{option.name}={value!r}",
                      str(err).startswith(option.name + " ") and not list(folder.iterdir()),
                      str(err))


def audit_api_objects(root: Path) -> None:
    import numpyro
    import numpyro.distributions as dist

    def regression(x, y):
        b = numpyro.sample("b", dist.Normal(0, 1))
        numpyro.sample("y", dist.Normal(b * x, 1), obs=y)

    cases = [(dict(chains=2.5), "chains"), (dict(chains="2"), "chains"),
             (dict(chains=0), "chains"), (dict(chains=-1), "chains"),
             (dict(seed="0"), "seed"), (dict(draws=math.nan), "draws"),
             (dict(objective=3, recipe="manual"), "objective"),
             (dict(budget="50", recipe="manual"), "budget"), (dict(init="zeros"), "init"),
             (dict(init={"x": 0.0}), "init"), (dict(recipe="nope"), "recipe")]
    for keywords, name in cases:
        try:
            adaptmc.sample(TARGET, progress=False, **keywords)
            check("5 API objects and types", repr(keywords), False, "accepted")
        except OptionError as err:
            check("5 API objects and types", repr(keywords), str(err).startswith(name),
                  str(err))
    try:
        adaptmc.sample(regression, progress=False)
    except ValueError as err:
        check("5 API objects and types", "NumPyro model without data",
              "called without its data" in str(err), str(err))


def audit_damaged(root: Path) -> None:
    kind = "6 damaged folders and summary"
    run = root / "finished" / "run"
    code, err = cli(["summary", root / "missing"])
    check(kind, "summary of a missing folder", code == 2 and "does not exist" in err, err)
    code, err = cli(["summary", run, "--rows", "-1"])
    check(kind, "--rows -1", code == 2 and "--rows" in err, err)
    flipped = root / "flipped"
    shutil.copytree(run, flipped)
    data = bytearray((flipped / "draws.nc").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (flipped / "draws.nc").write_bytes(bytes(data))
    code, err = cli(["summary", flipped])
    check(kind, "a flipped byte in draws.nc", code == 2 and "checksum" in err, err)
    unfinished = _unfinished(root / "stray")
    (unfinished / "chunks" / "notes.npz").write_bytes(b"notes")
    code, err = cli(["resume", unfinished, "--no-progress"])
    check(kind, "stray chunks/notes.npz", code == 2 and "notes.npz" in err, err)
    unfinished = _unfinished(root / "config")
    config = json.loads((unfinished / "config.json").read_text())
    config["cli"]["step_size"] = "abc"
    (unfinished / "config.json").write_text(json.dumps(config))
    code, err = cli(["resume", unfinished, "--no-progress"])
    check(kind, 'cli.step_size = "abc"', code == 2 and "cli.step_size" in err, err)
    mine, theirs = _unfinished(root / "mine"), _unfinished(root / "theirs", "gauss-2d-v2")
    (mine / "checkpoint.npz").write_bytes((theirs / "checkpoint.npz").read_bytes())
    code, err = cli(["resume", mine, "--no-progress"])
    check(kind, "a checkpoint of another target", code == 2 and "another run" in err, err)


def _unfinished(out: Path, target: str = "gauss-2d-v1") -> Path:
    """A resumable run folder: its final write failed (a full disk)."""
    write = netcdf._write_netcdf

    def full(tmp, idata, describe):
        raise OSError(28, "No space left on device")

    netcdf._write_netcdf = full
    try:
        cli([*[a if a != "gauss-2d-v1" else target for a in MANUAL], "--out", out])
    finally:
        netcdf._write_netcdf = write
    return out


def audit_faults(root: Path) -> None:
    kind = "7 faults"
    out = _unfinished(root / "full")
    entries = sorted(p.name for p in out.iterdir())
    check(kind, "full disk at the final write keeps the checkpoint",
          entries == [".adaptmc", "checkpoint.npz", "chunks", "config.json"], str(entries))
    code, err = cli(["resume", out, "--no-progress"])
    check(kind, "resume once space is freed", code == 0 and (out / "draws.nc").is_file(), err)
    interrupted = root / "interrupted"
    from adaptmc.run.transitions import SuperTransitions

    step = SuperTransitions.step

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    SuperTransitions.step = ctrl_c  # the first super-transition of the run's stage
    try:
        code, err = cli([*MANUAL, "--out", interrupted])
    finally:
        SuperTransitions.step = step
    check(kind, "Ctrl-C before the first checkpoint",
          code == 130 and "adaptmc resume" not in err and not interrupted.exists(), err)
    (root / "raising_audit.py").write_text(RAISING)
    sys.path.insert(0, str(root))
    try:
        raising = root / "raising"
        argv = [a if a != "gauss-2d-v1" else "raising_audit:make" for a in MANUAL]
        code, err = cli([*argv, "--out", raising])
    finally:
        sys.path.remove(str(root))
    saved = raising / "failure.json"
    check(kind, "a log density that raises mid-run",
          code == 2 and err.count("\n") == 1 and "raising_audit.py" in err
          and "CpuCallback" not in err and saved.is_file(), err)


RAISING = """
import jax, jax.numpy as jnp, numpy as np
from adaptmc.targets import make_target

def density(x):
    if abs(float(x[0])) > 1.0:
        raise FloatingPointError("the ODE solver diverged")
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
    return make_target(logdensity, jnp.zeros(2), name="raising")
"""


def audit_api_structured(root: Path) -> None:
    """The API's structured values (box, grid, inverse_mass, data) in the wrong form."""
    kind = "8 API structured values"
    folder = root / "structured"
    folder.mkdir()
    cases = [(dict(data=5), "data"), (dict(data=[1, 2]), "data"),
             (dict(recipe="manual", inverse_mass="abc"), "inverse_mass"),
             (dict(recipe="manual", inverse_mass=[1.0, math.nan]), "inverse_mass"),
             (dict(recipe="manual", tuner="gp-ucb", box="step_size=1:2"), "box"),
             (dict(recipe="manual", tuner="gp-ucb", box={"step_size": (2, 1)}), "box"),
             (dict(recipe="manual", tuner="gp-ucb", box={"step_size": "a:b"}), "box"),
             (dict(recipe="manual", tuner="grid", grid="num_leapfrog=5"), "grid"),
             (dict(recipe="manual", tuner="grid", grid={"num_leapfrog": "5,10"}), "grid")]
    for keywords, name in cases:
        try:
            adaptmc.sample(TARGET, progress=False, output_dir=folder / "never", **keywords)
            check(kind, repr(keywords), False, "accepted")
        except OptionError as err:
            check(kind, repr(keywords), str(err).startswith(name + " ")
                  and not list(folder.iterdir()), str(err))


def lab_cli(argv) -> tuple[int, str]:
    """``adaptmc-lab ARGV`` in this process: ``(exit status, stderr)``."""
    from adaptmc_lab.cli import main as lab_main

    err = text_io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(text_io.StringIO()):
        code = lab_main([str(a) for a in argv])
    return code, err.getvalue()


def lab_typed_flags() -> list[tuple[str, str, object]]:
    """``(command, flag, parse)`` of every lab flag whose type is declared (an integer
    ``Option`` on ``parse.option``, or a list of names)."""
    import argparse

    from adaptmc_lab.cli import build_lab_parser

    out = []
    parser = build_lab_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command, sub in commands.choices.items():
        for action in sub._actions:
            if action.option_strings and callable(action.type) and \
                    hasattr(action.type, "option"):
                out.append((command, action.option_strings[0], action.type))
    return out


def audit_lab(root: Path) -> None:
    """Every declared flag of the lab's commands x its declaration's bad values: one line,
    nothing written into --out."""
    kind = "9 lab commands x bad values"
    folder = root / "lab"
    folder.mkdir()
    for command, name, parse in lab_typed_flags():
        head = ["reproduce", "dexter"] if command == "reproduce" else [command]
        values = ["", ",", "a,,b"] if parse.option is None else \
            options.invalid_examples(parse.option)
        for value in values:
            # "2": the API's wrong type, a valid number on a command line (it would run)
            text = "abc" if value == "2" else repr(value) if isinstance(value, float) \
                else str(value)
            code, err = lab_cli([*head, f"{name}={text}", "--out", folder / "never"])
            check(kind, f"{command} {name}={text}", code == 2 and err.count("\n") == 1
                  and name in err and "usage:" not in err and not list(folder.iterdir()), err)
    code, err = lab_cli(["bogus"])
    check(kind, "an unknown command", code == 2 and err.count("\n") == 1, err)


def audit_nothing_lost(root: Path) -> None:
    """The faults of a run folder one process owns, damage without the sidecar, a full disk
    mid-run, and messages that name the problem."""
    import subprocess

    from adaptmc import io as run_io
    from adaptmc.run import lock

    kind = "10 one owner, damage, full disk, messages"
    run = root / "finished" / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from adaptmc.run import lock; "
         "lock.acquire(sys.argv[1]); print('held', flush=True); time.sleep(60)", str(run)],
        stdout=subprocess.PIPE, text=True, env={**__import__("os").environ,
                                                 "PYTHONPATH": ":".join(sys.path)})
    try:
        holder.stdout.readline()
        for argv in ([*MANUAL, "--out", run, "--force"], ["resume", run]):
            code, err = cli(argv)
            check(kind, f"{argv[0]} on a folder another process holds", code == 2 and
                  f"process {holder.pid}" in err and err.count("\n") == 1, err)
    finally:
        holder.kill()
        holder.wait()
    lock.acquire(run)  # the killed holder's lock is stale: taken over at once
    lock.release(run)
    check(kind, "a killed holder's lock is taken over", not lock.lock_path(run).exists(), "")
    copy = root / "sidecar"
    shutil.copytree(run, copy)
    (copy / "draws.sha256").unlink()
    data = bytearray((copy / "draws.nc").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / "draws.nc").write_bytes(bytes(data))
    code, err = cli(["summary", copy])
    check(kind, "a flipped byte with draws.sha256 deleted", code == 2 and "checksum" in err,
          err)
    (copy / "draws.nc").unlink()
    for command in ("summary", "resume"):
        code, err = cli([command, copy])
        check(kind, f"{command} of a finished run whose draws.nc was deleted",
              code == 2 and "draws.nc was deleted" in err, err)
    empty = root / "empty-config"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    code, err = cli(["resume", empty])
    check(kind, "config.json of {}", code == 2 and "no fingerprint" in err, err)
    savez, calls = run_io.atomic_savez, []

    def full(path, arrays):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return savez(path, arrays)

    run_io.atomic_savez = full
    try:
        code, err = cli([*MANUAL, "--out", root / "mid-run"])
    finally:
        run_io.atomic_savez = savez
    check(kind, "a full disk at a mid-run checkpoint", code == 2 and err.count("\n") == 1
          and "the disk is full" in err and "MB" in err, err)
    code, err = cli(["resume", root / "mid-run", "--no-progress"])
    check(kind, "its resume once there is room", code == 0, err)
    garbage = root / "garbage.json.zip"
    garbage.write_bytes(b"not a zip")
    from adaptmc.targets.stan.model import data_json

    try:
        data_json(str(garbage))
        check(kind, "--data garbage.json.zip", False, "accepted")
    except ValueError as err:
        check(kind, "--data garbage.json.zip", "garbage.json.zip" in str(err), str(err))
    (root / "pair_audit.py").write_text("def make():\n    return (abs, 'not an array')\n")
    sys.path.insert(0, str(root))
    try:
        code, err = cli(["sample", "--target", "pair_audit:make", "--out", root / "pair"])
    finally:
        sys.path.remove(str(root))
    check(kind, "a target returning (fn, 'not an array')",
          code == 2 and "initial_params are not numbers" in err, err)


AUDITS = ("audit_data_loss", "audit_declared", "audit_api_objects", "audit_damaged",
          "audit_faults", "audit_api_structured", "audit_lab", "audit_nothing_lost")


def main_audit(verbose: bool, only: tuple[str, ...] = AUDITS) -> int:
    """Run the audits named in ``only`` (``--only a,b``; audit_data_loss always: it makes the
    finished run the others use)."""
    root = Path(tempfile.mkdtemp(prefix="adaptmc-audit-"))
    try:
        for name in ("audit_data_loss", *[a for a in only if a != "audit_data_loss"]):
            globals()[name](root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    failed = 0
    for kind in sorted(RESULTS):
        rows = RESULTS[kind]
        bad = [r for r in rows if not r[1]]
        failed += len(bad)
        print(f"{kind:50s} {len(rows) - len(bad):4d} pass {len(bad):3d} fail")
        for name, ok, detail in rows:
            if verbose or not ok:
                print(f"    {'ok  ' if ok else 'FAIL'} {name}: {detail[:160]}")
    total = sum(len(r) for r in RESULTS.values())
    print(f"{'all':50s} {total - failed:4d} pass {failed:3d} fail")
    return 1 if failed else 0


if __name__ == "__main__":
    chosen = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--only=")), None)
    sys.exit(main_audit("--verbose" in sys.argv,
                        AUDITS if chosen is None else tuple(chosen.split(","))))
