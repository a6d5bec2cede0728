"""Welford accumulation of a mean and a sum of squares, the one estimator every warm-up and
kernel uses: one draw at a time inside compiled code (`welford_step`, Welford 1962) or a
batch of draws on the host (`welford_update`, Chan, Golub & LeVeque 1979 for the merge), and
Stan's regularised covariance estimate from it (Stan Reference Manual, "HMC algorithm
parameters")."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def welford_step(mean, m2, count, x):
    """Add one draw ``x: (dim,)`` to a running mean ``(dim,)`` and sum of squared deviations
    ``m2`` over ``count`` draws (Welford 1962): ``(dim,)`` per coordinate, or ``(dim, dim)``
    the scatter matrix (sum of outer products of deviations). In JAX, so it runs inside a
    kernel step or a compiled warm-up; returns the three updated."""
    count = count + 1.0
    delta = x - mean
    mean = mean + delta / count
    m2 = m2 + (jnp.outer(delta, x - mean) if m2.ndim == 2 else delta * (x - mean))
    return mean, m2, count


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
