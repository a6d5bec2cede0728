"""The command line's parser and the parsing of its values: `build_parser` (every command
and its flags) and `recipe_options` (the flags a recipe takes, parsed, under its names)."""

from __future__ import annotations

import argparse
from pathlib import Path

COMPILE_CACHE_HELP = ("compile every program afresh (default: keep compiled programs in "
                      "~/.cache/adaptmc/jax, or $ADAPTMC_COMPILE_CACHE, and load them when the "
                      "same model and sizes run again)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="adaptmc", description="Self-tuning MCMC: HMC, MALA and RWM with online tuners."
    )
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the traceback of an error")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name, **kwargs):
        return sub.add_parser(name, parents=[debug], **kwargs)

    sample = add("sample", help="run chains on a target and write a run folder")
    add_sample_arguments(sample)

    resume = add("resume", help="continue a checkpointed run folder")
    resume.add_argument("run_dir")
    resume.add_argument("--no-progress", action="store_true")
    resume.add_argument("--no-compile-cache", action="store_true", help=COMPILE_CACHE_HELP)
    resume.add_argument("--trust-code", action="store_true",
                        help="import the module:function the run folder's config.json names "
                             "(code from a folder you received can do anything)")
    resume.add_argument("--target", default=None, metavar="MODULE:FUNCTION",
                        help="confirm the run's module:function target by naming it")
    resume.add_argument("--objective", default=None, metavar="MODULE:FUNCTION",
                        help="confirm the run's module:function objective by naming it")

    summ = add("summary", help="print the summary of a finished run folder")
    summ.add_argument("run_dir")
    summ.add_argument("--rows", type=int, default=12, help="parameters to show")

    add("targets", help="list the built-in targets")

    from adaptmc.experiments import EXPERIMENTS

    repro = add("reproduce", help="re-run the protocol of a published experiment (the "
                "literature's rows printed beside the measured ones, with the difference; "
                "deviations from the sources: BENCHMARKS.md)")
    repro.add_argument("experiment", choices=sorted(EXPERIMENTS))
    repro.add_argument("--out", default=None, help="output folder (default runs/<experiment>)")
    repro.add_argument("--quick", action="store_true", help="a small version for CI and demos")
    repro.add_argument("--force", action="store_true", help="overwrite the output folder")
    repro.add_argument("--seed", type=int, default=0)
    repro.add_argument("--set", action="append", default=None, metavar="NAME=VALUE",
                       help="replace one of the experiment's sizes (dexter: "
                            "num_super_transitions, gradient_budget, nuts_warmup, "
                            "start_steps, num_folds, tuner_burn_in; ising, for every "
                            "model: flips, burn_in, tune, measure, chains; "
                            "riemannian-logistic: num_burn, num_keep, repeats, caravan=1 "
                            "to add the sixth set), e.g. --set gradient_budget=4004")
    repro.add_argument("--no-compile-cache", action="store_true", help=COMPILE_CACHE_HELP)

    bench = add("bench", help="benchmark matrix: targets x samplers x seeds")
    add_bench_arguments(bench)
    return parser


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--targets", default=None,
                   help="comma-separated targets (default: the eleven posteriordb posteriors, "
                        "Gaussians, funnel, logistic-german, bnn-robot-arm)")
    p.add_argument("--samplers", default=None,
                   help="comma-separated samplers (default: adaptmc-adaptive-hmc, "
                        "adaptmc-gadmala, blackjax-nuts; also -adaptive-hmc-parametric, "
                        "-hedge, -sir, adaptmc-bandit-hmc, -hmc-da, -hmc-grid, numpyro-nuts)")
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
    """Options of ``adaptmc sample``: the recipe's (default None: the recipe's default;
    an option the recipe does not take is refused) and the run's."""
    from adaptmc.kernels import KERNELS
    from adaptmc.recipes import DEFAULT_RECIPE, RECIPES, TUNER_CHOICES

    p.add_argument("--target", required=True,
                   help="built-in target name (see `adaptmc targets`), module:function, or a "
                        "Stan program (model.stan; needs adaptmc[stan] and a C++ compiler)")
    p.add_argument("--data", default=None, metavar="FILE",
                   help="the Stan program's data: a .json file or a .json.zip holding one")
    p.add_argument("--recipe", default=DEFAULT_RECIPE, choices=sorted(RECIPES),
                   help="a named sampler of adaptmc.recipes (default adaptive-hmc: NUTS "
                        "warm-up, then a bandit over HMC's (eps, L) in a box measured on the "
                        "target; adaptive-portfolio: the same warm-up, then adaptive HMC or "
                        "gadMALA, whichever wins a trial; manual: any --kernel with any "
                        "--tuner)")
    recipe = p.add_argument_group("recipe options (default: the recipe's)")
    _add_adaptive_hmc_options(recipe)
    recipe.add_argument("--kernel", default=None, choices=sorted(KERNELS),
                        help="kernels with in-step adaptation (gadmala, gadrwm, am, mala-da, "
                             "hmc-da, ...) adapt during --warmup, then freeze")
    recipe.add_argument("--keep-adapting", type=float, default=None, metavar="DECAY",
                        help="gadmala/gadrwm: after warm-up keep adapting with the learning "
                             "rate decaying as (1 + t)^-DECAY instead of freezing")
    recipe.add_argument("--step-size", type=float, default=None, help="eps")
    recipe.add_argument("--num-leapfrog", type=int, default=None, help="L, HMC only")
    recipe.add_argument("--refresh-angle", type=float, default=None,
                        help="partial momentum refreshment angle theta in (0, pi/2] (HMC)")
    recipe.add_argument("--jitter", type=float, default=None,
                        help="step-size jitter j in [0, 1) (HMC)")
    recipe.add_argument("--inverse-mass", default=None,
                        help="inverse mass: a number, or a .npy file holding a vector or matrix")
    recipe.add_argument("--super-transitions", type=int, default=None,
                        help="number of super-transitions")
    recipe.add_argument("--budget", type=int, default=None,
                        help="gradient evaluations per chain per super-transition (S)")
    recipe.add_argument("--warmup", type=int, default=None, help="warm-up super-transitions")
    recipe.add_argument("--adapt-until", type=int, default=None,
                        help="freeze the tuner's best setting after this many "
                             "super-transitions")
    recipe.add_argument("--tuner", default=None, choices=TUNER_CHOICES)
    recipe.add_argument("--grid", action="append", default=None, metavar="NAME=V1,V2,...",
                        help="values for the grid tuner, e.g. --grid step_size=0.1,0.2")
    recipe.add_argument("--box", action="append", default=None, metavar="NAME=LOW:HIGH",
                        help="search box of a bandit tuner, e.g. --box step_size=0.01:1 "
                             "--box num_leapfrog=1:100 (the defaults for HMC)")
    recipe.add_argument("--schedule", default=None,
                        choices=("exp", "poly", "geometric", "constant"),
                        help="adoption-probability schedule of a bandit tuner (default: exp "
                             "for gp-ucb, hedge and sir, geometric for parametric, constant "
                             "for random)")
    recipe.add_argument("--anneal-rate", type=float, default=None,
                        help="the schedule's parameter: lambda of exp(-lambda (i-1)) (default "
                             "0.05), gamma of i^-gamma (0.5), rate of rate^(i-1) (0.99), p (1)")
    recipe.add_argument("--target-accept", type=float, default=None,
                        help="target acceptance rate of dual averaging")
    recipe.add_argument("--objective", default=None,
                        help="esjd, esjd-sqrt-l, chees, ess-lag1, autocorrelation, min-ess, "
                             "or module:function for your own reward (positions, stats, "
                             "num_grads) -> float (adaptive-hmc: ess-lag1)")
    recipe.add_argument("--max-divergence-rate", type=float, default=None,
                        help="manual: a super-transition fails only when more than this "
                             "fraction of its steps diverged (default 0: any divergence; "
                             "for RMHMC/MSD, whose non-converged fixed points are rare, "
                             "exactly rejected divergences)")
    recipe.add_argument("--adapt-mass", choices=("diag", "dense"), default=None,
                        help="estimate the inverse mass matrix during the warm-up, with the "
                             "step size; the tuner takes over after it (for adaptive-hmc and "
                             "hmc-grid this is --metric)")
    recipe.add_argument("--mass-warmup", type=int, default=None,
                        help="super-transitions of mass adaptation (default: all of --warmup "
                             "in manual); the rest of the warm-up lets the tuner explore")
    _add_run_options(p)


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """The run-level options of ``adaptmc sample`` (any recipe)."""
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--thin", type=int, default=None,
                   help="keep every n-th draw (default: the recipe's, 1 unless it caps draws)")
    p.add_argument("--out", required=True, help="run folder to write")
    p.add_argument("--force", action="store_true", help="overwrite an existing run folder")
    p.add_argument("--checkpoint-every", type=int, default=10,
                   help="super-transitions between checkpoints")
    p.add_argument("--init", default=None, metavar="FILE",
                   help="starting point(s) in the target's unconstrained space: a .npy, .json "
                        "or whitespace-separated text file holding a (dim,) point (jittered "
                        "per chain by --init-jitter) or a (chains, dim) array (used as is)")
    p.add_argument("--init-jitter", type=float, default=0.5, metavar="J",
                   help="each chain starts at the point plus U(-J, J) per coordinate "
                        "(default 0.5; 0: every chain at the point)")
    p.add_argument("--float32", action="store_true", help="single precision (default: float64)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-compile-cache", action="store_true", help=COMPILE_CACHE_HELP)


