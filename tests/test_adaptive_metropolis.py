"""Adaptive Metropolis (Haario et al. 2001): the running moments, invariance once frozen,
and the learned covariance on the 2-d Gaussian with correlation 0.99."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.adaptation import welford_step
from adaptmc.kernels import AMParams, adaptive_metropolis
from adaptmc.kernels.adaptive_metropolis import proposal_cholesky
from adaptmc.targets import correlated_2d

TARGET = correlated_2d(1.0)


def test_welford_matches_numpy_covariance():
    x = np.random.default_rng(0).normal(size=(50, 3))
    mean, scatter, count = jnp.asarray(x[0]), jnp.zeros((3, 3)), jnp.asarray(1.0)
    for row in x[1:]:
        mean, scatter, count = welford_step(mean, scatter, count, jnp.asarray(row))
    np.testing.assert_allclose(mean, x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(scatter / (count - 1), np.cov(x.T), rtol=1e-10)


def test_proposal_uses_initial_covariance_until_t0_then_scaled_empirical():
    state = adaptive_metropolis.init(jnp.zeros(2), TARGET)
    cov = jnp.asarray(TARGET.info["cov"])
    state = state._replace(scatter=cov * 99.0, count=jnp.asarray(100.0))
    early = proposal_cholesky(state, AMParams(step_size=0.3, t0=200))
    np.testing.assert_allclose(early, 0.3 * np.eye(2))
    late = proposal_cholesky(state, AMParams(t0=50, epsilon=1e-12))
    np.testing.assert_allclose(late @ late.T, 2.38**2 / 2 * cov, rtol=1e-8)


def test_one_step_from_exact_draws_with_adaptation_frozen():
    n = 20_000
    chol = np.linalg.cholesky(TARGET.info["cov"])
    draws = jnp.asarray(np.asarray(jax.random.normal(jax.random.key(1), (n, 2))) @ chol.T)
    proposal = jnp.asarray(1.5 * chol)
    params = AMParams(adapt=0.0)

    def one(key, x):
        state = adaptive_metropolis.init(x, TARGET)._replace(chol=proposal)
        return adaptive_metropolis.step(key, state, TARGET, params)

    new, info = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(2), n), draws)
    after = np.asarray(new.position)
    assert 0.1 < float(info.acceptance_rate.mean()) < 0.9
    z_mean = after.mean(0) / (after.std(0) / math.sqrt(n))
    sq = after**2
    z_var = (sq.mean(0) - 1.0) / (sq.std(0) / math.sqrt(n))
    assert np.max(np.abs(np.concatenate([z_mean, z_var]))) < 4.0
    np.testing.assert_array_equal(np.asarray(new.chol[0]), np.asarray(proposal))


def test_learns_target_covariance_then_frozen_chain_recovers_moments():
    kernel, num_chains = adaptive_metropolis, 4
    states = jax.vmap(lambda x: kernel.init(x, TARGET))(jnp.zeros((num_chains, 2)))

    def chain(params, num_steps):
        def one(key, state):
            def body(s, k):
                s, info = kernel.step(k, s, TARGET, params)
                return s, (s.position, info.accepted)

            return jax.lax.scan(body, state, jax.random.split(key, num_steps))

        return jax.jit(jax.vmap(one))

    keys = jax.random.split(jax.random.key(3), num_chains)
    states, _ = chain(AMParams(step_size=0.5), 10_000)(keys, states)
    cov = np.asarray(states.scatter / (states.count - 1.0)[:, None, None])
    target_cov = TARGET.info["cov"]
    for c in range(num_chains):
        assert np.linalg.norm(cov[c] - target_cov) / np.linalg.norm(target_cov) < 0.2
    keys = jax.random.split(jax.random.key(4), num_chains)
    frozen, (draws, accepted) = chain(AMParams(adapt=0.0), 10_000)(keys, states)
    np.testing.assert_array_equal(np.asarray(frozen.chol), np.asarray(states.chol))
    from helpers import moment_z_scores

    z_mean, z_var = moment_z_scores(np.asarray(draws), np.zeros(2), np.ones(2))
    assert np.max(np.abs(np.concatenate([z_mean, z_var]))) < 4.0
    assert 0.15 < float(np.mean(accepted)) < 0.45  # 2.38^2/d scaling in 2-d


@pytest.mark.parametrize(
    ("params", "match"),
    [(AMParams(step_size=0.0), "step_size"), (AMParams(adapt=2.0), "adapt"),
     (AMParams(t0=0), "t0"), (AMParams(scale=-1.0), "scale")],
)
def test_bad_params_raise(params, match):
    with pytest.raises(ValueError, match=match):
        adaptive_metropolis.check_params(params)
