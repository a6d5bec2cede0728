"""Dual averaging of the step size as a tuner, the baseline the bandits are compared with."""

from __future__ import annotations

import math

import numpy as np

from adaptmc.adaptation.dual_averaging import (
    DualAveragingState,
    da_final_step_size,
    da_init,
    da_step_size,
    da_update,
)
from adaptmc.tuners.base import Tuner


def dual_averaging_tuner(
    initial_step_size: float = 0.1,
    *,
    target_accept: float = 0.8,
    num_leapfrog: int | None = None,
    gamma: float = 0.05,
    t0: float = 10.0,
    kappa: float = 0.75,
    zero_on_divergence: bool = True,
) -> Tuner:
    """Dual averaging of the step size toward ``target_accept`` (Hoffman & Gelman 2014,
    Algorithm 5), one update per super-transition with its mean acceptance rate; ``L`` stays
    at the kernel's value, or at ``num_leapfrog`` when given. ``best`` is the averaged step
    size ``exp(xbar)``. State: `DualAveragingState` (arrays).

    ``zero_on_divergence`` (default): a super-transition with any divergent step counts as
    acceptance 0. False: the mean acceptance as it is, in which a divergent step already
    counts 0 (`adaptmc.kernels.base.metropolis_hastings`): Algorithm 5's per-step statistic
    averaged, for kernels whose long super-transitions see an occasional divergence at a good
    step size (a fixed-point iteration of the generalised leapfrog failing once in 50
    steps), where the default rule would cut the step tenfold."""
    if not 0 < target_accept < 1:
        raise ValueError(f"target_accept must be in (0, 1), got {target_accept}")
    if not initial_step_size > 0:
        raise ValueError(f"initial_step_size must be positive, got {initial_step_size}")
    names = ("step_size",) if num_leapfrog is None else ("step_size", "num_leapfrog")
    extra = {} if num_leapfrog is None else {"num_leapfrog": int(num_leapfrog)}

    def as_numpy(state: DualAveragingState) -> DualAveragingState:
        return DualAveragingState(*(np.asarray(v, dtype=float) for v in state))

    def propose(key, state):
        return {"step_size": float(da_step_size(state)), **extra}, state

    def update(state, proposal, reward, stats):
        rate = (stats or {}).get("acceptance_rate", float("nan"))
        if zero_on_divergence and (stats or {}).get("divergences", 0) > 0:
            rate = 0.0  # a divergent super-transition counts as a rejection
        rate = rate if math.isfinite(rate) else 0.0
        return as_numpy(da_update(state, rate, target_accept, gamma, t0, kappa))

    def best(state):
        if float(state.step) == 0:
            return {"step_size": float(da_step_size(state)), **extra}
        return {"step_size": float(da_final_step_size(state)), **extra}

    facts = {"policy": "dual-averaging", "initial_step_size": float(initial_step_size),
             "target_accept": target_accept, "num_leapfrog": num_leapfrog, "gamma": gamma,
             "t0": t0, "kappa": kappa, "zero_on_divergence": zero_on_divergence}
    return Tuner("dual-averaging", names, lambda key: as_numpy(da_init(initial_step_size)),
                 propose, update, best, lambda state: facts)