def _add_adaptive_hmc_options(group) -> None:
    group.add_argument("--metric", default=None, choices=("auto", "diag", "dense", "low-rank"),
                       help="adaptive-hmc: the metric (auto: dense or low-rank-plus-diagonal "
                            "when the warm-up's draws are strongly correlated)")
    group.add_argument("--warmup-steps", type=int, default=None,
                       help="adaptive-hmc: NUTS warm-up transitions per chain (default 500)")
    group.add_argument("--tuning", type=int, default=None,
                       help="adaptive-hmc: bandit super-transitions before freezing, at most "
                            "(default 12; the stop rule may end tuning earlier)")
    group.add_argument("--stop-rule", default=None, choices=("ucb-lcb", "ucb", "ei"),
                       help="adaptive-hmc: what may end tuning early: the GP's regret bound "
                            "(ucb-lcb, default), the lead of its most optimistic setting over "
                            "the frozen one (ucb) or its largest expected improvement (ei)")
    group.add_argument("--stop-tolerance", type=float, default=None, metavar="FRACTION",
                       help="adaptive-hmc: end tuning once the stop rule's measure is at most "
                            "this fraction of the frozen setting's reward (default 0.1, 0.01 "
                            "for ei; 0: off, always --tuning super-transitions)")
    group.add_argument("--draws", type=int, default=None,
                       help="adaptive-hmc: about this many draws' worth of gradients per chain "
                            "in sampling (default 1000)")
    group.add_argument("--max-draws", type=int, default=None,
                       help="adaptive-hmc: kept draws per chain at most, by thinning")
    group.add_argument("--audition", type=int, default=None,
                       help="adaptive-portfolio: frozen super-transitions ending each "
                            "kernel's trial, on which it is scored (default 4)")


