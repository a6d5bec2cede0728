"""The search box of a bandit tuner: named parameters, bounds and integer flags.

Bandit and Bayesian-optimisation tuners (Wang 2012, Sec. 4.2; Wang & de Freitas 2011) search
a user-given box of kernel parameters. Internally every surrogate and acquisition works on the
unit cube ``[0, 1]^d``: a point ``x`` of the box maps to ``u = (x - lower) / (upper - lower)``,
so GP lengthscales "alpha times the box widths" are simply ``alpha`` in unit coordinates.
Integer parameters are rounded when a unit point is mapped back. Parameters flagged ``log``
map linearly in their logarithm, ``u = log(x / lower) / log(upper / lower)``, so a box spanning
decades gives each decade the same share of the unit cube, and GP lengthscales and DIRECT's
trisections act on relative changes: a good region such as 2..7 of 1..100 then covers a
quarter of its axis rather than 5 %.

A kernel declares its tunable parameters with their default bounds and integer flags
(`adaptmc.kernels.base.Tunable`); `box_from_tunables` builds the default box from them, and
`parse_box` overrides its bounds from the command line (``--box NAME=LOW:HIGH``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


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


def make_box(bounds: dict[str, tuple[float, float]], integer: tuple[str, ...] = (),
             log: tuple[str, ...] = ()) -> Box:
    """A `Box` from ``{name: (lower, upper)}``.

    Parameters
    ----------
    bounds
        Inclusive bounds for each parameter, ``lower < upper``.
    integer
        Names of the integer parameters (their bounds must be integers).
    log
        Names of the parameters searched in log scale (bounds must be positive).
    """
    if not bounds:
        raise ValueError("a box needs at least one parameter")
    names = tuple(bounds)
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


def box_from_tunables(tunables, bounds: dict[str, tuple[float, float]] | None = None,
                      log: tuple[str, ...] = ()) -> Box:
    """The box over a kernel's tunable parameters.

    Parameters
    ----------
    tunables
        The kernel's ``tunables`` (`adaptmc.kernels.base.Tunable`): names, integer flags,
        default bounds and log flags.
    bounds
        ``{name: (lower, upper)}`` overriding the default bounds of those tunables.
    log
        Names searched in log scale, besides the tunables flagged ``log``.
    """
    bounds = dict(bounds or {})
    names = tuple(t.name for t in tunables)
    unknown = set(bounds) - set(names)
    if unknown:
        raise ValueError(f"parameters {sorted(unknown)} are not tunable (tunable: {names})")
    merged = {}
    for tunable in tunables:
        merged[tunable.name] = bounds.get(tunable.name, tunable.bounds)
        if merged[tunable.name] is None:
            raise ValueError(f"tunable {tunable.name!r} has no default bounds; give them")
    integer = tuple(t.name for t in tunables if t.integer)
    log = tuple(dict.fromkeys((*(t.name for t in tunables if t.log), *log)))
    return make_box(merged, integer=integer, log=log)


def parse_box(items: list[str], default: Box) -> Box:
    """A box from command-line items ``NAME=LOW:HIGH`` (e.g. ``x=0.01:1``); names not
    given keep the bounds of ``default``, and integer and log flags are those of
    ``default``."""
    bounds = {n: (lo, hi) for n, lo, hi in zip(default.names, default.lower, default.upper,
                                               strict=True)}
    for item in items:
        name, sep, rest = item.partition("=")
        low, colon, high = rest.partition(":")
        if not sep or not colon:
            raise ValueError(f"--box {item!r}: expected NAME=LOW:HIGH, e.g. x=0.01:1")
        try:
            bounds[name.strip()] = (float(low), float(high))
        except ValueError:
            raise ValueError(f"--box {item!r}: bounds must be numbers") from None
    flags = zip(default.names, default.integer,
                default.log if default.log is not None else [False] * default.dim, strict=True)
    flags = list(flags)
    return make_box(bounds, integer=tuple(n for n, i, _ in flags if i),
                    log=tuple(n for n, _, lg in flags if lg))


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


def unit_snapper(box: Box):
    """``u: (m, d) -> (m, d)``, `snap_unit` of ``box`` with the box's constants computed once
    and only its log and integer columns treated as such: the same values, at a third of
    the cost (the acquisition optimiser snaps every batch it evaluates)."""
    width = box.upper - box.lower
    logs = np.flatnonzero(box.log) if box.log is not None else np.zeros(0, dtype=int)
    integers = np.flatnonzero(box.integer)
    low, ratio = box.lower[logs], box.upper[logs] / box.lower[logs]
    log_ratio = np.log(ratio)

    def snap(u: np.ndarray) -> np.ndarray:
        u = np.clip(np.asarray(u, dtype=float), 0.0, 1.0)
        x = box.lower + u * width
        x[..., logs] = low * ratio ** u[..., logs]
        x[..., integers] = np.round(x[..., integers])
        out = (x - box.lower) / width
        out[..., logs] = np.log(x[..., logs] / low) / log_ratio
        return out

    return snap


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
