"""Transition kernels: pure ``init`` / ``step`` functions with parameters at call time."""

from adaptmc.kernels.base import Kernel, StepInfo
from adaptmc.kernels.hmc import HMCParams, HMCState, hmc
from adaptmc.kernels.mala import MALAParams, MALAState, mala
from adaptmc.kernels.rwm import RWMParams, RWMState, rwm

KERNELS: dict[str, Kernel] = {"hmc": hmc, "mala": mala, "rwm": rwm}

__all__ = [
    "HMCParams",
    "HMCState",
    "KERNELS",
    "Kernel",
    "MALAParams",
    "MALAState",
    "RWMParams",
    "RWMState",
    "StepInfo",
    "hmc",
    "mala",
    "rwm",
]
