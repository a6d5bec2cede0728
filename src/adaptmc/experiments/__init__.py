"""Reproduced tables and figures, one module each; `EXPERIMENTS` maps the name used by
``adaptmc reproduce NAME`` to a function ``(out, quick, force, seed) -> exit code``."""

from __future__ import annotations

from collections.abc import Callable


def _robot_arm(out, quick: bool = False, force: bool = False, seed: int = 0) -> int:
    from adaptmc.experiments.robot_arm import run_robot_arm

    return run_robot_arm(out, quick=quick, force=force, seed=seed)


def _hmc_sensitivity(out, quick: bool = False, force: bool = False, seed: int = 0) -> int:
    from adaptmc.experiments.hmc_sensitivity import run_hmc_sensitivity

    return run_hmc_sensitivity(out, quick=quick, force=force, seed=seed)


def _gradient_adaptive(out, quick: bool = False, force: bool = False, seed: int = 0) -> int:
    from adaptmc.experiments.gradient_adaptive import run_gradient_adaptive

    return run_gradient_adaptive(out, quick=quick, force=force, seed=seed)


def _hmc_cost(out, quick: bool = False, force: bool = False, seed: int = 0) -> int:
    from adaptmc.experiments.hmc_cost import main

    return main(out, quick=quick, force=force, seed=seed)


def _tuned_vs_oracle(out, quick: bool = False, force: bool = False, seed: int = 0) -> int:
    from adaptmc.experiments.tuned_vs_oracle import run_tuned_vs_oracle

    return run_tuned_vs_oracle(out, quick=quick, force=force, seed=seed)


def _main_vs_nuts(out, quick: bool = False, force: bool = False, seed: int = 0) -> int:
    from adaptmc.experiments.main_vs_nuts import run_main_vs_nuts

    return run_main_vs_nuts(out, quick=quick, force=force, seed=seed)


EXPERIMENTS: dict[str, Callable[..., int]] = {
    "main-vs-nuts": _main_vs_nuts,
    "tuned-vs-oracle": _tuned_vs_oracle,
    "hmc-cost": _hmc_cost,
    "gradient-adaptive": _gradient_adaptive,
    "robot-arm": _robot_arm,
    "hmc-sensitivity": _hmc_sensitivity,
}
