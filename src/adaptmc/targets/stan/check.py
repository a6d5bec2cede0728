"""A JAX translation of a posteriordb program against the Stan program itself: the same log
density up to a constant and the same gradient, at points of Stan's unconstrained space.

A Stan point goes to the translation's unconstrained space through the constrained values:
Stan's ``write_array`` gives them per Stan variable (``theta``, as the reference draws name
them), the translation's ``unconstrain`` maps them back. Both use Stan's transforms, so the
two unconstrained points hold the same numbers, perhaps in another order: matching them gives
the permutation under which the gradients must agree.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from adaptmc.targets.posteriordb import PosteriordbModel
from adaptmc.targets.stan.model import StanModel


class Comparison(NamedTuple):
    """Stan and the translation at the same points: ``stan_lp, jax_lp: (n,)``;
    ``stan_grad, jax_grad: (n, dim)`` (the translation's in Stan's coordinate order)."""

    stan_lp: np.ndarray
    jax_lp: np.ndarray
    stan_grad: np.ndarray
    jax_grad: np.ndarray

    def lp_spread(self) -> float:
        """Spread (max - min) of ``stan_lp - jax_lp``: 0 when they differ by a constant."""
        diff = self.stan_lp - self.jax_lp
        return float(np.max(diff) - np.min(diff))

    def grad_error(self) -> float:
        """Largest ``|stan - jax|`` of the gradients over ``1 + |stan|``."""
        return float(np.max(np.abs(self.stan_grad - self.jax_grad) /
                            (1.0 + np.abs(self.stan_grad))))


def reference_points(model: StanModel, posterior, count: int) -> np.ndarray | None:
    """``(count, dim)`` Stan unconstrained points of reference draws (spread over chains and
    draws), or None when the reference draws lack one of the program's parameters."""
    draws = posterior.reference_draws
    parameters = [v for v in model.variables if v.block == "parameters"]
    names = model.constrained_names(False, False)
    if any(name not in draws for name in names):
        return None
    chains, length = next(iter(draws.values())).shape
    points = []
    for index in range(count):
        chain, draw = index % chains, (index * 7919) % length
        flat = np.array([draws[name][chain, draw] for name in names])
        values, start = {}, 0
        for variable in parameters:
            size = int(np.prod(variable.shape, dtype=int))
            values[variable.name] = flat[start:start + size].reshape(variable.shape, order="F")
            start += size
        points.append(model.unconstrain(values))
    return np.array(points)


def translated_point(model: StanModel, translation: PosteriordbModel,
                     point: np.ndarray) -> np.ndarray:
    """The translation's flat unconstrained point at Stan's unconstrained ``point``."""
    values = model.constrain(point[None], transformed=True, generated=False)[0]
    named, start = {}, 0
    for variable in model.variables:
        if variable.block == "generated quantities":
            break
        size = int(np.prod(variable.shape, dtype=int))  # Stan's flat order is column-major
        named[variable.name] = values[start:start + size].reshape(variable.shape, order="F")
        start += size
    params = translation.unconstrain(named)
    params = jax.tree.map(lambda ref, v: jnp.asarray(v, float).reshape(jnp.shape(ref)),
                          translation.initial_params, params)
    return np.asarray(ravel_pytree(params)[0])


def coordinate_order(stan_point: np.ndarray, jax_point: np.ndarray) -> np.ndarray:
    """``order`` with ``jax_point[order] == stan_point`` (to rounding), or `ValueError`
    when the two points do not hold the same numbers."""
    order = np.array([int(np.argmin(np.abs(jax_point - v))) for v in stan_point])
    if len(set(order.tolist())) != len(order) or not np.allclose(
            jax_point[order], stan_point, rtol=1e-6, atol=1e-8):
        raise ValueError("the translation's unconstrained coordinates are not Stan's")
    return order


def compare(model: StanModel, translation: PosteriordbModel,
            points: np.ndarray) -> Comparison:
    """Log densities and gradients of Stan and the translation at Stan's ``points: (n,
    dim)``."""
    stan_lp, stan_grad, message = model.log_density_gradient(points)
    if message:
        raise ValueError(f"Stan rejected a point: {message}")
    flat, unravel = ravel_pytree(translation.initial_params)
    value_and_grad = jax.jit(jax.value_and_grad(lambda x: translation.logdensity(unravel(x))))
    jax_lp, jax_grad = [], []
    for point in points:
        jax_point = translated_point(model, translation, point)
        order = coordinate_order(point, jax_point)
        value, grad = value_and_grad(jnp.asarray(jax_point))
        jax_lp.append(float(value))
        jax_grad.append(np.asarray(grad)[order])
    return Comparison(stan_lp, np.array(jax_lp), stan_grad, np.array(jax_grad))
