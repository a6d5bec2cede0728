"""Gradient-based adaptive MCMC: RWM and MALA proposals whose Cholesky factor is learned by
stochastic gradient ascent on the generalised speed measure (Titsias & Dellaportas 2019,
"Gradient-based Adaptive Markov Chain Monte Carlo", NeurIPS).

Proposals, with ``L`` lower triangular (full) or diagonal, ``L_ii = exp(l_i) > 0`` so a
gradient step never makes ``L`` singular and ``sum_i log L_ii = sum_i l_i``. Full factors
come in two parametrisations (``N`` strictly lower triangular):

- ``"scaled"`` (default): ``L = (I + N) diag(exp(l))``. Rescaling the target rescales
  ``exp(l)`` only, so RMSProp's scale-free steps are relative changes of ``L`` whatever the
  target's scale (on logistic regression, posterior sds ~0.1, this doubled gadMALA's min
  ESS in our runs). Slow where ``N`` must grow large: on the 51-d GP Gaussian (Cholesky
  diagonal ~0.1, entries ~1) the shape error was still 0.24 after 10^5 steps.
- ``"direct"`` (``-direct`` kernels): ``L = N + diag(exp(l))``, entries of ``L`` updated in
  absolute units as in the paper; learns the 51-d GP shape to < 0.1 in 6 x 10^4 steps,
  but its fixed absolute step is large for small-scale posteriors.


- gadRWM (Sec. 3.1): ``y = x + L eps``, ``eps ~ N(0, I)``;
- gadMALA (Sec. 3.2): ``y = x + (1/2) L L^T grad log pi(x) + L eps`` with its M-H
  correction, which in terms of ``eps`` reads
  ``log r = log pi(y) - log pi(x) - |eps + L^T (g_x + g_y) / 2|^2 / 2 + |eps|^2 / 2``
  (``g = grad log pi``), so no triangular solve is needed.

After every step, accepted or not, the factor takes one RMSProp step (Optax's
``scale_by_rms``, ``G_t = 0.9 G_{t-1} + 0.1 g_t^2``) on the single-sample objective
(Sec. 3, Eqs. 6-8)

    F(L) = min(0, log r(x, y(L, eps))) + beta * sum_i log L_ii,

the reparametrised gradient through the proposed ``y`` (so rejected proposals teach too).
``beta`` follows ``beta <- beta (1 + rho_beta (accepted - target_acceptance))`` (Sec. 3.1,
target 0.25 for RWM and 0.55 for MALA). The fast gadMALA stops the gradient inside
``grad log pi(y)`` (Sec. 3.2, O(n^2) per step, one gradient); the exact one differentiates
through it (a Hessian-vector product, counted as a second gradient).

Adaptation is switched by ``adapt`` (1 during burn-in, 0 to freeze: the kernel is then a
plain RWM/MALA with fixed ``L`` and leaves the target invariant). With ``lr_decay = k > 0``
the learning rate and ``rho_beta`` are multiplied by ``(1 + c)^-k``, where ``c`` counts the
steps taken with a decaying rate, so adaptation can go on after burn-in and diminish (Roberts &
Rosenthal 2007).

What ``L L^T`` learns: the proposal covariance, i.e. the target covariance times a scale
set by ``beta`` (the acceptance target): about ``2.38^2 / d`` for RWM (Roberts & Rosenthal
2001) and ``O(d^{-1/3})`` for MALA on Gaussians, so only the *shape* of ``L L^T`` is
compared with the target covariance (see `scaled_covariance_error`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from adaptmc.adaptation.first_step import first_step
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

_RMSPROP = optax.scale_by_rms(decay=0.9, eps=1e-6, eps_in_sqrt=False)


class GADState(NamedTuple):
    """position, logdensity, logdensity_grad: ``(dim,)``, ``()``, ``(dim,)`` at the current
    point; factor: ``{"log_diag": (dim,), "unit_lower" or "offdiag": (dim, dim)}`` (strictly
    lower part used; `factor_matrix`; only ``log_diag`` for diagonal variants), NaN until
    the first step sets it to
    ``step_size * I``; rms: Optax RMSProp state (``nu``, same tree as ``factor``); beta: the
    entropy weight; decay_clock: steps taken with a decaying learning rate."""

    position: Array
    logdensity: Array
    logdensity_grad: Array
    factor: dict
    rms: optax.ScaleByRmsState
    beta: Array
    decay_clock: Array


class GADRWMParams(NamedTuple):
    """step_size: initial ``L = step_size * I``; learning_rate: RMSProp rate rho; rho_beta,
    target_acceptance: the beta controller; initial_beta: beta at the start (kept in the
    state afterwards); adapt: 1 to learn, 0 to freeze; lr_decay: exponent k of the
    diminishing rate (0 = constant)."""

    step_size: float = 0.1
    learning_rate: float = 0.002
    target_acceptance: float = 0.25
    rho_beta: float = 0.02
    initial_beta: float = 1.0
    adapt: float = 1.0
    lr_decay: float = 0.0


class GADMALAParams(NamedTuple):
    """As `GADRWMParams`, with MALA's acceptance target 0.55."""

    step_size: float = 0.1
    learning_rate: float = 0.002
    target_acceptance: float = 0.55
    rho_beta: float = 0.02
    initial_beta: float = 1.0
    adapt: float = 1.0
    lr_decay: float = 0.0


