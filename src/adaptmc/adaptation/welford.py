"""Welford accumulation of a mean and a sum of squares over batches of draws (Welford 1962;
Chan, Golub & LeVeque 1979 for the batch merge), and Stan's regularised covariance estimate
from it (Stan Reference Manual, "HMC algorithm parameters")."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def welford_step(mean, scatter, count, x):
    """Add one draw ``x: (dim,)`` to a running mean ``(dim,)`` and scatter matrix
    ``(dim, dim)`` (sum of outer products of deviations) over ``count`` draws (Welford 1962),
    in JAX so it runs inside a kernel step; returns the three updated."""
    count = count + 1.0
    delta = x - mean
    mean = mean + delta / count
    scatter = scatter + jnp.outer(delta, x - mean)
    return mean, scatter, count


def welford_update(count, mean, m2, draws: np.ndarray, dense: bool):
    """Add ``draws: (n, dim)`` to a Welford accumulator.

    Parameters
    ----------
    count, mean, m2
        Draws so far, their mean ``(dim,)`` and sum of squared deviations: ``(dim,)``
        (diagonal) or ``(dim, dim)`` (``dense``).

    Returns
    -------
    ``(count, mean, m2)`` with ``draws`` included.
    """
    n = draws.shape[0]
    if n == 0:
        return count, mean, m2
    batch_mean = draws.mean(axis=0)
    centred = draws - batch_mean
    batch_m2 = centred.T @ centred if dense else np.sum(centred**2, axis=0)
    delta = batch_mean - mean
    total = count + n
    new_mean = mean + delta * n / total
    correction = np.outer(delta, delta) if dense else delta**2
    new_m2 = m2 + batch_m2 + correction * count * n / total
    return float(total), new_mean, new_m2


def regularised_covariance(count: float, m2: np.ndarray) -> np.ndarray:
    """Stan's regularised estimate ``(n / (n + 5)) C + 1e-3 (5 / (n + 5)) I`` from a Welford
    sum of squares ``m2`` over ``count = n`` draws: diagonal (``(dim,)``) or dense
    (``(dim, dim)``)."""
    cov = m2 / max(count - 1.0, 1.0)
    shrink = count / (count + 5.0)
    jitter = 1e-3 * 5.0 / (count + 5.0)
    if cov.ndim == 1:
        return shrink * cov + jitter
    return shrink * cov + jitter * np.eye(cov.shape[0])
