"""Per-step dual averaging of a kernel's ``step_size`` during burn-in (Hoffman & Gelman 2014,
Algorithm 5 / Eq. 6, using `adaptmc.adaptation.dual_averaging`).

`with_step_size_adaptation` wraps any kernel whose ``Params`` has a ``step_size`` field
(MALA, HMC with a fixed number of leapfrog steps) into a kernel whose state carries the
dual-averaging state next to the inner kernel's. Its ``Params`` are the inner ones plus

- ``adapt``: 1 to use and update the exploring step size ``exp(x_t)`` after every step,
  0 to use the averaged ``exp(xbar_t)`` and stop adapting (the kernel is then the inner
  kernel at a fixed step size, so invariant);
- ``target_acceptance``: delta of the dual averaging.

``Params.step_size`` is the initial step size (and the one used if ``adapt`` was never 1).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from adaptmc.adaptation.dual_averaging import (
    DualAveragingState,
    da_final_step_size,
    da_init,
    da_step_size,
    da_update,
)
from adaptmc.kernels.base import Kernel, StepInfo

Array = jax.Array


class AdaptedState(NamedTuple):
    """inner: the wrapped kernel's state; dual_averaging: its `DualAveragingState` (NaN
    until the first step starts it at ``Params.step_size``)."""

    inner: Any
    dual_averaging: DualAveragingState

    @property
    def position(self) -> Array:
        return self.inner.position

    @property
    def logdensity(self) -> Array:
        return self.inner.logdensity


def current_step_size(state: AdaptedState, params) -> Array:
    """The step size the next step uses: exploring while adapting, averaged once frozen."""
    da = state.dual_averaging
    started = jnp.isfinite(da.log_step_size)
    exploring = jnp.where(started, da_step_size(da), params.step_size)
    averaged = jnp.where(started & (da.step > 0), da_final_step_size(da), params.step_size)
    return jnp.where(params.adapt > 0, exploring, averaged)


def with_step_size_adaptation(kernel: Kernel, target_acceptance: float = 0.8,
                              name: str | None = None) -> Kernel:
    """``kernel`` with its ``step_size`` dual-averaged after every step while ``adapt`` is 1.

    Parameters
    ----------
    kernel
        A kernel whose ``Params`` has ``step_size``.
    target_acceptance
        Default delta: 0.574 suits MALA (Roberts & Rosenthal 1998), 0.65 HMC (Beskos et
        al. 2013), 0.8 NUTS (Hoffman & Gelman 2014).
    """
    fields = kernel.Params._fields
    if "step_size" not in fields:
        raise ValueError(f"kernel {kernel.name!r} has no step_size to adapt")
    defaults = kernel.Params()
    Params = namedtuple(  # noqa: PYI024 - fields come from the wrapped kernel
        f"{kernel.Params.__name__}DualAveraging",
        (*fields, "adapt", "target_acceptance"),
        defaults=(*defaults, 1.0, target_acceptance),
    )
    Params.__doc__ = (f"{kernel.Params.__name__} fields, plus adapt (1: dual averaging on) "
                      "and target_acceptance.")

    def inner_params(params):
        return kernel.Params(*params[: len(fields)])

    def init(position: Array, target) -> AdaptedState:
        inner = kernel.init(position, target)
        dtype = inner.position.dtype
        return AdaptedState(inner, da_init(jnp.asarray(jnp.nan, dtype)))

    def step(key: Array, state: AdaptedState, target, params) -> tuple[AdaptedState, StepInfo]:
        da = state.dual_averaging
        da = jax.tree.map(lambda fresh, old: jnp.where(jnp.isnan(old), fresh, old),
                          da_init(jnp.asarray(params.step_size, da.mu.dtype)), da)
        state = AdaptedState(state.inner, da)
        step_size = current_step_size(state, params)
        inner, info = kernel.step(key, state.inner, target,
                                  inner_params(params)._replace(step_size=step_size))
        updated = da_update(da, info.acceptance_rate, params.target_acceptance)
        da = jax.tree.map(lambda new, old: jnp.where(params.adapt > 0, new, old), updated, da)
        return AdaptedState(inner, da), info

    def cost(params) -> int:
        return kernel.cost(inner_params(params))

    def check_params(params, dim: int | None = None) -> None:
        kernel.check_params(inner_params(params), dim=dim)
        if float(params.adapt) not in (0.0, 1.0):
            raise ValueError(f"adapt must be 0 or 1, got {params.adapt}")
        if not 0.0 < float(params.target_acceptance) < 1.0:
            raise ValueError(
                f"target_acceptance must be in (0, 1), got {params.target_acceptance}")

    # the inner kernel's tunables: ``step_size`` is the initial step of the dual averaging
    return Kernel(name or f"{kernel.name}-da", init, step, cost, check_params, Params,
                  kernel.tunables, kernel.parameters, kernel.initial_step, adapts_in_step=True)
