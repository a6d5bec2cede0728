"""Command line: ``adaptmc sample``, ``resume``, ``summary``, ``targets``.

From the command line to a kernel step: `cmd_sample` parses the options, builds the named
recipe's `adaptmc.recipes.Plan` (`adaptmc.recipes.build`) and runs it (`adaptmc.run.run`:
its warm-up stage, then its super-transitions).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from adaptmc.cli.interrupts import deferring_sigint
from adaptmc.cli.options import build_parser, read_init, recipe_options
from adaptmc.cli.outputs import (
    finished_draws,
    outputs_unwritten,
    write_outputs,
    write_predictive,
)

__all__ = ["build_parser", "main", "recipe_options"]


def cmd_sample(args, resume: bool = False) -> int:
    import jax

    jax.config.update("jax_enable_x64", not args.float32)
    _quiet_compile_cache()
    if not getattr(args, "no_compile_cache", False):
        from adaptmc.compile_cache import use_compile_cache

        use_compile_cache()
    from adaptmc.io import check_output_place, prepare_output_dir
    from adaptmc.run.lock import owning

    if not resume:
        prepare_output_dir(args.out, force=args.force)  # fail before any work
    check_output_place(args.out, resume=resume)
    _AT_START["draws"] = _finished_draws(args.out)  # what Ctrl-C's advice compares with
    with owning(args.out, resume=resume):  # one process owns the folder (adaptmc.run.lock)
        from adaptmc.api import one_chain_quiet

        target, options = _prepared(args, resume)
        with one_chain_quiet(args.chains):
            return _sample(args, target, options, resume)


def _quiet_compile_cache() -> None:
    """JAX's warnings that a program could not be written to (or read from) its persistent
    compilation cache (a full disk, a half-written entry, a busy lock) are not shown: the
    program is compiled as without a cache, the draws are the same, and a full disk is told
    in the one line of the write that matters (`adaptmc.disk`)."""
    import warnings

    warnings.filterwarnings("ignore", "Error (writing|reading) persistent compilation cache",
                            UserWarning)


_AT_START: dict = {}  # the output folder's draws.nc when the command began (Ctrl-C advice)


def _finished_draws(folder) -> list | None:
    """The identity of ``folder/draws.nc`` (None: there is none)."""
    try:
        facts = (Path(folder) / "draws.nc").stat()
    except OSError:
        return None
    return [facts.st_ino, facts.st_mtime_ns]


def _prepared(args, resume: bool = False):
    """The target and the recipe's options of ``args``, checked against the machine."""
    from adaptmc.options import check_resources
    from adaptmc.targets import get_target

    options = recipe_options(args)
    target = get_target(args.target, data=getattr(args, "data", None))
    _check_precision(args, target)
    from adaptmc.api import predictive_options

    target, options, _ = predictive_options(target, options, getattr(args, "heldout", None),
                                            args.seed)
    finished = resume and outputs_unwritten(args.out)  # no draws to write: no disk check
    check_resources(options, target.dim, args.chains, None if finished else args.out,
                    target.initial_position.dtype.itemsize)
    return target, options


def _sample(args, target, options: dict, resume: bool) -> int:
    """Build the plan, run it (a resumed run that finished without its summary and plots:
    read its draws), print and write the summary and the plots."""
    from adaptmc.api import run_options
    from adaptmc.recipes import build
    from adaptmc.run import run

    plan = build(args.recipe, target, **options)
    starts = _starts(args, target)
    if plan.kernel.initial_step is not None and getattr(args, "step_size", None) is None:
        print(f"initial factor L = {float(plan.params.step_size):.3g} I (Hoffman & Gelman's "
              "heuristic; --step-size sets it)")
    if resume and outputs_unwritten(args.out):
        idata = finished_draws(args.out)
    else:
        idata = run(target, plan, options=run_options(
            plan, chains=args.chains, seed=args.seed, initial_positions=starts,
            output_dir=args.out, force=args.force, resume=resume,
            checkpoint_every=args.checkpoint_every, thin=args.thin,
            progress=not args.no_progress, config={"cli": vars(args)},
            init_jitter=getattr(args, "init_jitter", 0.5))).idata
    paths = write_outputs(idata, args.out, plan)
    print("plots: " + ", ".join(path.name for path in paths))
    print(f"\nrun folder: {args.out} (draws.nc, summary.txt, config.json)")
    return 0


