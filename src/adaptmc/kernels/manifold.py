"""Riemannian dynamics: RMHMC and manifold stochastic dynamics (MSD) on a position-dependent
metric ``G(q)`` (`adaptmc.kernels.metrics.RiemannianMetric`).

Both simulate the non-separable Hamiltonian ``H(q, p) = -log pi(q) + w log|G(q)| / 2 +
p^T G(q)^-1 p / 2`` with the generalised leapfrog (Girolami & Calderhead 2011, eqs. 16-18;
`adaptmc.kernels.integrators.generalized_leapfrog`):

- **RMHMC** (Girolami & Calderhead 2011, Sec. 4): a fresh ``p ~ N(0, G(q))``, ``L`` steps,
  Metropolis correction.
- **MSD** (Zlochin & Baram 2000, "Manifold Stochastic Dynamics for Bayesian Learning"): one
  step per iteration and momentum persistence ``p <- p cos(theta) + z sin(theta)``,
  ``z ~ N(0, G(q))`` (Horowitz 1991 on the manifold; this keeps ``p | q ~ N(0, G(q))``
  invariant), with an optional Metropolis correction (momentum negated on rejection).

The log-determinant weight ``w``: with ``w = 1`` the position's stationary law is ``pi(q)``
exactly. With ``w = 0`` (the Hamiltonian of Zlochin & Baram without the ``log|G|`` term) it
is ``pi(q) |G(q)|^(1/2)``: the posterior times a Jeffreys-type factor, which Zlochin & Baram
read as part of the prior. Both are offered (``log_det`` in the parameters).

Non-convergence of a fixed-point iteration, a metric that is not positive definite, or any
non-finite value is a rejected, counted divergence. ``num_grads`` reports gradient-
equivalents: log-density gradients plus ``metric.cost`` per evaluation or pullback of ``G``
(or ``metric.quadratic_cost`` per Gauss-Newton quadratic force; see `generalized_leapfrog`);
``cost(params)`` is the upper bound reached when every fixed-point iteration runs to
``max_iterations``, so a super-transition never overspends. The fixed points are solved by
plain iteration or, with ``memory > 0`` in `msd_kernel` / `rmhmc_kernel`, by Anderson
acceleration (`adaptmc.kernels.integrators.fixed_point`): the same equations to the same
tolerance. For a metric with a ``quadratic_gradient`` the state carries ``G``'s factor,
inverse and log-determinant gradient at its position, so an iteration does not evaluate
``G`` again where the last one ended.

The metric is bound by `rmhmc_kernel(metric)` / `msd_kernel(metric)`; the registered
``rmhmc`` and ``msd`` kernels take it from ``target.info["metric"]`` (the models of
`adaptmc_lab.models.metric_models` put it there), falling back to the negative Hessian
(`hessian_metric`), and size super-transitions with the ``metric_cost`` parameter.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.kernels.base import (
    NUM_LEAPFROG,
    REFRESH_ANGLE,
    STEP_SIZE,
    Kernel,
    StepInfo,
    Tunable,
    check_num_steps,
    check_positive,
    metropolis_hastings,
    select,
)
from adaptmc.kernels.integrators import (
    IntegratorState,
    MetricTerms,
    integrate_implicit,
    metric_terms,
    terms_cost,
    uses_quadratic,
)
from adaptmc.kernels.metrics import RiemannianMetric, hessian_metric

Array = jax.Array

MSD_REFRESH_ANGLE = math.acos(0.95)  # Zlochin & Baram's persistence cos(theta) = 0.95


class ManifoldState(NamedTuple):
    """``momentum`` is NaN until the first step (then drawn in full from ``N(0, G(q))``).
    ``metric_chol``, ``metric_inverse``, ``log_det_gradient``: `MetricTerms` at the
    position, carried so that a metric with a ``quadratic_gradient`` is not evaluated
    again at the start of the next iteration (``log_det_gradient`` is zero for other
    metrics, whose pullback is recomputed)."""

    position: Array
    logdensity: Array
    logdensity_grad: Array
    momentum: Array
    metric_chol: Array
    metric_inverse: Array
    log_det_gradient: Array


class RMHMCParams(NamedTuple):
    """step_size: eps; num_leapfrog: L; refresh_angle: theta of partial refreshment (pi/2:
    a fresh momentum, Girolami & Calderhead's RMHMC); log_det: w, 1 (exact) or 0 (Jeffreys
    variant); metropolis: 1 applies the M-H correction, 0 accepts every converged step;
    max_iterations, tolerance: of each fixed-point iteration (relative change; raised to
    ten machine epsilons); metric_cost: ``G``'s cost in gradient-equivalents used by
    ``cost`` to size super-transitions when the metric comes from the target."""

    step_size: float = 0.1
    num_leapfrog: int = 5
    refresh_angle: float = math.pi / 2
    log_det: float = 1.0
    metropolis: float = 1.0
    max_iterations: int = 20
    tolerance: float = 1e-8
    metric_cost: float = 1.0


class MSDParams(NamedTuple):
    """As `RMHMCParams` with one step per iteration and Zlochin & Baram's persistence
    ``cos(theta) = 0.95`` by default."""

    step_size: float = 0.1
    refresh_angle: float = MSD_REFRESH_ANGLE
    log_det: float = 1.0
    metropolis: float = 1.0
    max_iterations: int = 20
    tolerance: float = 1e-8
    metric_cost: float = 1.0


def metric_of(target) -> RiemannianMetric:
    """The target's metric (``target.info["metric"]``), else its negative Hessian."""
    metric = target.info.get("metric") if isinstance(target.info, dict) else None
    if metric is None:
        return hessian_metric(target.logdensity, target.dim)
    if not isinstance(metric, RiemannianMetric):
        raise TypeError(f"target.info['metric'] must be a RiemannianMetric, got {type(metric)}")
    return metric


