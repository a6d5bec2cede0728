"""Maximisation of an acquisition function over the unit cube with DIRECT (Jones, Perttunen &
Stuckman 1993), the acquisition optimiser of the bandits.

`maximise_unit_cube` calls ``scipy.optimize.direct`` one point at a time; `direct_maximise`,
which the bandits use, is the same algorithm with the new points of each iteration evaluated
in one vectorised call (a GP prediction for a batch costs about what one point costs), and
returns the same maximiser. Both maximise; ``snap`` maps a unit point to the point it stands
for (integer parameters rounded, `adaptmc.tuners.box.snap_unit`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.optimize import direct


def maximise_unit_cube(
    acquisition: Callable[[np.ndarray], float],
    dim: int,
    snap: Callable[[np.ndarray], np.ndarray] | None = None,
    maxfun: int | None = None,
) -> tuple[np.ndarray, float]:
    """Maximise ``acquisition(u: (d,)) -> float`` over ``[0, 1]^d`` with DIRECT.

    ``snap`` maps a unit point to the point it stands for (integer parameters rounded, see
    `adaptmc.tuners.box.snap_unit`); the acquisition is evaluated, and the maximiser returned,
    at snapped points, so integer dimensions are searched as a piecewise-constant function.
    ``maxfun`` defaults to ``100 d`` evaluations. Returns ``(u_best: (d,), value)``.
    """
    snap = (lambda u: u) if snap is None else snap

    def negated(u):
        value = acquisition(snap(u))
        return -value if np.isfinite(value) else 1e300

    result = direct(
        negated, [(0.0, 1.0)] * dim, maxfun=maxfun or 100 * dim, locally_biased=False,
        len_tol=1e-4,
    )
    u_best = snap(np.asarray(result.x, dtype=float))
    return u_best, -float(result.fun)


def direct_maximise(
    acquisition: Callable[[np.ndarray], np.ndarray],
    dim: int,
    snap: Callable[[np.ndarray], np.ndarray] | None = None,
    maxfun: int | None = None,
    eps: float = 1e-4,
    len_tol: float = 1e-4,
) -> tuple[np.ndarray, float]:
    """Maximise ``acquisition(u: (m, d)) -> (m,)`` over ``[0, 1]^d`` with DIRECT (Jones,
    Perttunen & Stuckman 1993), evaluating the new points of each iteration in one call.

    The original (not locally biased) DIRECT: the cube is trisected into hyperrectangles
    sampled at their centres; each iteration divides the potentially optimal ones (on the
    lower-right convex hull of (centre-to-vertex distance, value), with Jones' ``eps``
    condition), sampling ``c +- side/3 e_j`` along their longest sides and splitting first
    along the side with the best sample. It stops after the iteration in which the
    evaluations reach ``maxfun`` or when the rectangle of the best point has a
    centre-to-vertex distance below ``len_tol``. ``maxfun`` defaults to ``100 d``: on 60
    random GP-UCB acquisitions in 2-d, 150-200 evaluations came within 5e-4 (on the [0, 1]
    reward scale) of the maximum found with 1000, at a fifth of the cost. ``snap`` as in
    `maximise_unit_cube`; non-finite values count as the worst. Returns ``(u_best: (d,), value)``.
    """
    snap = (lambda u: u) if snap is None else snap
    maxfun = maxfun or 100 * dim

    def negated(u):
        values = -np.asarray(acquisition(snap(u)), dtype=float).reshape(len(u))
        return np.where(np.isfinite(values), values, 1e300)

    centres = np.full((1, dim), 0.5)
    levels = np.zeros((1, dim), dtype=int)  # side j of a rectangle is 3^-levels[j]
    values = negated(centres)
    while len(values) < maxfun:
        sizes = 0.5 * np.sqrt(np.sum(9.0 ** -levels, axis=1))
        best = int(np.argmin(values))
        if sizes[best] < len_tol:
            break
        chosen = np.asarray(_potentially_optimal(sizes, values, eps), dtype=int)
        # one (rectangle, longest side) pair per row, rectangle-major; two new points per pair
        longest = levels[chosen] == levels[chosen].min(axis=1, keepdims=True)
        owner, side = np.nonzero(longest)
        delta = 3.0 ** -(levels[chosen[owner], side] + 1)
        points = np.repeat(centres[chosen[owner]], 2, axis=0)
        points[np.arange(0, len(points), 2), side] += delta
        points[np.arange(1, len(points), 2), side] -= delta
        new_values = negated(points)
        # split first along the side whose better sample is best (a stable sort within each
        # rectangle); the children along the k-th side are divided along sides 1..k
        best_of_pair = new_values.reshape(-1, 2).min(axis=1)
        order = np.lexsort((np.arange(len(owner)), best_of_pair, owner))
        rank = np.empty(len(owner), dtype=int)
        starts = np.flatnonzero(np.diff(owner[order], prepend=-1))
        rank[order] = np.arange(len(owner)) - np.repeat(starts, np.diff(starts,
                                                                      append=len(owner)))
        divided = (owner[:, None] == owner[None, :]) & (rank[None, :] <= rank[:, None])
        child = levels[chosen[owner]] + divided.astype(int) @ np.eye(dim, dtype=int)[side]
        levels[chosen] += longest
        centres = np.vstack([centres, points])
        levels = np.vstack([levels, np.repeat(child, 2, axis=0)])
        values = np.concatenate([values, new_values])
    best = int(np.argmin(values))
    return snap(centres[best]), -float(values[best])


def _potentially_optimal(sizes: np.ndarray, values: np.ndarray, eps: float) -> list[int]:
    """Indices of the potentially optimal rectangles (Jones et al. 1993, Definition 3.1): the
    best of each size that some rate constant ``K > 0`` makes best of all, with
    ``f - K size <= f_min - eps |f_min|``."""
    fmin = float(values.min())
    distinct, group = np.unique(np.round(sizes, 12), return_inverse=True)
    order = np.lexsort((values, group.reshape(-1)))
    first = np.diff(group.reshape(-1)[order], prepend=-1) != 0
    heads = order[first]  # the best rectangle of each size, sizes ascending
    f = values[heads]
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = (f[:, None] - f[None, :]) / (distinct[:, None] - distinct[None, :])
    upper = np.triu(np.ones((len(f), len(f)), dtype=bool), 1)  # (g, t): t larger than g
    k_low = np.where(upper.T, rates, -np.inf).max(axis=1)
    k_high = np.where(upper, rates, np.inf).min(axis=1)
    has_larger = np.arange(len(f)) < len(f) - 1
    ok = (k_low <= k_high) & ~(has_larger & (k_high <= 0))
    ok &= f - np.where(has_larger, k_high, np.inf) * distinct <= fmin - eps * abs(fmin)
    return [int(i) for i in heads[ok]]
