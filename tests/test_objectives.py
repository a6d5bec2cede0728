"""Rewards computed from one super-transition's draws, on draws whose jumps are known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adaptmc import objectives


def _alternating(chains: int, draws: int, dim: int) -> np.ndarray:
    """Draws that jump between +1 and -1 in every coordinate: squared jump 4 dim per step."""
    signs = np.where(np.arange(draws) % 2 == 0, 1.0, -1.0)
    return np.broadcast_to(signs[None, :, None], (chains, draws, dim)).copy()


def test_esjd_rewards_on_known_jumps():
    chains, draws, dim, num_leapfrog = 3, 10, 2, 16
    positions = _alternating(chains, draws, dim)
    stats = {"is_divergent": np.zeros((chains, draws), bool)}
    num_grads = chains * draws * num_leapfrog
    per_grad = objectives.esjd_per_grad(positions, stats, num_grads)
    per_sqrt = objectives.esjd_per_sqrt_cost(positions, stats, num_grads)
    assert math.isclose(per_grad, 4 * dim / num_leapfrog)
    # Wang, Mohamed & de Freitas (2013): ESJD / sqrt(L)
    assert math.isclose(per_sqrt, 4 * dim / math.sqrt(num_leapfrog))
    assert objectives.OBJECTIVES["esjd-sqrt-l"].reward is objectives.esjd_per_sqrt_cost


def test_a_divergent_super_transition_scores_nan():
    positions = _alternating(2, 8, 1)
    stats = {"is_divergent": np.zeros((2, 8), bool)}
    stats["is_divergent"][1, 3] = True
    for name, entry in objectives.OBJECTIVES.items():
        assert math.isnan(entry.reward(positions, stats, 160)), name


def test_chees_gives_nothing_for_antithetic_jumps_and_something_for_real_ones():
    """x -> -x leaves every squared radius unchanged: ChEES 0 where ESJD is largest; draws
    of a Gaussian that are independent score ChEES = 2 Var(||x||^2) / 4 = d per step (for
    whitened draws, Var(chi^2_d) = 2 d), whatever the coordinates' scales."""
    stats = {"is_divergent": np.zeros((2, 8), bool)}
    antithetic = _alternating(2, 8, 3) * np.array([1.0, 2.0, 0.5])
    assert objectives.chees_per_grad(antithetic, stats, 2 * 8) == 0.0
    assert objectives.esjd_per_grad(antithetic, stats, 2 * 8) > 0
    rng = np.random.default_rng(0)
    dim, draws = 3, 200_000
    independent = rng.normal(size=(1, draws, dim)) * np.array([1.0, 100.0, 0.01])
    stats = {"is_divergent": np.zeros((1, draws), bool)}
    value = objectives.chees_per_grad(independent, stats, draws)
    assert math.isclose(value, dim, rel_tol=0.03)


def test_lag_one_ess_credits_independent_draws_not_antithetic_or_diffusive_ones():
    """Independent draws score 1000 per 1000 gradients at one gradient per draw; x -> -x
    scores nothing (x^2 never moves); an AR(1) chain with rho = 0.8 (a diffusive move)
    scores (1 - 0.8) / (1 + 0.8) of that, for x and x^2 alike (x^2's lag-one autocorrelation
    is rho^2 = 0.64, the larger factor, so x decides)."""
    rng = np.random.default_rng(3)
    chains, draws, dim = 4, 50_000, 3
    stats = {"is_divergent": np.zeros((chains, draws), bool)}
    independent = rng.normal(size=(chains, draws, dim)) * np.array([1.0, 100.0, 0.01])
    value = objectives.lag_one_ess_per_grad(independent, stats, chains * draws)
    assert math.isclose(value, 1000.0, rel_tol=0.03), value
    flips = {"is_divergent": np.zeros((2, 8), bool)}
    assert objectives.lag_one_ess_per_grad(_alternating(2, 8, 3), flips, 2 * 8) == 0.0
    ar = np.zeros((chains, draws, dim))
    noise = rng.normal(size=(chains, draws, dim)) * np.sqrt(1 - 0.8**2)
    for t in range(1, draws):
        ar[:, t] = 0.8 * ar[:, t - 1] + noise[:, t]
    value = objectives.lag_one_ess_per_grad(ar, stats, chains * draws)
    assert math.isclose(value, 1000.0 * 0.2 / 1.8, rel_tol=0.05), value


