"""Command line: ``adaptmc sample``, ``resume``, ``summary``, ``reproduce``, ``bench``.

From the command line to a kernel step is two calls: `cmd_sample` builds the target,
kernel, parameters and tuner from the arguments and calls `adaptmc.run.run`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

TUNER_CHOICES = (
    "fixed", "grid", "gp-ucb", "parametric", "hedge", "sir", "dual-averaging", "random",
)
BANDIT_TUNERS = ("gp-ucb", "parametric", "hedge", "sir", "random")


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

    bench = sub.add_parser("bench", help="benchmark matrix: targets x samplers x seeds")
    add_bench_arguments(bench)
    return parser


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--targets", default=None,
                   help="comma-separated targets (default: the posteriordb eight, Gaussians, "
                        "funnel, logistic-german, bnn-robot-arm)")
    p.add_argument("--samplers", default=None,
                   help="comma-separated samplers (default: adaptmc-hmc-da, -grid, -gpucb, "
                        "-parametric, -hedge, -sir, adaptmc-gadmala, blackjax-nuts; "
                        "numpyro-nuts is optional)")
    p.add_argument("--seeds", type=int, default=None, help="seeds per (target, sampler)")
    p.add_argument("--budget", type=int, default=None,
                   help="sampling draws per chain (warm-up: half as many)")
    p.add_argument("--chains", type=int, default=None, help="chains per cell (default 4)")
    p.add_argument("--out", default="runs/bench", help="output folder")
    p.add_argument("--force", action="store_true", help="recompute cells already in --out")
    p.add_argument("--dask", default=None, metavar="ADDRESS",
                   help="Dask scheduler address, e.g. tcp://10.0.0.5:8786")
    p.add_argument("--workers", type=int, default=0,
                   help="local Dask worker processes (0: auto, a local cluster for >= 4 "
                        "cells; 1: serial)")
    p.add_argument("--quick", action="store_true",
                   help="3 targets x 2 samplers x 1 seed, short chains (a couple of minutes)")


def add_sample_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", required=True,
                   help="built-in target name (see `adaptmc targets`) or module:function")
    from adaptmc.kernels import KERNELS

    p.add_argument("--kernel", default="hmc", choices=sorted(KERNELS),
                   help="kernels with in-step adaptation (gadmala, gadrwm, am, mala-da, "
                        "hmc-da, ...) adapt during --warmup, then freeze")
    p.add_argument("--keep-adapting", type=float, default=None, metavar="DECAY",
                   help="gadmala/gadrwm: after warm-up keep adapting with the learning rate "
                        "decaying as (1 + t)^-DECAY instead of freezing")
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
    p.add_argument("--box", action="append", default=[], metavar="NAME=LOW:HIGH",
                   help="search box of a bandit tuner, e.g. --box step_size=0.01:1 "
                        "--box num_leapfrog=1:100 (the defaults for HMC)")
    p.add_argument("--schedule", default=None, choices=("exp", "poly", "geometric", "constant"),
                   help="adoption-probability schedule of a bandit tuner (default: exp for "
                        "gp-ucb, hedge and sir, geometric for parametric, constant for random)")
    p.add_argument("--anneal-rate", type=float, default=None,
                   help="the schedule's parameter: lambda of exp(-lambda (i-1)) (default "
                        "0.05), gamma of i^-gamma (0.5), rate of rate^(i-1) (0.99), p (1)")
    p.add_argument("--target-accept", type=float, default=0.8,
                   help="target acceptance rate of the dual-averaging tuner")
    p.add_argument("--objective", default="esjd",
                   help="esjd, esjd-sqrt-l, autocorrelation, min-ess, or module:function for "
                        "your own reward "
                        "(positions, stats, num_grads) -> float")
    p.add_argument("--thin", type=int, default=1, help="keep every n-th draw")
    p.add_argument("--adapt-mass", choices=("diag", "dense"), default=None,
                   help="estimate the inverse mass matrix during --warmup (>= 3), with the "
                        "step size; the tuner takes over after warm-up")
    p.add_argument("--mass-warmup", type=int, default=None,
                   help="super-transitions of mass adaptation (default: all of --warmup); "
                        "the rest of the warm-up lets the tuner explore without keeping draws")
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

    objective = _objective(args.objective, OBJECTIVES)
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
    if args.tuner == "dual-averaging":
        step_size = args.step_size if args.step_size is not None else 0.1
        return tuners.dual_averaging_tuner(
            step_size, target_accept=getattr(args, "target_accept", 0.8)
        ), objective
    if args.tuner in BANDIT_TUNERS:
        box = make_box(args)
        schedule = None
        if getattr(args, "schedule", None) is not None:
            rate = getattr(args, "anneal_rate", None)
            make = tuners.SCHEDULES[args.schedule]
            schedule = make() if rate is None else make(rate)
        elif getattr(args, "anneal_rate", None) is not None:
            raise ValueError("--anneal-rate needs --schedule exp|poly|geometric|constant")
        if args.tuner == "random":
            return tuners.random_search(box, schedule=schedule), objective
        make_bandit = {"gp-ucb": tuners.gp_ucb, "parametric": tuners.parametric,
                       "hedge": tuners.hedge, "sir": tuners.sir}[args.tuner]
        return make_bandit(box, schedule=schedule), objective
    raise ValueError(f"unknown tuner {args.tuner!r}")


def make_box(args):
    """The bandit's search box from ``--box`` items over the kernel's default box
    (HMC: step_size in [0.01, 1], num_leapfrog in [1, 100]; MALA and RWM: step_size)."""
    from adaptmc import recipes, tuners

    default = recipes.hmc_box()
    if getattr(args, "kernel", "hmc") != "hmc":
        default = tuners.make_box({"step_size": (0.01, 1.0)})
    elif args.budget < 4 * default.upper[1]:
        # at least 4 draws per super-transition, the fewest an objective scores
        default = recipes.hmc_box(num_leapfrog=(1, max(2, args.budget // 4)))
    box = tuners.parse_box(list(getattr(args, "box", None) or []), default)
    top = box.upper[box.names.index("num_leapfrog")] if "num_leapfrog" in box.names else 0
    if top > args.budget:
        raise ValueError(f"--box num_leapfrog reaches {int(top)}, more than the "
                         f"--budget {args.budget} gradients of a super-transition")
    return box


def _objective(spec: str, builtins: dict):
    """A built-in objective by name, or ``module:function`` for a model-specific reward."""
    if spec in builtins:
        return builtins[spec]
    if ":" not in spec:
        raise ValueError(
            f"unknown objective {spec!r}; choose one of {', '.join(builtins)} or give "
            "module:function"
        )
    from adaptmc.spec import load_object

    return load_object(spec, "objective")


def _number(text: str):
    value = float(text)
    return int(value) if value.is_integer() and "." not in text and "e" not in text else value


def in_step_adaptation_tuner(kernel, keep_adapting: float | None):
    """For kernels that adapt inside every step: adapt during warm-up, then freeze
    (``adapt = 0``) or, with ``keep_adapting``, go on with a decaying learning rate."""
    from adaptmc.tuners.warmup import switch_after_warmup

    if keep_adapting is None:
        return switch_after_warmup()
    if "lr_decay" not in kernel.Params._fields:
        raise ValueError(f"--keep-adapting does not apply to kernel {kernel.name!r}")
    return switch_after_warmup({"adapt": 1.0, "lr_decay": 0.0},
                               {"adapt": 1.0, "lr_decay": float(keep_adapting)})


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
    if args.step_size is None and args.kernel.startswith(("gadmala", "gadrwm")):
        from adaptmc.kernels.gradient_adaptive import initial_step_size

        step = initial_step_size(jax.random.key(args.seed), target, target.initial_position,
                                 proposal="mala" if args.kernel.startswith("gadmala") else "rwm")
        params = params._replace(step_size=step)
        print(f"initial factor L = {step:.3g} I (Hoffman & Gelman's heuristic; "
              "--step-size sets it)")
    tuner, objective = make_tuner(args)
    adapt_until = args.adapt_until
    keep_adapting = getattr(args, "keep_adapting", None)
    if ("adapt" in kernel.Params._fields and args.tuner == "fixed") or keep_adapting is not None:
        tuner = in_step_adaptation_tuner(kernel, keep_adapting)
        adapt_until = args.warmup if adapt_until is None else adapt_until
    not_the_tuners = 0  # mass warm-up super-transitions the tuner never saw (for the plots)
    if getattr(args, "adapt_mass", None):
        from adaptmc.tuners.mass import mass_adaptation, terminal_length

        if "inverse_mass" not in kernel.Params._fields:
            raise ValueError(f"--adapt-mass does not apply to kernel {kernel.name!r}")
        if args.inverse_mass is not None:
            raise ValueError("--adapt-mass and --inverse-mass exclude each other")
        step = args.step_size if args.step_size is not None else 0.1
        mass_warmup = getattr(args, "mass_warmup", None) or args.warmup
        if mass_warmup > args.warmup:
            raise ValueError("--mass-warmup cannot exceed --warmup")
        tuner = mass_adaptation(tuner, target.dim, mass_warmup,
                                dense=args.adapt_mass == "dense", initial_step_size=step,
                                warm_start=args.tuner in BANDIT_TUNERS)
        not_the_tuners = mass_warmup - (terminal_length(mass_warmup)
                                        if args.tuner in BANDIT_TUNERS else 0)
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
        adapt_until=adapt_until,
        seed=args.seed,
        output_dir=args.out,
        force=args.force,
        resume=resume,
        checkpoint_every=args.checkpoint_every,
        thin=args.thin,
        progress=not args.no_progress,
        config={"cli": vars(args)},
    )
    text = format_summary(result.idata)
    (Path(args.out) / "summary.txt").write_text(text + "\n")
    print(text)
    if args.tuner not in ("fixed", "grid"):
        from adaptmc.plots import write_tuning_plots

        box = make_box(args) if args.tuner in BANDIT_TUNERS else None
        for path in write_tuning_plots(result.idata, args.out, box=box, skip=not_the_tuners):
            print(f"plot: {path}")
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
    from adaptmc.experiments import run_experiment

    out = args.out or f"runs/{args.experiment}"
    return run_experiment(args.experiment, out, quick=args.quick, force=args.force,
                          seed=args.seed)


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

