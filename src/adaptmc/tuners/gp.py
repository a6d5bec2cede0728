"""Gaussian-process surrogate of the reward over the unit cube (Rasmussen & Williams 2006,
Algorithm 2.1), as used by the GP bandit of Wang (2012, Algorithm 3).

The kernel is the ARD squared exponential
``k(u, u') = s^2 exp(-1/2 sum_j (u_j - u'_j)^2 / l_j^2)`` with lengthscales ``l_j`` (in unit
coordinates, so ``l_j = alpha`` is "alpha times the box width"). Repeated evaluations of one
point enter the GP once, as their mean with noise variance ``sigma^2 / count``: this is the
same posterior as keeping every replicate, but the Cholesky factor has one row per *unique*
point, so the cost stays bounded while an annealed bandit re-runs its current setting forever.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class GPPosterior(NamedTuple):
    """A GP conditioned on data.

    points: ``(n, d)`` unique inputs; weights: ``(n,)`` ``K_y^-1 (y - m)``; precision:
    ``(n, n)`` ``K_y^-1``; lengthscales: ``(d,)``; signal_var: ``s^2``; mean: the constant
    prior mean ``m``.
    """

    points: np.ndarray
    weights: np.ndarray
    precision: np.ndarray
    lengthscales: np.ndarray
    signal_var: float
    mean: float


def sq_exp_kernel(a: np.ndarray, b: np.ndarray, lengthscales, signal_var: float) -> np.ndarray:
    """ARD squared-exponential covariance. ``a: (n, d)``, ``b: (m, d)`` -> ``(n, m)``."""
    a = np.atleast_2d(np.asarray(a, dtype=float)) / lengthscales
    b = np.atleast_2d(np.asarray(b, dtype=float)) / lengthscales
    sq = np.sum(a**2, 1)[:, None] + np.sum(b**2, 1)[None, :] - 2.0 * a @ b.T
    return signal_var * np.exp(-0.5 * np.maximum(sq, 0.0))


def unique_points(points: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                    np.ndarray]:
    """Merge repeated rows. ``points: (n, d)``, ``values: (n,)`` -> unique ``(k, d)``, the
    mean value at each ``(k,)`` and the count of each ``(k,)`` (rows in first-seen order)."""
    points = np.asarray(points, dtype=float).reshape(len(values), -1)
    if len(values) == 0:
        return points, np.zeros(0), np.zeros(0, dtype=int)
    _, first, inverse, counts = np.unique(
        points, axis=0, return_index=True, return_inverse=True, return_counts=True
    )
    inverse = inverse.reshape(-1)
    sums = np.bincount(inverse, weights=np.asarray(values, dtype=float), minlength=len(counts))
    order = np.argsort(first)
    return points[first[order]], (sums / counts)[order], counts[order]


def gp_fit(
    points: np.ndarray,
    values: np.ndarray,
    lengthscales,
    signal_var: float = 1.0,
    noise_var: float = 0.01,
    mean: float | None = None,
) -> GPPosterior:
    """Condition the GP on ``values: (n,)`` at ``points: (n, d)``; repeated points are merged
    (`unique_points`). ``mean=None`` uses the mean of the unique values as the prior mean."""
    pts, vals, counts = unique_points(points, values)
    dim = pts.shape[1] if pts.ndim == 2 else 0
    lengthscales = np.broadcast_to(np.asarray(lengthscales, dtype=float), (dim,)).copy()
    prior_mean = float(np.mean(vals)) if mean is None and len(vals) else float(mean or 0.0)
    if len(vals) == 0:
        return GPPosterior(pts, np.zeros(0), np.zeros((0, 0)), lengthscales, signal_var,
                           prior_mean)
    gram = sq_exp_kernel(pts, pts, lengthscales, signal_var)
    gram[np.diag_indices_from(gram)] += noise_var / counts + 1e-10 * signal_var
    inv_chol = _lower_inverse(np.linalg.cholesky(gram))  # raises LinAlgError if not PD
    precision = inv_chol.T @ inv_chol
    weights = precision @ (vals - prior_mean)
    return GPPosterior(pts, weights, precision, lengthscales, float(signal_var), prior_mean)


def _lower_inverse(chol: np.ndarray, block: int = 32) -> np.ndarray:
    """Inverse of a lower-triangular ``(n, n)`` matrix by blocks,
    ``[[A, 0], [C, D]]^-1 = [[A^-1, 0], [-D^-1 C A^-1, D^-1]]``, with LAPACK only on blocks of
    at most ``block`` rows. Why not ``cho_solve(factor, I)`` or ``inv``: OpenBLAS threads its
    triangular solves and inverses from about 64 rows, and on a machine whose cores are busy
    those calls took 10-100 ms of CPU for 50-100 points (0.05-0.2 ms single-threaded); matrix
    products stay fast."""
    n = len(chol)
    if n <= block:
        return np.linalg.inv(chol)
    half = n // 2
    a_inv = _lower_inverse(chol[:half, :half], block)
    d_inv = _lower_inverse(chol[half:, half:], block)
    out = np.zeros_like(chol)
    out[:half, :half] = a_inv
    out[half:, half:] = d_inv
    out[half:, :half] = -(d_inv @ chol[half:, :half]) @ a_inv
    return out


def gp_predict(post: GPPosterior, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and standard deviation of the latent reward (noise excluded)
    (Rasmussen & Williams 2006, Eqs. 2.25-2.26). ``query: (m, d)`` -> ``(m,)``, ``(m,)``."""
    query = np.atleast_2d(np.asarray(query, dtype=float))
    if len(post.weights) == 0:
        m = len(query)
        return np.full(m, post.mean), np.full(m, np.sqrt(post.signal_var))
    cross = sq_exp_kernel(query, post.points, post.lengthscales, post.signal_var)
    mu = post.mean + cross @ post.weights
    var = post.signal_var - np.sum((cross @ post.precision) * cross, axis=1)
    return mu, np.sqrt(np.maximum(var, 0.0))


def gp_predict_one(post: GPPosterior, u: np.ndarray) -> tuple[float, float]:
    """`gp_predict` at one point ``u: (d,)``, lean enough to be called thousands of times by
    DIRECT."""
    if len(post.weights) == 0:
        return post.mean, float(np.sqrt(post.signal_var))
    diff = post.points - u
    cross = post.signal_var * np.exp(-0.5 * ((diff * diff) @ post.lengthscales**-2.0))
    var = post.signal_var - cross @ (post.precision @ cross)
    return post.mean + float(cross @ post.weights), float(np.sqrt(max(var, 0.0)))
