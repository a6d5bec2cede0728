"""Metrics: how momentum is drawn and what kinetic energy it carries.

A `Metric` is a NamedTuple of functions (as in BlackJAX's ``metrics.py``), each taking the
position too, so a position-dependent (Riemannian) metric has the same shape as a Euclidean
one. The Euclidean metric is built from the inverse mass matrix passed at call time: a
scalar (unit mass times a constant), a ``(dim,)`` diagonal, a ``(dim, dim)`` dense matrix, or
a `LowRankInverseMass` (a diagonal times a rank-``k`` modification of the identity).

Cost per leapfrog step of each, next to one gradient evaluation: diagonal ``O(dim)``;
low-rank ``O(dim k)`` (two ``(dim, k)`` products per metric operation, ``4 dim k`` flops for
``M^{-1} p``); dense ``O(dim^2)`` (``2 dim^2`` flops for ``M^{-1} p``, and a triangular solve
to draw the momentum).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from adaptmc.adaptation.low_rank import LowRankInverseMass, low_rank_dense  # noqa: F401

Array = jax.Array


class Metric(NamedTuple):
    """``sample_momentum(key, position) -> p``; ``kinetic_energy(p, position) -> scalar``;
    ``velocity(p, position) -> dK/dp``; ``scale(v, position)`` multiplies a vector by a
    square root S of the inverse mass (``S S^T = M^{-1}``, for RWM and MALA proposals);
    ``inverse_mass_times(v, position) = M^{-1} v``; ``mass_quadratic(d, position) =
    d^T M d / 2``, the exponent of a Gaussian displacement with covariance ``M^{-1}``."""

    sample_momentum: Callable[[Array, Array], Array]
    kinetic_energy: Callable[[Array, Array], Array]
    velocity: Callable[[Array, Array], Array]
    scale: Callable[[Array, Array], Array]
    inverse_mass_times: Callable[[Array, Array], Array]
    mass_quadratic: Callable[[Array, Array], Array]


def _low_rank_apply(y, vectors, scales):
    """``(I + U (diag(scales) - I) U^T) y`` in ``O(dim k)``: with orthonormal ``U``, powers
    of this operator are the same form with powered ``scales``."""
    return y + vectors @ ((scales - 1.0) * (vectors.T @ y))


def low_rank_metric(inverse_mass: LowRankInverseMass) -> Metric:
    """The Euclidean metric of a `LowRankInverseMass` (nutpie's low-rank modified mass
    matrix; `adaptmc.adaptation.low_rank`), every function ``O(dim k)``.

    With ``s = D^{1/2}`` and ``R = I + U (Lambda^{1/2} - I) U^T`` (symmetric, ``R^2 = I +
    U (Lambda - I) U^T`` as ``U^T U = I``): ``M^{-1} = s R^2 s``, the square root used by
    ``scale`` is ``S = s R``, a momentum is ``p = s^{-1} R^{-1} z``, ``z ~ N(0, I)`` (its
    covariance ``s^{-1} R^{-2} s^{-1} = M``), and ``d^T M d = y^T (I + U (Lambda^{-1} - I)
    U^T) y`` with ``y = d / s``."""
    diag, vectors, values = (jnp.asarray(a) for a in inverse_mass)
    root = jnp.sqrt(diag)
    root_values = jnp.sqrt(values)

    def sample_momentum(key, position):
        z = jax.random.normal(key, position.shape, position.dtype)
        return _low_rank_apply(z, vectors, 1.0 / root_values) / root

    def velocity(p, position):
        return root * _low_rank_apply(root * p, vectors, values)

    def kinetic_energy(p, position):
        return 0.5 * jnp.sum(p * velocity(p, position))

    def scale(v, position):
        return root * _low_rank_apply(v, vectors, root_values)

    def mass_quadratic(d, position):
        y = d / root
        return 0.5 * jnp.sum(y * _low_rank_apply(y, vectors, 1.0 / values))

    return Metric(sample_momentum, kinetic_energy, velocity, scale, velocity, mass_quadratic)


def euclidean_metric(inverse_mass: Array | LowRankInverseMass) -> Metric:
    """Gaussian kinetic energy ``K(p) = p^T M^{-1} p / 2`` (Neal 2011, Sec. 5.4.1)."""
    if isinstance(inverse_mass, LowRankInverseMass):
        return low_rank_metric(inverse_mass)
    inverse_mass = jnp.asarray(inverse_mass)
    if inverse_mass.ndim <= 1:
        sqrt_inv = jnp.sqrt(inverse_mass)

        def sample_momentum(key, position):
            return jax.random.normal(key, position.shape, position.dtype) / sqrt_inv

        def kinetic_energy(p, position):
            return 0.5 * jnp.sum(p * p * inverse_mass)

        def velocity(p, position):
            return inverse_mass * p

        def scale(v, position):
            return sqrt_inv * v

        def inverse_mass_times(v, position):
            return inverse_mass * v

        def mass_quadratic(d, position):
            return 0.5 * jnp.sum(d * d / inverse_mass)

    elif inverse_mass.ndim == 2:
        chol = jnp.linalg.cholesky(inverse_mass)  # M^{-1} = L L^T, so M = L^{-T} L^{-1}

        def sample_momentum(key, position):
            z = jax.random.normal(key, position.shape, position.dtype)
            return solve_triangular(chol, z, lower=True, trans="T")

        def kinetic_energy(p, position):
            return 0.5 * p @ (inverse_mass @ p)

        def velocity(p, position):
            return inverse_mass @ p

        def scale(v, position):
            return chol @ v

        def inverse_mass_times(v, position):
            return inverse_mass @ v

        def mass_quadratic(d, position):
            z = solve_triangular(chol, d, lower=True)
            return 0.5 * jnp.sum(z * z)

    else:
        raise ValueError(
            f"inverse mass must be a scalar, vector or matrix; got {inverse_mass.shape}"
        )
    return Metric(
        sample_momentum, kinetic_energy, velocity, scale, inverse_mass_times, mass_quadratic
    )


# ----------------------------------------------------------------------------- Riemannian


class RiemannianMetric(NamedTuple):
    """A position-dependent metric ``G(q)`` (Girolami & Calderhead 2011, Sec. 4).

    matrix: ``position: (dim,) -> (dim, dim)`` symmetric positive definite ``G(q)``, written
    with ``jax.numpy`` so that the integrator can differentiate it (one ``jax.vjp`` per
    position, no dense derivative tensor); cost: gradient-equivalents of one evaluation of
    ``G`` (a log-density gradient is 1), the unit in which kernels report ``num_grads``;
    name: short label for tables.

    The momentum of a kernel on this metric is ``p ~ N(0, G(q))`` and the kinetic energy
    ``p^T G(q)^-1 p / 2 (+ log|G(q)| / 2)``; `adaptmc.kernels.integrators` counts a pullback
    through ``G`` (the reverse sweep) as one more evaluation of ``cost``.

    quadratic_gradient: optional ``(q, v) -> d/dq [v^T G(q) v / 2]`` at fixed ``v``, the
    kinetic force of the generalised leapfrog's momentum half-step, when the metric can
    compute it without a pullback through ``G`` (`gauss_newton_metric`: one forward-over-
    reverse product); quadratic_cost: its gradient-equivalents.
    """

    matrix: Callable[[Array], Array]
    cost: float
    name: str = "user"
    quadratic_gradient: Callable[[Array, Array], Array] | None = None
    quadratic_cost: float = 0.0


def _symmetric(matrix: Array) -> Array:
    return 0.5 * (matrix + matrix.T)


def _precision_diagonal(precision, dim: int, dtype) -> Array:
    return jnp.broadcast_to(jnp.asarray(precision, dtype), (dim,))


def user_metric(matrix: Callable[[Array], Array], cost: float, regulariser: float = 0.0,
                name: str = "user") -> RiemannianMetric:
    """Any ``G(q)`` given as a function; ``regulariser`` adds ``lambda I``. ``cost`` is what
    one evaluation costs in gradient-equivalents (say it honestly: it scales the budget)."""
    if not cost > 0:
        raise ValueError(f"a metric's cost must be positive, got {cost}")

    def regularised(position):
        g = _symmetric(matrix(position))
        return g + regulariser * jnp.eye(g.shape[0], dtype=g.dtype)

    return RiemannianMetric(regularised, float(cost), name)


def gauss_newton_metric(
    output: Callable[[Array, Array], Array],
    inputs: Array,
    dim: int,
    noise_precision: float,
    prior_precision: float | Array,
    regulariser: float = 0.0,
) -> RiemannianMetric:
    """Bayesian Gauss-Newton metric ``G(q) = beta (J^T J + lambda I) + (alpha + lambda) I``.

    Zlochin & Baram (2000), Sec. 3 (MacKay 1992's Gauss-Newton approximation of the
    Hessian): ``J: (n K, dim)`` is the Jacobian of the model's outputs over the training
    inputs, ``beta`` the Gaussian noise precision, ``alpha`` the prior precision (a scalar,
    or ``(dim,)`` per weight: the current precisions of a hierarchical prior). ``lambda``
    regularises both terms, keeping ``G`` well conditioned where ``J^T J`` is singular.

    Parameters
    ----------
    output
        ``output(position, x) -> (K,)``: the model's outputs for ONE case ``x``. ``J`` is
        built case by case (``vmap`` of ``jacrev``), i.e. ``K`` reverse sweeps over the data
        set, so one evaluation costs ``K`` gradient-equivalents (``J^T J`` is then one
        ``(dim, n K) x (n K, dim)`` product; no Hessian of the log density is formed).
    inputs
        ``(n, ...)`` training inputs.
    dim
        The dimension of the position (to find ``K`` without evaluating the model).
    """
    inputs = jnp.asarray(inputs)
    single_jacobian = jax.jacrev(output)

    def matrix(position):
        jac = jax.vmap(single_jacobian, in_axes=(None, 0))(position, inputs)
        jac = jac.reshape(-1, position.shape[0])
        dim_, dtype = position.shape[0], position.dtype
        alpha = _precision_diagonal(prior_precision, dim_, dtype)
        data_term = noise_precision * (jac.T @ jac + regulariser * jnp.eye(dim_, dtype=dtype))
        return _symmetric(data_term) + jnp.diag(alpha + regulariser)

    def quadratic_gradient(position, v):
        """``beta d/dq |J(q) v|^2 / 2``: ``J(q) v`` by one forward-mode pass over the data
        (``jvp``), its gradient by one reverse pass over that (Pearlmutter 1994's
        R-operator): the cost of a Hessian-vector product, counted 2 gradient-equivalents
        whatever ``K``."""

        def directional(q):
            outputs = jax.vmap(output, in_axes=(None, 0))
            return jax.jvp(lambda w: outputs(w, inputs), (q,), (v,))[1]

        values, pullback = jax.vjp(directional, position)
        return noise_precision * pullback(values)[0]

    position_shape = jax.ShapeDtypeStruct((dim,), inputs.dtype)
    num_outputs = int(np.prod(jax.eval_shape(output, position_shape, inputs[0]).shape))
    return RiemannianMetric(matrix, float(num_outputs), "gauss-newton", quadratic_gradient,
                            2.0)


def fisher_metric(
    fisher: Callable[[Array], Array],
    prior_precision: float | Array | Callable[[Array], Array],
    cost: float,
    regulariser: float = 0.0,
) -> RiemannianMetric:
    """Fisher information plus the negative Hessian of the log prior, ``G(q) = F(q) -
    d^2 log p(q) + lambda I`` (Zlochin & Baram 2000, eq. 9; Girolami & Calderhead 2011,
    eq. 14), for any likelihood whose Fisher information ``fisher: q -> (dim, dim)`` is
    known in closed form. ``prior_precision``: a scalar, ``(dim,)`` diagonal, ``(dim, dim)``
    matrix, or a function of the position (the current precisions of a hierarchical prior).
    ``cost``: gradient-equivalents of one evaluation of ``F``."""

    def prior_term(position):
        value = prior_precision(position) if callable(prior_precision) else prior_precision
        value = jnp.asarray(value, position.dtype)
        if value.ndim == 2:
            return value
        return jnp.diag(_precision_diagonal(value, position.shape[0], position.dtype))

    def matrix(position):
        g = _symmetric(fisher(position)) + prior_term(position)
        return g + regulariser * jnp.eye(position.shape[0], dtype=position.dtype)

    return user_metric(matrix, cost, name="fisher")


def hessian_metric(logdensity: Callable[[Array], Array], dim: int,
                   regulariser: float = 0.0) -> RiemannianMetric:
    """The negative Hessian of the log density plus ``lambda I``: the fallback for a target
    without a model-specific metric. It is a metric only where the log density is strictly
    concave; elsewhere its Cholesky factor is NaN and a kernel counts a divergence. One
    evaluation is ``dim`` forward-over-reverse sweeps: ``dim`` gradient-equivalents."""
    hessian = jax.jacfwd(jax.grad(logdensity))
    return user_metric(lambda q: -hessian(q), float(dim), regulariser, name="hessian")
