"""Adoption-probability schedules: callables ``i -> p_i`` (Optax's schedule shape).

After super-transition ``i`` (counted from 1) an annealed bandit takes a new proposal with
probability ``p_i`` and otherwise keeps its current setting; since ``p_i -> 0`` the kernel
changes ever more rarely, which gives diminishing adaptation (Roberts & Rosenthal 2007) and
so ergodicity (Wang 2012, Ch. 4; Wang, Mohamed & de Freitas 2013).

- `exponential`: ``p_i = exp(-lambda (i - 1))`` (Wang 2012, Algorithm 3), default lambda 0.05
  (the bandits' default, `adaptmc.tuners.annealed.ANNEAL_RATE`);
- `polynomial`: ``p_i = i^-gamma``;
- `geometric`: ``p_i = rate^(i - 1)``, i.e. ``p <- rate * p`` after each step
  (Wang & de Freitas 2011, Algorithm 2);
- `constant`: ``p_i = p``.

The built-ins are `NamedSchedule` values, callables that also say what they are, so a tuner
can record its schedule (`schedule_config`) and a plot can rebuild it
(`schedule_from_config`). Any other callable ``i -> p_i`` works as a schedule too; it is
recorded as ``"custom"``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

Schedule = Callable[[int], float]


def _exp(rate: float, i: int) -> float:
    return math.exp(-rate * (max(int(i), 1) - 1))


def _poly(gamma: float, i: int) -> float:
    return float(max(int(i), 1)) ** (-gamma)


def _geometric(rate: float, i: int) -> float:
    return rate ** (max(int(i), 1) - 1)


def _constant(p: float, i: int) -> float:
    return float(p)


_FORMULAS = {"exp": _exp, "poly": _poly, "geometric": _geometric, "constant": _constant}


class NamedSchedule(NamedTuple):
    """A built-in schedule: ``kind`` (a key of `SCHEDULES`) and its one parameter ``rate``
    (lambda, gamma, rate or p); calling it gives ``p_i``."""

    kind: str
    rate: float

    def __call__(self, i: int) -> float:
        return _FORMULAS[self.kind](self.rate, i)


def exponential(rate: float = 0.05) -> NamedSchedule:
    """``p_i = exp(-rate (i - 1))``, ``rate >= 0`` (Wang 2012, Algorithm 3)."""
    if not rate >= 0:
        raise ValueError(f"exponential schedule needs rate >= 0, got {rate}")
    return NamedSchedule("exp", float(rate))


def polynomial(gamma: float = 0.5) -> NamedSchedule:
    """``p_i = i^-gamma``, ``gamma >= 0``."""
    if not gamma >= 0:
        raise ValueError(f"polynomial schedule needs gamma >= 0, got {gamma}")
    return NamedSchedule("poly", float(gamma))


def geometric(rate: float = 0.99) -> NamedSchedule:
    """``p_i = rate^(i - 1)``, ``0 < rate <= 1`` (``p <- rate p``; Wang & de Freitas 2011)."""
    if not 0 < rate <= 1:
        raise ValueError(f"geometric schedule needs 0 < rate <= 1, got {rate}")
    return NamedSchedule("geometric", float(rate))


def constant(p: float = 1.0) -> NamedSchedule:
    """``p_i = p``: with ``p = 1`` a new proposal every step (no annealing)."""
    if not 0 <= p <= 1:
        raise ValueError(f"constant schedule needs 0 <= p <= 1, got {p}")
    return NamedSchedule("constant", float(p))


SCHEDULES: dict[str, Callable[[float], NamedSchedule]] = {
    "exp": exponential,
    "poly": polynomial,
    "geometric": geometric,
    "constant": constant,
}


def schedule_config(schedule: Schedule) -> dict:
    """JSON-able facts of a schedule: ``{"schedule": kind, "anneal_rate": rate}`` for a
    built-in, ``{"schedule": "custom"}`` for any other callable."""
    if isinstance(schedule, NamedSchedule):
        return {"schedule": schedule.kind, "anneal_rate": schedule.rate}
    return {"schedule": "custom"}


def schedule_from_config(config: dict) -> Schedule | None:
    """The schedule `schedule_config` described, or None for a custom one."""
    kind = config.get("schedule")
    if kind not in SCHEDULES:
        return None
    return SCHEDULES[kind](config["anneal_rate"])


def expected_adoptions(schedule: Schedule, num_steps: int) -> float:
    """``sum_{i=1}^{n-1} p_i + 1``: the expected number of distinct settings after ``n``
    steps (the first is always new; step ``i`` adopts after super-transition ``i``)."""
    return 1.0 + sum(schedule(i) for i in range(1, num_steps))
