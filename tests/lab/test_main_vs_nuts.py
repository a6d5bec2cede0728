"""`adaptmc-lab reproduce main-vs-nuts`: the table's medians and ratios to NUTS, and the README's
main job as the experiment builds it."""

from __future__ import annotations

import pytest

from adaptmc_lab.experiments import EXPERIMENTS
from adaptmc_lab.experiments.main_vs_nuts import SAMPLERS, markdown


def _row(sampler, seed, ess, grads, wall):
    final = (0.4, None) if sampler == "nuts" else (0.3, 3)
    return {"sampler": sampler, "seed": seed, "ess": ess, "grads": grads, "wall_s": wall,
            "final": final}


def test_registered_with_the_three_samplers():
    assert EXPERIMENTS["main-vs-nuts"].__name__ == "_main_vs_nuts"
    assert SAMPLERS == ("adaptive-hmc", "bandit-hmc", "nuts")


def test_table_reports_medians_over_seeds_and_ratios_to_nuts():
    rows = [_row("adaptive-hmc", 0, 2000, 200_000, 10.0), _row("nuts", 0, 1000, 200_000, 40.0),
            _row("adaptive-hmc", 1, 3000, 200_000, 30.0), _row("nuts", 1, 1000, 250_000, 20.0),
            _row("adaptive-hmc", 2, 4000, 200_000, 20.0), _row("nuts", 2, 1500, 250_000, 30.0)]
    table = markdown(rows)
    per_seed = [line for line in table.splitlines() if line.startswith("| 0 |")]
    assert per_seed[0] == "| 0 | adaptive-hmc | 2000 | 200,000 | 10.0 | 10 | 200 | (0.3, 3) |"
    assert per_seed[1].endswith("| 5 | 25 | eps 0.4 |")
    # medians: adaptive-hmc 15 ESS / 1000 grads (10, 15, 20), 200 ESS / s (200, 100, 200);
    # NUTS 5 (5, 4, 6) and 50 (25, 50, 50)
    assert "| adaptive-hmc | 3 | 15 | 3.00 | 200 | 4.00 |" in table
    assert "| nuts | 3 | 5 | 1.00 | 50 | 1.00 |" in table


def test_the_main_job_is_the_default_recipe_with_no_options():
    """The experiment's first row builds exactly what ``adaptmc sample --target neal-100d``
    builds: the default recipe with no option but the seed."""
    from adaptmc import recipes
    from adaptmc.targets import get_target

    assert recipes.DEFAULT_RECIPE == SAMPLERS[0]
    target = get_target("neal-100d")
    plan = recipes.build(SAMPLERS[0], target, seed=3)
    assert plan.name == "adaptive-hmc" and plan.prepare is not None
    with pytest.raises(ValueError, match="does not take"):
        recipes.build(SAMPLERS[0], target, seed=3, keep_adapting=True)