def _state(position, logdensity, grad, momentum, terms: MetricTerms) -> ManifoldState:
    log_det = (jnp.zeros_like(position) if terms.log_det_gradient is None
               else terms.log_det_gradient)
    return ManifoldState(position, logdensity, grad, momentum, terms.chol, terms.inverse,
                         log_det)


def _init(position: Array, target, metric: RiemannianMetric | None) -> ManifoldState:
    """The state at ``position``; its terms with ``w = 1`` (a step with ``w = 0`` ignores
    the log-determinant gradient)."""
    metric = metric_of(target) if metric is None else metric
    position = jnp.asarray(position)
    logdensity, grad = target.logdensity_and_grad(position)
    return _state(position, logdensity, grad, jnp.full_like(position, jnp.nan),
                  metric_terms(metric, position))


def init(position: Array, target) -> ManifoldState:
    """The state at ``position`` for the target's metric (`metric_of`)."""
    return _init(position, target, None)


def _hamiltonian(logdensity, chol, momentum, log_det_weight):
    """``-log pi + w log|G| / 2 + p^T G^-1 p / 2`` from the Cholesky factor of ``G``."""
    whitened = jax.scipy.linalg.solve_triangular(chol, momentum, lower=True)
    log_det = 2.0 * jnp.sum(jnp.log(jnp.diag(chol)))
    return -logdensity + 0.5 * log_det_weight * log_det + 0.5 * jnp.sum(whitened**2)


def _step(key, state: ManifoldState, target, params, num_leapfrog, metric, memory=0):
    """Refresh ``p`` (partially), ``num_leapfrog`` generalised-leapfrog steps, M-H."""
    metric = metric_of(target) if metric is None else metric
    key_momentum, key_accept = jax.random.split(key)
    dtype = state.position.dtype
    if uses_quadratic(metric):  # the state carries them
        terms = MetricTerms(state.metric_chol, state.metric_inverse, None,
                            state.log_det_gradient)
        start_cost = 0.0
    else:
        terms = metric_terms(metric, state.position, params.log_det)
        start_cost = terms_cost(metric, params.log_det)
    noise = jax.random.normal(key_momentum, state.position.shape, dtype)
    fresh = terms.chol @ noise
    angle = jnp.asarray(params.refresh_angle, dtype)
    momentum = jnp.where(jnp.isnan(state.momentum), fresh,
                         state.momentum * jnp.cos(angle) + fresh * jnp.sin(angle))
    tolerance = jnp.maximum(params.tolerance, 10 * jnp.finfo(dtype).eps)
    start = IntegratorState(state.position, momentum, state.logdensity, state.logdensity_grad)
    end, end_terms, implicit = integrate_implicit(
        start, params.step_size, num_leapfrog, target.logdensity_and_grad, metric, terms,
        log_det_weight=params.log_det, max_iterations=params.max_iterations,
        tolerance=tolerance, memory=memory,
    )
    energy_start = _hamiltonian(state.logdensity, terms.chol, momentum, params.log_det)
    energy_end = _hamiltonian(end.logdensity, end_terms.chol, end.momentum, params.log_det)
    log_ratio = energy_start - energy_end
    # without the correction a converged step is always taken; a failed one never is
    log_ratio = jnp.where(params.metropolis > 0, log_ratio, jnp.where(jnp.isfinite(log_ratio),
                                                                      0.0, log_ratio))
    log_ratio = jnp.where(implicit.converged, log_ratio, jnp.nan)
    num_grads = jnp.ceil(start_cost + implicit.num_grads)
    accept, info = metropolis_hastings(key_accept, log_ratio, num_grads)
    energy_error = jnp.where(implicit.converged, energy_end - energy_start, jnp.inf)
    info = info._replace(energy_error=jnp.where(jnp.isfinite(energy_error), energy_error,
                                                jnp.inf))
    proposal = _state(end.position, end.logdensity, end.logdensity_grad, end.momentum,
                      end_terms)
    rejected = state._replace(momentum=-momentum)
    return select(accept, proposal, rejected), info