def _check_precision(args, target) -> None:
    """``--float32`` is refused where the target's module turned float64 on (JAX's
    ``jax_enable_x64``) or the target computes in float64: the run would not be single
    precision."""
    import jax

    if args.float32 and (jax.config.read("jax_enable_x64")
                         or target.initial_position.dtype.itemsize > 4):
        raise ValueError(f"--float32: the target {args.target!r} turns on float64 (its module "
                         "sets jax_enable_x64, or its arrays are float64); drop --float32, or "
                         "remove that setting from the module")


def _starts(args, target):
    """The chains' starts from ``--init`` and ``--init-jitter`` (None: the run's own).
    The point's values are recorded in the run's config (``init_values``), so a resumed run
    starts its warm-up from the same numbers even if the file changed."""
    import numpy as np

    from adaptmc.run import starting_positions

    values = getattr(args, "init_values", None)
    if values is None and args.init is not None:
        values = read_init(args.init)
        values = values if isinstance(values, dict) else values.tolist()
    jitter = getattr(args, "init_jitter", 0.5)
    args.init_values = values
    if values is None:  # the run's own starts, jittered by ``jitter`` (retried if not finite)
        return None
    if isinstance(values, dict):  # named constrained values (a .json object)
        from adaptmc.targets.initial import unconstrained_point

        values = unconstrained_point(target, values)
    return np.asarray(starting_positions(target, args.chains, args.seed, values, jitter,
                                         check=False))  # the run checks them


# the options of `adaptmc sample` a run folder's config.json must record to be resumed
RESUME_KEYS = ("target", "recipe", "seed", "chains", "thin", "checkpoint_every", "float32")


def cmd_resume(args) -> int:
    """Continue the run in ``args.run_dir`` with the options its ``config.json`` recorded.
    Nothing the folder names is imported before it is checked: a ``module:function`` target
    or objective needs ``--trust-code``, or the user naming it (``--target``,
    ``--objective``)."""
    from adaptmc.run.lock import owning

    with owning(args.run_dir, resume=True):  # the holder named before anything is read
        return _resume(args)


def _resume(args) -> int:
    from adaptmc.run.store import read_config

    config = read_config(Path(args.run_dir))
    if "fingerprint" not in config:
        raise ValueError(f"{str(Path(args.run_dir) / 'config.json')!r} is damaged or not a "
                         "run's: it has no fingerprint (what run it was), so there is "
                         "nothing to resume")
    saved = config.get("cli")
    if saved is None:
        raise ValueError(f"{args.run_dir!r} was not started from the command line; resume it "
                         "from Python with run(..., resume=True)")
    if not isinstance(saved, dict):
        raise ValueError(f"{args.run_dir!r}: config.json is damaged ('cli' is not a mapping)")
    missing = [k for k in RESUME_KEYS if k not in saved]
    if missing:
        raise ValueError(f"{args.run_dir!r}: config.json is damaged (missing "
                         f"{', '.join(missing)}); it cannot say what run to continue")
    from adaptmc.run.netcdf import finished_without_draws

    deleted = finished_without_draws(args.run_dir)
    if deleted is not None:
        raise ValueError(deleted)
    if (Path(args.run_dir) / "draws.nc").exists() and not outputs_unwritten(args.run_dir):
        raise ValueError(f"the run in {args.run_dir!r} has finished (draws.nc is written): "
                         f"nothing to resume (`adaptmc summary {args.run_dir}` shows it)")
    for option in ("target", "objective"):
        spec = saved.get(option)
        if isinstance(spec, str) and ":" in spec and not args.trust_code \
                and getattr(args, option, None) != spec:
            raise ValueError(
                f"{args.run_dir!r} names user code as its {option} ({spec!r}), which is not "
                f"imported unless you confirm: pass --{option} {spec} (a module importable "
                "from your environment) or --trust-code (code shipped in a folder you "
                "received can do anything)")
    defaults = vars(build_parser().parse_args(["sample", "--target", "x", "--out", "x"]))
    _check_saved(args.run_dir, saved, defaults)
    sample_args = argparse.Namespace(**{**defaults, **saved})
    sample_args.out = args.run_dir
    sample_args.no_progress = args.no_progress
    sample_args.no_compile_cache = args.no_compile_cache
    sample_args.force = False
    return cmd_sample(sample_args, resume=True)


