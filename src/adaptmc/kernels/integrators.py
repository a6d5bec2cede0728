"""Symplectic integrators generated from their coefficients.

A palindromic splitting integrator alternates momentum ("b") and position ("a") updates,
``b1 a1 b2 a2 ... a2 b2 a1 b1``; velocity Verlet (leapfrog) is ``(1/2, 1, 1/2)`` and
McLachlan's two-stage scheme ``(b, 1/2, 1 - 2b, 1/2, b)`` with b = 0.1932 (Blanes et al. 2014).
The gradient at the end of a step is carried into the next, so a step costs one gradient
evaluation per "a" coefficient.

For a position-dependent metric the Hamiltonian is not separable and the splitting above is
not symplectic; `generalized_leapfrog` (Girolami & Calderhead 2011, eqs. 16-18) solves its
two implicit half-steps by fixed-point iteration with a convergence check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve

from adaptmc.kernels.metrics import Metric, RiemannianMetric

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


# ----------------------------------------------------------------------------- implicit


class MetricTerms(NamedTuple):
    """What the generalised leapfrog needs of ``G`` at one position: its Cholesky factor,
    its inverse and the pullback ``C -> sum_jk C_jk dG_jk/dq`` (from one ``jax.vjp``)."""

    chol: Array
    inverse: Array
    pullback: Callable


class ImplicitInfo(NamedTuple):
    """converged: every fixed-point iteration met its tolerance with finite values;
    num_grads: gradient-equivalents spent (float; see `generalized_leapfrog`)."""

    converged: Array
    num_grads: Array


def metric_terms(metric: RiemannianMetric, position: Array) -> MetricTerms:
    """``G(q)``'s Cholesky factor, inverse and pullback; costs ``metric.cost``."""
    matrix, pullback = jax.vjp(metric.matrix, position)
    chol = jnp.linalg.cholesky(_materialised(matrix))
    inverse = cho_solve((chol, True), jnp.eye(position.shape[0], dtype=position.dtype))
    return MetricTerms(chol, inverse, pullback)


def _materialised(matrix: Array) -> Array:
    """``matrix`` computed once: without the barrier XLA fuses the computation of ``G`` (a
    Jacobian product) into the Cholesky factorisation's consumers and recomputes it per
    element, measured 60 times slower on the robot-arm network."""
    return jax.lax.optimization_barrier(matrix)


def metric_force(terms: MetricTerms, momentum: Array, log_det_weight) -> Array:
    """``d/dq [w log|G(q)| / 2 + p^T G(q)^-1 p / 2]`` at fixed ``p`` (Girolami & Calderhead
    2011, eq. 15): ``w tr(G^-1 dG) / 2 - v^T dG v / 2`` with ``v = G^-1 p``, one pullback."""
    velocity = terms.inverse @ momentum
    cotangent = 0.5 * log_det_weight * terms.inverse - 0.5 * jnp.outer(velocity, velocity)
    return terms.pullback(cotangent)[0]


def fixed_point(update: Callable[[Array], Array], start: Array, max_iterations, tolerance):
    """Iterate ``x <- update(x)`` from ``start`` until ``max|dx| <= tolerance (1 + max|x|)``
    or ``max_iterations`` updates. Returns ``(x, converged, num_updates)``; a NaN never
    converges (it runs to ``max_iterations`` and reports ``converged=False``)."""

    def cond(carry):
        _, change, count = carry
        return (count < max_iterations) & ~(change <= tolerance)

    def body(carry):
        x, _, count = carry
        new = update(x)
        change = jnp.max(jnp.abs(new - x)) / (1.0 + jnp.max(jnp.abs(new)))
        return new, change, count + 1

    init = (start, jnp.asarray(jnp.inf, start.dtype), jnp.asarray(0, jnp.int32))
    x, change, count = jax.lax.while_loop(cond, body, init)
    return x, (change <= tolerance) & jnp.all(jnp.isfinite(x)), count


