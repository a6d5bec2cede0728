"""The bench's comparison with nutpie's low-rank NUTS (`adaptmc_lab.bench.comparison`) on a
small synthetic ``results.json``: verdicts, ratios, counts and the three tables."""

from __future__ import annotations

import pytest

from adaptmc_lab.bench import comparison
from adaptmc_lab.bench.report import write_report

OURS, BASE, DIAG = "adaptmc-adaptive-hmc", "nutpie-low-rank", "nutpie-diag"


def _cell(target, sampler, seed, ess, err=0.05, rhat=1.002, before=1000, after=3000, dim=5):
    return {"cell": {"target": target, "sampler": sampler, "seed_index": seed},
            "key": f"{target}__{sampler}__s{seed}", "dim": dim, "finite": True,
            "warmup_grads": before, "sampling_grads": after, "wall_s": 1.0, "compile_s": 1.0,
            "min_ess": ess * 4, "median_ess": ess * 5, "min_ess_per_1k_grads": ess,
            "min_ess_per_s": 1.0, "max_rhat": rhat, "divergences": 0, "max_err_sd": err,
            "max_err_mcse": None if err is None else 1.0}


def _results():
    return [
        # posterior a (dim 5), two seeds: ours twice the baseline's rate, half its warm-up
        _cell("stan-a", OURS, 0, 20.0, before=500), _cell("stan-a", BASE, 0, 10.0),
        _cell("stan-a", OURS, 1, 30.0, before=500), _cell("stan-a", BASE, 1, 10.0),
        # posterior b (dim 50): ours wrong by R-hat; the baseline wrong by its error
        _cell("stan-b", OURS, 0, 5.0, rhat=1.05, dim=50),
        _cell("stan-b", BASE, 0, 5.0, err=0.3, before=4000, dim=50),
        # posterior c (dim 500): no reference; ours right by R-hat; nutpie-diag failed
        _cell("stan-c", OURS, 0, 1.0, err=None, dim=500),
        _cell("stan-c", BASE, 0, 2.0, err=None, dim=500),
        {"cell": {"target": "stan-c", "sampler": DIAG, "seed_index": 0},
         "key": "stan-c__nutpie-diag__s0", "failed": True, "error": "boom"},
        _cell("stan-a", DIAG, 0, 5.0),
    ]


def test_verdicts_follow_rhat_error_and_reference():
    assert comparison.verdict(_cell("t", OURS, 0, 1.0)) == "right"
    assert comparison.verdict(_cell("t", OURS, 0, 1.0, rhat=1.01)) == "wrong"
    assert comparison.verdict(_cell("t", OURS, 0, 1.0, err=0.25)) == "wrong"
    assert comparison.verdict(_cell("t", OURS, 0, 1.0, err=None)) == "no ref"
    assert comparison.verdict(_cell("t", OURS, 0, 1.0, err=None, rhat=float("nan"))) == "wrong"
    assert comparison.verdict({"cell": {}, "failed": True}) == "failed"


def test_summary_rows_ratios_over_cells_both_right():
    rows = {r["sampler"]: r for r in comparison.summary_rows(_results())}
    assert list(rows) == [OURS, DIAG, BASE]  # the baseline last
    ours = rows[OURS]
    assert (ours["right"], ours["wrong"], ours["no ref"], ours["failed"]) == (2, 1, 1, 0)
    assert ours["pairs"] == 2 and ours["at_least_1x"] == 2
    assert ours["ess_ratio"] == pytest.approx(2.5)  # median of 2 and 3
    assert (ours["ess_low"], ours["ess_high"]) == (pytest.approx(2.0), pytest.approx(3.0))
    # before the first draw, over every cell both ran: 0.5, 0.5, 1000 / 4000, 1
    assert ours["before_ratio"] == pytest.approx(0.5)
    diag = rows[DIAG]
    assert diag["failed"] == 1 and diag["pairs"] == 1 and diag["ess_ratio"] == 0.5
    assert rows[BASE]["ess_ratio"] == 1.0 and rows[BASE]["wrong"] == 1


def test_tables_mark_wrong_no_ref_and_failed_cells():
    cells = comparison.cell_table(_results())
    lines = cells.splitlines()
    assert len(lines) == 2 + 4  # a (2 seeds), b, c
    assert lines[0].startswith("| posterior | seed | adaptmc-adaptive-hmc: ESS / 1k grads")
    b = next(line for line in lines if line.startswith("| b |"))
    assert "5 wrong" in b and "1.050" in b and "0.30" in b
    c = next(line for line in lines if line.startswith("| c |"))
    assert "no ref" in c and "failed" in c
    assert "500 (14 %)" in lines[2]  # gradients before the first draw and their share
    summary = comparison.summary_table(_results())
    assert f"| {OURS} | 2 | 1 | 1 | 0 | 2.50 (2.00-3.00) | 2 | 2 | 0.50 |" in summary
    sizes = comparison.size_table(_results(), OURS)
    assert "| 1-10 | 1 | 2 / 0 / 0 | 2 / 0 / 0 | 2.50 (2) | 0.50 |" in sizes
    assert "| > 100 | 1 | 0 / 0 / 1 | 0 / 0 / 1 | — (0) | 1.00 |" in sizes


def test_the_report_holds_the_comparison_only_with_the_baseline(tmp_path):
    text = write_report(_results(), tmp_path / "with", "adaptmc-lab bench").read_text()
    assert "## Against nutpie-low-rank" in text and "By dimension" in text
    assert "stan-c__nutpie-diag__s0: boom" in text
    plain = [r for r in _results() if r["cell"]["sampler"] != BASE]
    text = write_report(plain, tmp_path / "without", "adaptmc-lab bench").read_text()
    assert "Against" not in text
