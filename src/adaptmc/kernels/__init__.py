"""Transition kernels: pure ``init`` / ``step`` functions with parameters at call time."""

from adaptmc.kernels.adaptive_metropolis import AMParams, AMState, adaptive_metropolis
from adaptmc.kernels.base import Kernel, Param, StepInfo, Tunable
from adaptmc.kernels.discrete import (
    KawasakiParams,
    SAWParams,
    SpinGraph,
    SpinState,
    kawasaki,
    saw,
)
from adaptmc.kernels.gradient_adaptive import (
    GADMALAParams,
    GADRWMParams,
    GADState,
    gadmala,
    gadmala_diag,
    gadmala_direct,
    gadmala_exact,
    gadrwm,
    gadrwm_diag,
    gadrwm_direct,
)
from adaptmc.kernels.hmc import HMCParams, HMCState, hmc
from adaptmc.kernels.mala import MALAParams, MALAState, mala
from adaptmc.kernels.mams import MAMSParams, MAMSState, mams
from adaptmc.kernels.manifold import (
    ManifoldState,
    MSDParams,
    RMHMCParams,
    msd,
    msd_kernel,
    rmhmc,
    rmhmc_kernel,
)
from adaptmc.kernels.metrics import LowRankInverseMass
from adaptmc.kernels.rwm import RWMParams, RWMState, rwm
from adaptmc.kernels.step_size_adaptation import AdaptedState, with_step_size_adaptation

KERNELS: dict[str, Kernel] = {"hmc": hmc, "mala": mala, "rwm": rwm, "mams": mams}
KERNELS.update({
    k.name: k
    for k in (gadrwm, gadrwm_direct, gadrwm_diag, gadmala, gadmala_direct, gadmala_exact,
              gadmala_diag, adaptive_metropolis, rmhmc, msd, saw, kawasaki)
})
KERNELS["mala-da"] = with_step_size_adaptation(mala, 0.574)
KERNELS["hmc-da"] = with_step_size_adaptation(hmc, 0.65)

__all__ = [
    "AMParams",
    "AMState",
    "AdaptedState",
    "GADMALAParams",
    "GADRWMParams",
    "GADState",
    "HMCParams",
    "HMCState",
    "KawasakiParams",
    "KERNELS",
    "Kernel",
    "LowRankInverseMass",
    "MALAParams",
    "MAMSParams",
    "MAMSState",
    "MSDParams",
    "Param",
    "ManifoldState",
    "MALAState",
    "RMHMCParams",
    "RWMParams",
    "RWMState",
    "SAWParams",
    "SpinGraph",
    "SpinState",
    "StepInfo",
    "Tunable",
    "adaptive_metropolis",
    "gadmala",
    "gadmala_diag",
    "gadmala_direct",
    "gadmala_exact",
    "gadrwm",
    "gadrwm_diag",
    "gadrwm_direct",
    "hmc",
    "kawasaki",
    "mala",
    "mams",
    "msd",
    "msd_kernel",
    "rmhmc",
    "rmhmc_kernel",
    "rwm",
    "saw",
    "with_step_size_adaptation",
]
