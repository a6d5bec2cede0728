"""The one NUTS driver (`adaptmc_lab.baselines.nuts`): right moments on a known Gaussian, exact
gradient counts, the key scheme, and a gradient budget that stops chains apart."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from adaptmc.targets import gaussian
from adaptmc_lab.baselines import compile_nuts, nuts

jax.config.update("jax_enable_x64", True)
TARGET = gaussian(np.array([1.0, -2.0]), np.array([1.0, 0.25]), name="g2")


def test_moments_and_counts_on_a_known_gaussian():
    result = nuts(TARGET, 3, num_chains=4, num_warmup=200, num_draws=500)
    assert result.positions.shape == (4, 500, 2)
    assert result.num_grads.shape == result.divergent.shape == (4, 500)
    from adaptmc import diagnostics

    draws = result.positions
    ess = diagnostics.ess(draws)
    z = (draws.mean(axis=(0, 1)) - [1.0, -2.0]) / (draws.std(axis=(0, 1)) / np.sqrt(ess))
    assert np.all(np.abs(z) < 4), z
    np.testing.assert_allclose(draws.std(axis=(0, 1)), [1.0, 0.5], rtol=0.1)
    # one gradient per leapfrog step, at least one per transition, plus one per chain start
    assert np.all(result.num_grads >= 1) and np.all(result.warmup_grads > 200)
    assert result.total_grads == result.warmup_grads.sum() + result.num_grads.sum()
    assert np.all(result.num_draws == 500) and result.wall_s > 0 and result.compile_s > 0
    assert not result.divergent.any() and 0.5 < result.acceptance_rate.mean() < 1.0


@pytest.mark.slow  # 15 s; the baseline's draws and counts: the moments and budget tests below
def test_chain_c_uses_split_key_c_and_starts_where_told():
    """A one-chain program run with ``split(key, 2)[1]`` reproduces chain 1 of the two-chain
    run (the same random numbers; the floating point of a batch of one and of two differs in
    the last digits): chains are independent of how many run beside them."""
    key = jax.random.key(5)
    both = nuts(TARGET, key, num_chains=2, num_warmup=50, num_draws=40)
    program = compile_nuts(TARGET, num_chains=1, num_warmup=50, num_draws=40)
    one = program.run(jax.random.split(key, 2)[1:], np.asarray(TARGET.initial_position)[None])
    np.testing.assert_allclose(one.positions[0], both.positions[1], rtol=1e-11, atol=1e-12)
    np.testing.assert_array_equal(one.num_grads[0], both.num_grads[1])
    assert int(one.warmup_grads[0]) == int(both.warmup_grads[1])


# 1500 slow: the same stopping rule as 600, later in the sampling (4 s of compiling)
@pytest.mark.parametrize("budget", [600, pytest.param(1500, marks=pytest.mark.slow)])
def test_gradient_budget_stops_each_chain_once_spent(budget):
    result = nuts(TARGET, 1, num_chains=3, num_warmup=50, num_draws=2000,
                  gradient_budget=budget)
    for c in range(3):
        made = int(result.num_draws[c])
        spent = int(result.warmup_grads[c]) + int(result.num_grads[c, :made].sum())
        # stops at the first draw that reaches the budget: before it, the budget was not met
        assert spent >= budget > spent - int(result.num_grads[c, made - 1])
        assert np.all(result.num_grads[c, made:] == 0)
        np.testing.assert_array_equal(result.positions[c, made:],
                                      np.broadcast_to(result.positions[c, made - 1],
                                                      result.positions[c, made:].shape))
