"""Shared test utilities: z-scores in MCSE units."""

from __future__ import annotations

import warnings

import numpy as np

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import arviz as az


def mcse_mean(draws: np.ndarray) -> np.ndarray:
    """``draws: (chains, draws, dim) -> (dim,)`` Monte Carlo standard error of the mean."""
    # az.mcse returns shape (1,) for a (chains, draws) array in some ArviZ versions
    return np.array([np.ravel(az.mcse(draws[..., i], method="mean"))[0]
                     for i in range(draws.shape[-1])])


def moment_z_scores(draws, true_mean, true_var):
    """z-scores of the sample mean and of the sample second central moment (about the true
    mean) against their known values, in MCSE units estimated from the chains."""
    draws = np.asarray(draws, dtype=float)
    z_mean = (draws.mean(axis=(0, 1)) - true_mean) / mcse_mean(draws)
    sq = (draws - true_mean) ** 2
    z_var = (sq.mean(axis=(0, 1)) - true_var) / mcse_mean(sq)
    return z_mean, z_var


def counting_gaussian(scales):
    """``(logdensity, count)``: a centred Gaussian with sds ``scales`` whose log density adds
    one to ``count[0]`` per evaluation (a host callback: once per point, also under
    ``vmap``), the counter the gradient-count tests compare a run's record with."""
    import jax
    import jax.numpy as jnp

    count = [0]

    def add(_):
        count[0] += 1

    def logdensity(x):
        jax.debug.callback(add, x)
        return -0.5 * jnp.sum((x / scales) ** 2)

    return logdensity, count

