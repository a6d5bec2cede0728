"""Command line: ``adaptmc sample``, ``resume``, ``summary``, ``reproduce``, ``bench``.

From the command line to a kernel step is two calls: `cmd_sample` builds the target,
kernel, parameters and tuner from the arguments and calls `adaptmc.run.run`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

TUNER_CHOICES = ("fixed", "grid")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="adaptmc", description="Self-tuning MCMC: HMC, MALA and RWM with online tuners."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    sample = sub.add_parser("sample", help="run chains on a target and write a run folder")
    add_sample_arguments(sample)

    resume = sub.add_parser("resume", help="continue a checkpointed run folder")
    resume.add_argument("run_dir")
    resume.add_argument("--no-progress", action="store_true")

    summ = sub.add_parser("summary", help="print the summary of a finished run folder")
    summ.add_argument("run_dir")
    summ.add_argument("--rows", type=int, default=12, help="parameters to show")

    targets = sub.add_parser("targets", help="list the built-in targets")
    del targets

    from adaptmc.experiments import EXPERIMENTS

    repro = sub.add_parser("reproduce", help="regenerate a published table or figure")
    repro.add_argument("experiment", choices=sorted(EXPERIMENTS))
    repro.add_argument("--out", default=None, help="output folder (default runs/<experiment>)")
    repro.add_argument("--quick", action="store_true", help="a small version for CI and demos")
    repro.add_argument("--force", action="store_true", help="overwrite the output folder")
    repro.add_argument("--seed", type=int, default=0)
    return parser


def add_sample_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", required=True,
                   help="built-in target name (see `adaptmc targets`) or module:function")
    p.add_argument("--kernel", default="hmc", choices=("hmc", "mala", "rwm"))
    p.add_argument("--step-size", type=float, default=None, help="eps (default: kernel's)")
    p.add_argument("--num-leapfrog", type=int, default=None, help="L, HMC only")
    p.add_argument("--refresh-angle", type=float, default=None,
                   help="partial momentum refreshment angle theta in (0, pi/2] (HMC)")
    p.add_argument("--jitter", type=float, default=None, help="step-size jitter j in [0, 1) (HMC)")
    p.add_argument("--inverse-mass", default=None,
                   help="inverse mass: a number, or a .npy file holding a vector or matrix")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--super-transitions", type=int, default=50,
                   help="number of super-transitions")
    p.add_argument("--budget", type=int, default=1000,
                   help="gradient evaluations per chain per super-transition (S)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up super-transitions")
    p.add_argument("--adapt-until", type=int, default=None,
                   help="freeze the tuner's best setting after this many super-transitions")
    p.add_argument("--tuner", default="fixed", choices=TUNER_CHOICES)
    p.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...",
                   help="values for the grid tuner, e.g. --grid step_size=0.1,0.2")
    p.add_argument("--objective", default="esjd", help="esjd, autocorrelation or min-ess")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="run folder to write")
    p.add_argument("--force", action="store_true", help="overwrite an existing run folder")
    p.add_argument("--checkpoint-every", type=int, default=10,
                   help="super-transitions between checkpoints")
    p.add_argument("--float32", action="store_true", help="single precision (default: float64)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def make_params(kernel, args):
    """The kernel's Params with the command-line overrides."""
    import numpy as np

    fields = {}
    for name, value in (
        ("step_size", args.step_size),
        ("num_leapfrog", args.num_leapfrog),
        ("refresh_angle", args.refresh_angle),
        ("jitter", args.jitter),
    ):
        if value is None:
            continue
        if name not in kernel.Params._fields:
            raise ValueError(f"--{name.replace('_', '-')} does not apply to kernel {kernel.name!r}")
        fields[name] = value
    if args.inverse_mass is not None:
        try:
            fields["inverse_mass"] = float(args.inverse_mass)
        except ValueError:
            path = Path(args.inverse_mass)
            if not path.is_file():
                raise ValueError(f"--inverse-mass {args.inverse_mass!r}: no such file") from None
            fields["inverse_mass"] = np.load(path, allow_pickle=False)
    return kernel.Params(**fields)


