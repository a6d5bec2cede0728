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
    its inverse, and either the pullback ``C -> sum_jk C_jk dG_jk/dq`` (from one
    ``jax.vjp``; ``log_det_gradient`` None) or, for a metric with a cheap
    ``quadratic_gradient`` (`uses_quadratic`), ``log_det_gradient = tr(G^-1 dG/dq) / 2``
    (``pullback`` None). The second form holds arrays only: it can be carried from one
    step, or one MSD iteration, to the next instead of being recomputed."""

    chol: Array
    inverse: Array
    pullback: Callable | None
    log_det_gradient: Array | None


class ImplicitInfo(NamedTuple):
    """converged: every fixed-point iteration met its tolerance with finite values;
    num_grads: gradient-equivalents spent (float; see `generalized_leapfrog`)."""

    converged: Array
    num_grads: Array


def uses_quadratic(metric: RiemannianMetric) -> bool:
    """Whether the kinetic force comes from ``metric.quadratic_gradient`` (it exists and
    costs no more than a pullback through ``G``) rather than from pullbacks."""
    return metric.quadratic_gradient is not None and metric.quadratic_cost <= metric.cost


def metric_terms(metric: RiemannianMetric, position: Array, log_det_weight=1.0) -> MetricTerms:
    """``G(q)``'s Cholesky factor, inverse and pullback (or log-determinant gradient, see
    `MetricTerms`); costs `terms_cost`."""
    matrix, pullback = jax.vjp(metric.matrix, position)
    chol = jnp.linalg.cholesky(_materialised(matrix))
    inverse = cho_solve((chol, True), jnp.eye(position.shape[0], dtype=position.dtype))
    if not uses_quadratic(metric):
        return MetricTerms(chol, inverse, pullback, None)
    log_det_gradient = jax.lax.cond(jnp.asarray(log_det_weight) != 0,
                                    lambda: 0.5 * pullback(inverse)[0],
                                    lambda: jnp.zeros_like(position))
    return MetricTerms(chol, inverse, None, log_det_gradient)


def terms_cost(metric: RiemannianMetric, log_det_weight=1.0):
    """Gradient-equivalents of `metric_terms`: ``G`` (``c``), plus the log-determinant
    pullback (``c``) for a `uses_quadratic` metric when ``w != 0``."""
    if not uses_quadratic(metric):
        return metric.cost
    return metric.cost + jnp.where(jnp.asarray(log_det_weight) != 0, metric.cost, 0.0)


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


def kinetic_force(metric: RiemannianMetric, terms: MetricTerms, position: Array,
                  momentum: Array, log_det_weight) -> Array:
    """`metric_force` from either form of `MetricTerms`: with ``log_det_gradient``, ``w
    log_det_gradient - quadratic_gradient(q, G^-1 p)`` (`force_cost` either way)."""
    if terms.pullback is not None:
        return metric_force(terms, momentum, log_det_weight)
    velocity = terms.inverse @ momentum
    return (log_det_weight * terms.log_det_gradient
            - metric.quadratic_gradient(position, velocity))


def force_cost(metric: RiemannianMetric) -> float:
    """Gradient-equivalents of one `kinetic_force`: a pullback (``c``) or
    ``quadratic_cost``."""
    return metric.quadratic_cost if uses_quadratic(metric) else metric.cost


def fixed_point(update: Callable[[Array], Array], start: Array, max_iterations, tolerance,
                memory: int = 0):
    """Iterate ``x <- update(x)`` from ``start`` until ``max|dx| <= tolerance (1 + max|x|)``
    or ``max_iterations`` updates. Returns ``(x, converged, num_updates)``, ``x`` the last
    value of ``update``; a non-finite value never converges and stops the iteration at once
    (it could not recover: every later update would be non-finite or never compared).

    ``memory > 0`` mixes the updates by Anderson acceleration (Walker & Ni 2011, "Anderson
    acceleration for fixed-point iterations", type II with the last ``memory`` differences):
    the same fixed point, the same stopping rule on ``update(x) - x``, usually reached in
    fewer updates; ``memory = 0`` is the plain iteration."""
    if memory:
        return _anderson(update, start, max_iterations, tolerance, int(memory))

    def cond(carry):
        _, change, count, finite = carry
        return (count < max_iterations) & ~(change <= tolerance) & finite

    def body(carry):
        x, _, count, _ = carry
        new = update(x)
        change = jnp.max(jnp.abs(new - x)) / (1.0 + jnp.max(jnp.abs(new)))
        return new, change, count + 1, jnp.all(jnp.isfinite(new))

    init = (start, jnp.asarray(jnp.inf, start.dtype), jnp.asarray(0, jnp.int32),
            jnp.asarray(True))
    x, change, count, _ = jax.lax.while_loop(cond, body, init)
    return x, (change <= tolerance) & jnp.all(jnp.isfinite(x)), count


def _anderson(update, start, max_iterations, tolerance, memory: int):
    """Anderson-accelerated `fixed_point`: with residuals ``r_k = update(x_k) - x_k``,
    ``x_{k+1} = update(x_k) - dF gamma``, ``gamma`` the least-squares fit of ``r_k`` by the
    last ``memory`` residual differences ``dR`` (``dF`` the matching differences of
    ``update``). The fit is ridge-regularised (``1e-10`` of its trace) so unfilled or
    collinear history rows get a zero weight; a non-finite mixed point falls back to
    ``update(x_k)`` (the plain step)."""
    dim, dtype = start.shape[0], start.dtype

    def cond(carry):
        change, count, finite = carry[5:]
        return (count < max_iterations) & ~(change <= tolerance) & finite

    def body(carry):
        x, f_prev, r_prev, d_res, d_val, _, count, _ = carry
        f = update(x)
        r = f - x
        change = jnp.max(jnp.abs(r)) / (1.0 + jnp.max(jnp.abs(f)))
        first = count == 0
        d_res = jnp.roll(d_res, 1, axis=0).at[0].set(jnp.where(first, 0.0, r - r_prev))
        d_val = jnp.roll(d_val, 1, axis=0).at[0].set(jnp.where(first, 0.0, f - f_prev))
        gram = d_res @ d_res.T
        ridge = 1e-10 * jnp.trace(gram) + jnp.finfo(dtype).tiny
        # Cholesky, not LU: the ridged Gram matrix is positive definite, and an LU solve
        # measured 20 times slower per step on CPU
        factor = jnp.linalg.cholesky(gram + ridge * jnp.eye(memory, dtype=dtype))
        gamma = cho_solve((factor, True), d_res @ r)
        mixed = f - gamma @ d_val
        mixed = jnp.where(jnp.all(jnp.isfinite(mixed)), mixed, f)
        return mixed, f, r, d_res, d_val, change, count + 1, jnp.all(jnp.isfinite(f))

    history = jnp.zeros((memory, dim), dtype)
    init = (start, start, jnp.zeros_like(start), history, history,
            jnp.asarray(jnp.inf, dtype), jnp.asarray(0, jnp.int32), jnp.asarray(True))
    carry = jax.lax.while_loop(cond, body, init)
    f, change, count = carry[1], carry[5], carry[6]
    return f, (change <= tolerance) & jnp.all(jnp.isfinite(f)), count


def generalized_leapfrog(state: IntegratorState, step_size, logdensity_and_grad: Callable,
                         metric: RiemannianMetric, terms: MetricTerms, log_det_weight=1.0,
                         max_iterations=20, tolerance=1e-8, memory: int = 0
                         ) -> tuple[IntegratorState, MetricTerms, ImplicitInfo]:
    """One step of the generalised leapfrog for ``H(q, p) = -log pi(q) + w log|G(q)| / 2 +
    p^T G(q)^-1 p / 2`` (Girolami & Calderhead 2011, eqs. 16-18; Leimkuhler & Reich 2004):

    1. ``p' = p - eps/2 dH/dq(q, p')``: implicit, solved by fixed-point iteration;
    2. ``q' = q + eps/2 (G(q)^-1 + G(q')^-1) p'``: implicit, fixed-point iteration;
    3. ``p'' = p' - eps/2 dH/dq(q', p')``: explicit.

    Both are solved by `fixed_point` (``memory``: its Anderson acceleration, 0 for the
    plain iteration), the momentum from ``p``, the position from the explicit Euler guess
    ``q + eps G(q)^-1 p'``. In step 1 ``q`` is fixed: ``G(q)``, its factor, inverse and
    log-determinant gradient are computed once (``terms``, by the caller, who needs them
    for the momentum draw), and each iteration costs one `kinetic_force`. The map is
    time-reversible and volume-preserving when both iterations converge (whichever solver
    found the solution); when one does not (``max_iterations`` reached, or a non-finite
    value), ``converged`` is False and the kernel must count a divergence. The terms at
    ``q'`` are returned.

    Cost in gradient-equivalents (``c = metric.cost``, ``c_f`` = `force_cost`, ``c_t`` =
    `terms_cost`): one log-density gradient, ``c_f`` per momentum iteration, one evaluation
    of ``G`` (``c``) per position iteration, and the terms and force at ``q'``:
    ``1 + c_f (n_p + 1) + c n_q + c_t``; with pullbacks (``c_f = c_t = c``) this is
    ``1 + c (n_p + n_q + 2)``.
    """
    position, momentum, _, grad = state
    half = 0.5 * step_size

    def momentum_update(p_half):
        force = kinetic_force(metric, terms, position, p_half, log_det_weight)
        return momentum + half * (grad - force)

    p_half, ok_momentum, n_momentum = fixed_point(
        momentum_update, momentum, max_iterations, tolerance, memory
    )
    start_velocity = terms.inverse @ p_half

    def position_update(q_new):
        chol = jnp.linalg.cholesky(_materialised(metric.matrix(q_new)))
        return position + half * (start_velocity + cho_solve((chol, True), p_half))

    q_new, ok_position, n_position = fixed_point(
        position_update, position + step_size * start_velocity, max_iterations, tolerance,
        memory,
    )
    logdensity, grad_new = logdensity_and_grad(q_new)
    new_terms = metric_terms(metric, q_new, log_det_weight)
    force = kinetic_force(metric, new_terms, q_new, p_half, log_det_weight)
    p_new = p_half + half * (grad_new - force)
    finite = jnp.all(jnp.isfinite(p_new)) & jnp.isfinite(logdensity)
    num_grads = (1.0 + force_cost(metric) * (n_momentum + 1) + metric.cost * n_position
                 + terms_cost(metric, log_det_weight))
    info = ImplicitInfo(ok_momentum & ok_position & finite, num_grads)
    return IntegratorState(q_new, p_new, logdensity, grad_new), new_terms, info


def carried(terms: MetricTerms) -> MetricTerms:
    """``terms`` without the pullback (a closure cannot leave a loop)."""
    return terms._replace(pullback=None)


def integrate_implicit(
    state: IntegratorState,
    step_size,
    num_steps,
    logdensity_and_grad: Callable,
    metric: RiemannianMetric,
    terms: MetricTerms,
    **options,
) -> tuple[IntegratorState, MetricTerms, ImplicitInfo]:
    """``num_steps >= 1`` (may be traced) generalised-leapfrog steps from ``state`` with
    ``terms`` at its position. Returns the end state, the `carried` terms at the end and
    the steps' combined `ImplicitInfo` (converged: all steps did). A pullback cannot be
    carried through a loop: with pullbacks, steps after the first recompute ``G`` at their
    start (`terms_cost` each, counted); terms of a `uses_quadratic` metric are carried."""
    log_det_weight = options.get("log_det_weight", 1.0)
    state, end_terms, info = generalized_leapfrog(
        state, step_size, logdensity_and_grad, metric, terms, **options
    )
    recompute = not uses_quadratic(metric)

    def body(_, carry):
        s, start_terms, converged, spent = carry
        extra = 0.0
        if recompute:
            start_terms = metric_terms(metric, s.position, log_det_weight)
            extra = terms_cost(metric, log_det_weight)
        s, new_terms, step_info = generalized_leapfrog(
            s, step_size, logdensity_and_grad, metric, start_terms, **options
        )
        return (s, carried(new_terms), converged & step_info.converged,
                spent + extra + step_info.num_grads)

    carry = (state, carried(end_terms), info.converged, jnp.asarray(info.num_grads, float))
    state, end_terms, converged, spent = jax.lax.fori_loop(
        1, jnp.asarray(num_steps, jnp.int32), body, carry
    )
    return state, end_terms, ImplicitInfo(converged, spent)
