"""`adaptmc reproduce manifold`: the equal-cost note and a tiny end-to-end run."""

import json

import numpy as np
import pytest

from adaptmc_lab.experiments import manifold


def test_equal_cost_note_says_when_nuts_makes_no_draw():
    """NUTS's warm-up over the fixed MSD's budget: no draw at equal cost, said in words."""
    over = manifold.equal_cost_note({"warmup_grads_per_run": 131413.0}, 13363.0)
    assert "makes no draw" in over and "131,413" in over and "13,363" in over
    within = manifold.equal_cost_note({"warmup_grads_per_run": 1000.0}, 13363.0)
    assert "within" in within and "no draw" not in within


@pytest.mark.slow
def test_tiny_reproduction_has_every_row(tmp_path):
    """Every sampler of the protocol (both MSD targets, the tuned MSD, NUTS at its own
    cost) gets a row with a finite test error; the report states the equal-cost note."""
    cfg = manifold.Config(2, 40, 20, 5, 10, (0.0002,), (0.01,), 3, 10, 8)
    assert manifold.run_manifold(tmp_path, config=cfg) == 0
    rows = {r["sampler"]: r for r in json.loads((tmp_path / "results.json").read_text())["rows"]}
    assert set(rows) == {"HMC30", "HMC100", "MSD", "MSD (Jeffreys)", "MSD (GP-UCB)", "NUTS"}
    for name, row in rows.items():
        assert row["error_mean"] == row["error_mean"] and row["error_mean"] > 0, name
    assert rows["MSD (Jeffreys)"]["grad_eq_per_iteration"] < rows["MSD"]["grad_eq_per_iteration"]
    assert rows["NUTS"]["num_kept"] == 8
    report = (tmp_path / "report.md").read_text()
    assert "NUTS at the fixed MSD's cost" in report and "true function scores" in report
    assert rows["MSD (GP-UCB)"]["tuned_step_size"] > 0 and rows["NUTS"]["tuned_step_size"] > 0


def test_within_cost_keeps_the_super_transitions_that_fit():
    """Two chains, 5 super-transitions of 50 gradients per chain after 5 per chain before:
    at 120 per chain the first two fit (105); the first is warm-up, so one's draws are kept;
    a cost below the first kept one still keeps it."""
    tuning = {"num_grads": np.full(5, 100), "num_draws": np.full(5, 10)}
    assert manifold.within_cost(tuning, 510, 1, 2, 120.0) == (10, 210.0)
    assert manifold.within_cost(tuning, 510, 1, 2, 10.0) == (10, 210.0)
    assert manifold.within_cost(tuning, 510, 1, 2, 1e9) == (40, 510.0)
