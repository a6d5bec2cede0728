"""The options of a run, declared once: name, type, range, default and help.

``adaptmc sample``'s flags and their help are generated from `RUN_OPTIONS` and the recipes'
options (`adaptmc.declarations`; the parser is `adaptmc.cli.options`), and `adaptmc.sample`
checks its keywords with the same declarations, so the command line and the Python API
refuse the same values with the same words, before anything is loaded, run or written. An
`OptionError` names the option; the command line shows it as its flag (``--keep-adapting``),
Python as its keyword (``keep_adapting``). `check_resources` refuses sizes whose memory or
disk would exceed the machine's, naming the option to change.
"""

from __future__ import annotations

import math
import numbers
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

MAX_COUNT = 2**31 - 1  # counts index int32 arrays on the device
MAX_SEED = 2**63


class OptionError(ValueError):
    """A bad option value: ``str(err)`` names the keyword; `flag_message` the flag."""

    def __init__(self, name: str, problem: str):
        super().__init__(f"{name} {problem}")
        self.name, self.problem = name, problem

    def flag_message(self) -> str:
        return f"{flag(self.name)} {self.problem}"


def flag(name: str) -> str:
    """The command line's flag of the keyword ``name``: ``keep_adapting -> --keep-adapting``."""
    return "--" + name.replace("_", "-")


class Option(NamedTuple):
    """One option. kind: ``int``, ``float``, ``choice``, ``str``, ``bool``, ``value`` (a
    text parsed by ``parse`` on the command line, any object checked by ``check`` in
    Python) or ``array`` (a number or an array; on the command line a number or a ``.npy``
    file); low, high: the range (``open`` names the ends excluded: ``"low"``, ``"high"``,
    ``"both"``); choices: a tuple, or a function returning one; group: ``run``, ``adaptive``
    (the adaptive recipes) or ``manual`` (the kernel-and-tuner recipes); api: whether
    `adaptmc.sample` takes it under ``name``; none: whether None is allowed (the default)."""

    name: str
    kind: str
    help: str
    default: Any = None
    low: float | None = None
    high: float | None = None
    open: str = ""
    choices: tuple | Callable | None = None
    metavar: str | None = None
    group: str = "run"
    api: bool = True
    none: bool = True
    parse: Callable | None = None
    check: Callable | None = None

    def allowed(self) -> tuple:
        return tuple(self.choices()) if callable(self.choices) else tuple(self.choices or ())


def count_option(name, help, low=1, high=MAX_COUNT, group="run", **kw) -> Option:
    return Option(name, "int", help, low=low, high=high, group=group, **kw)


RUN_OPTIONS: tuple[Option, ...] = (
    Option("seed", "int", "the run's seed: the same seed, the same draws", 0, 0, MAX_SEED - 1,
           none=False),
    count_option("chains", "chains run in parallel (R-hat needs at least 2)", default=4,
                 high=65536, none=False),
    count_option("thin", "keep every n-th draw (default: the recipe's)"),
    count_option("checkpoint_every", "super-transitions between checkpoints", default=10,
                 api=False, none=False),
    Option("init_jitter", "float", "each chain starts at --init plus U(-J, J) per "
           "coordinate (0: every chain at the point)", 0.5, 0.0, 1e6, metavar="J",
           none=False),
    Option("heldout", "value", "held-out observations of --objective predictive: a "
           "fraction (drawn with --seed) or a data file", metavar="FRACTION|FILE",
           check=lambda v: _check_heldout(v)),
)


def _check_heldout(value) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float | str | dict) or (
            isinstance(value, int | float) and not 0.0 < value < 1.0):
        raise OptionError("heldout", "must be a fraction in (0, 1), a dict or a file, got "
                          f"{show_value(value)}")

ADAPTIVE = "adaptive"
MANUAL = "manual"