def make_tuner(args):
    """Tuner and objective from ``--tuner``, ``--grid`` and ``--objective``."""
    from adaptmc import tuners
    from adaptmc.objectives import OBJECTIVES

    if args.objective not in OBJECTIVES:
        raise ValueError(
            f"unknown objective {args.objective!r}; choose one of {', '.join(OBJECTIVES)}"
        )
    objective = OBJECTIVES[args.objective]
    if args.tuner == "fixed":
        if args.grid:
            raise ValueError("--grid needs --tuner grid")
        return tuners.fixed(), objective
    if args.tuner == "grid":
        values = {}
        for item in args.grid:
            name, sep, vals = item.partition("=")
            if not sep or not vals:
                raise ValueError(f"--grid {item!r}: expected NAME=V1,V2,...")
            values[name] = [_number(v) for v in vals.split(",")]
        return tuners.grid(values), objective
    raise ValueError(f"unknown tuner {args.tuner!r}")


def _number(text: str):
    value = float(text)
    return int(value) if value.is_integer() and "." not in text and "e" not in text else value


def cmd_sample(args, resume: bool = False) -> int:
    import jax

    jax.config.update("jax_enable_x64", not args.float32)
    from adaptmc.diagnostics import format_summary
    from adaptmc.kernels import KERNELS
    from adaptmc.run import run
    from adaptmc.targets import get_target

    if not resume:
        from adaptmc.io import prepare_output_dir

        prepare_output_dir(args.out, force=args.force)  # fail before any work
    target = get_target(args.target)
    kernel = KERNELS[args.kernel]
    params = make_params(kernel, args)
    tuner, objective = make_tuner(args)
    result = run(
        target,
        kernel,
        params,
        num_super_transitions=args.super_transitions,
        gradient_budget=args.budget,
        num_chains=args.chains,
        tuner=tuner,
        objective=objective,
        num_warmup=args.warmup,
        adapt_until=args.adapt_until,
        seed=args.seed,
        output_dir=args.out,
        force=args.force,
        resume=resume,
        checkpoint_every=args.checkpoint_every,
        progress=not args.no_progress,
        config={"cli": vars(args)},
    )
    text = format_summary(result.idata)
    (Path(args.out) / "summary.txt").write_text(text + "\n")
    print(text)
    print(f"\nrun folder: {args.out} (draws.nc, summary.txt, config.json)")
    return 0


def cmd_resume(args) -> int:
    config_path = Path(args.run_dir) / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{args.run_dir!r} holds no run to resume (no config.json)")
    saved = json.loads(config_path.read_text()).get("cli")
    if saved is None:
        raise ValueError(f"{args.run_dir!r} was not started from the command line; resume it "
                         "from Python with run(..., resume=True)")
    sample_args = argparse.Namespace(**saved)
    sample_args.out = args.run_dir
    sample_args.no_progress = args.no_progress
    return cmd_sample(sample_args, resume=True)


def cmd_summary(args) -> int:
    import warnings

    from adaptmc.diagnostics import format_summary

    path = Path(args.run_dir) / "draws.nc"
    if not path.is_file():
        raise FileNotFoundError(
            f"{str(path)!r} not found: the run has not finished (try `adaptmc resume "
            f"{args.run_dir}`)"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz as az

        idata = az.from_netcdf(str(path))
    print(format_summary(idata, max_rows=args.rows))
    return 0


def cmd_targets(args) -> int:
    from adaptmc.targets import BUILTIN_TARGETS

    for name in sorted(BUILTIN_TARGETS):
        print(name)
    return 0


def cmd_reproduce(args) -> int:
    from adaptmc.experiments import EXPERIMENTS

    out = args.out or f"runs/{args.experiment}"
    return int(EXPERIMENTS[args.experiment](out=out, quick=args.quick, force=args.force,
                                            seed=args.seed) or 0)


COMMANDS = {
    "sample": cmd_sample,
    "resume": cmd_resume,
    "summary": cmd_summary,
    "targets": cmd_targets,
    "reproduce": cmd_reproduce,
}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (ValueError, FileExistsError, FileNotFoundError, TypeError) as err:
        print(f"adaptmc {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted; resume with `adaptmc resume RUN_DIR`", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