def factor_matrix(factor: dict) -> Array:
    """The Cholesky factor ``L: (dim, dim)``: ``(I + N) diag(exp(l))`` (key ``unit_lower``,
    the scaled parametrisation), ``N + diag(exp(l))`` (key ``offdiag``, direct) or
    ``diag(exp(l))``; ``N`` is the strictly lower part of the stored matrix."""
    diag = jnp.exp(factor["log_diag"])
    if "unit_lower" in factor:
        eye = jnp.eye(diag.shape[0], dtype=diag.dtype)
        return (jnp.tril(factor["unit_lower"], -1) + eye) * diag
    if "offdiag" in factor:
        return jnp.tril(factor["offdiag"], -1) + jnp.diag(diag)
    return jnp.diag(diag)


def proposal_covariance(factor: dict) -> Array:
    """``L L^T: (dim, dim)``, the proposal covariance (vmap it over chains)."""
    chol = factor_matrix(factor)
    return chol @ chol.T


def scaled_covariance_error(learned: Array, target_cov: Array) -> tuple[Array, Array]:
    """Relative Frobenius error of a learned proposal covariance after the best scalar.

    The scale of ``L L^T`` is set by beta's acceptance target (about ``2.38^2 / d`` times
    the target covariance for RWM, ``O(d^{-1/3})`` for MALA), not by the target, so we
    compare shapes: with ``a = <C, Sigma>_F / <C, C>_F``, the scalar minimising
    ``||a C - Sigma||_F``, return ``(||a C - Sigma||_F / ||Sigma||_F, 1 / a)``; ``1 / a``
    is the learned scale ``C ~ Sigma / a``.
    """
    learned, target_cov = jnp.asarray(learned), jnp.asarray(target_cov)
    best = jnp.sum(learned * target_cov) / jnp.sum(learned * learned)
    error = jnp.linalg.norm(best * learned - target_cov) / jnp.linalg.norm(target_cov)
    return error, 1.0 / best


def _times_factor(factor: dict, v: Array) -> Array:
    """``L v``."""
    scaled = jnp.exp(factor["log_diag"]) * v
    if "unit_lower" in factor:
        return scaled + jnp.tril(factor["unit_lower"], -1) @ scaled
    if "offdiag" in factor:
        return scaled + jnp.tril(factor["offdiag"], -1) @ v
    return scaled


def _times_factor_t(factor: dict, v: Array) -> Array:
    """``L^T v``."""
    diag = jnp.exp(factor["log_diag"])
    if "unit_lower" in factor:
        return diag * (v + jnp.tril(factor["unit_lower"], -1).T @ v)
    if "offdiag" in factor:
        return diag * v + jnp.tril(factor["offdiag"], -1).T @ v
    return diag * v


