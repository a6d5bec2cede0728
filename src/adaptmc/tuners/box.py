"""The search box of a bandit tuner: named parameters, bounds and integer flags.

Bandit and Bayesian-optimisation tuners (Wang 2012, Sec. 4.2; Wang & de Freitas 2011) search
a user-given box of kernel parameters. Internally every surrogate and acquisition works on the
unit cube ``[0, 1]^d``: a point ``x`` of the box maps to ``u = (x - lower) / (upper - lower)``,
so GP lengthscales "alpha times the box widths" are simply ``alpha`` in unit coordinates.
Integer parameters (``num_leapfrog``) are rounded when a unit point is mapped back.
Parameters flagged ``log`` map linearly in their logarithm, ``u = log(x / lower) /
log(upper / lower)``, so a box spanning decades (step sizes 0.01 to 1, 1 to 100 leapfrog steps)
gives each decade the same share of the unit cube, and GP lengthscales and DIRECT's
trisections act on relative changes: a good region such as ``L`` in 2..7 of 1..100 then covers
a quarter of the ``L`` axis rather than 5 %.

The default HMC box is ``step_size`` in ``[0.01, 1.0]`` and ``num_leapfrog`` in ``[1, 100]``:
it covers the step sizes that are stable for targets whose smallest scale lies between about
0.005 and 0.5 (for a Gaussian, leapfrog is unstable above twice the smallest standard
deviation, Neal 2011, Sec. 4.2) and trajectories of up to 100 gradient evaluations.
Give another box with `make_box` or, from the command line, ``--box step_size=0.001:0.2``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

INTEGER_PARAMETERS = ("num_leapfrog",)

HMC_DEFAULT_BOUNDS = {"step_size": (0.01, 1.0), "num_leapfrog": (1, 100)}


class Box(NamedTuple):
    """names: ``(d,)`` parameter names (fields of a kernel's ``Params``); lower, upper:
    ``(d,)`` bounds; integer: ``(d,)`` booleans, True where the parameter is an integer."""

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    integer: np.ndarray
    log: np.ndarray | None = None  # (d,) booleans, True where mapped in log scale

    @property
    def dim(self) -> int:
        return len(self.names)


def make_box(bounds: dict[str, tuple[float, float]], integer: tuple[str, ...] | None = None,
             log: tuple[str, ...] = ()) -> Box:
    """A `Box` from ``{name: (lower, upper)}``.

    Parameters
    ----------
    bounds
        Inclusive bounds for each parameter, ``lower < upper``.
    integer
        Names of the integer parameters; default: those in ``INTEGER_PARAMETERS``
        (``num_leapfrog``). Integer bounds must be integers.
    log
        Names of the parameters searched in log scale (bounds must be positive).
    """
    if not bounds:
        raise ValueError("a box needs at least one parameter")
    names = tuple(bounds)
    integer = tuple(n for n in names if n in INTEGER_PARAMETERS) if integer is None else integer
    unknown = (set(integer) | set(log)) - set(names)
    if unknown:
        raise ValueError(f"parameters {sorted(unknown)} are not in the box {names}")
    lower = np.array([float(bounds[n][0]) for n in names])
    upper = np.array([float(bounds[n][1]) for n in names])
    flags = np.array([n in integer for n in names])
    log_flags = np.array([n in log for n in names])
    for name, lo, hi, is_int in zip(names, lower, upper, flags, strict=True):
        if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
            raise ValueError(f"box for {name!r} must have finite lower < upper, got [{lo}, {hi}]")
        if is_int and not (lo.is_integer() and hi.is_integer()):
            raise ValueError(f"integer parameter {name!r} needs integer bounds, got [{lo}, {hi}]")
        if name in log and not lo > 0:
            raise ValueError(f"log-scale parameter {name!r} needs lower > 0, got {lo}")
    return Box(names, lower, upper, flags, log_flags)


def hmc_box(
    step_size: tuple[float, float] = HMC_DEFAULT_BOUNDS["step_size"],
    num_leapfrog: tuple[int, int] = HMC_DEFAULT_BOUNDS["num_leapfrog"],
    log: bool = False,
) -> Box:
    """The box over HMC's ``(step_size, num_leapfrog)``; defaults ``[0.01, 1] x [1, 100]``;
    ``log=True`` searches both in log scale."""
    return make_box({"step_size": step_size, "num_leapfrog": num_leapfrog},
                    log=("step_size", "num_leapfrog") if log else ())


def parse_box(items: list[str], default: Box | None = None) -> Box:
    """A box from command-line items ``NAME=LOW:HIGH`` (e.g. ``step_size=0.01:1``); names not
    given keep the bounds of ``default`` (default: `hmc_box`)."""
    default = hmc_box() if default is None else default
    bounds = {n: (lo, hi) for n, lo, hi in zip(default.names, default.lower, default.upper,
                                               strict=True)}
    for item in items:
        name, sep, rest = item.partition("=")
        low, colon, high = rest.partition(":")
        if not sep or not colon:
            raise ValueError(f"--box {item!r}: expected NAME=LOW:HIGH, e.g. step_size=0.01:1")
        try:
            bounds[name.strip()] = (float(low), float(high))
        except ValueError:
            raise ValueError(f"--box {item!r}: bounds must be numbers") from None
    return make_box(bounds)


def to_unit(box: Box, x: np.ndarray) -> np.ndarray:
    """``x: (..., d)`` in the box -> ``(..., d)`` in the unit cube."""
    x = np.asarray(x, dtype=float)
    linear = (x - box.lower) / (box.upper - box.lower)
    if box.log is None or not box.log.any():
        return linear
    with np.errstate(divide="ignore", invalid="ignore"):
        logged = np.log(x / box.lower) / np.log(box.upper / box.lower)
    return np.where(box.log, logged, linear)


def scale_unit(box: Box, u: np.ndarray) -> np.ndarray:
    """``u: (..., d)`` in the unit cube -> ``(..., d)`` in the box, log dimensions
    geometrically; neither clipped nor rounded (the continuous axes of a plot)."""
    u = np.asarray(u, dtype=float)
    x = box.lower + u * (box.upper - box.lower)
    if box.log is not None and box.log.any():
        x = np.where(box.log, box.lower * (box.upper / box.lower) ** u, x)
    return x


def from_unit(box: Box, u: np.ndarray) -> np.ndarray:
    """``u: (..., d)`` in the unit cube -> ``(..., d)`` in the box, clipped, integer
    parameters rounded."""
    x = scale_unit(box, np.clip(np.asarray(u, dtype=float), 0.0, 1.0))
    return np.where(box.integer, np.round(x), x)


def snap_unit(box: Box, u: np.ndarray) -> np.ndarray:
    """``u: (..., d)`` -> the unit point of the box point it stands for (integers rounded)."""
    return to_unit(box, from_unit(box, u))


def as_proposal(box: Box, x: np.ndarray) -> dict:
    """``x: (d,)`` box point -> ``{name: number}`` (Python ``int`` for integer parameters)."""
    x = np.asarray(x, dtype=float)
    return {
        name: int(round(v)) if is_int else float(v)
        for name, v, is_int in zip(box.names, x, box.integer, strict=True)
    }


def from_proposal(box: Box, proposal: dict) -> np.ndarray:
    """``{name: number}`` -> ``(d,)`` box point."""
    missing = set(box.names) - set(proposal)
    if missing:
        raise ValueError(f"proposal lacks parameters {sorted(missing)} of the box")
    return np.array([float(proposal[n]) for n in box.names])
