"""Random-walk Metropolis with Gaussian proposal ``y = x + eps * M^{-1/2} z``
(Metropolis et al. 1953; the preconditioner is the same ``inverse_mass`` HMC takes)."""

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


class RWMState(NamedTuple):
    position: Array
    logdensity: Array


class RWMParams(NamedTuple):
    """step_size: proposal scale eps; inverse_mass: proposal covariance shape (scalar,
    ``(dim,)`` or ``(dim, dim)``), so the proposal covariance is ``eps^2 inverse_mass``."""

    step_size: float = 0.1
    inverse_mass: Array | float = 1.0


def init(position: Array, target) -> RWMState:
    position = jnp.asarray(position)
    return RWMState(position, target.logdensity(position))


def step(key: Array, state: RWMState, target, params: RWMParams) -> tuple[RWMState, StepInfo]:
    """One RWM step; costs one log-density evaluation (counted as ``num_grads = 1``)."""
    key_proposal, key_accept = jax.random.split(key)
    metric = euclidean_metric(params.inverse_mass)
    z = jax.random.normal(key_proposal, state.position.shape, state.position.dtype)
    proposal = state.position + params.step_size * metric.scale(z, state.position)
    logdensity = target.logdensity(proposal)
    accept, info = metropolis_hastings(key_accept, logdensity - state.logdensity, 1)
    return select(accept, RWMState(proposal, logdensity), state), info


def cost(params: RWMParams) -> int:
    return 1


def check_params(params: RWMParams, dim: int | None = None) -> None:
    check_positive("step_size", params.step_size)
    check_shape("step_size", params.step_size, dim)
    check_shape("inverse_mass", params.inverse_mass, dim, matrix=True)
    check_inverse_mass(params.inverse_mass)


TUNABLES = (Tunable("step_size", bounds=(0.01, 1.0), label="eps", stat="step_size"),)

rwm = Kernel("rwm", init, step, cost, check_params, RWMParams, TUNABLES,
             (STEP_SIZE, INVERSE_MASS))
