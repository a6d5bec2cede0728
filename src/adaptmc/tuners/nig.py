"""Bayesian parametric surrogate of the reward (Wang & de Freitas 2011, "Predictive
adaptation of hybrid Monte Carlo with Bayesian parametric bandits", Algorithm 2).

The reward is linear in ``K`` Gaussian radial basis functions of the unit-cube point ``u``,
``r = b + phi(u)^T w + e`` with ``phi_k(u) = exp(-|u - c_k|^2 / (2 h^2))`` (centres ``c_k``
from a Latin hypercube), ``e ~ N(0, s^2)``, the Normal-Inverse-Gamma prior
``w | s^2 ~ N(w0, s^2 V0)``, ``s^2 ~ IG(a0, b0)`` (``a0 = 5, b0 = 10, w0 = 0, V0 = 5 I``) and
a flat prior on the offset ``b``. Integrating ``b`` out centres the data (``n - 1`` effective
observations); the conjugate update is then (Murphy 2007, "Conjugate Bayesian analysis of
the Gaussian distribution", the NIG linear model)::

    V_n^-1 = V0^-1 + Phi_c^T Phi_c,   w_n = V_n (V0^-1 w0 + Phi_c^T y_c),
    a_n = a0 + (n - 1) / 2,           b_n = b0 + (y_c^T y_c + w0^T V0^-1 w0 - w_n^T V_n^-1 w_n) / 2,

with the Student-t predictive of ``2 a_n`` degrees of freedom, location
``ybar + (phi(u) - phibar)^T w_n`` and squared scale
``b_n / a_n (1 + 1/n + (phi(u) - phibar)^T V_n (phi(u) - phibar))``. The RBF width ``h`` is
integrated out by quadrature: a discrete uniform prior over ``widths`` weighted by each width's
marginal likelihood, so the predictive is a mixture of Student-t's.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import gammaln
from scipy.stats import qmc

DEFAULT_WIDTHS = (0.05, 0.1, 0.2, 0.4)


class NIGPrior(NamedTuple):
    """``w | s^2 ~ N(w0, s^2 V0)``, ``s^2 ~ IG(a0, b0)``; w0: ``(K,)``, V0: ``(K, K)``."""

    a0: float
    b0: float
    w0: np.ndarray
    V0: np.ndarray


class NIGPosterior(NamedTuple):
    """One width's posterior. w: ``(K,)``, V: ``(K, K)``, a, b: the IG parameters,
    y_mean: ``ybar``, phi_mean: ``(K,)`` ``phibar``, n: data count, log_evidence: the log
    marginal likelihood of the data (up to a width-independent constant)."""

    w: np.ndarray
    V: np.ndarray
    a: float
    b: float
    y_mean: float
    phi_mean: np.ndarray
    n: int
    log_evidence: float


def default_prior(num_features: int, a0: float = 5.0, b0: float = 10.0, v0: float = 5.0
                  ) -> NIGPrior:
    """The prior of Wang & de Freitas (2011): ``a0 = 5, b0 = 10, w0 = 0, V0 = 5 I``."""
    return NIGPrior(a0, b0, np.zeros(num_features), v0 * np.eye(num_features))


def latin_hypercube_centres(num_features: int, dim: int, seed: int) -> np.ndarray:
    """``(K, d)`` RBF centres from a Latin hypercube over the unit cube."""
    return qmc.LatinHypercube(d=dim, seed=np.random.default_rng(seed)).random(num_features)


def rbf_features(points: np.ndarray, centres: np.ndarray, width: float) -> np.ndarray:
    """``points: (n, d)``, ``centres: (K, d)`` -> ``(n, K)`` Gaussian RBF features."""
    points = np.atleast_2d(np.asarray(points, dtype=float))
    sq = np.sum((points[:, None, :] - centres[None, :, :]) ** 2, axis=-1)
    return np.exp(-0.5 * sq / width**2)


def nig_update(prior: NIGPrior, features: np.ndarray, values: np.ndarray) -> NIGPosterior:
    """Conjugate NIG update with the offset integrated out. ``features: (n, K)``,
    ``values: (n,)``, ``n >= 1``."""
    features = np.asarray(features, dtype=float)
    values = np.asarray(values, dtype=float)
    n = len(values)
    if n == 0:
        raise ValueError("nig_update needs at least one observation")
    phi_mean, y_mean = features.mean(0), float(values.mean())
    phi_c, y_c = features - phi_mean, values - y_mean
    prior_precision = np.linalg.inv(prior.V0)
    precision = prior_precision + phi_c.T @ phi_c
    V = np.linalg.inv(precision)
    V = 0.5 * (V + V.T)
    w = V @ (prior_precision @ prior.w0 + phi_c.T @ y_c)
    a = prior.a0 + 0.5 * (n - 1)
    b = prior.b0 + 0.5 * (
        y_c @ y_c + prior.w0 @ prior_precision @ prior.w0 - w @ precision @ w
    )
    _, logdet_v = np.linalg.slogdet(V)
    _, logdet_v0 = np.linalg.slogdet(prior.V0)
    log_evidence = (
        0.5 * (logdet_v - logdet_v0) + prior.a0 * np.log(prior.b0) - a * np.log(b)
        + gammaln(a) - gammaln(prior.a0) - 0.5 * (n - 1) * np.log(2 * np.pi) - 0.5 * np.log(n)
    )
    return NIGPosterior(w, V, float(a), float(b), y_mean, phi_mean, n, float(log_evidence))


def nig_predict(post: NIGPosterior, features: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                    float]:
    """Student-t predictive of a new reward. ``features: (m, K)`` -> location ``(m,)``,
    scale ``(m,)`` and degrees of freedom ``2 a_n``."""
    centred = np.atleast_2d(features) - post.phi_mean
    loc = post.y_mean + centred @ post.w
    quad = np.einsum("ij,jk,ik->i", centred, post.V, centred)
    scale = np.sqrt(post.b / post.a * (1.0 + 1.0 / post.n + quad))
    return loc, scale, 2.0 * post.a


class ParametricModel(NamedTuple):
    """The width mixture: one `NIGPosterior` per width and the posterior weights ``(W,)``."""

    centres: np.ndarray
    widths: np.ndarray
    posteriors: tuple[NIGPosterior, ...]
    weights: np.ndarray


def fit_parametric(points: np.ndarray, values: np.ndarray, centres: np.ndarray,
                   widths=DEFAULT_WIDTHS, prior: NIGPrior | None = None) -> ParametricModel:
    """Fit the NIG model for every width of the discrete uniform prior and weight each by its
    marginal likelihood. ``points: (n, d)`` unit-cube points, ``values: (n,)``."""
    widths = np.asarray(widths, dtype=float)
    prior = default_prior(len(centres)) if prior is None else prior
    posts = tuple(nig_update(prior, rbf_features(points, centres, h), values) for h in widths)
    log_ev = np.array([p.log_evidence for p in posts])
    weights = np.exp(log_ev - log_ev.max())
    return ParametricModel(centres, widths, posts, weights / weights.sum())


def parametric_predict(model: ParametricModel, points: np.ndarray) -> tuple[np.ndarray,
                                                                           np.ndarray]:
    """Mixture mean and standard deviation at ``points: (m, d)`` -> ``(m,)``, ``(m,)``."""
    means, second = 0.0, 0.0
    for h, post, weight in zip(model.widths, model.posteriors, model.weights, strict=True):
        loc, scale, dof = nig_predict(post, rbf_features(points, model.centres, h))
        var = scale**2 * dof / (dof - 2.0) if dof > 2 else np.full_like(scale, np.inf)
        means = means + weight * loc
        second = second + weight * (var + loc**2)
    return means, np.sqrt(np.maximum(second - means**2, 0.0))
