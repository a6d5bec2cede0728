"""Gaussian targets with known moments: isotropic, diagonal and dense.

Built-ins include Neal's (2011) 100-d Gaussian with standard deviations 0.01, 0.02, ..., 1
(Neal, "MCMC using Hamiltonian dynamics", Sec. 4.2) and the 2-d Gaussians with correlation
0.99 and variances 1 and 2 used by Wang (2012, Figs 2.1-2.4).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from adaptmc.targets.base import Reference, Target, make_target, with_reference


def gaussian(mean, cov, name: str = "gaussian", initial_position=None) -> Target:
    """A Gaussian ``N(mean, cov)``; ``cov`` is a scalar (isotropic), a ``(dim,)`` vector of
    variances (diagonal) or a ``(dim, dim)`` matrix (dense)."""
    mean = np.asarray(mean, dtype=float)
    if mean.ndim != 1:
        raise ValueError(f"mean must be a vector, got shape {mean.shape}")
    dim = mean.shape[0]
    cov = np.asarray(cov, dtype=float)
    if cov.ndim == 0:
        cov = np.full(dim, float(cov))
    if cov.ndim == 1:
        if cov.shape != (dim,) or np.any(cov <= 0):
            raise ValueError("diagonal covariance must be positive with the mean's length")
        # host arrays, constants of the compiled programs (`jnp.asarray` compiles one)
        precision_diag = 1.0 / cov
        mean_j = mean

        def logdensity(x):
            d = x - mean_j
            return -0.5 * jnp.sum(d * d * precision_diag)

        full_cov = np.diag(cov)
    elif cov.shape == (dim, dim):
        if not np.allclose(cov, cov.T):
            raise ValueError("covariance must be symmetric")
        chol = np.linalg.cholesky(cov)  # raises LinAlgError if not positive definite
        chol_j = jnp.asarray(chol)
        mean_j = jnp.asarray(mean)

        def logdensity(x):
            z = solve_triangular(chol_j, x - mean_j, lower=True)
            return -0.5 * jnp.sum(z * z)

        full_cov = cov
    else:
        raise ValueError(f"covariance of shape {cov.shape} does not match mean of length {dim}")
    start = np.zeros(dim) if initial_position is None else np.asarray(initial_position, float)
    target = make_target(
        logdensity,
        jax.device_put(start),  # as `jnp.asarray` made it, with no program compiled
        name=name,
        info={"mean": mean, "cov": full_cov},
    )
    sd = np.sqrt(np.diag(full_cov))
    return with_reference(target, Reference(target.parameter_names, mean, sd, None))


def neal_100d() -> Target:
    """Neal's 100-d Gaussian: independent, standard deviations 0.01, 0.02, ..., 1."""
    sds = np.linspace(0.01, 1.0, 100)
    return gaussian(np.zeros(100), sds**2, name="neal-100d", initial_position=np.full(100, 0.5))


def correlated_2d(variance: float = 1.0, covariance: float = 0.99) -> Target:
    """2-d Gaussian with covariance ``[[v, c], [c, v]]``; Wang (2012, Sec. 2.3) uses c = 0.99
    with v = 1 (correlation 0.99) and v = 2."""
    cov = np.array([[variance, covariance], [covariance, variance]])
    name = f"gauss-2d-v{variance:g}"
    return gaussian(np.zeros(2), cov, name=name, initial_position=np.array([1.0, -1.0]))


def gp_gaussian_51d(lengthscale: float = 0.4, variance: float = 1.0,
                    jitter: float = 0.01) -> Target:
    """51-d zero-mean Gaussian whose covariance is a Gaussian-process squared-exponential
    kernel ``K_ij = variance * exp(-(s_i - s_j)^2 / (2 lengthscale^2)) + jitter * delta_ij``
    on the regular grid ``s_i = 4 i / 50``, ``i = 0..50``.

    Titsias & Dellaportas (2019, Sec. 4) use such a target (an SE kernel on a regular grid
    plus small white noise) for its strong correlations; the constants here are ours:
    condition number about 1.2e3, so a diagonal preconditioner cannot fix it.
    """
    grid = np.linspace(0.0, 4.0, 51)
    diff = grid[:, None] - grid[None, :]
    cov = variance * np.exp(-0.5 * diff**2 / lengthscale**2) + jitter * np.eye(51)
    return gaussian(np.zeros(51), cov, name="gp-gauss-51d", initial_position=np.zeros(51))