def _upper_cost(metric_cost: float, num_leapfrog: int, max_iterations: int) -> int:
    """Gradient-equivalents when every fixed-point iteration runs to the limit: ``G`` at the
    start, then per step one gradient and ``2 max_iterations + 3`` metric evaluations or
    pullbacks (the third: the log-determinant pullback of a metric with a
    ``quadratic_gradient``; plus ``G`` at each later step's start)."""
    per_step = 1 + metric_cost * (2 * max_iterations + 3)
    return math.ceil(metric_cost * num_leapfrog + num_leapfrog * per_step)


def _check_common(params, dim: int | None = None) -> None:
    """``dim`` is accepted for the run loop's shape checks; these parameters are scalars."""
    check_positive("step_size", params.step_size)
    if np.ndim(params.step_size) != 0:
        raise ValueError(f"step_size must be a scalar, got shape {np.shape(params.step_size)}")
    if not 0.0 < float(params.refresh_angle) <= math.pi / 2:
        raise ValueError(f"refresh_angle must be in (0, pi/2], got {params.refresh_angle}")
    if float(params.log_det) not in (0.0, 1.0):
        raise ValueError(f"log_det must be 1 (exact) or 0 (Jeffreys variant), got "
                         f"{params.log_det}")
    if float(params.metropolis) not in (0.0, 1.0):
        raise ValueError(f"metropolis must be 1 or 0, got {params.metropolis}")
    iterations = params.max_iterations
    if int(iterations) != iterations or int(iterations) < 1:
        raise ValueError(f"max_iterations must be an integer >= 1, got {iterations}")
    check_positive("tolerance", params.tolerance)
    check_positive("metric_cost", params.metric_cost)


def _rmhmc_check(params: RMHMCParams, dim: int | None = None) -> None:
    _check_common(params, dim)
    check_num_steps("num_leapfrog", params.num_leapfrog)


# searched in log scale: the stable step of a position-dependent metric spans decades
MSD_TUNABLES = (Tunable("step_size", bounds=(0.001, 1.0), log=True, label="eps",
                        stat="step_size"),)
RMHMC_TUNABLES = (*MSD_TUNABLES, Tunable("num_leapfrog", integer=True, bounds=(1, 50),
                                         log=True, label="L", stat="n_steps"))


def rmhmc_kernel(metric: RiemannianMetric | None = None, name: str = "rmhmc",
                 memory: int = 0) -> Kernel:
    """Riemannian manifold HMC (Girolami & Calderhead 2011) on ``metric`` (None: the
    target's, see `metric_of`); ``memory``: Anderson acceleration of the fixed-point
    iterations (`adaptmc.kernels.integrators.fixed_point`; 0: plain iteration)."""

    def step(key, state, target, params: RMHMCParams) -> tuple[ManifoldState, StepInfo]:
        return _step(key, state, target, params, params.num_leapfrog, metric, memory)

    def cost(params: RMHMCParams) -> int:
        unit = params.metric_cost if metric is None else metric.cost
        return _upper_cost(unit, int(params.num_leapfrog), int(params.max_iterations))

    def init_state(position, target) -> ManifoldState:
        return _init(position, target, metric)

    return Kernel(name, init_state, step, cost, _rmhmc_check, RMHMCParams, RMHMC_TUNABLES,
                  (STEP_SIZE, NUM_LEAPFROG, REFRESH_ANGLE))


def msd_kernel(metric: RiemannianMetric | None = None, name: str = "msd",
               memory: int = 0) -> Kernel:
    """Manifold stochastic dynamics (Zlochin & Baram 2000) on ``metric`` (None: the
    target's, see `metric_of`); ``memory`` as in `rmhmc_kernel`."""

    def step(key, state, target, params: MSDParams) -> tuple[ManifoldState, StepInfo]:
        return _step(key, state, target, params, 1, metric, memory)

    def cost(params: MSDParams) -> int:
        unit = params.metric_cost if metric is None else metric.cost
        return _upper_cost(unit, 1, int(params.max_iterations))

    def init_state(position, target) -> ManifoldState:
        return _init(position, target, metric)

    return Kernel(name, init_state, step, cost, _check_common, MSDParams, MSD_TUNABLES,
                  (STEP_SIZE, REFRESH_ANGLE))


rmhmc = rmhmc_kernel()
msd = msd_kernel()
