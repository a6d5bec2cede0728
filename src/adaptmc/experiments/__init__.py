"""Reproduced tables and figures, one module each.

`EXPERIMENTS` maps the name used by ``adaptmc reproduce NAME`` to the ``module:function``
that runs it, ``function(out, quick=False, force=False, seed=0) -> exit code`` (and
``sizes=`` where the experiment's sizes can be set from the command line); modules are
imported only when their experiment runs (`run_experiment`).
"""

from __future__ import annotations

EXPERIMENTS: dict[str, str] = {
    "dexter": "adaptmc.experiments.dexter:run_dexter",
    "gradient-adaptive": "adaptmc.experiments.gradient_adaptive:run_gradient_adaptive",
    "hmc-cost": "adaptmc.experiments.hmc_cost:run_hmc_cost",
    "hmc-sensitivity": "adaptmc.experiments.hmc_sensitivity:run_hmc_sensitivity",
    "ising": "adaptmc.experiments.ising:run_ising",
    "manifold": "adaptmc.experiments.manifold:run_manifold",
    "main-vs-nuts": "adaptmc.experiments.main_vs_nuts:run_main_vs_nuts",
    "riemannian-logistic": "adaptmc.experiments.gradient_adaptive:run_riemannian_logistic",
    "robot-arm": "adaptmc.experiments.robot_arm:run_robot_arm",
    "tuned-vs-oracle": "adaptmc.experiments.tuned_vs_oracle:run_tuned_vs_oracle",
}


def run_experiment(name: str, out, quick: bool = False, force: bool = False,
                   seed: int = 0, sizes: dict | None = None) -> int:
    """Run experiment ``name`` into the folder ``out``; ``sizes`` (``NAME: value``) replace
    fields of its run configuration, for experiments whose function takes ``sizes`` (a
    budget between ``--quick`` and the source's full protocol)."""
    import inspect

    from adaptmc.spec import load_object

    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; choose one of {', '.join(EXPERIMENTS)}")
    function = load_object(EXPERIMENTS[name], "experiment")
    if not sizes:
        return int(function(out, quick=quick, force=force, seed=seed) or 0)
    if "sizes" not in inspect.signature(function).parameters:
        raise ValueError(f"experiment {name!r} takes no --set sizes")
    return int(function(out, quick=quick, force=force, seed=seed, sizes=sizes) or 0)


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
