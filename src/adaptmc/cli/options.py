"""The command line's parser and the parsing of its values: `build_parser` (every command
and its flags) and `recipe_options` (the flags a recipe takes, parsed, under its names)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

COMPILE_CACHE_HELP = ("compile every program afresh (default: cached in ~/.cache/adaptmc/jax "
                      "or $ADAPTMC_COMPILE_CACHE)")


class Parser(argparse.ArgumentParser):
    """argparse, whose refusal of a command line is one line (the usage is in ``--help``)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the "
                     "options)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="adaptmc", description="Self-tuning MCMC: HMC, MALA and RWM with online tuners."
    )
    debug = Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the traceback of an error")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name, **kwargs):
        return sub.add_parser(name, parents=[debug], **kwargs)

    sample = add("sample", help="run chains on a target and write a run folder",
                 usage="adaptmc sample --target NAME --out DIR [--recipe NAME] [options]")
    add_sample_arguments(sample)

    resume = add("resume", help="continue a checkpointed run folder")
    resume.add_argument("run_dir", help="the run folder (its config.json says what to run)")
    resume.add_argument("--no-progress", action="store_true", help="no progress bar")
    resume.add_argument("--no-compile-cache", action="store_true", help=COMPILE_CACHE_HELP)
    resume.add_argument("--trust-code", action="store_true",
                        help="import the module:function the run folder's config.json names "
                             "(code from a folder you received can do anything)")
    resume.add_argument("--target", default=None, metavar="MODULE:FUNCTION",
                        help="confirm the run's module:function target by naming it")
    resume.add_argument("--objective", default=None, metavar="MODULE:FUNCTION",
                        help="confirm the run's module:function objective by naming it")

    summ = add("summary", help="print the summary of a finished run folder")
    summ.add_argument("run_dir", help="a finished run folder (holding draws.nc)")
    summ.add_argument("--rows", type=_rows, default=12, metavar="N",
                      help="parameters to show (N >= 1; default 12)")

    add("targets", help="list the built-in targets")

    predict = add("predict", help="posterior predictive draws of a finished run folder "
                  "(NumPyro, PyMC or Stan model) into RUN/posterior_predictive.nc")
    predict.add_argument("run_dir", help="a finished run folder (holding draws.nc)")
    predict.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    predict.add_argument("--trust-code", action="store_true",
                         help="import the module:function the run folder's config.json names")
    predict.add_argument("--target", default=None, metavar="MODULE:FUNCTION",
                         help="confirm the run's module:function target by naming it")

    return parser


def _rows(text: str) -> int:
    try:
        rows = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from None
    if rows < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {rows}")
    return rows


