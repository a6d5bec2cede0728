"""The first-step heuristic of Hoffman & Gelman (2014, Algorithm 4), once: from a log step,
the first trial says whether the acceptance is above 1/2; the step is then doubled (or
halved) until that answer flips. `reasonable_step_size` applies it to one leapfrog step of
HMC (the warm-ups' first step), `adaptmc.kernels.gradient_adaptive.initial_step_size` to the
proposals of gadMALA and gadRWM."""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np


def first_step(above_half: Callable, log_step, max_iter: int):
    """Hoffman & Gelman's (2014, Alg. 4) search, traced (``jax.lax.while_loop``).

    ``above_half(log_step) -> bool``: whether the acceptance at ``exp(log_step)`` is above
    1/2. The first trial, at ``log_step``, sets the direction (up when above); each further
    trial doubles (or halves) the step until the answer flips, at most ``max_iter`` of them.

    Returns ``(log_step, trials, up, flipped)``: the last trial (where the answer flipped,
    the step Algorithm 4 returns), the trials made, the direction and whether it flipped.
    """

    def cond(carry):
        _, count, still, _ = carry
        return still & (count < max_iter)

    def body(carry):
        # count -1: the first trial at log_step sets the direction; then one doubling
        # (or halving) per trial until the acceptance crosses 1/2
        log_eps, count, _, first = carry
        trial = jnp.where(count < 0, log_eps,
                          log_eps + jnp.where(first, 1.0, -1.0) * math.log(2.0))
        above = above_half(trial)
        first = jnp.where(count < 0, above, first)
        return trial, count + 1, above == first, first

    log_eps, count, still, up = jax.lax.while_loop(cond, body, (log_step, -1, True, False))
    return log_eps, count + 1, up, ~still


def reasonable_step_size(key, target, position, step_size: float = 1.0,
                         max_iter: int = 100, inverse_mass=None,
                         start=None) -> tuple[float, int]:
    """`first_step` on one leapfrog step from ``position`` with momentum ``N(0, M)``;
    returns the step and the gradient evaluations spent (one per trial, and one at the
    start unless ``start``, the log density and gradient there, is given: a caller that
    has them does not evaluate the point twice). ``inverse_mass``: a diagonal ``M^{-1}``
    ``(dim,)`` (default the identity). The first trial, which sets the direction, runs
    inside the loop, so the compiled program holds the model's gradient twice (the start
    and the trial), not three times."""
    scale = jnp.ones_like(position) if inverse_mass is None else inverse_mass
    momentum = jax.random.normal(key, position.shape, position.dtype) / jnp.sqrt(scale)
    logdensity, grad = target.logdensity_and_grad(position) if start is None else start
    kinetic = 0.5 * momentum @ (scale * momentum)

    def above_half(log_eps):
        eps = jnp.exp(log_eps)
        p = momentum + 0.5 * eps * grad
        x = position + eps * scale * p
        new_logdensity, new_grad = target.logdensity_and_grad(x)
        p = p + 0.5 * eps * new_grad
        delta = new_logdensity - 0.5 * p @ (scale * p) - logdensity + kinetic
        return jnp.where(jnp.isfinite(delta), delta, -jnp.inf) > math.log(0.5)

    log_start = jnp.log(jnp.asarray(step_size, position.dtype))
    log_eps, trials, _, _ = first_step(above_half, log_start, max_iter)
    # gradients: one per trial and the start's, unless given
    return jnp.exp(log_eps), trials + (1 if start is None else 0)


def first_step_on_host(above_half: Callable, log_step: float, max_iter: int) -> tuple[float, int]:
    """`first_step`'s search as a Python loop, for an ``above_half`` that calls compiled
    code (no program of its own): returns ``(log_step, trials)``, the same trials."""
    trial, up, trials = float(log_step), bool(above_half(log_step)), 1
    while trials <= max_iter:
        trial += math.log(2.0) if up else -math.log(2.0)
        trials += 1
        if bool(above_half(trial)) != up:
            break
    return trial, trials


def reasonable_step_size_on_host(momentum, logdensity_and_grad: Callable, position,
                                 start, inverse_mass, step_size: float = 1.0,
                                 max_iter: int = 100) -> tuple[float, int]:
    """`reasonable_step_size` on the host: one leapfrog step per trial from ``position``
    (NumPy, ``(dim,)``) with ``momentum`` (a draw of ``N(0, M)``), its log density and
    gradient ``start``, under the diagonal ``inverse_mass: (dim,)``, each trial's log
    density and gradient from ``logdensity_and_grad`` (a compiled program); returns the
    step and the trials (one gradient each)."""
    logdensity, grad = start
    kinetic = 0.5 * momentum @ (inverse_mass * momentum)

    def above_half(log_eps):
        eps = math.exp(log_eps)
        with np.errstate(all="ignore"):
            p = momentum + 0.5 * eps * grad
            x = (position + eps * inverse_mass * p).astype(position.dtype)
            new_logdensity, new_grad = (np.asarray(a) for a in logdensity_and_grad(x))
            p = p + 0.5 * eps * new_grad
            delta = new_logdensity - 0.5 * p @ (inverse_mass * p) - logdensity + kinetic
        return bool(np.isfinite(delta)) and delta > math.log(0.5)

    log_eps, trials = first_step_on_host(above_half, math.log(step_size), max_iter)
    return math.exp(log_eps), trials