def generalized_leapfrog(
    state: IntegratorState,
    step_size,
    logdensity_and_grad: Callable,
    metric: RiemannianMetric,
    terms: MetricTerms,
    log_det_weight=1.0,
    max_iterations=20,
    tolerance=1e-8,
) -> tuple[IntegratorState, MetricTerms, ImplicitInfo]:
    """One step of the generalised leapfrog for ``H(q, p) = -log pi(q) + w log|G(q)| / 2 +
    p^T G(q)^-1 p / 2`` (Girolami & Calderhead 2011, eqs. 16-18; Leimkuhler & Reich 2004):

    1. ``p' = p - eps/2 dH/dq(q, p')``: implicit, solved by fixed-point iteration;
    2. ``q' = q + eps/2 (G(q)^-1 + G(q')^-1) p'``: implicit, fixed-point iteration;
    3. ``p'' = p' - eps/2 dH/dq(q', p')``: explicit.

    The map is time-reversible and volume-preserving when both iterations converge; when
    one does not (``max_iterations`` reached, or a non-finite value), ``converged`` is False
    and the kernel must count a divergence. ``terms`` are `metric_terms` at ``q`` (computed
    by the caller, who needs them for the momentum draw); the terms at ``q'`` are returned.

    Cost in gradient-equivalents (``c = metric.cost``): one log-density gradient, one
    pullback per momentum iteration, one evaluation of ``G`` per position iteration, and
    ``G`` with its pullback at ``q'``: ``1 + c (n_p + n_q + 2)``.
    """
    position, momentum, _, grad = state
    half = 0.5 * step_size

    def momentum_update(p_half):
        return momentum + half * (grad - metric_force(terms, p_half, log_det_weight))

    p_half, ok_momentum, n_momentum = fixed_point(
        momentum_update, momentum, max_iterations, tolerance
    )
    start_velocity = terms.inverse @ p_half

    def position_update(q_new):
        chol = jnp.linalg.cholesky(_materialised(metric.matrix(q_new)))
        return position + half * (start_velocity + cho_solve((chol, True), p_half))

    q_new, ok_position, n_position = fixed_point(
        position_update, position + step_size * start_velocity, max_iterations, tolerance
    )
    logdensity, grad_new = logdensity_and_grad(q_new)
    new_terms = metric_terms(metric, q_new)
    p_new = p_half + half * (grad_new - metric_force(new_terms, p_half, log_det_weight))
    finite = jnp.all(jnp.isfinite(p_new)) & jnp.isfinite(logdensity)
    num_grads = 1.0 + metric.cost * (n_momentum + n_position + 2)
    info = ImplicitInfo(ok_momentum & ok_position & finite, num_grads)
    return IntegratorState(q_new, p_new, logdensity, grad_new), new_terms, info


def integrate_implicit(
    state: IntegratorState,
    step_size,
    num_steps,
    logdensity_and_grad: Callable,
    metric: RiemannianMetric,
    terms: MetricTerms,
    **options,
) -> tuple[IntegratorState, Array, ImplicitInfo]:
    """``num_steps >= 1`` (may be traced) generalised-leapfrog steps from ``state`` with
    ``terms`` at its position. Returns the end state, the Cholesky factor of ``G`` at the
    end and the steps' combined `ImplicitInfo` (converged: all steps did). A pullback cannot
    be carried through a loop, so steps after the first recompute ``G`` at their start
    (``metric.cost`` each, counted)."""
    state, end_terms, info = generalized_leapfrog(
        state, step_size, logdensity_and_grad, metric, terms, **options
    )

    def body(_, carry):
        s, _, converged, spent = carry
        start_terms = metric_terms(metric, s.position)
        s, new_terms, step_info = generalized_leapfrog(
            s, step_size, logdensity_and_grad, metric, start_terms, **options
        )
        return (s, new_terms.chol, converged & step_info.converged,
                spent + metric.cost + step_info.num_grads)

    carry = (state, end_terms.chol, info.converged, jnp.asarray(info.num_grads, float))
    state, chol, converged, spent = jax.lax.fori_loop(
        1, jnp.asarray(num_steps, jnp.int32), body, carry
    )
    return state, chol, ImplicitInfo(converged, spent)
