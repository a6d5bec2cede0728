"""Named samplers: the one place where kernel, parameters, tuner, objective and warm-up are
put together.

A recipe is a plain function ``recipe(target, **options) -> Plan``; a `Plan` is exactly what
`adaptmc.run.run` consumes besides the run-level options (chains, seed, output folder), plus
an optional ``prepare`` step that runs on the chains before the first super-transition. The
command line (``adaptmc sample --recipe NAME``), the bench (a row per recipe) and every
experiment build their samplers here and nowhere else, so a bench row named after a recipe
runs exactly that recipe.

- ``adaptive-hmc`` (`adaptive_hmc`, the default): a NUTS warm-up on Stan's windows that
  reaches the typical set and measures scales and trajectory lengths, then a bandit over
  HMC's ``(eps, L)`` in a box built from those measurements, then frozen sampling;
- ``adaptive-portfolio`` (`adaptive_portfolio`): the same warm-up, then an equal-cost trial
  of adaptive HMC and of gadMALA, and the sampling budget to the one with the higher
  reward (`adaptmc.recipes.portfolio`);
- ``bandit-hmc``, ``gradient-adaptive``, ``hmc-da``, ``hmc-grid``, ``manual``: see
  `adaptmc.recipes.classic`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from adaptmc.options import check_options
from adaptmc.recipes.adaptive import adaptive_hmc
from adaptmc.recipes.classic import (
    bandit_hmc,
    gradient_adaptive,
    hmc_dual_averaging,
    hmc_grid,
    manual,
)
from adaptmc.recipes.parts import hmc_box, make_tuner
from adaptmc.recipes.plan import Plan, Prepared, check_plan
from adaptmc.recipes.portfolio import adaptive_portfolio
from adaptmc.targets.base import Target

RECIPES: dict[str, Callable[..., Plan]] = {
    "adaptive-hmc": adaptive_hmc,
    "adaptive-portfolio": adaptive_portfolio,
    "bandit-hmc": bandit_hmc,
    "gradient-adaptive": gradient_adaptive,
    "hmc-da": hmc_dual_averaging,
    "hmc-grid": hmc_grid,
    "manual": manual,
}
DEFAULT_RECIPE = "adaptive-hmc"


def get_recipe(name: str) -> Callable[..., Plan]:
    if name not in RECIPES:
        raise ValueError(f"unknown recipe {name!r}; choose one of {', '.join(RECIPES)}")
    return RECIPES[name]


def recipe_options(name: str) -> tuple[str, ...]:
    """The keyword options recipe ``name`` takes (besides the target); a recipe taking
    ``**params`` (`manual`) takes the parameters the kernels of `adaptmc.kernels.KERNELS`
    declare."""
    parameters = inspect.signature(get_recipe(name)).parameters.values()
    names = [p.name for p in parameters
             if p.name not in ("target", "name") and p.kind != p.VAR_KEYWORD]
    if any(p.kind == p.VAR_KEYWORD for p in parameters):
        names += [p for p in kernel_parameters() if p not in names]
    return tuple(names)


def kernel_parameters() -> tuple[str, ...]:
    """The names of the parameters the kernels declare, each once."""
    from adaptmc.kernels import KERNELS

    names = [param.name for kernel in KERNELS.values() for param in kernel.parameters]
    return tuple(dict.fromkeys(names))


def build(name: str, target: Target, **options) -> Plan:
    """``RECIPES[name](target, **options)``, refusing options the recipe does not take and
    values their declarations refuse (`adaptmc.options`)."""
    allowed = recipe_options(name)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"recipe {name!r} does not take {', '.join(unknown)} "
                         f"(its options: {', '.join(allowed)})")
    return get_recipe(name)(target, **check_options(options))


__all__ = [
    "DEFAULT_RECIPE",
    "RECIPES",
    "Plan",
    "Prepared",
    "adaptive_hmc",
    "adaptive_portfolio",
    "bandit_hmc",
    "build",
    "check_plan",
    "get_recipe",
    "gradient_adaptive",
    "hmc_box",
    "hmc_dual_averaging",
    "hmc_grid",
    "make_tuner",
    "manual",
    "recipe_options",
]
