"""Hamiltonian Monte Carlo with a fixed number of integrator steps.

Neal (2011), "MCMC using Hamiltonian dynamics", Secs. 3.2 and 5.3: the leapfrog integrator,
a unit, diagonal, dense or low-rank-plus-diagonal mass matrix, partial momentum refreshment
``p <- p cos(theta) + z sin(theta)`` (Horowitz 1991; Neal 2011, Sec. 5.3, momentum negated
on rejection) and step-size jitter ``eps * U(1 - j, 1 + j)`` (Neal 2011, Sec. 5.4.2.2).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from adaptmc.kernels.base import (
    INVERSE_MASS,
    JITTER,
    NUM_LEAPFROG,
    REFRESH_ANGLE,
    STEP_SIZE,
    Kernel,
    StepInfo,
    Tunable,
    check_inverse_mass,
    check_jitter,
    check_num_steps,
    check_positive,
    check_shape,
    jittered_step_size,
    metropolis_hastings,
    select,
)
from adaptmc.kernels.integrators import (
    LEAPFROG,
    IntegratorState,
    integrate,
    make_integrator,
    num_grads_per_step,
)
from adaptmc.kernels.metrics import euclidean_metric

Array = jax.Array


class HMCState(NamedTuple):
    """``momentum`` is NaN until the first step (then drawn in full), so partial
    refreshment starts from an exact draw."""

    position: Array
    logdensity: Array
    logdensity_grad: Array
    momentum: Array


class HMCParams(NamedTuple):
    """step_size: leapfrog step eps; num_leapfrog: steps per trajectory L (int, may be a
    traced value); inverse_mass: scalar, ``(dim,)``, ``(dim, dim)`` or a
    `adaptmc.kernels.metrics.LowRankInverseMass`; refresh_angle: theta
    of partial refreshment (pi/2 = full refreshment); jitter: j of the step-size jitter."""

    step_size: float = 0.1
    num_leapfrog: int = 10
    inverse_mass: Array | float = 1.0
    refresh_angle: float = math.pi / 2
    jitter: float = 0.0


def init(position: Array, target) -> HMCState:
    position = jnp.asarray(position)
    logdensity, grad = target.logdensity_and_grad(position)
    return HMCState(position, logdensity, grad, jnp.full_like(position, jnp.nan))


def step(key: Array, state: HMCState, target, params: HMCParams) -> tuple[HMCState, StepInfo]:
    """One HMC transition: refresh momentum, ``num_leapfrog`` leapfrog steps, M-H."""
    return _step(key, state, target, params, _LEAPFROG)


_LEAPFROG = make_integrator(LEAPFROG)


def _step(key, state: HMCState, target, params: HMCParams, integrator):
    key_momentum, key_jitter, key_accept = jax.random.split(key, 3)
    metric = euclidean_metric(params.inverse_mass)
    fresh = metric.sample_momentum(key_momentum, state.position)
    angle = jnp.asarray(params.refresh_angle, state.position.dtype)
    momentum = jnp.where(
        jnp.isnan(state.momentum), fresh, state.momentum * jnp.cos(angle) + fresh * jnp.sin(angle)
    )
    step_size = jittered_step_size(key_jitter, params.step_size, params.jitter)
    start = IntegratorState(state.position, momentum, state.logdensity, state.logdensity_grad)
    end = integrate(
        integrator, start, step_size, params.num_leapfrog, target.logdensity_and_grad, metric
    )
    energy_start = -start.logdensity + metric.kinetic_energy(momentum, state.position)
    energy_end = -end.logdensity + metric.kinetic_energy(end.momentum, end.position)
    num_grads = params.num_leapfrog * num_grads_per_step(LEAPFROG)
    accept, info = metropolis_hastings(key_accept, energy_start - energy_end, num_grads)
    info = info._replace(energy=jnp.where(accept, energy_end, energy_start))
    proposal = HMCState(end.position, end.logdensity, end.logdensity_grad, end.momentum)
    # on rejection the momentum is negated (only matters under partial refreshment)
    rejected = HMCState(state.position, state.logdensity, state.logdensity_grad, -momentum)
    return select(accept, proposal, rejected), info


def cost(params: HMCParams) -> int:
    return int(params.num_leapfrog) * num_grads_per_step(LEAPFROG)


def check_params(params: HMCParams, dim: int | None = None) -> None:
    check_positive("step_size", params.step_size)
    check_shape("step_size", params.step_size, dim)
    check_shape("inverse_mass", params.inverse_mass, dim, matrix=True)
    check_num_steps("num_leapfrog", params.num_leapfrog)
    check_inverse_mass(params.inverse_mass)
    if not 0.0 < float(params.refresh_angle) <= math.pi / 2:
        raise ValueError(f"refresh_angle must be in (0, pi/2], got {params.refresh_angle}")
    check_jitter(params.jitter)


TUNABLES = (
    Tunable("step_size", bounds=(0.01, 1.0), label="eps", stat="step_size"),
    Tunable("num_leapfrog", integer=True, bounds=(1, 100), label="L", stat="n_steps",
            cost_factor=True),
)

PARAMETERS = (STEP_SIZE, NUM_LEAPFROG, INVERSE_MASS, REFRESH_ANGLE, JITTER)

hmc = Kernel("hmc", init, step, cost, check_params, HMCParams, TUNABLES, PARAMETERS)
