"""Metrics: how momentum is drawn and what kinetic energy it carries.

A `Metric` is a NamedTuple of functions (as in BlackJAX's ``metrics.py``), each taking the
position too, so a position-dependent (Riemannian) metric has the same shape as a Euclidean
one. The Euclidean metric is built from the inverse mass matrix passed at call time: a
scalar (unit mass times a constant), a ``(dim,)`` diagonal, or a ``(dim, dim)`` dense matrix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

Array = jax.Array


class Metric(NamedTuple):
    """``sample_momentum(key, position) -> p``; ``kinetic_energy(p, position) -> scalar``;
    ``velocity(p, position) -> dK/dp``; ``scale(v, position)`` multiplies a vector by a
    square root S of the inverse mass (``S S^T = M^{-1}``, for RWM and MALA proposals);
    ``inverse_mass_times(v, position) = M^{-1} v``; ``mass_quadratic(d, position) =
    d^T M d / 2``, the exponent of a Gaussian displacement with covariance ``M^{-1}``."""

    sample_momentum: Callable[[Array, Array], Array]
    kinetic_energy: Callable[[Array, Array], Array]
    velocity: Callable[[Array, Array], Array]
    scale: Callable[[Array, Array], Array]
    inverse_mass_times: Callable[[Array, Array], Array]
    mass_quadratic: Callable[[Array, Array], Array]


def euclidean_metric(inverse_mass: Array) -> Metric:
    """Gaussian kinetic energy ``K(p) = p^T M^{-1} p / 2`` (Neal 2011, Sec. 5.4.1)."""
    inverse_mass = jnp.asarray(inverse_mass)
    if inverse_mass.ndim <= 1:
        sqrt_inv = jnp.sqrt(inverse_mass)

        def sample_momentum(key, position):
            return jax.random.normal(key, position.shape, position.dtype) / sqrt_inv

        def kinetic_energy(p, position):
            return 0.5 * jnp.sum(p * p * inverse_mass)

        def velocity(p, position):
            return inverse_mass * p

        def scale(v, position):
            return sqrt_inv * v

        def inverse_mass_times(v, position):
            return inverse_mass * v

        def mass_quadratic(d, position):
            return 0.5 * jnp.sum(d * d / inverse_mass)

    elif inverse_mass.ndim == 2:
        chol = jnp.linalg.cholesky(inverse_mass)  # M^{-1} = L L^T, so M = L^{-T} L^{-1}

        def sample_momentum(key, position):
            z = jax.random.normal(key, position.shape, position.dtype)
            return solve_triangular(chol, z, lower=True, trans="T")

        def kinetic_energy(p, position):
            return 0.5 * p @ (inverse_mass @ p)

        def velocity(p, position):
            return inverse_mass @ p

        def scale(v, position):
            return chol @ v

        def inverse_mass_times(v, position):
            return inverse_mass @ v

        def mass_quadratic(d, position):
            z = solve_triangular(chol, d, lower=True)
            return 0.5 * jnp.sum(z * z)

    else:
        raise ValueError(
            f"inverse mass must be a scalar, vector or matrix; got {inverse_mass.shape}"
        )
    return Metric(
        sample_momentum, kinetic_energy, velocity, scale, inverse_mass_times, mass_quadratic
    )