def _check_saved(run_dir: str, saved: dict, defaults: dict) -> None:
    """The options a run folder's config.json recorded, checked as the command line's are
    (`adaptmc.options`): a bad value names the file and the field."""
    from adaptmc.declarations import declarations
    from adaptmc.options import OptionError, check_value
    from adaptmc.recipes import RECIPES

    declared = declarations()
    where = f"{str(Path(run_dir) / 'config.json')!r} is damaged"
    try:
        for name, value in saved.items():
            if name in declared:
                check_value(declared[name], value)
            elif name in ("target", "recipe", "out") and not isinstance(value, str):
                raise OptionError(name, f"must be a string, got {value!r}")
            elif isinstance(defaults.get(name), bool) and not isinstance(value, bool):
                raise OptionError(name, f"must be true or false, got {value!r}")
    except OptionError as err:
        raise ValueError(f"{where}: cli.{err}") from None
    if saved["recipe"] not in RECIPES:
        raise ValueError(f"{where}: cli.recipe {saved['recipe']!r} is not a recipe")


def cmd_summary(args) -> int:
    from adaptmc.diagnostics import format_summary
    from adaptmc.run.netcdf import finished_without_draws, read_draws, verify_draws

    path = Path(args.run_dir) / "draws.nc"
    if not Path(args.run_dir).is_dir():
        raise FileNotFoundError(f"run folder {args.run_dir!r} does not exist")
    if finished_without_draws(args.run_dir) is not None:
        raise FileNotFoundError(finished_without_draws(args.run_dir))
    if not path.is_file():
        raise FileNotFoundError(
            f"{str(path)!r} not found: the run has not finished (try `adaptmc resume "
            f"{args.run_dir}`)"
        )
    verify_draws(Path(args.run_dir))
    try:
        text = format_summary(read_draws(Path(args.run_dir)), max_rows=args.rows)
    except (OSError, KeyError) as err:  # a damaged block, read lazily
        raise ValueError(f"{str(path)!r} is damaged ({' '.join(str(err).split())[:200]}); "
                         "its draws are lost: run again with --force") from None
    print(text)
    return 0


def cmd_targets(args) -> int:
    from adaptmc.targets import BUILTIN_TARGETS

    for name in sorted(BUILTIN_TARGETS):
        print(name)
    return 0


def cmd_predict(args) -> int:
    """Posterior predictive draws of a finished run (`adaptmc.predictive`), written to
    ``RUN/posterior_predictive.nc``; a ``module:function`` target is imported only when
    confirmed, as for ``resume``."""
    from adaptmc.predictive import target_posterior_predictive
    from adaptmc.run.netcdf import read_draws, verify_draws
    from adaptmc.run.store import read_config
    from adaptmc.targets import get_target

    run_dir = Path(args.run_dir)
    if not (run_dir / "draws.nc").is_file():
        raise FileNotFoundError(f"{str(run_dir / 'draws.nc')!r} not found: the run has not "
                                "finished")
    saved = read_config(run_dir).get("cli") or {}
    spec = saved.get("target")
    if not isinstance(spec, str):
        raise ValueError(f"{args.run_dir!r} was not started from the command line")
    if ":" in spec and not args.trust_code and args.target != spec:
        raise ValueError(f"{args.run_dir!r} names user code as its target ({spec!r}): pass "
                         f"--target {spec} or --trust-code to import it")
    import jax

    jax.config.update("jax_enable_x64", not saved.get("float32", False))
    verify_draws(run_dir)
    target = get_target(spec, data=saved.get("data"))
    idata = target_posterior_predictive(read_draws(run_dir), target, seed=args.seed)
    group = idata.posterior_predictive
    path = run_dir / "posterior_predictive.nc"
    write_predictive(group, path)
    shapes = ", ".join(f"{k} {tuple(v.shape)}" for k, v in group.data_vars.items())
    print(f"posterior predictive draws: {shapes}\nwritten: {path}")
    return 0


