"""Plots read a finished run's tuning record (and the tuner's recorded configuration) and
write PNG files; no sampling happens. The figures are checked on their content: the surrogate
refitted with the recorded hyperparameters is the bandit's own, the axes span the box, the
trace has one point per super-transition."""

from __future__ import annotations

import json

import numpy as np
import pytest
from matplotlib.figure import Figure

import adaptmc
from adaptmc import plots, tuners
from adaptmc.tuners.base import Tuner
from adaptmc.tuners.box import make_box, scale_unit, to_unit
from adaptmc.tuners.gp import gp_predict
from adaptmc.tuners.surrogate import GPConfig, fit_gp

BOX = make_box({"step_size": (0.05, 0.3), "num_leapfrog": (5, 8)}, integer=("num_leapfrog",))
HYPER = {"alpha": 0.35, "signal_var": 0.3, "noise_var": 0.02, "delta": 0.05}
NUM_SUPER = 8


def capturing(tuner: Tuner, seen: dict) -> Tuner:
    """``tuner`` whose last state is kept in ``seen["state"]`` (the bandit's own state)."""

    def update(state, proposal, reward, stats):
        seen["state"] = tuner.update(state, proposal, reward, stats)
        return seen["state"]

    return tuner._replace(update=update)


@pytest.fixture(scope="module")
def finished_run():
    """A run with non-default GP hyperparameters and the bandit's final state. Where the run
    loop does not record ``tuner_config`` yet, the tuner's own ``describe`` of its final
    state is put where the run puts it."""
    seen = {}
    tuner = tuners.gp_ucb(BOX, **HYPER)
    result = adaptmc.run.run(
        adaptmc.targets.correlated_2d(), adaptmc.kernels.hmc, adaptmc.kernels.HMCParams(0.1, 6),
        num_super_transitions=NUM_SUPER, gradient_budget=40, num_chains=2,
        tuner=capturing(tuner, seen), objective=adaptmc.objectives.esjd_per_grad, seed=4,
        progress=False,
    )
    idata = result.idata
    idata.tuning.attrs.setdefault("tuner_config", json.dumps(tuner.describe(seen["state"])))
    return idata, tuner, seen["state"]


def test_tuning_record_reads_the_tuning_group(finished_run):
    idata, _, state = finished_run
    record = plots.tuning_record(idata)
    assert record["names"] == ("step_size", "num_leapfrog")
    assert record["points"].shape == (NUM_SUPER, 2) and record["rewards"].shape == (NUM_SUPER,)
    assert np.all(record["points"] >= BOX.lower) and np.all(record["points"] <= BOX.upper)
    # the rewards as the tuner saw them (divergent super-transitions as failures)
    np.testing.assert_array_equal(record["points"], state["points"])
    np.testing.assert_array_equal(record["rewards"], state["rewards"])
    assert record["tuner_config"]["lengthscale_fraction"] == HYPER["alpha"]


def test_surface_refits_the_bandits_own_gp_with_the_recorded_hyperparameters(finished_run):
    idata, _, state = finished_run
    record = plots.tuning_record(idata)
    refit = plots.refit_surrogate(BOX, record["points"], record["rewards"],
                                  record["tuner_config"])
    own = fit_gp(BOX, state, GPConfig(HYPER["alpha"], HYPER["signal_var"], HYPER["noise_var"]))
    at = to_unit(BOX, state["points"])
    mean, sd = refit.predict(at)
    own_mean, own_sd = gp_predict(own, at)
    np.testing.assert_allclose(mean, own_mean, rtol=0, atol=1e-8)
    np.testing.assert_allclose(sd, own_sd, rtol=0, atol=1e-8)
    # the default hyperparameters give another surface: the test sees which were used
    default_mean = gp_predict(fit_gp(BOX, state), at)[0]
    assert np.max(np.abs(default_mean - own_mean)) > 1e-3
    # the slice's acquisition is the bandit's annealed UCB with its delta and schedule
    n = len(state["rewards"])
    beta = adaptmc.tuners.acquisition.ucb_beta(n, 2, HYPER["delta"])
    np.testing.assert_allclose(
        refit.acquisition(at),
        own_mean + tuners.exponential(0.05)(n) * np.sqrt(beta) * own_sd, rtol=0, atol=1e-8)


