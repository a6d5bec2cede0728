"""MAMS's trajectory length from the chains' autocorrelation
(`adaptmc.recipes.mams_rules.trajectory_length` and `mams_sampling.tune`): the rule on draws
of known autocorrelation, and on Gaussians of known scales under a metric that is not theirs, where
it must land at the rule's fixed point ``~1.1-1.2 sqrt(sum s_i^2)`` from a first length too
short or too long."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.recipes.mams_rules import LENGTH_FACTOR, MAX_LENGTH_CHANGE, trajectory_length
from adaptmc.recipes.mams_sampling import MIN_STEPS, tune
from adaptmc.targets.base import make_target


def ar1(rho: float, chains=4, n=20000, dim=3, seed=0) -> np.ndarray:
    """``(chains, n, dim)`` stationary AR(1) draws of lag-one autocorrelation ``rho``:
    ``tau = (1 + rho) / (1 - rho)`` transitions per effective draw."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((chains, n, dim)) * math.sqrt(1 - rho**2)
    x = np.empty_like(noise)
    x[:, 0] = rng.standard_normal((chains, dim))
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + noise[:, t]
    return x


@pytest.mark.parametrize(("rho", "tau"), [(0.6, 4.0), (0.8, 9.0), (0.0, 1.0)])
def test_the_length_rule_on_draws_of_known_autocorrelation(rho, tau):
    """``L' = L sqrt(c tau)``: longer where the draws are correlated, shorter where they
    are already independent (``tau = 1``: ``sqrt(0.4) L``)."""
    length, measured = trajectory_length(ar1(rho), 2.0)
    assert measured == pytest.approx(tau, rel=0.08)
    assert length == pytest.approx(2.0 * math.sqrt(LENGTH_FACTOR * tau), rel=0.05)


def test_the_length_rule_is_clipped_and_keeps_the_length_it_cannot_measure():
    length, tau = trajectory_length(ar1(0.995, n=4000), 1.5)
    assert tau > 100 and length == pytest.approx(1.5 * MAX_LENGTH_CHANGE)
    stuck = ar1(0.5, n=100)
    stuck[:, :, 1] = 3.0  # a coordinate no chain moved
    assert trajectory_length(stuck, 1.5)[0] == 1.5
    assert math.isnan(trajectory_length(stuck, 1.5)[1])


def gaussian(scales: np.ndarray, name: str):
    """``N(0, diag(scales^2))`` sampled under a unit metric: the metric is wrong by
    ``scales``."""
    sd = jnp.asarray(scales)
    return make_target(lambda x: -0.5 * jnp.sum((x / sd) ** 2), jnp.zeros(len(scales)),
                       name=name)


@pytest.mark.parametrize(("scales", "first"), [
    (np.full(20, 0.5), (1.6, 2.4)),               # isotropic: the first length too long
    (np.geomspace(0.3, 3.0, 20), (0.45, 0.8)),    # ill-conditioned: too short
])
def test_the_measured_length_lands_at_the_rules_fixed_point_on_a_gaussian(scales, first):
    """On a Gaussian the per-coordinate correlation of a transition of length ``L`` is
    ``E cos(T U)``, ``T = L / (s_i sqrt(d))`` (isokinetic dynamics as HMC in time
    ``L / sqrt(d)``), ``U ~ U(0.5, 1.5)`` the step's jitter; ``c mean tau = 1`` there at
    ``L* = 1.1-1.2 sqrt(sum s_i^2)`` (1.10 and 1.23 for these scales). `tune` starts at
    ``sqrt(d)`` in the metric's units, which runs ``first`` times ``sqrt(sum s_i^2)``
    (a step of one or three dual-averaged steps), and must land within 25 % of ``L*``."""
    d, trace = len(scales), math.sqrt(np.sum(scales**2))
    target = gaussian(scales, f"gauss-{scales[0]}-{scales[-1]}")
    for seed in (0, 1):
        start = np.asarray(jax.random.normal(jax.random.PRNGKey(seed + 1), (4, d))) * scales
        tuned = tune(target, start, 1.0, 0.5, jax.random.PRNGKey(seed))
        ran = tuned.first.step_size * tuned.first.num_leapfrog
        assert first[0] < ran / trace < first[1], ran / trace
        assert 0.9 < tuned.length / trace < 1.5, tuned.length / trace
        steps = tuned.adapted.num_leapfrog
        assert steps == max(MIN_STEPS, round(tuned.length / tuned.first.step_size))
        assert abs(np.mean(tuned.adapted.acceptance) - 0.9) < 0.06


def test_mams_samples_with_two_steps_where_the_rule_asks_for_one():
    """A standard Gaussian under its own metric: dual averaging's step is about the first
    trajectory's length, and the rule asks for ~1.2 steps (one, rounded). MAMS samples
    with `MIN_STEPS` = 2 (its step readapted to them), not with a single isokinetic step."""
    dim = 8
    target = make_target(lambda x: -0.5 * jnp.sum(x**2), jnp.zeros(dim), name="std-normal-8")
    start = np.asarray(jax.random.normal(jax.random.PRNGKey(1), (4, dim)))
    tuned = tune(target, start, 1.0, 0.5 * math.sqrt(dim), jax.random.PRNGKey(0))
    assert round(tuned.length / tuned.first.step_size) == 1
    assert tuned.first.num_leapfrog == 1
    assert tuned.adapted.num_leapfrog == MIN_STEPS == 2
    assert tuned.adapted is not tuned.first  # readapted: its step fits two steps
    assert abs(np.mean(tuned.adapted.acceptance) - 0.9) < 0.06


def test_a_first_length_of_fewer_than_two_steps_is_measured_at_two():
    """A 3-d standard Gaussian from a step as long as its first length (``sqrt(3)``: one
    step): the first stage runs `MIN_STEPS` steps fixed, and where the rule asks for no
    more, that is the setting sampled (no second stage)."""
    dim = 3
    target = make_target(lambda x: -0.5 * jnp.sum(x**2), jnp.zeros(dim), name="std-normal-3")
    start = np.asarray(jax.random.normal(jax.random.PRNGKey(1), (4, dim)))
    tuned = tune(target, start, 1.0, math.sqrt(dim), jax.random.PRNGKey(0))
    assert tuned.first.num_leapfrog == MIN_STEPS
    assert np.all(tuned.first.tail_steps == MIN_STEPS)  # every transition, averaging too
    assert round(tuned.length / tuned.first.step_size) <= MIN_STEPS
    assert tuned.adapted is tuned.first
