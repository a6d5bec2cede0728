"""Nesterov's dual averaging of the log step size toward a target acceptance rate
(Hoffman & Gelman 2014, Algorithm 5 and Eq. 6), as pure functions over an explicit state
in NumPyro's ``dual_averaging() -> (init, update)`` spirit.

``x_{t+1} = mu - sqrt(t) / gamma * H_t`` with ``H_t = (1 - 1/(t + t0)) H_{t-1} +
(delta - alpha_t) / (t + t0)`` and the averaged iterate ``xbar_{t+1} = t^-kappa x_{t+1} +
(1 - t^-kappa) xbar_t``; the tuned step size is ``exp(xbar)``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np


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


FROZEN_T = 1e20
"""The iteration count of a frozen state (`da_frozen`): an update moves its log step by
``sqrt(t) / (gamma (t + t0))``, less than ``1e-8`` over a chunk of transitions."""


def da_frozen(step_size) -> DualAveragingState:
    """A state at ``step_size`` whose updates leave it (to ``1e-8``): `FROZEN_T`."""
    log = jnp.log(jnp.asarray(step_size, dtype=float))
    zero = jnp.zeros_like(log)
    return DualAveragingState(log, log, zero, log, zero + FROZEN_T)


def da_init_on_host(initial_step_size, ten: float = 10.0) -> DualAveragingState:
    """`da_init` for a caller outside ``jit``, in NumPy (float64; eager ``jax.numpy``
    would compile a program per operation)."""
    log_eps = np.log(np.asarray(initial_step_size, dtype=np.float64))
    zero = np.zeros_like(log_eps)
    return DualAveragingState(log_eps, zero, zero, np.log(ten) + log_eps, zero)


def da_frozen_on_host(step_size) -> DualAveragingState:
    """`da_frozen` for a caller outside ``jit``, in NumPy."""
    log = np.log(np.asarray(step_size, dtype=np.float64))
    zero = np.zeros_like(log)
    return DualAveragingState(log, log, zero, log, zero + FROZEN_T)


def da_final_step_size_on_host(state: DualAveragingState) -> np.ndarray:
    """`da_final_step_size` for a caller outside ``jit``, in NumPy."""
    return np.exp(np.asarray(state.log_step_size_avg, dtype=np.float64))


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
