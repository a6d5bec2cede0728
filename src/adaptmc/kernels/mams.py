"""Metropolis-adjusted microcanonical Hamiltonian Monte Carlo (MAMS).

Robnik, Cohn-Gordon & Seljak (2025), "Metropolis adjusted microcanonical Hamiltonian Monte
Carlo" (MAMS; BlackJAX's ``adjusted_mclmc`` and ``adjusted_mclmc_dynamic``): each transition
draws a fresh velocity uniformly on the unit sphere (full refreshment), runs ``num_leapfrog``
steps of the isokinetic (ESH) dynamics of Steeg & Galstyan (2021), whose velocity keeps unit
norm, with the velocity Verlet splitting ``B(eps/2) A(eps) B(eps/2)`` (one gradient per
step), and accepts with probability ``min(1, exp(-W))``, ``W = U(x') - U(x) + Delta K``:
the change of the potential ``U = -log p`` plus the kinetic energy change ``Delta K`` the
isokinetic velocity updates accumulate (``(d - 1)`` times a log factor per update, the
closed form of `velocity_update`; BlackJAX's ``esh_dynamics_momentum_update_one_step``
computes the same, and this module no longer imports BlackJAX). The step size
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


class IsokineticState(NamedTuple):
    """A point of an isokinetic trajectory: position, unit velocity (in the metric's frame
    ``z``), log density and its gradient."""

    position: Array
    velocity: Array
    logdensity: Array
    logdensity_grad: Array


def velocity_update(velocity, grad_z, step_size):
    """``(u', Delta K)``: the exact flow of the isokinetic velocity equation for a time
    ``step_size`` under a fixed gradient ``grad_z = S^T grad log p`` (Steeg & Galstyan 2021,
    ESH dynamics; the closed form of Robnik, De Luca, Silverstein & Seljak 2023, MCLMC):
    with ``e = grad_z / |grad_z|``, ``delta = step_size |grad_z| / (d - 1)``, ``zeta =
    exp(-delta)`` and ``c = u . e``, ``u' ~ e (1 - zeta) (1 + zeta + c (1 - zeta)) + 2 zeta
    u`` (normalised) and ``Delta K = (d - 1) (delta - log 2 + log(1 + c + (1 - c)
    zeta^2))``, the last term from ``|u + e|^2 / 2 = 1 + c`` (or ``|u - e|^2 / 2`` when
    ``zeta > 1``, a step backward) for accuracy when ``c`` is near -1."""
    d = velocity.shape[0]
    norm = jnp.linalg.norm(grad_z)
    e = jnp.where(norm > 0, grad_z / jnp.where(norm > 0, norm, 1.0), 0.0)
    c = jnp.dot(velocity, e)
    delta = step_size * norm / (d - 1)
    zeta = jnp.exp(-delta)
    raw = e * (1 - zeta) * (1 + zeta + c * (1 - zeta)) + 2 * zeta * velocity
    plus = 0.5 * jnp.sum(jnp.square(velocity + e))
    minus = 0.5 * jnp.sum(jnp.square(velocity - e))
    zeta2 = zeta * zeta
    log_a = jnp.log(jnp.where(zeta2 <= 1, plus * (1 - zeta2) + 2 * zeta2,
                              minus * (zeta2 - 1) + 2))
    return raw / jnp.linalg.norm(raw), (delta - jnp.log(2.0) + log_a) * (d - 1)


def _trajectory(target, metric, state: MAMSState, velocity, step_size, num_steps):
    """``num_steps`` velocity Verlet steps ``B(eps/2) A(eps) B(eps/2)`` of the isokinetic
    dynamics (one gradient each) from ``state`` with unit ``velocity`` in the frame ``x = x0
    + S z`` (``S`` the metric's ``scale``, ``S^T`` its transpose); returns the end
    `IsokineticState` and the summed kinetic energy change."""

    def scale(v):
        return metric.scale(v, state.position)

    transpose = jax.linear_transpose(scale, state.position)

    def body(_, carry):
        (x, u, lp, g), grad_z, kinetic = carry
        u, first = velocity_update(u, grad_z, 0.5 * step_size)
        x = x + step_size * scale(u)
        lp, g = target.logdensity_and_grad(x)
        grad_z = transpose(g)[0]
        u, second = velocity_update(u, grad_z, 0.5 * step_size)
        return IsokineticState(x, u, lp, g), grad_z, kinetic + first + second

    start = IsokineticState(state.position, velocity, state.logdensity, state.logdensity_grad)
    zero = jnp.zeros((), state.logdensity.dtype)
    end, _, kinetic = jax.lax.fori_loop(0, jnp.asarray(num_steps, jnp.int32), body,
                                        (start, transpose(state.logdensity_grad)[0], zero))
    return end, kinetic


def propose(target, metric, state: MAMSState, velocity, step_size, num_steps):
    """``(proposal, log M-H ratio -W)`` of ``num_steps`` isokinetic steps of ``step_size``
    from ``state`` with unit ``velocity`` under ``metric``."""
    end, kinetic_change = _trajectory(target, metric, state, velocity, step_size, num_steps)
    log_ratio = end.logdensity - state.logdensity - kinetic_change
    return MAMSState(end.position, end.logdensity, end.logdensity_grad), log_ratio


def step(key: Array, state: MAMSState, target, params: MAMSParams) -> tuple[MAMSState, StepInfo]:
    """One MAMS transition: a fresh unit velocity, ``num_leapfrog`` isokinetic steps, M-H
    on ``W = U(x') - U(x) + Delta K`` (module docstring)."""
    key_velocity, key_jitter, key_accept = jax.random.split(key, 3)
    metric = euclidean_metric(params.inverse_mass)
    z = jax.random.normal(key_velocity, state.position.shape, state.position.dtype)
    step_size = jittered_step_size(key_jitter, params.step_size, params.jitter)
    proposal, log_ratio = propose(target, metric, state, z / jnp.linalg.norm(z), step_size,
                                  params.num_leapfrog)
    accept, info = metropolis_hastings(key_accept, log_ratio, params.num_leapfrog)
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