def check_value(option: Option, value: Any) -> Any:
    """``value`` checked against ``option``'s declaration and returned (an integral float
    of an ``int`` option as an int); else `OptionError` naming the option."""
    if value is None:
        if option.none:
            return None
        raise OptionError(option.name, "must be given (None is not a value)")
    if option.kind == "int":
        return _in_range(option, _integer(option.name, value))
    if option.kind == "float":
        return _in_range(option, _real(option.name, value))
    if option.kind == "choice" and isinstance(value, str):
        if value not in option.allowed():
            raise OptionError(option.name, f"must be one of {', '.join(option.allowed())}, "
                              f"got {value!r}")
        return value
    if option.kind == "bool" and not isinstance(value, bool):
        raise OptionError(option.name, f"must be True or False, got {show_value(value)}")
    if option.kind == "str" and not isinstance(value, str):
        raise OptionError(option.name, f"must be a string, got {show_value(value)}")
    if option.check is not None:
        option.check(value)
    elif option.kind == "choice":
        raise OptionError(option.name, f"must be one of {', '.join(option.allowed())}, got "
                          f"{show_value(value)}")
    return value


def check_options(values: Mapping[str, Any], declared: Mapping[str, Option] | None = None
                  ) -> dict:
    """The declared ``values`` checked (`check_value`); names not declared pass as they
    are (the recipe refuses those it does not take)."""
    if declared is None:
        from adaptmc.declarations import declarations

        declared = declarations()
    return {k: check_value(declared[k], v) if k in declared else v for k, v in values.items()}


def parse_text(option: Option, text: str) -> Any:
    """A command-line value: ``text`` converted to the option's kind and checked."""
    if option.kind == "int":
        value = _to_number(option.name, text, "an integer")
        if not isinstance(value, int) and not (math.isfinite(value) and value.is_integer()):
            raise OptionError(option.name, f"must be an integer, got {text!r}")
        value = int(value)
    elif option.kind == "float":
        value = _to_number(option.name, text, "a number")
    elif option.parse is not None:
        value = option.parse(text)
    else:
        value = text
    return check_value(option, value)


def _to_number(name: str, text: str, what: str):
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise OptionError(name, f"must be {what}, got {text!r}") from None


def _scalar(value: Any):
    """A real number as a Python int or float (NumPy and JAX scalars included), or None
    for anything else (bools, strings, arrays, objects)."""
    if isinstance(value, bool | str | bytes):
        return None
    if isinstance(value, numbers.Real):
        return value
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        return None
    return array.item() if array.ndim == 0 and array.dtype.kind in "iuf" else None


def _integer(name: str, value: Any) -> int:
    number = _scalar(value)
    if number is None:
        raise OptionError(name, f"must be an integer, got {show_value(value)}")
    if isinstance(number, numbers.Integral):
        return int(number)
    if not math.isfinite(number) or not float(number).is_integer():
        raise OptionError(name, f"must be an integer, got {show_value(value)}")
    return int(number)


def _real(name: str, value: Any) -> float:
    number = _scalar(value)
    if number is None:
        raise OptionError(name, f"must be a number, got {show_value(value)}")
    value = float(number)
    if not math.isfinite(value):
        raise OptionError(name, f"must be a finite number, got {value}")
    return value


def _in_range(option: Option, value):
    low_ok = option.low is None or (value > option.low if option.open in ("low", "both")
                                    else value >= option.low)
    high_ok = option.high is None or (value < option.high if option.open in ("high", "both")
                                      else value <= option.high)
    if not (low_ok and high_ok):
        raise OptionError(option.name, f"must be {describe_range(option)}, got {value}")
    return value


def describe_range(option: Option) -> str:
    """``"an integer in [1, 2147483647]"``, ``"a number in (0, 1)"``."""
    what = "an integer" if option.kind == "int" else "a number"
    left = "(" if option.open in ("low", "both") else "["
    right = ")" if option.open in ("high", "both") else "]"
    low = "-inf" if option.low is None else _fmt(option.low)
    high = "inf" if option.high is None else _fmt(option.high)
    return f"{what} in {left}{low}, {high}{right}"


