"""`adaptmc-lab reproduce manifold`: a tiny end-to-end run and the cost ratio line."""

import json

import pytest

from adaptmc_lab.experiments import manifold
from adaptmc_lab.experiments.manifold_eval import cost_line


def test_cost_line_states_both_ratios_and_the_papers():
    rows = [{"sampler": "HMC30", "flops_per_iteration": 1.4e6, "grad_eq_per_iteration": 30.0},
            {"sampler": "MSD", "flops_per_iteration": 2.8e6, "grad_eq_per_iteration": 8.0}]
    assert cost_line(rows) == ("MSD cost per iteration / HMC30's: 2.00 (flops), 0.27 "
                               "(gradient-equivalents); the paper's: 0.36 (flops)")


@pytest.mark.slow
def test_tiny_reproduction_has_every_row(tmp_path):
    """Every sampler of the protocol gets a row with a finite test error, a flop count and
    the paper's row where it has one; the report carries the cost line; Fig. 1 is drawn."""
    cfg = manifold.Config(2, 40, 20, 5, 10, (0.0002,), (0.05,), 10)
    assert manifold.run_manifold(tmp_path, config=cfg) == 0
    rows = {r["sampler"]: r for r in json.loads((tmp_path / "results.json").read_text())["rows"]}
    assert set(rows) == {"HMC30", "HMC100", "MSD", "MSD + MH", "MSD (GP-UCB, ESJD)",
                         "MSD (GP-UCB, autocorrelation)"}
    for name, row in rows.items():
        assert row["error_mean"] == row["error_mean"] and row["error_mean"] > 0, name
        assert row["flops_per_iteration"] > 0, name
    assert rows["MSD"]["grad_eq_per_iteration"] == 8.0  # 2 + 3 K, K = 2 outputs
    assert rows["MSD + MH"]["grad_eq_per_iteration"] == 12.0
    assert 3.0 < rows["HMC100"]["flops_per_iteration"] / rows["HMC30"]["flops_per_iteration"] < 3.5
    for name in ("MSD (GP-UCB, ESJD)", "MSD (GP-UCB, autocorrelation)"):
        assert rows[name]["num_kept"] == 20 and rows[name]["tuned_angle"] > 0
    report = (tmp_path / "report.md").read_text()
    assert "MSD cost per iteration / HMC30's:" in report and "1.161 +/- 0.023" in report
    assert (tmp_path / "fig1.png").stat().st_size > 1000
