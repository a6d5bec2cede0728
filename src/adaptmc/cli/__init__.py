"""Command line: ``adaptmc sample``, ``resume``, ``summary``, ``reproduce``, ``bench``.

From the command line to a kernel step: `cmd_sample` parses the options, builds the named
recipe's `adaptmc.recipes.Plan` (`adaptmc.recipes.build`) and runs it (`adaptmc.api.run_plan`,
which calls `adaptmc.run.run`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from adaptmc.cli.options import build_parser, parse_items, recipe_options

__all__ = ["build_parser", "main", "recipe_options"]


def cmd_sample(args, resume: bool = False) -> int:
    import jax

    jax.config.update("jax_enable_x64", not args.float32)
    if not getattr(args, "no_compile_cache", False):
        from adaptmc.compile_cache import use_compile_cache

        use_compile_cache()
    from adaptmc.api import run_plan
    from adaptmc.diagnostics import format_summary
    from adaptmc.recipes import build
    from adaptmc.targets import get_target

    if not 0 <= args.seed < 2**63:
        raise ValueError(f"--seed must be an integer in [0, 2**63), got {args.seed}")
    if not resume:
        from adaptmc.io import prepare_output_dir

        prepare_output_dir(args.out, force=args.force)  # fail before any work
    target = get_target(args.target, data=getattr(args, "data", None))
    plan = build(args.recipe, target, **recipe_options(args))
    starts = _starts(args, target)
    if plan.kernel.name.startswith(("gadmala", "gadrwm")) and args.step_size is None:
        print(f"initial factor L = {float(plan.params.step_size):.3g} I (Hoffman & Gelman's "
              "heuristic; --step-size sets it)")
    result = run_plan(target, plan, chains=args.chains, seed=args.seed,
                      initial_positions=starts, output_dir=args.out,
                      force=args.force, resume=resume, checkpoint_every=args.checkpoint_every,
                      thin=args.thin, progress=not args.no_progress,
                      config={"cli": vars(args)})
    text = format_summary(result.idata)
    (Path(args.out) / "summary.txt").write_text(text + "\n")
    print(text)
    for warning in json.loads(result.idata.attrs.get("warnings", "[]")):
        print(f"adaptmc sample: warning: {warning}", file=sys.stderr)
    if plan.options.get("tuner") not in ("fixed", "grid"):
        from adaptmc.plots import write_tuning_plots

        skip = plan.plot_skip if plan.prepare is None else None
        for path in write_tuning_plots(result.idata, args.out, box=plan.box, skip=skip):
            print(f"plot: {path}")
    print(f"\nrun folder: {args.out} (draws.nc, summary.txt, config.json)")
    return 0


def _starts(args, target):
    """The chains' starts from ``--init`` and ``--init-jitter`` (None: the run's default).
    The point's values are recorded in the run's config (``init_values``), so a resumed run
    starts its warm-up from the same numbers even if the file changed."""
    import numpy as np

    from adaptmc.run import starting_positions

    values = getattr(args, "init_values", None)
    if values is None and args.init is not None:
        values = _read_init(args.init).tolist()
    jitter = getattr(args, "init_jitter", 0.5)
    args.init_values = values
    if values is None and jitter == 0.5:
        return None
    return np.asarray(starting_positions(target, args.chains, args.seed, values, jitter))


def _read_init(text: str):
    """A ``.npy``, ``.json`` or whitespace-separated text file of real numbers (a text file
    of one line is one point)."""
    import numpy as np

    path = Path(text)
    if not path.is_file():
        raise ValueError(f"--init {text!r}: no such file")
    if path.suffix == ".npy":
        from adaptmc.io import load_npy

        values = load_npy(path)
    else:
        try:
            raw = path.read_text()
            values = np.asarray(json.loads(raw) if path.suffix == ".json"
                                else [line.split() for line in raw.splitlines() if line.strip()],
                                dtype=float)
        except (ValueError, UnicodeDecodeError, TypeError) as err:
            raise ValueError(f"--init {text!r}: expected real numbers ({err})") from None
        values = values[0] if values.ndim == 2 and values.shape[0] == 1 else values
    if values.dtype.kind not in "fiu" or not np.all(np.isfinite(values)):
        raise ValueError(f"--init {text!r}: expected finite real numbers")
    return np.asarray(values, dtype=float)


# the options of `adaptmc sample` a run folder's config.json must record to be resumed
RESUME_KEYS = ("target", "recipe", "seed", "chains", "thin", "checkpoint_every", "float32")


def cmd_resume(args) -> int:
    """Continue the run in ``args.run_dir`` with the options its ``config.json`` recorded.
    Nothing the folder names is imported before it is checked: a ``module:function`` target
    or objective needs ``--trust-code``, or the user naming it (``--target``,
    ``--objective``)."""
    from adaptmc.run.store import read_config

    saved = read_config(Path(args.run_dir)).get("cli")
    if saved is None:
        raise ValueError(f"{args.run_dir!r} was not started from the command line; resume it "
                         "from Python with run(..., resume=True)")
    if not isinstance(saved, dict):
        raise ValueError(f"{args.run_dir!r}: config.json is damaged ('cli' is not a mapping)")
    missing = [k for k in RESUME_KEYS if k not in saved]
    if missing:
        raise ValueError(f"{args.run_dir!r}: config.json is damaged (missing "
                         f"{', '.join(missing)}); it cannot say what run to continue")
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
    sample_args = argparse.Namespace(**{**defaults, **saved})
    sample_args.out = args.run_dir
    sample_args.no_progress = args.no_progress
    sample_args.no_compile_cache = args.no_compile_cache
    sample_args.force = False
    return cmd_sample(sample_args, resume=True)


def cmd_summary(args) -> int:
    from adaptmc.diagnostics import format_summary
    from adaptmc.run.store import read_draws

    path = Path(args.run_dir) / "draws.nc"
    if not path.is_file():
        raise FileNotFoundError(
            f"{str(path)!r} not found: the run has not finished (try `adaptmc resume "
            f"{args.run_dir}`)"
        )
    print(format_summary(read_draws(Path(args.run_dir)), max_rows=args.rows))
    return 0


def cmd_targets(args) -> int:
    from adaptmc.targets import BUILTIN_TARGETS

    for name in sorted(BUILTIN_TARGETS):
        print(name)
    return 0


def cmd_reproduce(args) -> int:
    from adaptmc.experiments import run_experiment

    if not args.no_compile_cache:
        from adaptmc.compile_cache import use_compile_cache

        use_compile_cache()
    out = args.out or f"runs/{args.experiment}"
    sizes = parse_items(args.set, "--set", "NAME=VALUE", float) if args.set else None
    return run_experiment(args.experiment, out, quick=args.quick, force=args.force,
                          seed=args.seed, sizes=sizes)


def cmd_bench(args) -> int:
    import dataclasses
    import shlex

    from adaptmc import bench

    config = bench.QUICK_CONFIG if args.quick else bench.BenchConfig()
    if args.budget is not None:
        config = dataclasses.replace(config, num_samples=args.budget,
                                     num_warmup=max(10, args.budget // 2))
    if args.chains is not None:
        config = dataclasses.replace(config, num_chains=args.chains)
    targets = (args.targets.split(",") if args.targets else
               list(bench.QUICK_TARGETS if args.quick else bench.DEFAULT_TARGETS))
    samplers = (args.samplers.split(",") if args.samplers else
                list(bench.QUICK_SAMPLERS if args.quick else bench.DEFAULT_SAMPLERS))
    seeds = args.seeds if args.seeds is not None else (1 if args.quick else 2)
    command = "adaptmc " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    bench.run_bench(targets, samplers, seeds, config, args.out, dask_address=args.dask,
                    workers=args.workers, force=args.force, command=command)
    print((Path(args.out) / "results.md").read_text())
    return 0


COMMANDS = {
    "sample": cmd_sample,
    "resume": cmd_resume,
    "summary": cmd_summary,
    "targets": cmd_targets,
    "reproduce": cmd_reproduce,
    "bench": cmd_bench,
}


def main(argv: list[str] | None = None) -> int:
    """Parse and run one command. The one exception boundary: any error (from the options,
    the user's target or objective, data files, the file system) is one line with its cause
    and exit status 2; ``--debug`` shows the traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("\ninterrupted; resume with `adaptmc resume RUN_DIR`", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - the boundary: every error becomes one line
        if getattr(args, "debug", False):
            import traceback

            traceback.print_exc()
        print(f"adaptmc {args.command}: error: {error_line(err)}", file=sys.stderr)
        return 2


def error_line(err: BaseException) -> str:
    """One line saying what went wrong: the message of the errors adaptmc raises on purpose,
    the exception's type and message for anything else (the user's code, a library)."""
    text = " ".join(str(err).split()) or "(no message)"
    if isinstance(err, FileExistsError | FileNotFoundError | ValueError | TypeError) and \
            type(err).__module__ == "builtins" and not isinstance(err, UnicodeError):
        return text
    return f"{type(err).__name__}: {text} (--debug shows the traceback)"


if __name__ == "__main__":
    sys.exit(main())