def test_box_is_recovered_from_the_record(finished_run):
    idata, _, _ = finished_run
    box = plots.infer_box(plots.tuning_record(idata))
    assert box.names == BOX.names
    np.testing.assert_array_equal(box.lower, BOX.lower)
    np.testing.assert_array_equal(box.upper, BOX.upper)
    np.testing.assert_array_equal(box.integer, BOX.integer)


def test_reward_surface_axes_span_the_box(finished_run):
    idata, _, _ = finished_run
    record = plots.tuning_record(idata)
    ax = Figure().subplots()
    plots.plot_reward_surface(ax, BOX, record["points"], record["rewards"], resolution=7,
                              facts=record["tuner_config"])
    np.testing.assert_allclose(ax.get_xlim(), (BOX.lower[0], BOX.upper[0]))
    np.testing.assert_allclose(ax.get_ylim(), (BOX.lower[1], BOX.upper[1]))
    assert (ax.get_xlabel(), ax.get_ylabel()) == tuple(map(plots.parameter_label, BOX.names))


def test_trace_has_one_point_per_super_transition(finished_run):
    idata, _, _ = finished_run
    record = plots.tuning_record(idata)
    fig = Figure()
    axes = fig.subplots(3, 1, sharex=True)
    plots.plot_tuning_trace(axes, record)
    reward_line = axes[0].get_lines()[0]
    failed = sum(len(c.get_offsets()) for c in axes[0].collections)
    assert len(reward_line.get_xdata()) + failed == NUM_SUPER
    for ax, k in zip(axes[1:], range(2), strict=True):
        x, y = ax.get_lines()[0].get_data()
        np.testing.assert_array_equal(x, np.arange(NUM_SUPER))
        np.testing.assert_array_equal(y, record["points"][:, k])


def test_write_tuning_plots_writes_pngs(finished_run, tmp_path):
    idata, _, _ = finished_run
    written = plots.write_tuning_plots(idata, tmp_path, box=BOX)
    names = sorted(p.name for p in written)
    assert names == ["reward_slice.png", "reward_surface.png", "tuning_trace.png"]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_box_is_inferred_when_not_given(finished_run, tmp_path):
    idata, _, _ = finished_run
    written = plots.write_tuning_plots(idata, tmp_path)
    assert "reward_surface.png" in [p.name for p in written]


def test_missing_tuning_group_raises():
    class NoTuning:
        def groups(self):
            return ["posterior"]

    with pytest.raises(ValueError, match="tuning"):
        plots.tuning_record(NoTuning())


def test_log_box_axes_are_logarithmic_and_span_the_box(finished_run):
    """A log box is drawn on log axes whose contour spans the box's values (the GP lives in
    unit coordinates; the axes show the parameters)."""
    from matplotlib.contour import ContourSet

    idata, _, _ = finished_run
    record = plots.tuning_record(idata)
    box = make_box({"step_size": (0.05, 0.3), "num_leapfrog": (5, 8)}, integer=("num_leapfrog",),
                   log=("step_size", "num_leapfrog"))
    ax = Figure().subplots()
    plots.plot_reward_surface(ax, box, record["points"], record["rewards"], resolution=5)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    xs = np.concatenate([path.vertices[:, 0] for c in ax.collections
                         if isinstance(c, ContourSet) for path in c.get_paths()
                         if len(path.vertices)])
    assert xs.min() == pytest.approx(0.05) and xs.max() == pytest.approx(0.3)
    # the middle of the unit cube is the geometric mean of a log dimension
    middle = scale_unit(box, np.array([0.5, 0.5]))
    np.testing.assert_allclose(middle, [np.sqrt(0.05 * 0.3), np.sqrt(5 * 8)])


