"""The tuned-vs-oracle experiment (issue 3) runs end to end and writes its table."""

from __future__ import annotations

import json

import pytest

from adaptmc_lab.experiments import tuned_vs_oracle


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


def test_tuned_plan_is_gp_ucb_in_log_eps_l_after_the_mass_warmup():
    """The tuned sampler comes from the manual recipe: jittered HMC, GP-UCB over the log box
    warm-started after the diagonal mass warm-up, frozen at the end of the burn-in when
    asked, rewarded by the named objective."""
    from adaptmc import recipes
    from adaptmc.objectives import OBJECTIVES
    from adaptmc.targets import get_target

    target = get_target("gauss-2d-v2")
    plan = tuned_vs_oracle.tuned_plan(target, tuned_vs_oracle.DEFAULT_BOX, 500, 40, 20, 0,
                                      "esjd-sqrt-l", mass_warmup=15, freeze=True)
    assert isinstance(plan, recipes.Plan) and plan.kernel.name == "hmc"
    assert plan.params.jitter == tuned_vs_oracle.HMC_JITTER
    assert plan.objective is OBJECTIVES["esjd-sqrt-l"].reward
    assert (plan.num_warmup, plan.adapt_until, plan.num_super_transitions) == (20, 20, 40)
    assert plan.box.names == ("step_size", "num_leapfrog") and all(plan.box.log)
    assert list(plan.box.lower) == [0.01, 1] and list(plan.box.upper) == [1.0, 100]
    assert "mass" in plan.tuner.name and 0 < plan.plot_skip < 15
    unit = tuned_vs_oracle.tuned_plan(target, tuned_vs_oracle.BOXES["gauss-2d-v2"], 500, 40,
                                      20, 0)
    assert unit.adapt_until is None and unit.plot_skip == 0 and "mass" not in unit.tuner.name


def test_min_ess_is_the_robust_one():
    """An antithetic chain (x_t = -x_{t-1} + noise) has a bulk-ESS of x above its draws; the
    experiment's ESS must not credit it (the ESS of x^2 is small)."""
    import arviz as az
    import numpy as np

    rng = np.random.default_rng(0)
    x = np.empty((4, 1000, 1))
    x[:, 0] = rng.standard_normal((4, 1))
    for t in range(1, 1000):
        x[:, t] = -0.95 * x[:, t - 1] + np.sqrt(1 - 0.95**2) * rng.standard_normal((4, 1))
    idata = az.from_dict(posterior={"x": x})
    bulk = float(az.ess(x[..., 0]))
    assert bulk > 4000 and tuned_vs_oracle._min_ess(idata) < 0.2 * bulk
