"""Warm-up mass-matrix adaptation: windows, Welford accumulation, step bracketing, and the
estimate on known Gaussians."""

import math

import numpy as np
import pytest

from adaptmc import io, recipes, tuners
from adaptmc.adaptation import bracket_step, regularised_covariance, welford_update
from adaptmc.kernels import HMCParams, hmc
from adaptmc.run import run
from adaptmc.targets import correlated_2d, gaussian
from adaptmc.tuners.mass import mass_adaptation, terminal_length, window_ends
from helpers import mcse_mean, moment_z_scores

MANUAL = ["sample", "--recipe", "manual"]  # kernel and tuner set by hand


def test_windows_double_and_end_at_the_last_warmup_super_transition():
    assert list(window_ends(8)) == [1, 3, 7]
    assert list(window_ends(20)) == [1, 3, 7, 19]
    ends = window_ends(50)
    assert ends[-1] == 49 and all(np.diff(ends) > 0)


@pytest.mark.parametrize("dense", [False, True])
def test_welford_batches_match_numpy(dense):
    rng = np.random.default_rng(0)
    draws = rng.normal(size=(300, 3)) @ np.array([[1, 0, 0], [0.5, 2, 0], [0, 0.3, 0.1]])
    count, mean, m2 = 0.0, np.zeros(3), np.zeros((3, 3) if dense else 3)
    for batch in np.array_split(draws, 7):
        count, mean, m2 = welford_update(count, mean, m2, batch, dense)
    np.testing.assert_allclose(mean, draws.mean(0))
    expected = np.cov(draws.T) if dense else draws.var(0, ddof=1)
    np.testing.assert_allclose(m2 / (count - 1), expected)
    reg = regularised_covariance(count, m2)
    np.testing.assert_allclose(reg, 300 / 305 * expected + 1e-3 * 5 / 305 * (
        np.eye(3) if dense else 1))


def test_bracketing_doubles_halves_then_bisects():
    bracket = np.array([-np.inf, np.inf])
    log_step, bracket = bracket_step(0.0, bracket, met_target=True)
    assert log_step == pytest.approx(math.log(2)) and bracket[0] == 0.0
    log_step, bracket = bracket_step(log_step, bracket, met_target=False)
    assert log_step == pytest.approx(math.log(2) / 2)
    assert list(bracket) == [0.0, pytest.approx(math.log(2))]


def _covariance_z_scores(draws, mean, cov):
    """``draws: (chains, draws, dim)``: z-scores in MCSE units of the means and of every
    ``E[(x_i - m_i)(x_j - m_j)] = Sigma_ij`` (i <= j)."""
    i, j = np.triu_indices(draws.shape[-1])
    products = (draws - mean)[..., i] * (draws - mean)[..., j]
    z_mean = (draws.mean(axis=(0, 1)) - mean) / mcse_mean(draws)
    z_cov = (products.mean(axis=(0, 1)) - cov[i, j]) / mcse_mean(products)
    return np.concatenate([z_mean, z_cov])


def _warmup_run(target, dense, seed, num_st=14, num_warmup=10):
    tuner = mass_adaptation(tuners.fixed(), target.dim, num_warmup, dense=dense)
    return run(target, hmc, HMCParams(num_leapfrog=10, jitter=0.3), tuner=tuner,
               num_super_transitions=num_st, gradient_budget=1000, num_chains=4,
               num_warmup=num_warmup, seed=seed, progress=False)


def test_diagonal_estimate_recovers_badly_scaled_variances():
    scales = np.geomspace(0.01, 10.0, 8)
    target = gaussian(np.zeros(8), scales**2, name="scaled")
    result = _warmup_run(target, dense=False, seed=1)
    final = result.idata.tuning
    assert final.acceptance_rate.values[-1] > 0.6
    draws = result.idata.posterior["x"].values
    z_mean, z_var = moment_z_scores(draws, np.zeros(8), scales**2)
    assert np.max(np.abs(np.concatenate([z_mean, z_var]))) < 4, (z_mean, z_var)


def test_dense_estimate_whitens_a_correlated_gaussian():
    """Correlation 0.99: with the dense estimate, eps grows to the whitened scale and the
    draws have the target's covariance."""
    target = correlated_2d(1.0)
    result = _warmup_run(target, dense=True, seed=2, num_st=16)
    record = result.idata.tuning
    assert record.acceptance_rate.values[-1] > 0.6
    assert record.step_size.values[-1] > 0.5  # unit mass needs eps < 0.2 here
    draws = result.idata.posterior["x"].values
    z = _covariance_z_scores(draws, target.info["mean"], target.info["cov"])
    assert np.max(np.abs(z)) < 4, z


