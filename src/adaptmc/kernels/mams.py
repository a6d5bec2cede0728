"""Metropolis-adjusted microcanonical Hamiltonian Monte Carlo (MAMS).

Robnik, Cohn-Gordon & Seljak (2025), "Metropolis adjusted microcanonical Hamiltonian Monte
Carlo" (MAMS; BlackJAX's ``adjusted_mclmc`` and ``adjusted_mclmc_dynamic``): each transition
draws a fresh velocity uniformly on the unit sphere (full refreshment), runs ``num_leapfrog``
steps of the isokinetic (ESH) dynamics of Steeg & Galstyan (2021), whose velocity keeps unit
norm, with the velocity Verlet splitting ``B(eps/2) A(eps) B(eps/2)`` (one gradient per
step), and accepts with probability ``min(1, exp(-W))``, ``W = U(x') - U(x) + Delta K``:
the change of the potential ``U = -log p`` plus the kinetic energy change ``Delta K`` the
isokinetic velocity updates accumulate (``(d - 1)`` times a log factor per update; BlackJAX's
``esh_dynamics_momentum_update_one_step``, whose closed form we use as it is). The step size
is jittered per transition, ``eps U(1 - j, 1 + j)`` (Neal 2011, Sec. 5.4.2.2), which
randomises the trajectory length at a fixed gradient cost (BlackJAX's
``adjusted_mclmc_dynamic`` draws the number of steps instead; here it stays fixed so that
`cost` is a Python int). The number of steps is named ``num_leapfrog``, as HMC's, so the
tuners and the mass warm-up that set HMC's steps set these (velocity Verlet is a leapfrog).

The metric is ours, not BlackJAX's. With ``S`` the square root of the inverse mass that
`adaptmc.kernels.metrics.euclidean_metric` builds (``S S^T = M^{-1}``: diagonal, dense
Cholesky factor, or low-rank-plus-diagonal ``s R``), the dynamics run in the frame
``x = x0 + S z`` with unit metric: the velocity ``u`` lives in ``z``, the velocity update
sees the gradient ``S^T grad log p(x)`` (``S^T`` by ``jax.linear_transpose`` of ``S``) and
the position moves ``x += eps S u``. For a diagonal or low-rank ``M^{-1}`` this is BlackJAX's
own preconditioning (its ``forward_L`` and ``adjoint_L``); for a dense one, which BlackJAX's
isokinetic integrator does not take, it is the same map with the Cholesky factor. The
frame's Jacobian is constant, so ``W`` is the same in ``x`` and ``z``.

The isokinetic dynamics needs ``d >= 2`` (a unit velocity in one dimension is +-1 and the
update divides by ``d - 1``). `StepInfo.energy` is NaN: a unit velocity carries no
Gaussian kinetic energy, so Stan's ``energy__`` (E-BFMI) is not defined.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.kernels.base import (
    INVERSE_MASS,
    JITTER,
    NUM_LEAPFROG,
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
from adaptmc.kernels.metrics import euclidean_metric

Array = jax.Array


class MAMSState(NamedTuple):
    """No velocity: every transition draws a fresh one."""

    position: Array
    logdensity: Array
    logdensity_grad: Array


class MAMSParams(NamedTuple):
    """step_size: the isokinetic step eps (a scalar; about ``sqrt(d)`` times HMC's leapfrog
    step on the same whitened target, as the velocity has unit norm); num_leapfrog: velocity
    Verlet steps per transition (int, may be a traced value); inverse_mass: scalar, ``(dim,)``,
    ``(dim, dim)`` or a `adaptmc.kernels.metrics.LowRankInverseMass`; jitter: j of the
    step-size jitter."""

    step_size: float = 1.0
    num_leapfrog: int = 10
    inverse_mass: Array | float = 1.0
    jitter: float = 0.0


def init(position: Array, target) -> MAMSState:
    position = jnp.asarray(position)
    logdensity, grad = target.logdensity_and_grad(position)
    return MAMSState(position, logdensity, grad)


def _isokinetic_step(target, scale, scale_transpose):
    """One velocity Verlet step of the isokinetic dynamics in the frame ``x = x0 + S z``:
    BlackJAX's two-stage splitting with its ESH velocity update (on ``S^T grad``) and a
    position update through our target and ``S``. Returns ``step(state, step_size) ->
    (state, kinetic_energy_change)``."""
    from blackjax.mcmc import integrators

    esh_update = integrators.esh_dynamics_momentum_update_one_step(1.0)

    def velocity_update(velocity, grad, step_size, coef, previous=None, is_last_call=False):
        return esh_update(velocity, scale_transpose(grad), step_size, coef, previous,
                          is_last_call)

    def position_update(position, velocity, step_size, coef, info=None):
        position = position + step_size * coef * scale(velocity)
        logdensity, grad = target.logdensity_and_grad(position)
        return position, logdensity, grad, info

    return integrators.generalized_two_stage_integrator(
        velocity_update, position_update, integrators.velocity_verlet_coefficients,
        format_output_fn=integrators.format_isokinetic_state_output)


def _trajectory(target, metric, state: MAMSState, velocity, step_size, num_steps):
    """``num_steps`` isokinetic steps from ``state`` with unit ``velocity``; returns the end
    ``IntegratorState`` and the summed kinetic energy change."""
    from blackjax.mcmc.integrators import IntegratorState

    def scale(v):
        return metric.scale(v, state.position)

    transpose = jax.linear_transpose(scale, state.position)

    def scale_transpose(g):
        return transpose(g)[0]

    one_step = _isokinetic_step(target, scale, scale_transpose)

    def body(_, carry):
        integrator_state, kinetic_change = carry
        integrator_state, change = one_step(integrator_state, step_size)
        return integrator_state, kinetic_change + change

    start = IntegratorState(state.position, velocity, state.logdensity, state.logdensity_grad)
    zero = jnp.zeros((), state.logdensity.dtype)
    return jax.lax.fori_loop(0, jnp.asarray(num_steps, jnp.int32), body, (start, zero))


def step(key: Array, state: MAMSState, target, params: MAMSParams) -> tuple[MAMSState, StepInfo]:
    """One MAMS transition: a fresh unit velocity, ``num_leapfrog`` isokinetic steps, M-H
    on ``W = U(x') - U(x) + Delta K`` (module docstring)."""
    key_velocity, key_jitter, key_accept = jax.random.split(key, 3)
    metric = euclidean_metric(params.inverse_mass)
    z = jax.random.normal(key_velocity, state.position.shape, state.position.dtype)
    velocity = z / jnp.linalg.norm(z)
    step_size = jittered_step_size(key_jitter, params.step_size, params.jitter)
    end, kinetic_change = _trajectory(target, metric, state, velocity, step_size,
                                      params.num_leapfrog)
    log_ratio = end.logdensity - state.logdensity - kinetic_change
    accept, info = metropolis_hastings(key_accept, log_ratio, params.num_leapfrog)
    proposal = MAMSState(end.position, end.logdensity, end.logdensity_grad)
    return select(accept, proposal, state), info


def cost(params: MAMSParams) -> int:
    return int(params.num_leapfrog)


def check_params(params: MAMSParams, dim: int | None = None) -> None:
    if np.ndim(params.step_size) != 0:
        raise ValueError(f"step_size must be a scalar, got shape {np.shape(params.step_size)}")
    check_positive("step_size", params.step_size)
    check_shape("inverse_mass", params.inverse_mass, dim, matrix=True)
    check_num_steps("num_leapfrog", params.num_leapfrog)
    check_inverse_mass(params.inverse_mass)
    check_jitter(params.jitter)
    if dim is not None and dim < 2:
        raise ValueError(f"mams needs a target of dimension >= 2 (isokinetic dynamics), "
                         f"got dimension {dim}")


TUNABLES = (
    Tunable("step_size", bounds=(0.05, 10.0), log=True, label="eps", stat="step_size"),
    Tunable("num_leapfrog", integer=True, bounds=(1, 100), label="L", stat="n_steps",
            cost_factor=True),
)

PARAMETERS = (STEP_SIZE, NUM_LEAPFROG, INVERSE_MASS, JITTER)

mams = Kernel("mams", init, step, cost, check_params, MAMSParams, TUNABLES, PARAMETERS)