def _empty_factor(dim: int, dtype, parametrisation: str) -> dict:
    factor = {"log_diag": jnp.full((dim,), jnp.nan, dtype)}
    if parametrisation != "diagonal":
        key = "unit_lower" if parametrisation == "scaled" else "offdiag"
        factor[key] = jnp.zeros((dim, dim), dtype)
    return factor


def _make_init(parametrisation: str):
    def init(position: Array, target) -> GADState:
        position = jnp.asarray(position)
        logdensity, grad = target.logdensity_and_grad(position)
        factor = _empty_factor(position.shape[0], position.dtype, parametrisation)
        zero = jnp.zeros((), position.dtype)
        return GADState(position, logdensity, grad, factor, _RMSPROP.init(factor),
                        jnp.full((), jnp.nan, position.dtype), zero)

    return init


def _started(state: GADState, params) -> GADState:
    """Set the NaN factor and beta of a fresh state from the call-time parameters."""
    log_diag = state.factor["log_diag"]
    log_diag = jnp.where(jnp.isnan(log_diag), jnp.log(params.step_size), log_diag)
    beta = jnp.where(jnp.isnan(state.beta), params.initial_beta, state.beta)
    return state._replace(factor={**state.factor, "log_diag": log_diag},
                          beta=beta.astype(state.position.dtype))


def _rwm_proposal(factor, state: GADState, eps, target, exact):
    """Proposal, log density and gradient there, and ``log r`` as functions of ``factor``.
    ``log pi(y)`` enters through its first-order expansion at the (stopped) proposal, so
    the value is exact and the gradient w.r.t. ``factor`` is ``g_y . dy/dL`` at the cost
    of the single ``value_and_grad`` evaluation."""
    y = state.position + _times_factor(factor, eps)
    y_stop = jax.lax.stop_gradient(y)
    logdensity_y, grad_y = target.logdensity_and_grad(y_stop)
    logdensity_y_diff = logdensity_y + jnp.dot(grad_y, y - y_stop)
    return y_stop, logdensity_y, grad_y, logdensity_y_diff - state.logdensity


def _mala_proposal(factor, state: GADState, eps, target, exact):
    """gadMALA's proposal and ``log r`` (module docstring). ``exact``: differentiate
    through ``grad log pi(y)``; else stop it (the fast variant)."""
    g_x = state.logdensity_grad
    y = state.position + 0.5 * _times_factor(factor, _times_factor_t(factor, g_x))
    y = y + _times_factor(factor, eps)
    y_stop = jax.lax.stop_gradient(y)
    if exact:
        logdensity_y_diff, grad_y_diff = target.logdensity_and_grad(y)
        logdensity_y = jax.lax.stop_gradient(logdensity_y_diff)
        grad_y = jax.lax.stop_gradient(grad_y_diff)
    else:
        logdensity_y, grad_y = target.logdensity_and_grad(y_stop)
        logdensity_y_diff = logdensity_y + jnp.dot(grad_y, y - y_stop)
        grad_y_diff = grad_y
    reverse = eps + 0.5 * _times_factor_t(factor, g_x + grad_y_diff)
    log_ratio = (logdensity_y_diff - state.logdensity
                 - 0.5 * jnp.sum(reverse**2) + 0.5 * jnp.sum(eps**2))
    return y_stop, logdensity_y, grad_y, log_ratio


def speed_objective(factor, state: GADState, eps, target, beta, proposal, exact=False):
    """``F(L) = min(0, log r) + beta * sum(log L_ii)`` for one ``eps`` (Titsias &
    Dellaportas 2019, Eq. 8 with the entropy of ``N(., L L^T)`` up to a constant).

    Returns ``(F, (y, log pi(y), grad log pi(y), log r))``.
    """
    y, logdensity_y, grad_y, log_ratio = proposal(factor, state, eps, target, exact)
    value = jnp.minimum(0.0, log_ratio) + beta * jnp.sum(factor["log_diag"])
    return value, (y, logdensity_y, grad_y, log_ratio)


