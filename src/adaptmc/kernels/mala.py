"""Metropolis-adjusted Langevin algorithm (Roberts & Tweedie 1996), preconditioned:
``y = x + (eps^2 / 2) M^{-1} grad log pi(x) + eps M^{-1/2} z`` with its M-H correction
(Girolami & Calderhead 2011, Eq. 10 with a constant metric)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from adaptmc.kernels.base import (
    INVERSE_MASS,
    STEP_SIZE,
    Kernel,
    StepInfo,
    Tunable,
    check_inverse_mass,
    check_positive,
    check_shape,
    metropolis_hastings,
    select,
)
from adaptmc.kernels.metrics import euclidean_metric

Array = jax.Array


class MALAState(NamedTuple):
    position: Array
    logdensity: Array
    logdensity_grad: Array


class MALAParams(NamedTuple):
    step_size: float = 0.1
    inverse_mass: Array | float = 1.0


def init(position: Array, target) -> MALAState:
    position = jnp.asarray(position)
    logdensity, grad = target.logdensity_and_grad(position)
    return MALAState(position, logdensity, grad)


def step(key: Array, state: MALAState, target, params: MALAParams) -> tuple[MALAState, StepInfo]:
    """One MALA step; one gradient evaluation."""
    key_proposal, key_accept = jax.random.split(key)
    metric = euclidean_metric(params.inverse_mass)
    eps = params.step_size
    x = state.position
    z = jax.random.normal(key_proposal, x.shape, x.dtype)
    drift_x = x + 0.5 * eps**2 * metric.inverse_mass_times(state.logdensity_grad, x)
    y = drift_x + eps * metric.scale(z, x)
    logdensity_y, grad_y = target.logdensity_and_grad(y)
    drift_y = y + 0.5 * eps**2 * metric.inverse_mass_times(grad_y, y)

    def log_q(a, drift_b):  # log N(a; drift_b, eps^2 M^{-1}) up to a constant
        return -metric.mass_quadratic(a - drift_b, x) / eps**2

    log_ratio = logdensity_y - state.logdensity + log_q(x, drift_y) - log_q(y, drift_x)
    accept, info = metropolis_hastings(key_accept, log_ratio, 1)
    return select(accept, MALAState(y, logdensity_y, grad_y), state), info


def cost(params: MALAParams) -> int:
    return 1


def check_params(params: MALAParams, dim: int | None = None) -> None:
    check_positive("step_size", params.step_size)
    check_shape("step_size", params.step_size, dim)
    check_shape("inverse_mass", params.inverse_mass, dim, matrix=True)
    check_inverse_mass(params.inverse_mass)


TUNABLES = (Tunable("step_size", bounds=(0.01, 1.0), label="eps", stat="step_size"),)

mala = Kernel("mala", init, step, cost, check_params, MALAParams, TUNABLES,
              (STEP_SIZE, INVERSE_MASS))