RECIPE_FLAGS = (
    "metric", "warmup_steps", "tuning", "stop_rule", "stop_tolerance", "draws", "max_draws",
    "audition", "kernel",
    "keep_adapting",
    "step_size", "num_leapfrog", "refresh_angle", "jitter", "inverse_mass",
    "super_transitions", "budget", "warmup", "adapt_until", "tuner", "grid", "box",
    "schedule", "anneal_rate", "target_accept", "objective", "adapt_mass", "mass_warmup",
    "max_divergence_rate",
)


def recipe_options(args) -> dict:
    """The recipe options given on the command line, parsed, under the recipe's names
    (``--adapt-mass`` is the ``metric`` of recipes that take one); the seed is passed too."""
    from adaptmc.recipes import recipe_options as accepted

    given = {name: getattr(args, name, None) for name in RECIPE_FLAGS}
    given = {name: value for name, value in given.items() if value is not None}
    if "inverse_mass" in given:
        given["inverse_mass"] = _inverse_mass(given["inverse_mass"])
    if "grid" in given:
        given["grid"] = parse_items(given["grid"], "--grid", "NAME=V1,V2,...", _grid_values)
    if "box" in given:
        given["box"] = parse_items(given["box"], "--box", "NAME=LOW:HIGH", _box_bounds)
    names = accepted(args.recipe)
    if "adapt_mass" in given and "adapt_mass" not in names and "metric" in names:
        given["metric"] = given.pop("adapt_mass")
    for name in given:
        if name not in names:
            flag = "--" + name.replace("_", "-")
            hint = " (--recipe manual sets any kernel and tuner by hand)" \
                if args.recipe != "manual" else ""
            raise ValueError(f"{flag} does not apply to recipe {args.recipe!r}{hint}")
    return {**given, "seed": args.seed}


def parse_items(items: list[str], flag: str, form: str, parse) -> dict:
    out = {}
    for item in items:
        name, sep, rest = item.partition("=")
        if not sep or not name.strip() or not rest:
            raise ValueError(f"{flag} {item!r}: expected {form}")
        try:
            out[name.strip()] = parse(rest)
        except ValueError:
            raise ValueError(f"{flag} {item!r}: expected {form} with numbers") from None
    return out


def _grid_values(text: str) -> list:
    return [_number(v) for v in text.split(",")]


def _box_bounds(text: str) -> tuple[float, float]:
    low, colon, high = text.partition(":")
    if not colon:
        raise ValueError(text)
    return float(low), float(high)


def _inverse_mass(text: str):
    import numpy as np

    try:
        return float(text)
    except ValueError:
        path = Path(text)
        if not path.is_file():
            raise ValueError(f"--inverse-mass {text!r}: no such file") from None
        from adaptmc.io import load_npy

        inverse_mass = load_npy(path)
        if not np.issubdtype(inverse_mass.dtype, np.floating) \
                and not np.issubdtype(inverse_mass.dtype, np.integer):
            raise ValueError(f"--inverse-mass {text!r}: expected real numbers, got "
                             f"{inverse_mass.dtype}") from None
        return inverse_mass


def _number(text: str):
    value = float(text)
    return int(value) if value.is_integer() and "." not in text and "e" not in text else value
