"""Adoption-probability schedules: plain callables ``i -> p_i`` (Optax's schedule shape).

After super-transition ``i`` (counted from 1) an annealed bandit takes a new proposal with
probability ``p_i`` and otherwise keeps its current setting; since ``p_i -> 0`` the kernel
changes ever more rarely, which gives diminishing adaptation (Roberts & Rosenthal 2007) and
so ergodicity (Wang 2012, Ch. 4; Wang, Mohamed & de Freitas 2013).

- `exponential`: ``p_i = exp(-lambda (i - 1))`` (Wang 2012, Algorithm 3), default lambda 0.05
  (the bandits' default, `adaptmc.tuners.bandit.ANNEAL_RATE`);
- `polynomial`: ``p_i = i^-gamma``;
- `geometric`: ``p_i = rate^(i - 1)``, i.e. ``p <- rate * p`` after each step
  (Wang & de Freitas 2011, Algorithm 2).
"""

from __future__ import annotations

import math
from collections.abc import Callable

Schedule = Callable[[int], float]


def exponential(rate: float = 0.05) -> Schedule:
    """``p_i = exp(-rate (i - 1))``, ``rate >= 0`` (Wang 2012, Algorithm 3)."""
    if not rate >= 0:
        raise ValueError(f"exponential schedule needs rate >= 0, got {rate}")
    return lambda i: math.exp(-rate * (max(int(i), 1) - 1))


def polynomial(gamma: float = 0.5) -> Schedule:
    """``p_i = i^-gamma``, ``gamma >= 0``."""
    if not gamma >= 0:
        raise ValueError(f"polynomial schedule needs gamma >= 0, got {gamma}")
    return lambda i: float(max(int(i), 1)) ** (-gamma)


def geometric(rate: float = 0.99) -> Schedule:
    """``p_i = rate^(i - 1)``, ``0 < rate <= 1`` (``p <- rate p``; Wang & de Freitas 2011)."""
    if not 0 < rate <= 1:
        raise ValueError(f"geometric schedule needs 0 < rate <= 1, got {rate}")
    return lambda i: rate ** (max(int(i), 1) - 1)


def constant(p: float = 1.0) -> Schedule:
    """``p_i = p``: with ``p = 1`` a new proposal every step (no annealing)."""
    if not 0 <= p <= 1:
        raise ValueError(f"constant schedule needs 0 <= p <= 1, got {p}")
    return lambda i: float(p)


SCHEDULES: dict[str, Callable[[float], Schedule]] = {
    "exp": exponential,
    "poly": polynomial,
    "geometric": geometric,
    "constant": constant,
}


def expected_adoptions(schedule: Schedule, num_steps: int) -> float:
    """``sum_{i=1}^{n-1} p_i + 1``: the expected number of distinct settings after ``n``
    steps (the first is always new; step ``i`` adopts after super-transition ``i``)."""
    return 1.0 + sum(schedule(i) for i in range(1, num_steps))