COMMANDS = {
    "predict": cmd_predict,
    "sample": cmd_sample,
    "resume": cmd_resume,
    "summary": cmd_summary,
    "targets": cmd_targets,
}


def main(argv: list[str] | None = None) -> int:
    """Parse and run one command. The one exception boundary: any error (from the options,
    the user's target or objective, data files, the file system) is one line with its cause
    and exit status 2; ``--debug`` shows the traceback."""
    _AT_START.clear()
    args = None
    try:
        with deferring_sigint():  # a Ctrl-C inside JAX's gc callback is not lost
            try:
                args = build_parser().parse_args(argv)
            except SystemExit as exit_:  # --help, or a refused command line (one line)
                return int(exit_.code or 0)
            return run_command(args)
    except KeyboardInterrupt:
        advice = "nothing was done" if args is None else interrupted_advice(args)
        print(f"\ninterrupted; {advice}", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - the boundary: every error becomes one line
        if getattr(args, "debug", False):
            import traceback

            traceback.print_exc()
        print(f"adaptmc {getattr(args, 'command', '')}: error: {error_line(err)}",
              file=sys.stderr)
        if argv is None and getattr(err, "hdf5_broken", False):
            sys.stdout.flush()  # the command's process after a failed netCDF write: HDF5
            sys.stderr.flush()  # would crash closing the file at exit; the run folder is
            os._exit(2)         # consistent and nothing is left to do
        return 2


def run_command(args) -> int:
    """``COMMANDS[args.command](args)``; an exception of the user's log density raised
    before the run (loading the target, its checks, the warm-up) is told as one
    `adaptmc.run.faults.TargetError`, as one raised during the run is."""
    from adaptmc.run.faults import telling_target_errors

    with telling_target_errors():
        return COMMANDS[args.command](args)


def interrupted_advice(args) -> str:
    """What to do after Ctrl-C: resume only a run folder holding this run's checkpoint."""
    folder = getattr(args, "run_dir", None) or getattr(args, "out", None)
    if args.command not in ("sample", "resume") or folder is None:
        return "nothing to resume"
    path = Path(folder)
    saved = (path / "checkpoint.npz").is_file() or (path / "warmup.npz").is_file()
    if saved and not (path / "draws.nc").exists():
        return f"resume with `adaptmc resume {folder}`"
    now = _finished_draws(path)
    if now is not None and now != _AT_START.get("draws"):
        then = f"`adaptmc resume {folder}` writes its summary and plots" if \
            outputs_unwritten(folder) else f"`adaptmc summary {folder}` shows them"
        return f"the run had finished: {folder} holds its draws ({then})"
    if args.command == "sample" and now is not None:
        return (f"stopped before the new run's first checkpoint: {folder} still holds the "
                "previous run")
    return f"stopped before the first checkpoint: nothing was written to {folder}"


def error_line(err: BaseException) -> str:
    """One line saying what went wrong: the message of the errors adaptmc raises on purpose,
    the exception's type and message for anything else (the user's code, a library)."""
    from adaptmc.options import OptionError

    if isinstance(err, OptionError):
        return err.flag_message()
    text = " ".join(str(err).split()) or "(no message)"
    if isinstance(err, FileExistsError | FileNotFoundError | ValueError | TypeError) and \
            type(err).__module__ == "builtins" and not isinstance(err, UnicodeError):
        return text
    if type(err).__module__.startswith("adaptmc."):  # adaptmc's own errors say it all
        return text
    return f"{type(err).__name__}: {text} (--debug shows the traceback)"


if __name__ == "__main__":
    sys.exit(main())