def test_tolerating_divergences_fails_only_above_the_rate():
    """One divergent step in 16 (rate 1/16): below a 0.1 tolerance the reward is the
    objective's on the same draws with no divergence; above a 0.05 one it fails."""
    positions = _alternating(2, 8, 1)
    stats = {"is_divergent": np.zeros((2, 8), bool)}
    stats["is_divergent"][1, 3] = True
    clean = objectives.esjd_per_grad(positions, {"is_divergent": np.zeros((2, 8), bool)}, 160)
    tolerant = objectives.tolerating_divergences(objectives.esjd_per_grad, 0.1)
    assert tolerant(positions, stats, 160) == clean
    assert math.isnan(objectives.tolerating_divergences(objectives.esjd_per_grad, 0.05)(
        positions, stats, 160))
    assert tolerant.__name__ == "esjd_per_grad_tolerating_0.1"
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError, match="max_rate"):
            objectives.tolerating_divergences(objectives.esjd_per_grad, bad)


def _hmc_draws(scales, step, num_leapfrog, chains=4, draws=400, seed=0):
    """Exact HMC (leapfrog, Metropolis correction, identity metric) on independent Gaussian
    coordinates of sd ``scales``: ``(chains, draws, dim)``."""
    rng = np.random.default_rng(seed)
    precision = 1.0 / np.asarray(scales) ** 2
    x = rng.normal(size=(chains, len(scales))) * scales
    out = np.empty((chains, draws, len(scales)))
    for t in range(draws):
        p = rng.normal(size=x.shape)
        y, q = x.copy(), p - 0.5 * step * precision * x
        for i in range(num_leapfrog):
            y = y + step * q
            q = q - (step if i < num_leapfrog - 1 else 0.5 * step) * precision * y
        delta = (-0.5 * np.sum(precision * y**2 + q**2, axis=1)
                 + 0.5 * np.sum(precision * x**2 + p**2, axis=1))
        x = np.where((np.log(rng.uniform(size=chains)) < delta)[:, None], y, x)
        out[:, t] = x
    return out


@pytest.mark.parametrize("name", ["ess-lag1", "ess-robust"])
def test_reward_ranks_settings_as_the_robust_ess_per_gradient_does(name):
    """Twenty coordinates the metric scaled well and one it left ten times wider: one
    leapfrog step near its stability limit (MALA-like) decorrelates the twenty in a
    gradient or two but moves the wide one by diffusion, while ten steps move it
    ballistically. The robust ESS per gradient (its smallest parameter) of long runs
    prefers ten steps several times over; the reward, from one super-transition's draws of
    each at equal gradient cost, must rank them the same way (the mean over coordinates
    ranked L = 1 first)."""
    scales = np.array([1.0] * 20 + [10.0])
    stats = {"is_divergent": np.zeros((4, 400), bool)}
    rewards, robust = {}, {}
    for num_leapfrog, draws in ((1, 400), (10, 40)):
        short = _hmc_draws(scales, 1.0, num_leapfrog, draws=draws, seed=1)
        rewards[num_leapfrog] = objectives.OBJECTIVES[name].reward(
            short, {"is_divergent": stats["is_divergent"][:, :draws]}, 4 * 400)
        long = _hmc_draws(scales, 1.0, num_leapfrog, draws=20_000 // num_leapfrog, seed=2)
        from adaptmc.diagnostics import robust_ess

        robust[num_leapfrog] = robust_ess(long).min() / (4 * 20_000)
    assert robust[10] > 3 * robust[1], robust
    assert rewards[10] > rewards[1], (rewards, robust)


def test_robust_reward_estimates_the_effective_draws_over_lags():
    """Independent draws: 1000 per 1000 gradients at one gradient per draw; an AR(1) chain
    with rho = 0.8: (1 - rho) / (1 + rho) of that, as ArviZ's ESS (Geyer's initial
    sequence) estimates it from the same draws."""
    from adaptmc.diagnostics import ess

    rng = np.random.default_rng(5)
    chains, draws = 4, 20_000
    stats = {"is_divergent": np.zeros((chains, draws), bool)}
    independent = rng.normal(size=(chains, draws, 2)) * np.array([1.0, 50.0])
    value = objectives.robust_ess_per_grad(independent, stats, chains * draws)
    assert math.isclose(value, 1000.0, rel_tol=0.05), value
    ar = np.zeros((chains, draws, 1))
    noise = rng.normal(size=ar.shape) * np.sqrt(1 - 0.8**2)
    for t in range(1, draws):
        ar[:, t] = 0.8 * ar[:, t - 1] + noise[:, t]
    fraction = objectives.geyer_fractions(ar)[0]
    assert math.isclose(fraction, ess(ar)[0] / (chains * draws), rel_tol=0.03)
    assert math.isclose(fraction, 0.2 / 1.8, rel_tol=0.1)
