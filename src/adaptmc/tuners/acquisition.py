"""Acquisition functions: what the bandits maximise over the unit cube.

UCB with ``beta_i = 2 log(d (i+1)^2 pi^2 / (3 delta))`` (Wang 2012, Algorithm 3, after
Srinivas et al. 2010; the bonus is scaled by the adoption probability ``p_i``), expected
improvement and probability of improvement for a Gaussian predictive (Jones et al. 1998;
Kushner 1964), EI for a Student-t predictive and for the NIG width mixture (Wang & de Freitas
2011), and the GP-Hedge portfolio probabilities (Hoffman, Brochu & de Freitas 2011). The
optimiser that maximises them is `adaptmc.tuners.optimise`. All of them maximise: higher
reward is better.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import gammaln, ndtr, stdtr

from adaptmc.tuners.nig import ParametricModel

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT2 = math.sqrt(2.0)


def ucb_beta(i: int, dim: int, delta: float = 0.1) -> float:
    """``beta_i = 2 log(d (i+1)^2 pi^2 / (3 delta))`` at step ``i >= 1`` (Wang 2012,
    Algorithm 3, after Srinivas et al. 2010)."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    return 2.0 * math.log(dim * (i + 1) ** 2 * math.pi**2 / (3.0 * delta))


def ucb(mu, sd, beta: float, scale: float = 1.0):
    """``mu + scale * sqrt(beta) * sd``; ``scale = p_i`` gives the annealed acquisition of
    Wang (2012, Algorithm 3). Shapes broadcast."""
    return mu + scale * math.sqrt(beta) * sd


def expected_improvement(mu, sd, best: float, xi: float = 0.0):
    """Gaussian EI ``(mu - best - xi) Phi(z) + sd phi(z)``, ``z = (mu - best - xi) / sd``
    (Jones et al. 1998, Eq. 15); ``max(mu - best - xi, 0)`` where ``sd = 0``."""
    if isinstance(mu, float) and isinstance(sd, float):  # DIRECT's one-point calls
        gap = mu - best - xi
        if sd <= 0:
            return max(gap, 0.0)
        z = gap / sd
        return gap * 0.5 * math.erfc(-z / _SQRT2) + sd * math.exp(-0.5 * z * z - _LOG_SQRT_2PI)
    mu, sd = np.asarray(mu, dtype=float), np.asarray(sd, dtype=float)
    gap = mu - best - xi
    safe = np.where(sd > 0, sd, 1.0)
    z = gap / safe
    ei = gap * ndtr(z) + safe * np.exp(-0.5 * z**2 - _LOG_SQRT_2PI)
    return np.where(sd > 0, ei, np.maximum(gap, 0.0))


def probability_of_improvement(mu, sd, best: float, xi: float = 0.0):
    """``Phi((mu - best - xi) / sd)`` (Kushner 1964); a step function where ``sd = 0``."""
    if isinstance(mu, float) and isinstance(sd, float):
        gap = mu - best - xi
        return 0.5 * math.erfc(-gap / (sd * _SQRT2)) if sd > 0 else float(gap > 0)
    mu, sd = np.asarray(mu, dtype=float), np.asarray(sd, dtype=float)
    gap = mu - best - xi
    return np.where(sd > 0, ndtr(gap / np.where(sd > 0, sd, 1.0)), (gap > 0).astype(float))


def student_t_expected_improvement(loc, scale, dof, best: float):
    """EI for a Student-t predictive with location ``loc``, scale ``scale`` and ``dof > 1``
    degrees of freedom: ``(loc - best) T(z) + scale (dof + z^2) / (dof - 1) t(z)`` with
    ``z = (loc - best) / scale`` (the t-analogue of Jones et al. 1998, Eq. 15; used with the
    NIG model of Wang & de Freitas 2011). Shapes broadcast."""
    loc, scale, dof = (np.asarray(v, dtype=float) for v in (loc, scale, dof))
    return _t_ei(loc, scale, dof, best, student_t_log_norm(dof))


def student_t_log_norm(dof):
    """``log Gamma((dof+1)/2) - log Gamma(dof/2) - log(dof pi) / 2``, the log normaliser of
    the standard Student-t density (precomputed by callers that evaluate EI many times)."""
    dof = np.asarray(dof, dtype=float)
    return gammaln((dof + 1) / 2) - gammaln(dof / 2) - 0.5 * np.log(dof * np.pi)


def _t_ei(loc, scale, dof, best, log_norm):
    z = (loc - best) / scale
    density = np.exp(log_norm - (dof + 1) / 2 * np.log1p(z**2 / dof))
    return (loc - best) * stdtr(dof, z) + scale * (dof + z**2) / (dof - 1) * density


def hedge_probabilities(gains: np.ndarray, eta: float = 1.0) -> np.ndarray:
    """``p_j = exp(eta g_j) / sum_k exp(eta g_k)`` (Hoffman et al. 2011, GP-Hedge).
    ``gains: (k,)`` -> ``(k,)``."""
    logits = eta * np.asarray(gains, dtype=float)
    logits = logits - np.max(logits)
    weights = np.exp(logits)
    return weights / weights.sum()


def nig_mixture_ei(model: ParametricModel, incumbent: float
                   ) -> Callable[[np.ndarray], np.ndarray]:
    """``u: (m, d) -> (m,)``, ``sum_h weight_h EI_t(u; h)``: the Student-t EI of the NIG width
    mixture (Wang & de Freitas 2011, Algorithm 2) over ``incumbent``, with the per-width
    posteriors stacked so that a batched optimiser's calls stay cheap."""
    keep = model.weights > 1e-8
    widths = model.widths[keep]
    posts = [p for p, k in zip(model.posteriors, keep, strict=True) if k]
    weights = model.weights[keep]
    w = np.stack([p.w for p in posts])
    V = np.stack([p.V for p in posts])
    phi_mean = np.stack([p.phi_mean for p in posts])
    y_mean = np.array([p.y_mean for p in posts])
    scale2 = np.array([p.b / p.a for p in posts])
    dof = np.array([2.0 * p.a for p in posts])
    inv_n = 1.0 / posts[0].n
    log_norm = student_t_log_norm(dof)
    centres = model.centres

    def ei(u):
        u = np.atleast_2d(u)
        sq = np.sum((u[:, None, :] - centres[None]) ** 2, axis=2)  # (m, K)
        centred = np.exp(-0.5 * sq[None] / widths[:, None, None] ** 2) - phi_mean[:, None]
        loc = y_mean[:, None] + np.einsum("wmk,wk->wm", centred, w)
        quad = np.einsum("wmj,wmj->wm", np.einsum("wmk,wjk->wmj", centred, V), centred)
        scale = np.sqrt(scale2[:, None] * (1.0 + inv_n + quad))
        return weights @ _t_ei(loc, scale, dof[:, None], incumbent, log_norm[:, None])

    return ei
