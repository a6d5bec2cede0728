"""Reproduced tables and figures, one module each.

`EXPERIMENTS` maps the name used by ``adaptmc-lab reproduce NAME`` to the function that runs
it, ``function(out, quick=False, force=False, seed=0, sizes=None) -> exit code``; each
function imports its module only when it runs, so listing the experiments imports none.
``sizes`` (``--set NAME=VALUE``) is refused by the experiments whose sizes cannot be set.
"""

from __future__ import annotations

from collections.abc import Callable


def _no_sizes(name: str, sizes: dict | None) -> None:
    if sizes:
        raise ValueError(f"experiment {name!r} takes no --set sizes")


def _dexter(out, quick=False, force=False, seed=0, sizes=None):
    from adaptmc_lab.experiments.dexter import run_dexter

    return run_dexter(out, quick=quick, force=force, seed=seed, sizes=sizes)


def _gradient_adaptive(out, quick=False, force=False, seed=0, sizes=None):
    from adaptmc_lab.experiments.gradient_adaptive import run_gradient_adaptive

    _no_sizes("gradient-adaptive", sizes)
    return run_gradient_adaptive(out, quick=quick, force=force, seed=seed)


def _hmc_cost(out, quick=False, force=False, seed=0, sizes=None):
    from adaptmc_lab.experiments.hmc_cost import run_hmc_cost

    _no_sizes("hmc-cost", sizes)
    return run_hmc_cost(out, quick=quick, force=force, seed=seed)


def _hmc_sensitivity(out, quick=False, force=False, seed=0, sizes=None):
    from adaptmc_lab.experiments.hmc_sensitivity import run_hmc_sensitivity

    _no_sizes("hmc-sensitivity", sizes)
    return run_hmc_sensitivity(out, quick=quick, force=force, seed=seed)


def _ising(out, quick=False, force=False, seed=0, sizes=None):
    from adaptmc_lab.experiments.ising import run_ising

    return run_ising(out, quick=quick, force=force, seed=seed, sizes=sizes)


def _manifold(out, quick=False, force=False, seed=0, sizes=None):
    from adaptmc_lab.experiments.manifold import run_manifold

    _no_sizes("manifold", sizes)
    return run_manifold(out, quick=quick, force=force, seed=seed)


def _main_vs_nuts(out, quick=False, force=False, seed=0, sizes=None):
    from adaptmc_lab.experiments.main_vs_nuts import run_main_vs_nuts

    _no_sizes("main-vs-nuts", sizes)
    return run_main_vs_nuts(out, quick=quick, force=force, seed=seed)


def _riemannian_logistic(out, quick=False, force=False, seed=0, sizes=None):
    from adaptmc_lab.experiments.gradient_adaptive import run_riemannian_logistic

    return run_riemannian_logistic(out, quick=quick, force=force, seed=seed, sizes=sizes)


def _robot_arm(out, quick=False, force=False, seed=0, sizes=None):
    from adaptmc_lab.experiments.robot_arm import run_robot_arm

    _no_sizes("robot-arm", sizes)
    return run_robot_arm(out, quick=quick, force=force, seed=seed)


def _tuned_vs_oracle(out, quick=False, force=False, seed=0, sizes=None):
    from adaptmc_lab.experiments.tuned_vs_oracle import run_tuned_vs_oracle

    _no_sizes("tuned-vs-oracle", sizes)
    return run_tuned_vs_oracle(out, quick=quick, force=force, seed=seed)


EXPERIMENTS: dict[str, Callable[..., int]] = {
    "dexter": _dexter,
    "gradient-adaptive": _gradient_adaptive,
    "hmc-cost": _hmc_cost,
    "hmc-sensitivity": _hmc_sensitivity,
    "ising": _ising,
    "manifold": _manifold,
    "main-vs-nuts": _main_vs_nuts,
    "riemannian-logistic": _riemannian_logistic,
    "robot-arm": _robot_arm,
    "tuned-vs-oracle": _tuned_vs_oracle,
}


# The experiments that compute in float64 whatever they are asked (their module turns JAX's
# ``jax_enable_x64`` on): ``float32`` is refused for them.
FLOAT64_ONLY = frozenset({"gradient-adaptive", "hmc-cost", "hmc-sensitivity", "manifold",
                          "main-vs-nuts", "riemannian-logistic", "tuned-vs-oracle"})


def run_experiment(name: str, out, quick: bool = False, force: bool = False,
                   seed: int = 0, sizes: dict | None = None, float32: bool = False) -> int:
    """Run experiment ``name`` into the folder ``out``; ``sizes`` (``NAME: value``) replace
    fields of its run configuration, for experiments that take them (a budget between
    ``--quick`` and the source's full protocol). In float64 whatever JAX's global flag, as
    `adaptmc.sample` and ``adaptmc sample``; ``float32`` (``--float32``) asks for single
    precision, refused by the experiments in `FLOAT64_ONLY`."""
    import jax

    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; choose one of {', '.join(EXPERIMENTS)}")
    if float32 and name in FLOAT64_ONLY:
        raise ValueError(f"--float32: experiment {name!r} computes in float64 only; drop "
                         "--float32")
    jax.config.update("jax_enable_x64", not float32)
    return int(EXPERIMENTS[name](out, quick=quick, force=force, seed=seed, sizes=sizes) or 0)


def checked_sizes(experiment: str, sizes: dict, fields: tuple[str, ...],
                  may_be_zero: tuple[str, ...] = ()) -> dict:
    """``sizes`` (``--set NAME=VALUE``) as integers of ``fields``: one clear error naming
    ``experiment`` for an unknown name or a value that is not a positive integer (at least 0
    for the names in ``may_be_zero``)."""
    out = {}
    for name, value in sizes.items():
        if name not in fields:
            raise ValueError(f"{experiment}: --set {name}: not a size; choose from "
                             f"{', '.join(fields)}")
        number = float(value)
        if number != int(number) or int(number) < (0 if name in may_be_zero else 1):
            raise ValueError(f"{experiment}: --set {name}={value}: expected a positive integer")
        out[name] = int(number)
    return out
