"""A low-rank-plus-diagonal inverse mass from draws and their gradients.

nutpie's low-rank modified mass matrix (Seyboldt, nutpie documentation, "Low rank modified
mass matrix adaptation"; nuts-rs ``transform/adapt/low_rank.rs``; the same form as
BlackJAX's ``LowRankInverseMassMatrix``)::

    M^{-1} = D^{1/2} (I + U (Lambda - I) U^T) D^{1/2}

1. ``D = sqrt(var(x) / var(grad))`` per coordinate (the diagonal estimate of
   `adaptmc.adaptation.window.window_inverse_mass`); draws and gradients are centred and
   scaled, ``z = (x - mean x) / D^{1/2}``, ``h = (g - mean g) D^{1/2}``.
2. The work is done in the span of the scaled draws and gradients (all of ``R^dim`` when
   there are at least ``dim`` draws; otherwise the left singular vectors of both, as nutpie).
3. There ``A = cov(z) + gamma I`` and ``B = cov(h) + gamma I``, and the estimate is their
   geometric mean, the SPD ``S`` with ``S B S = A`` (``S = B^{-1/2} (B^{1/2} A B^{1/2})^{1/2}
   B^{-1/2}``), which minimises the sample Fisher divergence of an affine transformation;
   for a Gaussian (``h = -Sigma_z^{-1} z``) it is the covariance exactly, whatever the
   number of draws above ``dim``.
4. The eigenpairs of ``S`` with eigenvalues outside ``[1/c, c]`` are kept (``U``,
   ``Lambda``); the others are set to 1, i.e. left to the diagonal.

What we chose where nutpie's documentation is silent or differs: the ridge ``gamma`` is a
fixed ``1e-3`` in the scaled unit (where every coordinate's variance is about 1), not
nutpie's ``P P^T / (n gamma) + I``; it bounds the eigenvalues to about ``[gamma, 1 /
gamma]`` relative to the diagonal and keeps ``A`` and ``B`` invertible in the span; ``c = 2``
(nutpie's default cutoff); the scale ``D^{1/2}`` is the square root of the diagonal inverse
mass, so that the metric with ``Lambda = I`` is exactly our diagonal metric; the mean is the
draws' mean (nutpie's optional translation ``mean x + D mean g`` is not used: HMC needs no
mean). ``max_rank`` keeps at most that many pairs, the most extreme in ``|log lambda|``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

LOW_RANK_CUTOFF = 2.0
LOW_RANK_RIDGE = 1e-3


class LowRankInverseMass(NamedTuple):
    """``M^{-1} = D^{1/2} (I + U (Lambda - I) U^T) D^{1/2}``.

    diag: ``(dim,)`` positive ``D``, the inverse mass when ``Lambda = I`` (a variance scale,
    as a diagonal ``inverse_mass`` is); vectors: ``(dim, k)`` orthonormal columns ``U``;
    values: ``(k,)`` positive eigenvalues ``Lambda`` of the diagonally scaled covariance
    along ``U``. A pytree of three arrays, so it travels at call time like any kernel
    parameter; every metric operation on it costs ``O(dim k)``
    (`adaptmc.kernels.metrics.low_rank_metric`).
    """

    diag: Any
    vectors: Any
    values: Any

    @property
    def rank(self) -> int:
        return int(np.shape(self.values)[0])


def low_rank_dense(inverse_mass: LowRankInverseMass) -> np.ndarray:
    """The ``(dim, dim)`` matrix a `LowRankInverseMass` stands for (tests and reports only:
    ``O(dim^2)``)."""
    diag, vectors, values = (np.asarray(a, dtype=float) for a in inverse_mass)
    inner = np.eye(diag.shape[0]) + (vectors * (values - 1.0)) @ vectors.T
    root = np.sqrt(diag)
    return root[:, None] * inner * root[None, :]


def low_rank_inverse_mass(draws: np.ndarray, grads: np.ndarray, *,
                          cutoff: float = LOW_RANK_CUTOFF, gamma: float = LOW_RANK_RIDGE,
                          max_rank: int | None = None) -> LowRankInverseMass:
    """The low-rank-plus-diagonal inverse mass (see the module docstring) from ``draws`` and
    their ``grads``, both ``(..., dim)`` (pooled over every leading axis), on the host."""
    dim = np.shape(draws)[-1]
    x = np.asarray(draws, dtype=float).reshape(-1, dim)
    g = np.asarray(grads, dtype=float).reshape(-1, dim)
    if x.shape[0] < 3:
        raise ValueError(f"a low-rank estimate needs at least 3 draws, got {x.shape[0]}")
    if not cutoff > 1.0:
        raise ValueError(f"cutoff must exceed 1, got {cutoff}")
    diag = _diagonal(x, g)
    root = np.sqrt(diag)
    z = (x - x.mean(0)) / root
    h = (g - g.mean(0)) * root
    basis = _span(z, h)
    zp, hp = z @ basis, h @ basis
    n, ridge = x.shape[0], gamma * np.eye(basis.shape[1])
    scaled = geometric_mean(zp.T @ zp / n + ridge, hp.T @ hp / n + ridge)
    values, vectors = np.linalg.eigh(scaled)
    keep = np.flatnonzero((values > cutoff) | (values < 1.0 / cutoff))
    if max_rank is not None and keep.size > max_rank:
        keep = keep[np.argsort(-np.abs(np.log(values[keep])))[:max_rank]]
    return LowRankInverseMass(diag, basis @ vectors[:, keep], values[keep])


def geometric_mean(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The SPD ``S`` with ``S b S = a``: ``b^{-1/2} (b^{1/2} a b^{1/2})^{1/2} b^{-1/2}``
    (the geometric mean of ``a`` and ``b^{-1}``; Bhatia 2007, "Positive Definite Matrices",
    Sec. 4.1)."""
    b_values, b_vectors = np.linalg.eigh(b)
    b_values = np.maximum(b_values, 1e-300)
    b_root = (b_vectors * np.sqrt(b_values)) @ b_vectors.T
    b_root_inv = (b_vectors / np.sqrt(b_values)) @ b_vectors.T
    inner_values, inner_vectors = np.linalg.eigh(b_root @ a @ b_root)
    inner_root = (inner_vectors * np.sqrt(np.maximum(inner_values, 0.0))) @ inner_vectors.T
    mean = b_root_inv @ inner_root @ b_root_inv
    return 0.5 * (mean + mean.T)


def _diagonal(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``sqrt(var(x) / var(g))`` with the safeguards of the diagonal estimate (a coordinate
    without gradient variance, or without draw variance, gets 1)."""
    var_x, var_g = x.var(0, ddof=1), g.var(0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.sqrt(var_x / np.where(var_g > 0, var_g, 1.0))
    ok = np.isfinite(ratio) & (ratio > 0)
    tiny = 1e-10 * max(float(np.median(ratio[ok])) if ok.any() else 1.0, 1e-300)
    return np.where(ok, ratio, 1.0) + tiny


def _span(z: np.ndarray, h: np.ndarray) -> np.ndarray:
    """An orthonormal ``(dim, r)`` basis of where the scaled draws and gradients lie: the
    identity when there are at least ``dim`` draws, else the left singular vectors of both
    (nutpie's subspace)."""
    n, dim = z.shape
    if n >= dim:
        return np.eye(dim)
    both = np.concatenate([z, h], axis=0).T
    left, singular, _ = np.linalg.svd(both, full_matrices=False)
    return left[:, singular > 1e-10 * singular[0]]