def initial_step_size(key: Array, target, position, *, proposal: str = "mala",
                      step_size: float = 0.1, num_draws: int = 10,
                      max_doublings: int = 60) -> float:
    """A starting ``h`` for the factor ``L = h I``: Hoffman & Gelman's (2014, Algorithm 4)
    heuristic (`adaptmc.adaptation.first_step.first_step`) applied to one gadMALA (or gadRWM)
    proposal. From ``step_size``, ``h`` is doubled while, or halved until, the mean
    acceptance probability of ``num_draws`` proposals from ``position`` (fixed noise from
    ``key``; a non-finite ``log r`` counts as 0) exceeds 1/2; returns the largest ``h`` seen
    above 1/2. Without it a chain started where the gradient is huge (an over-dispersed
    start on a posteriordb posterior, gradients of order 1e6) rejects every proposal at
    ``h = 0.1`` and never moves: rejected proposals with a non-finite ``log r`` carry no
    gradient to learn from."""
    make = {"mala": _mala_proposal, "rwm": _rwm_proposal}[proposal]
    position = jnp.asarray(position)
    logdensity, grad = target.logdensity_and_grad(position)
    state = GADState(position, logdensity, grad, {}, None, None, None)
    eps = jax.random.normal(key, (num_draws, *position.shape), position.dtype)

    def above_half(log_h):
        factor = {"log_diag": jnp.full(position.shape, log_h, position.dtype)}
        log_r = jax.vmap(lambda e: make(factor, state, e, target, False)[3])(eps)
        prob = jnp.exp(jnp.minimum(0.0, log_r))
        return jnp.mean(jnp.where(jnp.isfinite(log_r), prob, 0.0)) > 0.5

    start = jnp.asarray(math.log(step_size), position.dtype)
    _, trials, up, flipped = jax.jit(lambda: first_step(above_half, start,
                                                        max_doublings - 1))()
    trials, up, flipped = int(trials), bool(up), bool(flipped)
    # the largest h above 1/2: up, the trial before the flip (or the last); down, the flip
    # (or one halving below the last); powers of 2 exactly, not exp(log)
    doublings = trials - 1 - flipped if up else -(trials - 1) - (not flipped)
    return float(step_size) * 2.0 ** doublings


def _make_step(proposal, exact: bool, needs_grad_when_frozen: bool):
    def step(key: Array, state: GADState, target, params) -> tuple[GADState, StepInfo]:
        key_eps, key_accept = jax.random.split(key)
        state = _started(state, params)
        # one diminishing factor for both rates, so beta never outruns a slowed-down L
        decay = (1.0 + state.decay_clock) ** (-params.lr_decay)
        eps = jax.random.normal(key_eps, state.position.shape, state.position.dtype)

        def adapting(state):
            (_, aux), grad = jax.value_and_grad(speed_objective, has_aux=True)(
                state.factor, state, eps, target, state.beta, proposal, exact)
            finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(g))
                                        for g in jax.tree.leaves(grad)]))
            grad = jax.tree.map(lambda g: jnp.where(finite, g, 0.0), grad)
            direction, rms = _RMSPROP.update(grad, state.rms)
            factor = jax.tree.map(lambda f, d: f + params.learning_rate * decay * d,
                                  state.factor, direction)
            clock = state.decay_clock + jnp.where(params.lr_decay > 0, 1.0, 0.0)
            return aux, factor, rms, clock

        def frozen(state):
            if needs_grad_when_frozen:
                _, aux = speed_objective(state.factor, state, eps, target, state.beta,
                                         proposal, exact=False)
            else:  # frozen gadRWM is plain RWM: one log-density evaluation, and the
                # gradient it stores is a placeholder (gadRWM never reads g_x)
                y = state.position + _times_factor(state.factor, eps)
                logdensity_y = target.logdensity(y)
                aux = (y, logdensity_y, jnp.zeros_like(y), logdensity_y - state.logdensity)
            return aux, state.factor, state.rms, state.decay_clock

        aux, factor, rms, clock = jax.lax.cond(params.adapt > 0, adapting, frozen, state)
        y, logdensity_y, grad_y, log_ratio = aux
        num_grads = jnp.where((params.adapt > 0) & exact, 2, 1)
        accept, info = metropolis_hastings(key_accept, log_ratio, num_grads)
        beta = jnp.where(
            params.adapt > 0,
            state.beta
            * (1.0 + params.rho_beta * decay * (accept.astype(state.beta.dtype)
                                        - params.target_acceptance)),
            state.beta,
        )
        moved = select(accept, (y, logdensity_y, grad_y),
                       (state.position, state.logdensity, state.logdensity_grad))
        return GADState(*moved, factor, rms, beta, clock), info

    return step


