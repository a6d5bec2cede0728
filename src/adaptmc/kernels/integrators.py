"""Symplectic integrators generated from their coefficients.

A palindromic splitting integrator alternates momentum ("b") and position ("a") updates,
``b1 a1 b2 a2 ... a2 b2 a1 b1``; velocity Verlet (leapfrog) is ``(1/2, 1, 1/2)`` and
McLachlan's two-stage scheme ``(b, 1/2, 1 - 2b, 1/2, b)`` with b = 0.1932 (Blanes et al. 2014).
The gradient at the end of a step is carried into the next, so a step costs one gradient
evaluation per "a" coefficient.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from adaptmc.kernels.metrics import Metric

Array = jax.Array

LEAPFROG = (0.5, 1.0, 0.5)
MCLACHLAN = (0.1931833275037836, 0.5, 1.0 - 2 * 0.1931833275037836, 0.5, 0.1931833275037836)


class IntegratorState(NamedTuple):
    position: Array
    momentum: Array
    logdensity: Array
    logdensity_grad: Array


def num_grads_per_step(coefficients: tuple[float, ...]) -> int:
    """Gradient evaluations one integrator step costs (the number of position updates)."""
    return len(coefficients) // 2


def make_integrator(
    coefficients: tuple[float, ...],
) -> Callable[[IntegratorState, Array, Callable, Metric], IntegratorState]:
    """Return ``step(state, step_size, logdensity_and_grad, metric) -> state``."""
    if len(coefficients) % 2 != 1 or tuple(coefficients) != tuple(reversed(coefficients)):
        raise ValueError("integrator coefficients must be an odd-length palindrome")

    def step(state: IntegratorState, step_size, logdensity_and_grad, metric: Metric):
        position, momentum, logdensity, grad = state
        for i, c in enumerate(coefficients):
            if i % 2 == 0:
                momentum = momentum + c * step_size * grad
            else:
                position = position + c * step_size * metric.velocity(momentum, position)
                logdensity, grad = logdensity_and_grad(position)
        return IntegratorState(position, momentum, logdensity, grad)

    return step


leapfrog = make_integrator(LEAPFROG)


def integrate(
    integrator,
    state: IntegratorState,
    step_size,
    num_steps,
    logdensity_and_grad,
    metric: Metric,
) -> IntegratorState:
    """Apply ``num_steps`` (may be traced) integrator steps with ``lax.fori_loop``."""

    def body(_, s):
        return integrator(s, step_size, logdensity_and_grad, metric)

    return jax.lax.fori_loop(0, jnp.asarray(num_steps, jnp.int32), body, state)
