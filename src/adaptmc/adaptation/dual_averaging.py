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
import numpy as np

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


FROZEN_T = 1e20
"""The iteration count of a frozen state (`da_frozen`): an update moves its log step by
``sqrt(t) / (gamma (t + t0))``, less than ``1e-8`` over a chunk of transitions."""


def da_frozen(step_size) -> DualAveragingState:
    """A state at ``step_size`` whose updates leave it (to ``1e-8``): `FROZEN_T`."""
    log = jnp.log(jnp.asarray(step_size, dtype=float))
    zero = jnp.zeros_like(log)
    return DualAveragingState(log, log, zero, log, zero + FROZEN_T)


class OnHost(NamedTuple):
    """What `on_host` returns: the next key and one key per chain, ``exp`` of the averaged
    log steps, `da_init` and `da_frozen` of the initial steps."""

    key: jax.Array
    chain_keys: jax.Array
    step_size: jnp.ndarray
    init: DualAveragingState
    frozen: DualAveragingState


@functools.partial(jax.jit, static_argnums=6, compiler_options=QUICK_COMPILE)
def _on_host(key, fold, index, log_step_size_avg, initial_step_size, ten, chains) -> OnHost:
    key = jax.lax.cond(fold, lambda k: jax.random.fold_in(k, index), lambda k: k, key)
    key, key_chains = jax.random.split(key)
    return OnHost(key, jax.random.split(key_chains, chains), jnp.exp(log_step_size_avg),
                  da_init(initial_step_size, ten), da_frozen(initial_step_size))


def on_host(key=None, chains: int | None = None, fold: int | None = None,
            log_step_size_avg=None, initial_step_size=None, ten=10.0) -> OnHost:
    """Everything a caller outside ``jit`` needs between the warm-up's programs, in one
    compiled program (run eagerly, each operation compiles one of its own): ``key``
    (folded with ``fold`` first, if given) split in two, the second split per chain, and
    per chain ``exp(log_step_size_avg)``, `da_init` and `da_frozen` of
    ``initial_step_size`` (``ten`` an argument, so that XLA computes log(10) as the eager
    operation does rather than folding it at compile time). Element-wise logs and
    exps: the same bits at `QUICK_COMPILE` as at XLA's defaults (checked on 1e5 values);
    key splits are integer work. Whatever is not given is a stand-in whose result is
    unused: every call is the same program for the chains' shapes."""
    steps = initial_step_size if initial_step_size is not None else log_step_size_avg
    if chains is None:
        chains = int(np.shape(steps)[0]) if steps is not None and np.ndim(steps) else 1
    if steps is None:
        steps = np.ones(chains, dtype=jax.dtypes.canonicalize_dtype(float))
    if key is None:  # jax.random.key(0), whose data are zeros: no program
        key = jax.random.wrap_key_data(np.zeros(2, np.uint32))
    return _on_host(key, np.bool_(fold is not None), np.uint32(fold or 0),
                    steps if log_step_size_avg is None else log_step_size_avg,
                    steps if initial_step_size is None else initial_step_size, ten, chains)


def da_init_compiled(initial_step_size, ten=10.0) -> DualAveragingState:
    """`da_init` for a caller outside ``jit`` (`on_host`)."""
    return on_host(initial_step_size=initial_step_size, ten=ten).init


def da_final_step_size_compiled(state: DualAveragingState):
    """`da_final_step_size` for a caller outside ``jit`` (`on_host`)."""
    return on_host(log_step_size_avg=state.log_step_size_avg).step_size


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
