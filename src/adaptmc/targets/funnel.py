"""Neal's funnel and the banana (twisted Gaussian) targets."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from adaptmc.targets.base import Reference, Target, make_target, with_reference


def funnel(dim: int = 10, scale: float = 3.0) -> Target:
    """Neal's (2003, Sec. 8) funnel: ``v ~ N(0, scale^2)``, ``x_i | v ~ N(0, exp(v))`` for
    ``i = 1..dim-1``. The first coordinate is ``v``; its mean is 0 and variance scale^2;
    each ``x_i`` has mean 0 and variance ``E[exp(v)] = exp(scale^2 / 2)``."""
    if dim < 2:
        raise ValueError("funnel needs dim >= 2")

    def logdensity(params):
        v, x = params["v"], params["x"]
        return (
            -0.5 * (v / scale) ** 2
            - 0.5 * jnp.sum(x**2) * jnp.exp(-v)
            - 0.5 * (dim - 1) * v
        )

    init = {"v": jnp.asarray(0.0), "x": jnp.ones(dim - 1)}
    target = make_target(logdensity, init, name=f"funnel-{dim}d")
    sd = np.full(dim, np.exp(scale**2 / 4.0))
    sd[0] = scale
    return with_reference(target, Reference(target.parameter_names, np.zeros(dim), sd, None))


def banana(curvature: float = 0.1, dim: int = 2) -> Target:
    """The banana of Haario et al. (1999): a Gaussian with variances (100, 1, 1, ...) whose
    second coordinate is twisted, ``y2 = x2 + b (x1^2 - 100)``. Mean is zero; the sds are
    ``10``, ``sqrt(1 + 2 b^2 100^2)`` (``x2 = y2 - b (x1^2 - 100)``, ``var x1^2 = 2 100^2``)
    and 1."""
    if dim < 2:
        raise ValueError("banana needs dim >= 2")

    def logdensity(x):
        y2 = x[1] + curvature * (x[0] ** 2 - 100.0)
        return -0.5 * (x[0] ** 2 / 100.0 + y2**2 + jnp.sum(x[2:] ** 2))

    target = make_target(logdensity, jnp.zeros(dim), name=f"banana-{dim}d")
    sd = np.ones(dim)
    sd[0], sd[1] = 10.0, np.sqrt(1.0 + 2.0 * curvature**2 * 100.0**2)
    return with_reference(target, Reference(target.parameter_names, np.zeros(dim), sd, None))
