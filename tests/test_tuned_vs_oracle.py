"""The tuned-vs-oracle experiment (issue 3) runs end to end and writes its table."""

from __future__ import annotations

import json

import pytest

from adaptmc.experiments import tuned_vs_oracle


@pytest.mark.slow
def test_quick_whitened_protocol_runs_end_to_end(tmp_path):
    # slow: a 4x4 grid, 2 tuned runs and NUTS on one target (about 20 s)
    out = tmp_path / "tvo"
    assert tuned_vs_oracle.run_tuned_vs_oracle(out, quick=True, targets=["gauss-2d-v2"]) == 0
    result = json.loads((out / "tuned_vs_oracle.json").read_text())["gauss-2d-v2"]
    assert result["mass_warmup"] > 0 and result["box"] == [[0.01, 1.0], [1, 100]]
    assert len(result["grid"]) == 16 and result["oracle"][0]["ess_per_grad"] > 0
    for runs in result["tuned"].values():
        assert 0 <= runs[0]["tuner_share"] < 1 and 0 <= runs[0]["objective_share"] < 1
    table = (out / "tuned_vs_oracle.md").read_text()
    assert "diagonal mass adaptation" in table and "| gauss-2d-v2 | esjd |" in table


def test_markdown_names_the_protocol():
    run = {"ess_per_grad": 0.1, "ess_per_s": 1.0, "tuner_share": 0.01, "objective_share": 0.0,
           "final": {"step_size": 0.5, "num_leapfrog": 3}}
    results = {"t": {"oracle_point": {"step_size": 0.5, "num_leapfrog": 4},
                     "oracle": [run], "nuts": [run], "tuned": {"esjd": [run]}}}
    assert "unit mass" in tuned_vs_oracle.markdown(results, 2000, 150, 1, 30, 0)
    dense = tuned_vs_oracle.markdown(results, 2000, 150, 1, 30, 15, dense=True)
    assert "dense mass adaptation in the first 15" in dense and "| 1.00 |" in dense
    frozen = tuned_vs_oracle.markdown(results, 2000, 150, 1, 30, 15, freeze=True)
    assert "frozen at its best setting" in frozen
