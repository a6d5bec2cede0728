"""The run's own starts, retried as Stan retries them: a chain whose default start (the
target's initial position, jittered) has a log density or gradient that is not finite starts
instead at the first of up to `STAN_TRIES` points drawn ``U(-2, 2)`` per coordinate on the
unconstrained scale where both are finite (Stan Reference Manual, "Initialization": random
inits on ``(-2, 2)``, up to 100 attempts). The draws are keyed (the run's ``"init"`` key
folded with `RETRY_FOLD`, then the chain), so a seed gives the same starts; every point
evaluated is counted. Only the run's own starts are retried: a start a user gives is checked
and refused (`adaptmc.targets.base.check_position`), never replaced.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.adaptation.host_random import key_rng
from adaptmc.targets.base import Target, evaluate_position, is_finite

STAN_RADIUS = 2.0
"""Stan's random inits: ``U(-2, 2)`` per unconstrained coordinate (``init=2``)."""
STAN_TRIES = 100
"""Stan's attempts at a finite start before it gives up."""
RETRY_FOLD = 2
"""Folded into the run's ``"init"`` key for the retries (1 is the tuner's,
`adaptmc.run.plan.run_keys`)."""


class Starts(NamedTuple):
    """positions: ``(chains, dim)``; evaluations: points evaluated to find them (each a log
    density and gradient, one per chain when every default start was finite); retries:
    per chain, the Stan draws tried (0 where the default start was finite)."""

    positions: jax.Array
    evaluations: int
    retries: tuple[int, ...]


def finite_starts(target: Target, first, key, what: str = "initial position") -> Starts:
    """The run's starts from its default ones ``first: (chains, dim)``: each kept where its
    log density and gradient are finite (then the array is returned as it is), else
    replaced by the first finite of `stan_draws`; `ValueError` naming the chain when none
    of them is finite either."""
    first = jnp.asarray(first, dtype=target.initial_position.dtype)
    rows = np.asarray(first)  # rows on the host: no slice compiled per chain
    replaced, retries, evaluations = {}, [], 0
    for chain in range(rows.shape[0]):
        label = f"{what} of chain {chain}"
        value, grad = evaluate_position(target, rows[chain], label)
        evaluations += 1
        tried = 0
        if not is_finite(value, grad):
            found, tried = _retried(target, key, chain)
            evaluations += tried
            if found is None:
                raise ValueError(
                    f"no start for chain {chain} of target {target.name!r}: the log density "
                    f"(here {float(value)}) or its gradient is not finite at the {label} "
                    f"nor at any of {STAN_TRIES} points drawn U(-{STAN_RADIUS:g}, "
                    f"{STAN_RADIUS:g}) on the unconstrained scale, as Stan tries; give "
                    "starts of positive density (init)")
            replaced[chain] = found
        retries.append(tried)
    if replaced:
        rows = np.array(rows)  # a copy: the device array's host view is read-only
        for chain, point in replaced.items():
            rows[chain] = point
        first = jnp.asarray(rows, dtype=target.initial_position.dtype)
    return Starts(first, evaluations, tuple(retries))


def _retried(target: Target, key, chain: int) -> tuple[np.ndarray | None, int]:
    """The first of chain ``chain``'s `stan_draws` with a finite log density and gradient
    (None if none is) and the number evaluated."""
    candidates = np.asarray(stan_draws(key, chain, target.dim, target.initial_position.dtype))
    for tried, point in enumerate(candidates, start=1):
        value, grad = evaluate_position(target, point, f"retried start of chain {chain}")
        if is_finite(value, grad):
            return point, tried
    return None, STAN_TRIES


def stan_draws(key, chain: int, dim: int, dtype=np.float64) -> np.ndarray:
    """``(STAN_TRIES, dim)`` points ``U(-2, 2)``, chain ``chain``'s retries under the run's
    ``"init"`` key ``key``, in the order they are tried (drawn on the host,
    `adaptmc.adaptation.host_random.key_rng`)."""
    points = key_rng(key, RETRY_FOLD, chain).uniform(-STAN_RADIUS, STAN_RADIUS, (STAN_TRIES, dim))
    return points.astype(dtype)