def add_sample_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``adaptmc sample``, generated from their declarations
    (`adaptmc.options`): the run's, then the recipes' (default: the recipe's; an option the
    recipe does not take is refused)."""
    from adaptmc.declarations import recipe_declarations
    from adaptmc.options import ADAPTIVE, MANUAL, RUN_OPTIONS
    from adaptmc.recipes import DEFAULT_RECIPE, RECIPES

    run = p.add_argument_group("run options")
    run.add_argument("--target", required=True, metavar="NAME|MODULE:FUNCTION|FILE.stan",
                     help="a built-in target (`adaptmc targets`), module:function "
                          "returning a target (the module importable from here), or a Stan "
                          "program (model.stan; needs adaptmc[stan] and a C++ compiler)")
    run.add_argument("--data", default=None, metavar="FILE",
                     help="the Stan program's data (.json or .json.zip)")
    run.add_argument("--recipe", default=DEFAULT_RECIPE, choices=sorted(RECIPES),
                     help="the sampler (default adaptive-hmc: NUTS warm-up, then NUTS or, "
                          "on a long run, tuned HMC; adaptive-portfolio: HMC or gadMALA by "
                          "trial; manual: any kernel, tuner)")
    run.add_argument("--out", required=True, metavar="DIR", help="run folder to write")
    run.add_argument("--force", action="store_true",
                     help="replace an existing run folder (once the new run's first "
                          "checkpoint is written)")
    for option in RUN_OPTIONS:
        add_declared(run, option)
    run.add_argument("--init", default=None, metavar="FILE",
                     help="start: a .json object of named values ({\"tau\": 2}), or "
                          "an unconstrained (dim,) point or (chains, dim) array (.npy, "
                          ".json, text)")
    run.add_argument("--float32", action="store_true",
                     help="single precision (default: float64)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--no-compile-cache", action="store_true", help=COMPILE_CACHE_HELP)
    titles = {ADAPTIVE: "adaptive-hmc and adaptive-portfolio options",
              MANUAL: "manual options (also bandit-hmc, gradient-adaptive, hmc-da, "
                      "hmc-grid where they take them)"}
    declared = recipe_declarations()
    for group, title in titles.items():
        section = p.add_argument_group(title)
        for option in declared:
            if option.group == group:
                add_declared(section, option)


def add_declared(group, option) -> None:
    """The flag of a declared option: its text parsed and checked by the declaration
    (a bad value is argparse's one-line error naming the flag)."""
    from adaptmc.options import OptionError, flag, parse_text

    def parse(text: str):
        try:
            return parse_text(option, text)
        except OptionError as err:
            raise argparse.ArgumentTypeError(err.problem) from None

    kwargs = {"default": option.default,
              "metavar": option.metavar or {"int": "N", "float": "X"}.get(option.kind)}
    notes = []
    if option.kind == "choice":
        choices = option.allowed()
        kwargs.update(choices=choices, metavar="NAME" if len(choices) > 4 else None)
        if len(choices) > 4 and not all(c in option.help for c in choices):
            notes.append(f"one of {', '.join(choices)}")
    elif option.kind in ("value", "array"):
        kwargs["action"] = "append" if option.name in ("grid", "box") else "store"
    else:
        kwargs["type"] = parse
        notes.append(short_range(option))
    if option.default is not None:
        notes.append(f"default {option.default}")
    text = option.help + (f" ({'; '.join(notes)})" if notes else "")
    group.add_argument(flag(option.name), help=text, **kwargs)


def short_range(option) -> str:
    """``N >= 1``, ``X in (0, 1]``: the range of a declared number, for its help."""
    from adaptmc.options import MAX_COUNT, describe_range

    name = kwargs_metavar = option.metavar or ("N" if option.kind == "int" else "X")
    if option.high is not None and option.high >= MAX_COUNT and option.low is not None:
        return f"{kwargs_metavar} >= {option.low}"
    return f"{name} in " + describe_range(option).split(" in ", 1)[1]


def recipe_options(args) -> dict:
    """The recipe options given on the command line, parsed, under the recipe's names
    (``--adapt-mass`` is the ``metric`` of recipes that take one); the seed is passed too."""
    from adaptmc.declarations import recipe_declarations
    from adaptmc.recipes import recipe_options as accepted

    declared = recipe_declarations()
    given = {o.name: getattr(args, o.name, None) for o in declared}
    given = {name: value for name, value in given.items() if value is not None}
    for option in declared:
        if option.kind == "array" and option.name in given:
            given[option.name] = _array(given[option.name], option.name)
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


def _array(text: str, name: str):
    """A number, or the array of a ``.npy`` file, for the array parameter ``name``."""
    import numpy as np

    from adaptmc.options import flag

    try:
        return float(text)
    except ValueError:
        path = Path(text)
        if not path.is_file():
            raise ValueError(f"{flag(name)} {text!r}: no such file") from None
        from adaptmc.io import load_npy

        array = load_npy(path)
        if not np.issubdtype(array.dtype, np.floating) \
                and not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"{flag(name)} {text!r}: expected real numbers, got "
                             f"{array.dtype}") from None
        return array


def _number(text: str):
    value = float(text)
    return int(value) if value.is_integer() and "." not in text and "e" not in text else value


def read_init(text: str):
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
            if path.suffix == ".json" and raw.lstrip().startswith("{"):
                return _named_init(text, json.loads(raw))
            values = np.asarray(json.loads(raw) if path.suffix == ".json"
                                else [line.split() for line in raw.splitlines() if line.strip()],
                                dtype=float)
        except (ValueError, UnicodeDecodeError, TypeError) as err:
            raise ValueError(f"--init {text!r}: expected real numbers ({err})") from None
        values = values[0] if values.ndim == 2 and values.shape[0] == 1 else values
    if values.dtype.kind not in "fiu" or not np.all(np.isfinite(values)):
        raise ValueError(f"--init {text!r}: expected finite real numbers")
    return np.asarray(values, dtype=float)


def _named_init(text: str, values) -> dict:
    """A ``.json`` object of named constrained values, each a number or nested lists."""
    import numpy as np

    try:
        return {str(k): np.asarray(v, dtype=float).tolist() for k, v in values.items()}
    except (ValueError, TypeError) as err:
        raise ValueError(f"--init {text!r}: expected real numbers ({err})") from None
