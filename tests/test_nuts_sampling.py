"""Sampling with NUTS under the warm-up's final metric (`adaptmc.adaptation.nuts_sampling`):
exactly ``draws`` draws, gradients counted as computed, right on a Gaussian, and NUTS's
reward against a fixed-L HMC's where fixed-L HMC is poor."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.adaptation import early
from adaptmc.adaptation.nuts_sampling import final_window, nuts_arm, nuts_reward, nuts_sample
from adaptmc.diagnostics import ess
from adaptmc.objectives import robust_ess_per_grad
from adaptmc.targets.base import make_target
from helpers import counting_gaussian

SCALES = jnp.array([0.1, 1.0, 10.0, 3.0])
CHAINS = 4


def _warmed(logdensity, dim, seed=0, num_steps=200):
    target = make_target(logdensity, jnp.zeros(dim))
    starts = np.asarray(jax.random.normal(jax.random.key(seed), (CHAINS, dim)))
    run = early.start_chains(target, starts, jax.random.key(seed + 1), num_steps=num_steps,
                             progress=False)
    while not run.done():
        run.advance()
        run.adapt()
    return target, run


def test_nuts_sampling_keeps_draws_and_counts_every_gradient_computed():
    logdensity, count = counting_gaussian(SCALES)
    _, run = _warmed(logdensity, 4)
    before = count[0]
    out = nuts_sample(nuts_arm(run), run.state, jax.random.key(7), draws=123)
    assert out.positions.shape == (CHAINS, 123, 4)
    assert out.logdensity.shape == out.steps.shape == out.divergent.shape == (CHAINS, 123)
    # 13 chunks of 10 ran: the 7 dropped transitions' gradients are counted too
    assert out.num_grads == count[0] - before
    assert out.num_grads > int(out.steps.sum())


def test_nuts_sampling_is_right_on_a_gaussian():
    """MCSE z-scores of the mean and the second moment of every coordinate, from the
    bulk-ESS (fixed seeds; |z| < 4 fails about once in 16k per statistic)."""
    _, run = _warmed(lambda x: -0.5 * jnp.sum((x / SCALES) ** 2), 4, seed=3)
    out = nuts_sample(nuts_arm(run), run.state, jax.random.key(11), draws=1000)
    assert not out.divergent.any()
    z = out.positions / np.asarray(SCALES)
    for statistic, truth in ((z, 0.0), (z**2, 1.0)):
        values = np.asarray(statistic)
        n_eff = ess(values)
        mcse = values.reshape(-1, 4).std(axis=0) / np.sqrt(n_eff)
        scores = (values.mean(axis=(0, 1)) - truth) / mcse
        assert np.all(np.abs(scores) < 4), scores
    # the steps are the warm-up's final ones, frozen
    assert np.allclose(out.step_sizes, early.final_steps(run))


@pytest.mark.xfail(strict=True, reason="known, open: the final window's reward is 0.28-0.55x "
                   "the sampling phase's on seeds 5-12 (docs/notes/cold-compile.md), so "
                   "choose_sampler under-credits NUTS against tuned HMC (mams='off')")
def test_nuts_reward_from_the_final_window_is_near_the_sampling_phase():
    """The reward measured on the warm-up's final window (step size still adapting)
    should rank as the sampling phase's own robust ESS per gradient, within a factor 2, on
    the default's 500-step warm-up (final window 80 transitions, 70 after its first chunk).
    It does not: 0.52-0.72x on seeds 6-8 and 10 when written, then on seeds 5-12 0.17-0.55x
    at cf56eb9 (two nan: one divergence in the window) and 0.28-0.52x since the host's
    random streams (docs/notes/cold-compile.md). Seed 6, the seed this test was written
    on (0.28x now); strict: a fix makes it pass, and the marker goes."""
    _, run = _warmed(lambda x: -0.5 * jnp.sum((x / SCALES) ** 2), 4, seed=6, num_steps=500)
    window = nuts_reward(robust_ess_per_grad, *final_window(run))
    out = nuts_sample(nuts_arm(run), run.state, jax.random.key(2), draws=1000)
    sampled = nuts_reward(robust_ess_per_grad, out.positions, out.divergent, out.num_grads)
    assert 0.5 < window / sampled < 2.0, (window, sampled)