def _fmt(number: float) -> str:
    if number == math.pi / 2:
        return "pi/2"
    return f"{number:g}" if isinstance(number, float) else str(number)


def show_value(value: Any) -> str:
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return f"{text} ({type(value).__name__})"


def invalid_examples(option: Option) -> list:
    """Values of 0, -1, NaN, +-inf, huge, just past the range, a non-integer and the wrong
    type that ``option``'s declaration refuses (for tests and audits: every declared
    option is checked with the same classes of bad input)."""
    if option.kind == "choice":
        return ["no-such-choice", 3]
    if option.kind not in ("int", "float"):
        return []
    out = []
    for value in (0, -1, 10.0**30 if option.kind == "float" else 10**30):
        try:
            check_value(option, value)
        except OptionError:
            out.append(value)
    out += [math.nan, math.inf, -math.inf, "2"]
    if option.high is not None:
        out.append(option.high + 1 if option.kind == "int"
                   else math.nextafter(option.high, math.inf))
    return out + ([2.5] if option.kind == "int" else [])


def machine_memory() -> int:
    """Bytes of memory this process may use: the machine's, or its cgroup's limit if lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        total = min(total, int(limit)) if limit.isdigit() else total
    except OSError:
        pass
    return total


def free_disk(path: str | os.PathLike) -> int:
    """Free bytes on the file system that would hold ``path`` (its nearest existing
    ancestor's)."""
    folder = Path(path).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free


def _size(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n / 1e3:.3g} kB"


def refuse_size(name: str, need: float, have: float, what: str, where: str) -> None:
    """`OptionError` naming ``name`` unless ``need`` bytes fit in ``have``."""
    if need > have:
        raise OptionError(name, f"is too large: {what} needs about {_size(need)} of "
                          f"{where}, and this machine has {_size(have)}; lower it")


def check_resources(values: Mapping[str, Any], dim: int, chains: int,
                    output_dir: str | os.PathLike | None = None, itemsize: int = 8) -> None:
    """Refuse, before any work, a NUTS warm-up (``warmup_steps``) whose transitions would
    not fit in half the machine's memory, and ``draws`` whose run folder (chunks and the
    final netCDF: twice the draws) would not fit on the output's disk."""
    steps = values.get("warmup_steps")
    if steps is not None:
        need = steps * (chains * (3 * dim + 16) * itemsize + 32)
        refuse_size("warmup_steps", need, machine_memory() / 2,
                    f"a warm-up of {steps} transitions x {chains} chains x dimension {dim}",
                    "memory (half of it)")
    draws = values.get("draws")
    if draws is not None and output_dir is not None:
        need = 2 * draws * chains * (dim + 8) * itemsize
        refuse_size("draws", need, free_disk(output_dir),
                    f"{draws} draws x {chains} chains x dimension {dim}", "free disk")


def check_run_resources(*, chains: int, dim: int, itemsize: int, draws_per_step: int,
                        super_transitions: int, checkpoint_every: int,
                        output_dir: str | os.PathLike | None) -> None:
    """Refuse a run whose draws of a super-transition (``budget`` over a step's cost and
    ``thin``; those until a checkpoint are held in memory) would not fit in half the
    machine's memory, or whose run folder would not fit on its disk."""
    per_draw = chains * (dim + 8) * itemsize
    held = min(checkpoint_every, super_transitions) if output_dir is not None \
        else super_transitions
    refuse_size("budget", 2 * held * draws_per_step * per_draw, machine_memory() / 2,
                f"{draws_per_step} kept draws per super-transition x {held} "
                f"super-transitions held in memory x {chains} chains x dimension {dim}",
                "memory (half of it)")
    if output_dir is not None:
        refuse_size("super_transitions", 2 * super_transitions * draws_per_step * per_draw,
                    free_disk(output_dir), f"{super_transitions} super-transitions x "
                    f"{draws_per_step} kept draws x {chains} chains x dimension {dim}",
                    "free disk")