def _make_cost(exact: bool):
    def cost(params) -> int:
        return 2 if exact and float(params.adapt) > 0 else 1

    return cost


def check_params(params, dim: int | None = None) -> None:
    for name in ("step_size", "learning_rate", "rho_beta", "initial_beta"):
        check_positive(name, getattr(params, name))
    check_shape("step_size", params.step_size, dim)
    if not 0.0 < float(params.target_acceptance) < 1.0:
        raise ValueError(f"target_acceptance must be in (0, 1), got {params.target_acceptance}")
    if float(params.adapt) not in (0.0, 1.0):
        raise ValueError(f"adapt must be 0 or 1, got {params.adapt}")
    if not 0.0 <= float(params.lr_decay) <= 1.0:
        raise ValueError(f"lr_decay must be in [0, 1], got {params.lr_decay}")


# the initial factor ``L = step_size * I``; the factor itself adapts in the state
TUNABLES = (Tunable("step_size", bounds=(0.01, 1.0), label="eps", stat="step_size"),)

PARAMETERS = (replace(STEP_SIZE, help="the initial factor's scale h (L = h I; default: "
                      "Hoffman & Gelman's heuristic at the start)"),)

PARAMETRISATIONS = ("scaled", "direct", "diagonal")


def _kernel_name(base: str, parametrisation: str) -> str:
    suffix = {"scaled": "", "direct": "-direct", "diagonal": "-diag"}
    if parametrisation not in suffix:
        raise ValueError(f"parametrisation must be one of {PARAMETRISATIONS}, "
                         f"got {parametrisation!r}")
    return base + suffix[parametrisation]


def make_gadrwm(parametrisation: str = "scaled") -> Kernel:
    """gadRWM with a full factor (``"scaled"``: ``L = (I + N) diag(exp(l))``, default;
    ``"direct"``: ``L = N + diag(exp(l))``) or a ``"diagonal"`` one."""
    name = _kernel_name("gadrwm", parametrisation)
    step = _make_step(_rwm_proposal, exact=False, needs_grad_when_frozen=False)
    return Kernel(name, _make_init(parametrisation), step, _make_cost(False), check_params,
                  GADRWMParams, TUNABLES, PARAMETERS, initial_step="rwm", adapts_in_step=True)


def make_gadmala(exact: bool = False, parametrisation: str = "scaled") -> Kernel:
    """gadMALA, fast (``grad log pi(y)`` stopped) or exact, with a factor parametrised as in
    `make_gadrwm`."""
    name = _kernel_name("gadmala" + ("-exact" if exact else ""), parametrisation)
    step = _make_step(_mala_proposal, exact=exact, needs_grad_when_frozen=True)
    return Kernel(name, _make_init(parametrisation), step, _make_cost(exact), check_params,
                  GADMALAParams, TUNABLES, PARAMETERS, initial_step="mala", adapts_in_step=True)


gadrwm = make_gadrwm()
gadrwm_direct = make_gadrwm("direct")
gadrwm_diag = make_gadrwm("diagonal")
gadmala = make_gadmala()
gadmala_direct = make_gadmala(parametrisation="direct")
gadmala_exact = make_gadmala(exact=True)
gadmala_diag = make_gadmala(parametrisation="diagonal")
