"""Nesterov's dual averaging of the log step size toward a target acceptance rate
(Hoffman & Gelman 2014, Algorithm 5 and Eq. 6), as pure functions over an explicit state
in NumPyro's ``dual_averaging() -> (init, update)`` spirit.

``x_{t+1} = mu - sqrt(t) / gamma * H_t`` with ``H_t = (1 - 1/(t + t0)) H_{t-1} +
(delta - alpha_t) / (t + t0)`` and the averaged iterate ``xbar_{t+1} = t^-kappa x_{t+1} +
(1 - t^-kappa) xbar_t``; the tuned step size is ``exp(xbar)``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from adaptmc.targets.base import QUICK_COMPILE


class DualAveragingState(NamedTuple):
    log_step_size: jnp.ndarray  # x_t, the current iterate
    log_step_size_avg: jnp.ndarray  # xbar_t
    error_avg: jnp.ndarray  # H_t
    mu: jnp.ndarray  # shrinkage point log(10 eps_0)
    step: jnp.ndarray  # t


def da_init(initial_step_size, ten=10.0) -> DualAveragingState:
    """The state before the first update, shrinking towards ``log(ten * eps_0)``."""
    log_eps = jnp.log(jnp.asarray(initial_step_size, dtype=float))
    zero = jnp.zeros_like(log_eps)
    return DualAveragingState(log_eps, zero, zero, jnp.log(ten) + log_eps, zero)


@functools.partial(jax.jit, compiler_options=QUICK_COMPILE)
def _on_host(log_step_size_avg, initial_step_size, ten):
    """``(exp(log_step_size_avg), da_init(initial_step_size, ten))``: what a caller outside
    ``jit`` needs, in one program (run eagerly, each operation compiles on its own)."""
    return jnp.exp(log_step_size_avg), da_init(initial_step_size, ten)


def da_init_compiled(initial_step_size, ten=10.0) -> DualAveragingState:
    """`da_init` for a caller outside ``jit``: pass ``ten=10.0`` as an argument, so that XLA
    computes log(10) as the eager operation does rather than folding it at compile time.
    Element-wise logs and exps: the same bits at `QUICK_COMPILE` as at XLA's defaults
    (checked on 1e5 values)."""
    return _on_host(initial_step_size, initial_step_size, ten)[1]


def da_final_step_size_compiled(state: DualAveragingState):
    """`da_final_step_size` for a caller outside ``jit`` (the program of `da_init_compiled`)."""
    return _on_host(state.log_step_size_avg, state.log_step_size_avg, 10.0)[0]


def da_update(
    state: DualAveragingState,
    acceptance_rate,
    target_acceptance: float = 0.8,
    gamma: float = 0.05,
    t0: float = 10.0,
    kappa: float = 0.75,
) -> DualAveragingState:
    """One update with the acceptance probability of the last proposal (NaN counts as 0)."""
    acceptance_rate = jnp.nan_to_num(jnp.asarray(acceptance_rate, dtype=float), nan=0.0)
    t = state.step + 1.0
    eta = 1.0 / (t + t0)
    error_avg = (1.0 - eta) * state.error_avg + eta * (target_acceptance - acceptance_rate)
    log_eps = state.mu - jnp.sqrt(t) / gamma * error_avg
    weight = t ** (-kappa)
    log_eps_avg = weight * log_eps + (1.0 - weight) * state.log_step_size_avg
    return DualAveragingState(log_eps, log_eps_avg, error_avg, state.mu, t)


def da_step_size(state: DualAveragingState):
    """The current (exploring) step size ``exp(x_t)``."""
    return jnp.exp(state.log_step_size)


def da_final_step_size(state: DualAveragingState):
    """The averaged step size ``exp(xbar_t)`` to freeze on after warm-up."""
    return jnp.exp(state.log_step_size_avg)