def test_skipped_warmup_points_stay_out_of_the_surface(finished_run, tmp_path):
    idata, _, _ = finished_run
    written = plots.write_tuning_plots(idata, tmp_path, box=BOX, skip=3)
    assert "reward_surface.png" in [p.name for p in written]
    assert plots.write_tuning_plots(idata, tmp_path / "all", box=BOX, skip=8)[-1].name == \
        "tuning_trace.png"  # nothing left for the tuner: only the trace


def test_policy_window_follows_the_recorded_wrappers():
    inner = tuners.gp_ucb(BOX)
    mass = tuners.mass_adaptation(inner, 2, 10, warm_start=True)
    frozen = tuners.freeze(mass, after=30)
    state = frozen.init(0)
    facts = frozen.describe(state)
    # mass hides 10 - 10 // 5 = 8 warm-up super-transitions; freeze stops at 30
    assert plots.policy_window(facts, 50) == (8, 30)
    assert plots.policy_window(mass.describe(mass.init(0)), 50) == (8, 50)
    assert plots.policy_window(None, 50) == (0, 50)


def test_tuning_plots_speak_plain_words_with_units(finished_run):
    """No tuner jargon in titles (``stop+moving-box+gp-ucb``), the reward axis says what the
    reward is and in what unit, the parameters are named in words, and a dashed line marks
    where tuning stopped."""
    idata, _, _ = finished_run
    assert plots.describe_tuner("stop+moving-box+gp-ucb") == \
        "Gaussian-process bandit (GP-UCB), search box that moves, stops once confident"
    assert "+" not in plots.describe_tuner("mass+moving-box+parametric")
    assert plots.reward_label("lag_one_ess_per_grad") == \
        "effective draws per 1000 gradients (lag-one estimate)"
    assert plots.reward_label("esjd_per_grad_tolerating_0.01") == \
        "squared jump distance per gradient"
    record = {**plots.tuning_record(idata), "adapted": 5}
    fig = Figure()
    axes = fig.subplots(3, 1, sharex=True)
    plots.plot_tuning_trace(axes, record)
    assert axes[0].get_ylabel().replace("\n", " ") == "squared jump distance per gradient"
    assert axes[1].get_ylabel() == "step size (eps)"
    assert axes[2].get_ylabel().replace("\n", " ") == "leapfrog steps per draw (L)"
    assert "40 gradients per chain" in axes[2].get_xlabel()
    stops = [line for line in axes[0].get_lines() if line.get_linestyle() == "--"]
    assert len(stops) == 1 and stops[0].get_xdata()[0] == pytest.approx(4.5)


def test_the_best_star_sits_at_the_surfaces_peak(finished_run):
    """The star marks the highest point of the drawn surface (not the best tried setting,
    which may lie off the peak)."""
    idata, _, _ = finished_run
    record = plots.tuning_record(idata)
    ax = Figure().subplots()
    plots.plot_reward_surface(ax, BOX, record["points"], record["rewards"], resolution=30,
                              facts=record["tuner_config"], frozen=record["points"][-1])
    refit = plots.refit_surrogate(BOX, record["points"], record["rewards"],
                                  record["tuner_config"])
    grid = np.linspace(0, 1, 30)
    ui, uj = np.meshgrid(grid, grid)
    unit = np.stack([ui.ravel(), uj.ravel()], axis=1)
    peak = scale_unit(BOX, unit[np.argmax(refit.predict(unit)[0])][None])[0]
    labels = {c.get_label(): c for c in ax.collections}
    np.testing.assert_allclose(labels["predicted best"].get_offsets()[0], peak)
    np.testing.assert_allclose(labels["sampled with"].get_offsets()[0], record["points"][-1])
    assert ax.get_title() == "Predicted reward over the search box"
