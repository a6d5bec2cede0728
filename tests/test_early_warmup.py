"""The warm-up that learns the metric early and often (`adaptmc.adaptation.early`) and the
choice of metric by what it buys (`adaptmc.adaptation.metric_choice`)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.adaptation import metric_choice
from adaptmc.adaptation.early import early_min, early_warmup, schedule
from adaptmc.adaptation.low_rank import LowRankInverseMass, low_rank_dense
from adaptmc.targets import gaussian

WARMUP_GRADIENT_BOUND = 20_000
"""The most gradients (4 chains together) the warm-up may spend on the regression below
before its metric removes the correlation: nutpie's own warm-up spends about 46,000 on a
posteriordb regression of this kind."""


def _regression_posterior(rng, n=100, centre=10.0):
    """The posterior of ``(a, b)`` in ``y = a + b x + N(0, 1)`` with a flat prior and ``x ~
    N(centre, 1)``: Gaussian with covariance ``(X^T X)^{-1}``, the pair correlated near
    ``-centre / sqrt(centre^2 + 1)``."""
    x = rng.normal(centre, 1.0, size=n)
    design = np.stack([np.ones(n), x], axis=1)
    cov = np.linalg.inv(design.T @ design)
    return np.array([1.0, 2.0]), cov


def _inverse_mass_matrix(warm):
    if isinstance(warm.inverse_mass, LowRankInverseMass):
        return low_rank_dense(warm.inverse_mass)
    inverse_mass = np.asarray(warm.inverse_mass)
    return np.diag(inverse_mass) if inverse_mass.ndim == 1 else inverse_mass


def _preconditioned(cov, inverse_mass):
    """``L^{-1} cov L^{-T}`` for ``inverse_mass = L L^T``."""
    root = np.linalg.cholesky(inverse_mass)
    whitened = np.linalg.solve(root, np.linalg.solve(root, cov).T)
    return 0.5 * (whitened + whitened.T)


def test_the_warmup_removes_an_uncentred_covariates_correlation_in_few_gradients():
    mean, cov = _regression_posterior(np.random.default_rng(0))
    sd = np.sqrt(np.diag(cov))
    assert cov[0, 1] / (sd[0] * sd[1]) < -0.99
    target = gaussian(mean, cov, name="uncentred-regression")
    starts = mean + sd * np.random.default_rng(1).uniform(-2, 2, size=(4, 2))
    warm = early_warmup(target, starts, jax.random.key(3), num_steps=150, progress=False)
    assert warm.metric != "diag"
    assert warm.num_grads <= WARMUP_GRADIENT_BOUND
    left = _preconditioned(cov, _inverse_mass_matrix(warm))
    values = np.linalg.eigvalsh(left)
    # what the metric leaves: no correlation and scales within a factor 3 of each other
    assert abs(left[0, 1]) / np.sqrt(left[0, 0] * left[1, 1]) < 0.3
    assert values[-1] / values[0] < 3.0
    # the trajectories of the final window are short: the metric was learned early
    assert np.median(warm.trajectory_steps) <= 7


def _exact_draws(rng, cov, n):
    """``n`` independent draws of ``N(0, cov)`` and their gradients, as ``(1, n, dim)``."""
    draws = rng.multivariate_normal(np.zeros(cov.shape[0]), cov, size=n)
    grads = -np.linalg.solve(cov, draws.T).T
    return draws[None], grads[None]


def test_the_choice_is_not_diagonal_on_a_correlated_regression():
    mean, cov = _regression_posterior(np.random.default_rng(4))
    draws, grads = _exact_draws(np.random.default_rng(5), cov, 400)
    kind, measured = metric_choice.choose(draws, grads, grad_flops=1e4, rank_budget=1,
                                          dense=True)
    assert kind in ("low-rank", "dense")
    assert measured["diag"]["condition"] > 20 * measured[kind]["condition"]


@pytest.mark.parametrize("unknown", [-1.0, float("nan")])
def test_an_unknown_gradient_cost_ranks_by_the_condition(unknown):
    """A gradient XLA cannot see (a Stan program's FFI call reports -1 flops) must not make
    every richer metric look dearer than the gradient: 144 coordinates, thirty directions 20
    times wider than the rest (an IRT model's shape), whose diagonal metric leaves a condition
    about ten times the low-rank one's. With -1 taken as a flop count, the low-rank metric's
    work per step looked several times the diagonal's, and the diagonal won."""
    rng = np.random.default_rng(11)
    dim = 144
    directions = np.linalg.qr(rng.standard_normal((dim, 30)))[0]
    cov = np.eye(dim) + 19.0 * directions @ directions.T
    draws, grads = _exact_draws(rng, cov, 2000)
    kind, measured = metric_choice.choose(draws, grads, grad_flops=unknown, rank_budget=36,
                                          dense=False)
    assert kind == "low-rank", measured
    assert measured["diag"]["condition"] > 4 * measured["low-rank"]["condition"]


def test_a_gradient_xla_cannot_see_has_an_unknown_cost(monkeypatch):
    """Where XLA's cost analysis says -1 (a foreign function: a Stan program's FFI call),
    the gradient's cost is unknown (NaN), not -1 operations; where it sees the gradient, its
    count."""
    target = gaussian(np.zeros(2), np.eye(2))
    assert metric_choice.grad_flops(target) > 0
    monkeypatch.setattr(jax.stages.Lowered, "cost_analysis", lambda self: {"flops": -1.0})
    assert np.isnan(metric_choice.grad_flops(target))


@pytest.mark.parametrize("dim", [10, 40])
def test_the_choice_is_diagonal_on_independent_coordinates_of_different_scales(dim):
    rng = np.random.default_rng(dim)
    variances = np.exp(rng.uniform(np.log(1e-4), np.log(1e4), size=dim))
    draws, grads = _exact_draws(rng, np.diag(variances), 400)
    kind, measured = metric_choice.choose(draws, grads, grad_flops=10.0 * dim,
                                          rank_budget=max(1, dim // 4), dense=True)
    assert kind == "diag", measured
    # the diagonal leaves only sampling noise: the top eigenvalue of a sample covariance of
    # n white draws is about (1 + sqrt(dim / n))^2 (Marchenko-Pastur), once for the draws
    # and once for the gradients (n = 200 held out)
    assert measured["diag"]["condition"] < 1.5 * (1 + np.sqrt(dim / 200)) ** 4


def test_the_condition_is_the_spread_of_scales_left():
    rng = np.random.default_rng(7)
    cov = np.diag([1.0, 4.0, 100.0])
    draws, grads = _exact_draws(rng, cov, 4000)
    identity = LowRankInverseMass(np.ones(3), np.zeros((3, 0)), np.zeros(0))
    assert metric_choice.condition(identity, draws[0], grads[0]) == pytest.approx(100, rel=0.15)
    exact = LowRankInverseMass(np.diag(cov), np.zeros((3, 0)), np.zeros(0))
    assert metric_choice.condition(exact, draws[0], grads[0]) == pytest.approx(1, rel=0.15)


def test_the_schedule_has_an_early_phase_and_a_final_window():
    early, final = schedule(500)
    assert (early, final) == (150, 420)  # the early phase at most; its least: early_min
    assert early_min(500) == 50
    assert schedule(100) == (30, 70) and early_min(100) == 30


def test_bad_warmup_arguments_are_refused():
    target = gaussian(np.zeros(2), 1.0)
    with pytest.raises(ValueError, match="metric must be"):
        early_warmup(target, np.zeros((2, 2)), jax.random.key(0), metric="full")
    with pytest.raises(ValueError, match="number of steps"):
        early_warmup(target, np.zeros((2, 2)), jax.random.key(0), num_steps=50)


def test_a_chain_left_in_a_far_lesser_mode_is_caught_before_tuning():
    """Two well-separated modes (weights 0.9 and 0.1, ten sd apart): three chains start in
    the main one, one in the lesser, and none can cross in a warm-up. That chain is moved to
    the best chain's position before tuning and named in a warning, not averaged into the
    draws; the draws then agree (R-hat) and sit in the main mode."""
    import adaptmc
    from adaptmc.diagnostics import posterior_array, rhat
    from adaptmc.targets.base import make_target

    far = jnp.array([10.0, 10.0])

    def logdensity(x):
        return jnp.logaddexp(jnp.log(0.9) - 0.5 * jnp.sum(x**2),
                             jnp.log(0.1) - 0.5 * jnp.sum((x - far) ** 2))

    target = make_target(logdensity, jnp.zeros(2))
    starts = np.array([[0.3, -0.2], [-0.4, 0.1], [0.2, 0.5], [10.2, 9.7]])
    idata = adaptmc.sample(target, chains=4, seed=0, progress=False, compile_cache=False,
                           init=starts, warmup_steps=150, draws=200, tuning=4)
    warnings = json.loads(idata.attrs["warnings"])
    assert any("chain 3 ended the warm-up far from the others" in w for w in warnings)
    found = json.loads(idata.attrs["warmup"])["far_chains"]
    assert found["moved"] == [3] and found["to"] in (0, 1, 2) and found["kept"] == []
    x, _ = posterior_array(idata)
    assert np.all(np.abs(x.mean(axis=1)) < 1.0) and np.max(rhat(x)) < 1.05


def test_far_chains_finds_the_odd_chain_and_none_among_agreeing_ones():
    from adaptmc.adaptation.chains import far_chains

    rng = np.random.default_rng(0)
    draws = rng.normal(size=(4, 200, 3))
    lp = -0.5 * np.sum(draws**2, axis=-1)
    assert far_chains(draws, lp) == []
    draws[2] += np.array([0.0, 8.0, 0.0])
    assert far_chains(draws, lp - 5.0 * (np.arange(4) == 2)[:, None]) == [(2, True)]
    assert far_chains(draws[:2], lp[:2]) == []


def test_chains_in_two_modes_give_the_metric_of_one_mode_not_of_the_gap():
    """Two chains near -10, two near +10, unit scale in each mode: pooled about a common
    mean the variance is ~101 (the gap), within each chain ~1; the metric must be the
    latter for the estimate and for the final choice."""
    rng = np.random.default_rng(3)
    modes = np.array([-10.0, -10.0, 10.0, 10.0])[:, None, None]
    draws = modes + rng.normal(size=(4, 200, 3))
    grads = -(draws - modes)
    found = metric_choice.estimate(draws, grads, "diag", 1, None)
    assert np.allclose(found.diag, 1.0, rtol=0.2)
    _, fitted, _ = metric_choice.choose_final(draws, grads, gaussian(np.zeros(3), 1.0),
                                              "diag", 1)
    assert np.allclose(fitted.diag, 1.0, rtol=0.2)


def _run_through(run):
    while not run.done():
        run.advance()
        run.adapt()
    return run


def test_a_warmup_without_its_final_window_ends_at_its_start_and_can_run_it_later():
    """``final_window=False`` (MAMS's warm-up: MAMS adapts its own step) ends where the final
    window would start, with the metric chosen and the averaged step (not a restarted dual
    averaging's); `run_final_window` (NUTS samples after all) then runs that window from
    where the chains stand exactly as a warm-up that ran it: the same draws, steps and
    gradients."""
    from adaptmc.adaptation.early import (
        chains_result,
        final_length,
        final_steps,
        run_final_window,
        start_chains,
    )

    sd = np.array([0.02, 0.05, 0.1])  # steps far from 1: a restarted averaging shows
    target = gaussian(np.zeros(3), np.diag(sd ** 2))
    starts = sd * np.random.default_rng(5).uniform(-2, 2, size=(4, 3))
    runs = [_run_through(start_chains(target, starts, jax.random.key(2), num_steps=200,
                                      progress=False, final_window=window))
            for window in (True, False)]
    whole, cut = runs
    first = cut.final_start // 10
    assert cut.counters["index"] == first == whole.final_start // 10
    warm = chains_result(cut)
    assert warm.choice["settled"]["final_window"] is False
    assert warm.num_grads == whole.num_grads - sum(
        int(np.sum(s)) for s in whole.out["steps"][first:])
    # what the result reads (far chains, trajectories) is the window before the final one's
    assert warm.trajectory_steps.shape == (4, final_length(200))
    assert 0.3 < warm.step_size / np.median(final_steps(whole)) < 1.5
    run_final_window(cut)
    for name in ("x", "steps", "eps"):
        np.testing.assert_array_equal(np.concatenate(cut.out[name], axis=1),
                                      np.concatenate(whole.out[name], axis=1))
    assert cut.num_grads == whole.num_grads
    np.testing.assert_array_equal(final_steps(cut), final_steps(whole))
