"""The lab's command line: ``adaptmc-lab reproduce`` (the source papers' experiments) and
``adaptmc-lab bench`` (targets x samplers x seeds against NUTS and nutpie). The lab sits above
the library: it calls `adaptmc`'s recipes and driver; the library never imports it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from adaptmc.cli import error_line
from adaptmc.cli.options import COMPILE_CACHE_HELP, Parser, parse_items
from adaptmc_lab.experiments import EXPERIMENTS


def build_lab_parser() -> argparse.ArgumentParser:
    parser = Parser(  # a refused command line is one line, as adaptmc's
        prog="adaptmc-lab", description="adaptmc's lab: reproductions of the source papers "
        "and the benchmark against NUTS and nutpie.")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name, **kwargs):
        return sub.add_parser(name, **kwargs)

    repro = add("reproduce", help="re-run the protocol of a published experiment (the "
                "literature's rows printed beside the measured ones, with the difference; "
                "deviations from the sources: docs/reproductions/)")
    repro.add_argument("experiment", choices=sorted(EXPERIMENTS))
    repro.add_argument("--out", default=None, help="output folder (default runs/<experiment>)")
    repro.add_argument("--quick", action="store_true", help="a small version for CI and demos")
    repro.add_argument("--force", action="store_true", help="overwrite the output folder")
    repro.add_argument("--seed", type=declared("seed"), default=0)
    repro.add_argument("--set", action="append", default=None, metavar="NAME=VALUE",
                       help="replace one of the experiment's sizes (dexter: "
                            "num_super_transitions, gradient_budget, nuts_warmup, "
                            "start_steps, num_folds, tuner_burn_in; ising, for every "
                            "model: flips, burn_in, tune, measure, chains; "
                            "riemannian-logistic: num_burn, num_keep, repeats, caravan=1 "
                            "to add the sixth set), e.g. --set gradient_budget=4004")
    repro.add_argument("--float32", action="store_true",
                       help="single precision (default: float64, as adaptmc sample; "
                            "dexter, ising and robot-arm only)")
    repro.add_argument("--no-compile-cache", action="store_true", help=COMPILE_CACHE_HELP)

    bench = add("bench", help="benchmark matrix: targets x samplers x seeds")
    add_bench_arguments(bench)
    return parser


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--targets", type=names("--targets"), default=None,
                   help="comma-separated targets, 'broad' for all 48 posteriordb posteriors' Stan "
                        "programs (default: the eleven posteriordb posteriors, Gaussians, "
                        "funnel, logistic-german, bnn-robot-arm)")
    p.add_argument("--samplers", type=names("--samplers"), default=None,
                   help="comma-separated samplers (default: adaptmc-adaptive-hmc, "
                        "adaptmc-gadmala, blackjax-nuts; also -adaptive-hmc-frozen (--tuning 1), "
                        "-nuts (NUTS as an arm), -nuts-always, -nuts-frozen, "
                        "-parametric, -hedge, -sir, adaptmc-bandit-hmc, -hmc-da, -hmc-grid, "
                        "numpyro-nuts, "
                        "nutpie (PyMC twins), nutpie-diag and nutpie-low-rank (any target, "
                        "from_pyfunc))")
    p.add_argument("--seeds", type=integer("seeds", 1), default=None,
                   help="seeds per (target, sampler)")
    p.add_argument("--budget", type=integer("budget", 1), default=None,
                   help="sampling draws per chain (warm-up: half as many)")
    p.add_argument("--chains", type=declared("chains"), default=None,
                   help="chains per cell (default 4)")
    p.add_argument("--out", default="runs/bench", help="output folder")
    p.add_argument("--force", action="store_true", help="recompute cells already in --out")
    p.add_argument("--dask", default=None, metavar="ADDRESS",
                   help="Dask scheduler address, e.g. tcp://10.0.0.5:8786")
    p.add_argument("--workers", type=integer("workers", 0), default=0,
                   help="local Dask worker processes (0: auto, a local cluster for >= 4 "
                        "cells; 1: serial)")
    p.add_argument("--quick", action="store_true",
                   help="3 targets x 2 samplers x 1 seed, short chains (a couple of minutes)")


def integer(name: str, low: int, high: int = 2**31 - 1):
    """An argparse type: an integer in ``[low, high]``, declared as the library declares its
    options (an `adaptmc.options.Option` on the function, ``.option``, which the audit
    reads) and parsed and refused as ``adaptmc sample`` does."""
    from adaptmc.options import Option

    return typed(Option(name, "int", "", low=low, high=high))


def declared(name: str):
    """An argparse type checking a value against the library's declaration of ``name``
    (`adaptmc.declarations.declarations`), as ``adaptmc sample`` does."""
    from adaptmc.declarations import declarations

    return typed(declarations()[name])


def typed(option):
    from adaptmc.options import OptionError, parse_text

    def parse(text: str):
        try:
            return parse_text(option, text)
        except OptionError as err:
            raise argparse.ArgumentTypeError(err.problem) from None

    parse.__name__, parse.option = option.name, option
    return parse


def names(flag: str):
    """An argparse type: a comma-separated list of non-empty names (at least one)."""
    def parse(text: str) -> str:
        items = text.split(",")
        if not text.strip() or any(not item.strip() for item in items):
            raise argparse.ArgumentTypeError(f"must be comma-separated names, none empty, got "
                                             f"{text!r}")
        return ",".join(item.strip() for item in items)

    parse.__name__, parse.option = flag, None  # no numeric declaration: a list of names
    return parse


def cmd_reproduce(args) -> int:
    from adaptmc_lab.experiments import run_experiment

    if not args.no_compile_cache:
        from adaptmc.compile_cache import use_compile_cache

        use_compile_cache()
    out = args.out or f"runs/{args.experiment}"
    sizes = parse_items(args.set, "--set", "NAME=VALUE", float) if args.set else None
    return run_experiment(args.experiment, out, quick=args.quick, force=args.force,
                          seed=args.seed, sizes=sizes, float32=args.float32)


def cmd_bench(args) -> int:
    import dataclasses
    import shlex

    from adaptmc_lab import bench

    config = bench.QUICK_CONFIG if args.quick else bench.BenchConfig()
    if args.budget is not None:
        config = dataclasses.replace(config, num_samples=args.budget,
                                     num_warmup=max(10, args.budget // 2))
    if args.chains is not None:
        config = dataclasses.replace(config, num_chains=args.chains)
    targets = (bench.expand_targets(args.targets.split(",")) if args.targets else
               list(bench.QUICK_TARGETS if args.quick else bench.DEFAULT_TARGETS))
    samplers = (args.samplers.split(",") if args.samplers else
                list(bench.QUICK_SAMPLERS if args.quick else bench.DEFAULT_SAMPLERS))
    seeds = args.seeds if args.seeds is not None else (1 if args.quick else 2)
    command = "adaptmc-lab " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    bench.run_bench(targets, samplers, seeds, config, args.out, dask_address=args.dask,
                    workers=args.workers, force=args.force, command=command)
    print((Path(args.out) / "results.md").read_text())
    return 0


COMMANDS = {"reproduce": cmd_reproduce, "bench": cmd_bench}


def main(argv: list[str] | None = None) -> int:
    """Parse and run one lab command; any error is one line and exit status 2."""
    try:
        args = build_lab_parser().parse_args(argv)
    except SystemExit as exit_:  # --help, or a refused command line (one line printed)
        return int(exit_.code or 0)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - the boundary: every error becomes one line
        if args.debug:
            import traceback

            traceback.print_exc()
        print(f"adaptmc-lab {args.command}: error: {error_line(err)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