def test_estimate_in_the_tuner_state_and_checkpoint_roundtrip(tmp_path):
    """Fed independent draws, the inverse mass is the last window's variance estimate: its
    error is a z-score with sd ``sigma^2 sqrt(2 / (n - 1))`` over that window's n draws."""
    tuner = mass_adaptation(tuners.fixed(), 3, 8)
    state = tuner.init(None)
    rng = np.random.default_rng(3)
    variances = np.array([0.01, 1.0, 25.0])
    for _ in range(8):
        proposal, state = tuner.propose(None, state)
        draws = rng.normal(size=(4, 200, 3)) * np.sqrt(variances)
        state = tuner.update(state, proposal, float("nan"),
                             {"acceptance_rate": 0.85, "divergences": 0, "positions": draws})
    proposal, _ = tuner.propose(None, state)
    ends = window_ends(8 - terminal_length(8))
    n = (ends[-1] - ends[-2]) * 4 * 200
    z = (proposal["inverse_mass"] / variances - 1.0) / math.sqrt(2.0 / (n - 1))
    assert np.max(np.abs(z)) < 4, z
    arrays = io.tree_to_arrays("tuner", state)
    io.atomic_savez(tmp_path / "s.npz", arrays)
    back = io.arrays_to_tree("tuner", io.load_npz(tmp_path / "s.npz"), tuner.init(None))
    np.testing.assert_array_equal(back["inverse_mass"], state["inverse_mass"])


def test_refuses_too_short_a_warmup_and_double_mass_setting():
    with pytest.raises(ValueError, match="num_warmup >= 3"):
        mass_adaptation(tuners.fixed(), 2, 2)
    inner = tuners.grid({"inverse_mass": [1.0, 2.0]})
    with pytest.raises(ValueError, match="already sets inverse_mass"):
        mass_adaptation(inner, 2, 5)


def test_cli_adapt_mass(tmp_path, capsys):
    from adaptmc.cli import main

    code = main([*MANUAL, "--target", "neal-100d", "--adapt-mass", "diag", "--warmup", "6",
                 "--super-transitions", "10", "--budget", "500", "--chains", "2",
                 "--out", str(tmp_path / "run"), "--no-progress"])
    assert code == 0
    assert main([*MANUAL, "--target", "neal-100d", "--adapt-mass", "diag", "--kernel", "hmc",
                 "--inverse-mass", "2", "--out", str(tmp_path / "bad"), "--no-progress"]) == 2
    assert "exclude each other" in capsys.readouterr().err
    assert main([*MANUAL, "--target", "neal-100d", "--adapt-mass", "diag", "--warmup", "4",
                 "--mass-warmup", "5", "--out", str(tmp_path / "bad2"), "--no-progress"]) == 2
    assert "cannot exceed" in capsys.readouterr().err


def test_warm_start_shows_the_bandit_the_terminal_warmup_super_transitions():
    """With warm_start the inner bandit records the last num_warmup // 5 warm-up settings (run
    under the final metric) with their rewards, and starts from them; without, it starts
    empty."""
    num_warmup, rng = 10, np.random.default_rng(4)
    for warm_start, expected in ((True, 2), (False, 0)):
        tuner = mass_adaptation(tuners.gp_ucb(recipes.hmc_box()), 2, num_warmup,
                                warm_start=warm_start)
        state = tuner.init(None)
        for index in range(num_warmup):
            proposal, state = tuner.propose(None, state)
            stats = {"acceptance_rate": 0.85, "divergences": 0,
                     "positions": rng.normal(size=(4, 50, 2))}
            state = tuner.update(state, proposal, float(index), stats)
        inner = state["inner"]
        assert len(inner["rewards"]) == expected
        if warm_start:
            assert list(inner["rewards"]) == [8.0, 9.0]
            # the settings recorded are the warm-up's (step size in force, 10 steps)
            np.testing.assert_allclose(inner["points"][:, 1], 10)
            np.testing.assert_allclose(inner["current"], inner["points"][-1])


def test_warm_start_refuses_a_tuner_of_other_parameters():
    inner = tuners.gp_ucb(tuners.make_box({"step_size": (0.01, 1.0),
                                           "refresh_angle": (0.1, 1.5)}))
    with pytest.raises(ValueError, match="warm_start needs a tuner of step_size"):
        mass_adaptation(inner, 2, 5, warm_start=True)


def test_cli_main_job_in_miniature(tmp_path, capsys):
    """The README's first command, small: mass warm-up, warm-started GP-UCB, frozen at its best
    setting after --adapt-until; plots leave out the warm-up the bandit never saw."""
    import arviz as az

    from adaptmc.cli import main

    out = tmp_path / "demo"
    code = main([*MANUAL, "--target", "neal-100d", "--adapt-mass", "diag", "--mass-warmup", "5",
                 "--warmup", "8", "--tuner", "gp-ucb", "--objective", "esjd-sqrt-l",
                 "--adapt-until", "8", "--jitter", "0.2", "--super-transitions", "12",
                 "--budget", "400", "--chains", "2", "--out", str(out), "--no-progress"])
    assert code == 0
    tuning = az.from_netcdf(out / "draws.nc").tuning
    eps, steps = tuning.step_size.values, tuning.num_leapfrog.values
    assert len(set(zip(eps[8:], steps[8:], strict=True))) == 1  # frozen after --adapt-until
    assert np.all(steps[:5] == 10)  # the warm-up's fixed trajectory length
    printed = capsys.readouterr().out
    assert "reward_surface.png" in printed and "tuning_trace.png" in printed
