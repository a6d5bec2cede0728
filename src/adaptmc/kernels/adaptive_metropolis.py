"""Adaptive Metropolis (Haario, Saksman & Tamminen 2001, Bernoulli 7(2), Eq. 2.1).

Random-walk proposal ``y ~ N(x, C_t)`` with

    C_t = C_0                                  for t <= t0,
    C_t = s_d Cov(X_0, ..., X_{t-1}) + s_d eps I   for t > t0,

``s_d = 2.38^2 / d`` (Gelman, Roberts & Gilks 1996) and ``C_0 = step_size^2 I``. The running
mean and covariance of the visited states are updated in the state after every step
(Welford's recursion), and the Cholesky factor of ``C_t`` is recomputed only while adapting,
so a frozen AM step is a plain RWM step with a fixed covariance (invariant for the target).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from adaptmc.adaptation.welford import welford_step
from adaptmc.kernels.base import (
    STEP_SIZE,
    Kernel,
    StepInfo,
    Tunable,
    check_positive,
    check_shape,
    metropolis_hastings,
    select,
)

Array = jax.Array


class AMState(NamedTuple):
    """position ``(dim,)``, logdensity ``()``; mean ``(dim,)`` and scatter ``(dim, dim)``
    (sum of outer products of deviations) of the ``count`` states seen so far; chol
    ``(dim, dim)``: Cholesky factor of the current proposal covariance (NaN until the first
    step sets it to ``step_size * I``)."""

    position: Array
    logdensity: Array
    mean: Array
    scatter: Array
    count: Array
    chol: Array


class AMParams(NamedTuple):
    """step_size: sd of the initial proposal ``C_0 = step_size^2 I``; adapt: 1 to update the
    running covariance, 0 to freeze; t0: steps with ``C_0`` before the empirical covariance
    is used; epsilon: the ridge ``eps`` of Haario et al.; scale: ``s_d`` (``<= 0`` means
    ``2.38^2 / d``)."""

    step_size: float = 0.1
    adapt: float = 1.0
    t0: int = 200
    epsilon: float = 1e-8
    scale: float = 0.0


def init(position: Array, target) -> AMState:
    position = jnp.asarray(position)
    dim = position.shape[0]
    return AMState(
        position,
        target.logdensity(position),
        position,
        jnp.zeros((dim, dim), position.dtype),
        jnp.ones((), position.dtype),
        jnp.full((dim, dim), jnp.nan, position.dtype),
    )


def proposal_cholesky(state: AMState, params: AMParams) -> Array:
    """Cholesky factor of ``C_t`` (Haario et al. 2001, Eq. 2.1)."""
    dim = state.position.shape[0]
    scale = jnp.where(params.scale > 0, params.scale, 2.38**2 / dim)
    cov = state.scatter / jnp.maximum(state.count - 1.0, 1.0)
    empirical = jnp.linalg.cholesky(scale * (cov + params.epsilon * jnp.eye(dim)))
    initial = params.step_size * jnp.eye(dim, dtype=state.position.dtype)
    use_empirical = (state.count > params.t0) & jnp.all(jnp.isfinite(empirical))
    return jnp.where(use_empirical, empirical, initial)


def step(key: Array, state: AMState, target, params: AMParams) -> tuple[AMState, StepInfo]:
    """One AM step: propose with the current ``C_t``, M-H, then (if adapting) add the new
    state to the running moments and refactorise. One log-density evaluation."""
    key_proposal, key_accept = jax.random.split(key)
    chol = jnp.where(jnp.isnan(state.chol),
                     params.step_size * jnp.eye(state.position.shape[0]), state.chol)
    z = jax.random.normal(key_proposal, state.position.shape, state.position.dtype)
    proposal = state.position + chol @ z
    logdensity = target.logdensity(proposal)
    accept, info = metropolis_hastings(key_accept, logdensity - state.logdensity, 1)
    position, logdensity = select(accept, (proposal, logdensity),
                                  (state.position, state.logdensity))
    moved = state._replace(position=position, logdensity=logdensity, chol=chol)

    def adapting(s):
        mean, scatter, count = welford_step(s.mean, s.scatter, s.count, s.position)
        s = s._replace(mean=mean, scatter=scatter, count=count)
        return s._replace(chol=proposal_cholesky(s, params))

    return jax.lax.cond(params.adapt > 0, adapting, lambda s: s, moved), info


def cost(params: AMParams) -> int:
    return 1


def check_params(params: AMParams, dim: int | None = None) -> None:
    check_positive("step_size", params.step_size)
    check_shape("step_size", params.step_size, dim)
    check_positive("epsilon", params.epsilon)
    if float(params.adapt) not in (0.0, 1.0):
        raise ValueError(f"adapt must be 0 or 1, got {params.adapt}")
    if int(params.t0) != params.t0 or params.t0 < 1:
        raise ValueError(f"t0 must be an integer >= 1, got {params.t0}")
    if float(params.scale) < 0:
        raise ValueError(f"scale must be >= 0 (0: 2.38^2 / d), got {params.scale}")


TUNABLES = (Tunable("step_size", bounds=(0.01, 1.0), label="eps", stat="step_size"),)

adaptive_metropolis = Kernel("am", init, step, cost, check_params, AMParams, TUNABLES,
                             (STEP_SIZE,), adapts_in_step=True)
