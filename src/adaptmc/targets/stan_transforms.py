"""Stan's constraint transforms in JAX and the record of a translated Stan program
(Stan Reference Manual, "Constraint transforms"):

- ``real<lower=0> x``: ``x = exp(u)``, ``log|J| = u``;
- ``real<lower=a, upper=b> x``: ``x = a + (b - a) inv_logit(u)``,
  ``log|J| = log(b - a) + log inv_logit(u) + log(1 - inv_logit(u))`` (the bounds may depend
  on earlier parameters, as garch11's ``beta1 < 1 - alpha1``);
- ``ordered[K] x``: ``x_1 = u_1``, ``x_k = x_{k-1} + exp(u_k)``, ``log|J| = sum_{k>1} u_k``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array


class PosteriordbModel(NamedTuple):
    """A translated Stan program.

    logdensity
        Unconstrained pytree -> scalar, Jacobians included.
    initial_params
        Unconstrained pytree at which to start (zeros, Stan's default interval centre).
    constrain
        Unconstrained pytree -> dict of constrained arrays named as in the reference draws
        (``{"theta": (8,), "mu": (), "tau": ()}``).
    unconstrain
        The inverse of ``constrain``: dict of constrained NumPy arrays -> unconstrained
        pytree.
    """

    logdensity: Callable[[Any], Array]
    initial_params: Any
    constrain: Callable[[Any], dict]
    unconstrain: Callable[[dict], Any]


def positive(u):
    """``real<lower=0>``: value and log-Jacobian."""
    return jnp.exp(u), u


def bounded(u, lower, upper):
    """``real<lower=lower, upper=upper>``: value and log-Jacobian."""
    value = lower + (upper - lower) * jax.nn.sigmoid(u)
    log_jac = jnp.log(upper - lower) + jax.nn.log_sigmoid(u) + jax.nn.log_sigmoid(-u)
    return value, log_jac


def logit(p):
    return np.log(p) - np.log1p(-p)


def ordered(u):
    """``ordered[K]``: value and log-Jacobian."""
    value = jnp.cumsum(jnp.concatenate([u[:1], jnp.exp(u[1:])]))
    return value, jnp.sum(u[1:])


# --- eight_schools_noncentered ------------------------------------------------------------
