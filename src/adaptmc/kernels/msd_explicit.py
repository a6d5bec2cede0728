"""Manifold stochastic dynamics as Zlochin & Baram (2000) write it: an explicit step of
their eq. (10) per iteration, with momentum persistence.

Zlochin & Baram, "Manifold Stochastic Dynamics for Bayesian Learning" (NIPS 2000). For a
least-squares model ``E(q) = beta |f(q) - y|^2 / 2 + alpha |q|^2 / 2`` (plus any terms of
``-log pi`` that the metric ignores) the Bayesian metric is ``G_B = J~^T J~ = beta J^T J +
alpha I`` (eqs. 7-8; ``J = df/dq`` over the training inputs) and the Hamiltonian
``H = E + p^T G_B^-1 p / 2`` (eq. 4) has, in the velocity ``v = dq/dt = G_B^-1 p``,

    d2q/dt2 = -G_B^-1 (grad E + J~^T (dJ~/dt) dq/dt),                       (eq. 10)

with ``dJ~/dt = beta^(1/2) dJ/dt`` the derivative of the Jacobian along ``v``. The
canonical law ``exp(-H)`` has the marginal ``exp(-E) |G_B|^(1/2)`` over ``q``: the
posterior times the Jeffreys factor (Sec. 4, footnote 2: the prior they kept).

**The step** (velocity form, explicit): a half-step of the position, one kick that treats
eq. (10)'s quadratic term as ``beta J^T (dJ/dt)[v] v'`` (the old velocity in the
derivative, the new one multiplying it: linear in ``v'``), a half-step of the position::

    q_h = q + eps v / 2
    (G_B + eps beta J^T M_v) v' = G_B v + eps grad log pi      (all at q_h)
    q' = q_h + eps v' / 2

``M_v = (dJ/dq)[v]``: ``J`` and ``M_v`` by one forward-over-reverse product (``jvp`` of the
case-wise ``jacrev``), no dense Hessian; one linear solve. The step is time-reversible
(``M_v v' = M_v' v``) and second order. Its velocity Jacobian is ``det(G_B - eps beta J^T
M_v') / det(G_B + eps beta J^T M_v)``, so the Metropolis-corrected variant (``metropolis``)
is exact for ``rho(q, v) = pi(q) |G_B|^(1 - w/2) exp(-v^T G_B v / 2)``: marginal
``pi |G_B|^((1 - w)/2)``, the Jeffreys-modified posterior for ``w = 0`` (``log_det``), the
posterior for ``w = 1`` (the force then lacks ``log|G_B|``'s gradient; only the correction
makes it exact). Without the correction (Zlochin & Baram's "generalization of the stochastic
dynamics method", their step chosen by the average Hamiltonian error, not a rejection rate)
every finite step is taken and the Jeffreys target holds up to the discretisation error.

**Persistence** (Horowitz 1991 on the manifold, Sec. 4): ``p <- p cos(theta) + xi
sin(theta)``, ``xi ~ N(0, G_B)``; in velocities ``v <- v cos(theta) + eta sin(theta)``,
``eta = L^-T z ~ N(0, G_B^-1)`` (``G_B = L L^T``). A rejection negates ``v``.

``num_grads`` counts gradient-equivalents: a log-density gradient or value 1, a Jacobian
``K`` (``K`` outputs per case: ``K`` reverse sweeps), a Jacobian with its derivative along
``v`` ``2 K``: uncorrected ``2 + 3 K``, corrected ``2 + 5 K`` (``M_v'`` for the Jacobian
of the step). The geometry is bound at construction (`explicit_msd_kernel`;
`adaptmc_lab.models.metric_models.bnn_msd_geometry` builds it for a network).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.kernels.base import (
    Kernel,
    StepInfo,
    Tunable,
    check_positive,
    metropolis_hastings,
    select,
)

Array = jax.Array

MSD_PERSISTENCE = math.acos(0.95)  # Zlochin & Baram's cos(theta) = 0.95


class MSDGeometry(NamedTuple):
    """``output(q, x) -> (K,)``: the model's outputs for one case; ``inputs: (n, ...)``;
    ``noise_precision`` beta and ``prior_precision`` alpha of ``G_B = beta J^T J +
    alpha I``; ``num_outputs`` K."""

    output: Callable[[Array, Array], Array]
    inputs: Array
    noise_precision: float
    prior_precision: float
    num_outputs: int


class ExplicitMSDState(NamedTuple):
    """``velocity`` dq/dt (NaN until the first step draws it in full); ``jacobian`` J and
    ``chol`` the Cholesky factor of ``G_B`` at ``position``."""

    position: Array
    logdensity: Array
    velocity: Array
    jacobian: Array
    chol: Array


class ExplicitMSDParams(NamedTuple):
    """step_size: eps; refresh_angle: theta (``cos(theta) = 0.95`` by default); log_det:
    w, 0 (the Jeffreys-modified posterior, Zlochin & Baram's) or 1 (the posterior; needs
    the correction)."""

    step_size: float = 0.01
    refresh_angle: float = MSD_PERSISTENCE
    log_det: float = 0.0


def jacobian(geometry: MSDGeometry, position: Array) -> Array:
    """``J: (n K, dim)``, case by case (``vmap`` of ``jacrev``: ``K`` reverse sweeps)."""
    single = jax.jacrev(geometry.output)
    jac = jax.vmap(single, in_axes=(None, 0))(position, geometry.inputs)
    return jac.reshape(-1, position.shape[0])


def jacobian_and_derivative(geometry, position, velocity) -> tuple[Array, Array]:
    """``(J, dJ/dt)`` with ``dJ/dt = (dJ/dq)[velocity]``: forward over reverse."""
    return jax.jvp(lambda q: jacobian(geometry, q), (position,), (velocity,))


def metric_matrix(geometry: MSDGeometry, jac: Array) -> Array:
    """``G_B = beta J^T J + alpha I`` (Zlochin & Baram, eq. 7)."""
    dim = jac.shape[1]
    gram = geometry.noise_precision * (jac.T @ jac)
    return 0.5 * (gram + gram.T) + geometry.prior_precision * jnp.eye(dim, dtype=jac.dtype)


def kinetic(geometry: MSDGeometry, jac: Array, velocity: Array) -> Array:
    """``v^T G_B v / 2 = (beta |J v|^2 + alpha |v|^2) / 2``: no matrix formed."""
    jv = jac @ velocity
    return 0.5 * (geometry.noise_precision * jv @ jv
                  + geometry.prior_precision * velocity @ velocity)


def kick(geometry, position, velocity, grad, step_size) -> tuple[Array, Array, Array]:
    """The velocity update of eq. (10) at ``position``: ``(v', J, K_+)`` with ``K_+ v' =
    G_B v + eps grad log pi``, ``K_+ = alpha I + beta J^T (J + eps (dJ/dt)[v])`` (one
    ``(dim, n K) x (n K, dim)`` product; ``G_B v`` by matrix-vector products)."""
    jac, djac = jacobian_and_derivative(geometry, position, velocity)
    beta, alpha = geometry.noise_precision, geometry.prior_precision
    k_plus = (beta * (jac.T @ (jac + step_size * djac))
              + alpha * jnp.eye(jac.shape[1], dtype=jac.dtype))
    metric_velocity = beta * (jac.T @ (jac @ velocity)) + alpha * velocity
    return jnp.linalg.solve(k_plus, metric_velocity + step_size * grad), jac, k_plus


def integrate(geometry, position, velocity, grad_fn, step_size):
    """One step ``(q, v) -> (q', v')`` (position half-step, kick, half-step); also ``(J,
    K_+)`` at the midpoint, for the step's Jacobian."""
    half = position + 0.5 * step_size * velocity
    new, jac, k_plus = kick(geometry, half, velocity, grad_fn(half), step_size)
    return half + 0.5 * step_size * new, new, half, jac, k_plus


def log_jacobian(geometry, half, jac, k_plus, new_velocity, step_size) -> Array:
    """``log |det d(q', v') / d(q, v)| = log|det K_-| - log|det K_+|``, ``K_- = G_B - eps
    beta J^T (dJ/dt)[v']`` at the midpoint."""
    _, djac = jacobian_and_derivative(geometry, half, new_velocity)
    k_minus = (geometry.noise_precision * (jac.T @ (jac - step_size * djac))
               + geometry.prior_precision * jnp.eye(jac.shape[1], dtype=jac.dtype))
    return jnp.linalg.slogdet(k_minus)[1] - jnp.linalg.slogdet(k_plus)[1]


def _log_det(chol: Array) -> Array:
    return 2.0 * jnp.sum(jnp.log(jnp.diag(chol)))


def persist(key, velocity, chol, angle) -> Array:
    """``v cos(theta) + eta sin(theta)``, ``eta ~ N(0, G_B^-1)`` (a full draw if ``v`` is
    NaN)."""
    noise = jax.random.normal(key, velocity.shape, velocity.dtype)
    eta = jax.scipy.linalg.solve_triangular(chol.T, noise, lower=False)
    angle = jnp.asarray(angle, velocity.dtype)
    return jnp.where(jnp.isnan(velocity), eta, velocity * jnp.cos(angle) + eta * jnp.sin(angle))


def _init(position, target, geometry) -> ExplicitMSDState:
    position = jnp.asarray(position)
    jac = jacobian(geometry, position)
    chol = jnp.linalg.cholesky(metric_matrix(geometry, jac))
    return ExplicitMSDState(position, target.logdensity(position),
                            jnp.full_like(position, jnp.nan), jac, chol)


def _step(key, state, target, params, geometry, metropolis: bool):
    """Persistence, one explicit step, the correction (or none)."""
    key_noise, key_accept = jax.random.split(key)
    velocity = persist(key_noise, state.velocity, state.chol, params.refresh_angle)
    eps = jnp.asarray(params.step_size, state.position.dtype)
    grad_fn = jax.grad(target.logdensity)
    position, new, half, jac_half, k_plus = integrate(geometry, state.position, velocity,
                                                      grad_fn, eps)
    jac = jacobian(geometry, position)
    chol = jnp.linalg.cholesky(metric_matrix(geometry, jac))
    logdensity = target.logdensity(position)
    energy_error = (-logdensity + kinetic(geometry, jac, new)
                    + state.logdensity - kinetic(geometry, state.jacobian, velocity))
    weight = 1.0 - 0.5 * params.log_det
    num_grads = 2 + 3 * geometry.num_outputs
    if metropolis:
        log_ratio = (-energy_error + weight * (_log_det(chol) - _log_det(state.chol))
                     + log_jacobian(geometry, half, jac_half, k_plus, new, eps))
        num_grads += 2 * geometry.num_outputs
    else:  # every finite step is taken
        log_ratio = jnp.where(jnp.isfinite(energy_error), 0.0, jnp.nan)
    log_ratio = jnp.where(jnp.all(jnp.isfinite(chol)), log_ratio, jnp.nan)
    accept, info = metropolis_hastings(key_accept, log_ratio, num_grads)
    info = info._replace(energy_error=jnp.where(jnp.isfinite(energy_error), energy_error,
                                                jnp.inf))
    proposal = ExplicitMSDState(position, logdensity, new, jac, chol)
    return select(accept, proposal, state._replace(velocity=-velocity)), info


def _check(params: ExplicitMSDParams, dim: int | None = None, metropolis: bool = True) -> None:
    check_positive("step_size", params.step_size)
    if np.ndim(params.step_size) != 0:
        raise ValueError(f"step_size must be a scalar, got shape {np.shape(params.step_size)}")
    if not 0.0 < float(params.refresh_angle) <= math.pi / 2:
        raise ValueError(f"refresh_angle must be in (0, pi/2], got {params.refresh_angle}")
    if float(params.log_det) not in (0.0, 1.0):
        raise ValueError(f"log_det must be 0 (Jeffreys) or 1 (posterior), got {params.log_det}")
    if float(params.log_det) == 1.0 and not metropolis:
        raise ValueError("log_det=1 (the posterior itself) needs the Metropolis correction: "
                         "the uncorrected dynamics keep the Jeffreys-modified posterior")


EXPLICIT_MSD_TUNABLES = (
    Tunable("step_size", bounds=(0.001, 0.1), log=True, label="eps", stat="step_size"),
    Tunable("refresh_angle", bounds=(0.05, math.pi / 2), log=True, label="theta"),
)


def explicit_msd_kernel(geometry: MSDGeometry, metropolis: bool = False,
                        name: str | None = None) -> Kernel:
    """Zlochin & Baram's MSD on ``geometry``; ``metropolis``: the exact, corrected variant
    (the paper's is uncorrected)."""
    if not isinstance(geometry, MSDGeometry):
        raise TypeError(f"geometry must be an MSDGeometry, got {type(geometry)}")
    name = name or ("msd-zb-mh" if metropolis else "msd-zb")

    def step(key, state, target, params) -> tuple[ExplicitMSDState, StepInfo]:
        return _step(key, state, target, params, geometry, metropolis)

    def cost(params) -> int:
        return 2 + (5 if metropolis else 3) * geometry.num_outputs

    def check(params, dim=None):
        _check(params, dim, metropolis)

    def init(position, target):
        return _init(position, target, geometry)

    return Kernel(name, init, step, cost, check, ExplicitMSDParams, EXPLICIT_MSD_TUNABLES)
