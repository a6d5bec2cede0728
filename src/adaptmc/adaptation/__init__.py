"""Adaptation primitives that kernels and tuners share, one of each: dual averaging of a step
size, bracketing of a log step size, Hoffman & Gelman's first-step heuristic, and Welford
mean / covariance accumulation."""

from adaptmc.adaptation.bracketing import bracket_step
from adaptmc.adaptation.dual_averaging import (
    DualAveragingState,
    da_final_step_size,
    da_init,
    da_step_size,
    da_update,
)
from adaptmc.adaptation.first_step import first_step, reasonable_step_size
from adaptmc.adaptation.welford import regularised_covariance, welford_step, welford_update

__all__ = [
    "DualAveragingState",
    "bracket_step",
    "da_final_step_size",
    "da_init",
    "da_step_size",
    "da_update",
    "first_step",
    "reasonable_step_size",
    "regularised_covariance",
    "welford_step",
    "welford_update",
]
