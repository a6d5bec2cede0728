"""Plots read a finished run's tuning record and write PNG files; no sampling happens."""

from __future__ import annotations

import numpy as np
import pytest

import adaptmc
from adaptmc import plots, tuners
from adaptmc.tuners.box import make_box


@pytest.fixture(scope="module")
def finished_run():
    box = make_box({"step_size": (0.05, 0.3), "num_leapfrog": (5, 8)}, integer=("num_leapfrog",))
    result = adaptmc.run.run(
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


def test_log_box_axes_are_logarithmic_and_span_the_box(finished_run):
    """A log box is drawn on log axes whose contour spans the box's values (the GP lives in
    unit coordinates; the axes show the parameters)."""
    from matplotlib.figure import Figure

    idata, _ = finished_run
    record = plots.tuning_record(idata)
    box = make_box({"step_size": (0.05, 0.3), "num_leapfrog": (5, 8)}, integer=("num_leapfrog",),
                   log=("step_size", "num_leapfrog"))
    ax = Figure().subplots()
    plots.plot_reward_surface(ax, box, record["points"], record["rewards"], resolution=5)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    from matplotlib.contour import ContourSet

    xs = np.concatenate([path.vertices[:, 0] for c in ax.collections
                         if isinstance(c, ContourSet) for path in c.get_paths()
                         if len(path.vertices)])
    assert xs.min() == pytest.approx(0.05) and xs.max() == pytest.approx(0.3)
    # the middle of the unit cube is the geometric mean of a log dimension
    from adaptmc.tuners.box import scale_unit

    middle = scale_unit(box, np.array([0.5, 0.5]))
    np.testing.assert_allclose(middle, [np.sqrt(0.05 * 0.3), np.sqrt(5 * 8)])


def test_skipped_warmup_points_stay_out_of_the_surface(finished_run, tmp_path):
    idata, box = finished_run
    written = plots.write_tuning_plots(idata, tmp_path, box=box, skip=3)
    assert "reward_surface.png" in [p.name for p in written]
    assert plots.write_tuning_plots(idata, tmp_path / "all", box=box, skip=8)[-1].name == \
        "tuning_trace.png"  # nothing left for the tuner: only the trace
