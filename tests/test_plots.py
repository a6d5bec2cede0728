"""Plots read a finished run's tuning record and write PNG files; no sampling happens."""

from __future__ import annotations

import numpy as np
import pytest

import adaptmc
from adaptmc import plots, tuners
from adaptmc.tuners.box import make_box


@pytest.fixture(scope="module")
def finished_run():
    box = make_box({"step_size": (0.05, 0.3), "num_leapfrog": (5, 8)})
    result = adaptmc.run(
        adaptmc.targets.correlated_2d(), adaptmc.kernels.hmc, adaptmc.kernels.HMCParams(0.1, 6),
        num_super_transitions=8, gradient_budget=40, num_chains=2, tuner=tuners.gp_ucb(box),
        objective=adaptmc.objectives.esjd_per_grad, seed=4, progress=False,
    )
    return result.idata, box


def test_tuning_record_reads_the_tuning_group(finished_run):
    idata, box = finished_run
    record = plots.tuning_record(idata)
    assert record["names"] == ("step_size", "num_leapfrog")
    assert record["points"].shape == (8, 2) and record["rewards"].shape == (8,)
    assert np.all(record["points"] >= box.lower) and np.all(record["points"] <= box.upper)


def test_write_tuning_plots_writes_pngs(finished_run, tmp_path):
    idata, box = finished_run
    written = plots.write_tuning_plots(idata, tmp_path, box=box)
    names = sorted(p.name for p in written)
    assert names == ["reward_slice.png", "reward_surface.png", "tuning_trace.png"]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_box_is_inferred_when_not_given(finished_run, tmp_path):
    idata, _ = finished_run
    written = plots.write_tuning_plots(idata, tmp_path)
    assert "reward_surface.png" in [p.name for p in written]


def test_surface_refits_the_tuners_gp(finished_run):
    idata, box = finished_run
    record = plots.tuning_record(idata)
    post = plots.fit_surrogate(box, record["points"], record["rewards"])
    state = {"points": record["points"], "rewards": record["rewards"]}
    same = tuners.bandit.fit_gp(box, state)
    np.testing.assert_allclose(post.weights, same.weights)


def test_missing_tuning_group_raises():
    class NoTuning:
        def groups(self):
            return ["posterior"]

    with pytest.raises(ValueError, match="tuning"):
        plots.tuning_record(NoTuning())
