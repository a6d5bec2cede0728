"""The compact NUTS transition (`adaptmc.adaptation.compact_nuts`): invariance, the metric's
algebra, the integrator's reversibility, tree lengths against BlackJAX's NUTS, divergences
and the depth limit. Fixed seeds; every statistical check can fail."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.adaptation import compact_nuts as cn
from adaptmc.adaptation import counter_random
from adaptmc.adaptation.compact_nuts import NutsState, nuts_step

jax.config.update("jax_enable_x64", True)


def gaussian(dim: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(dim, dim))
    cov = a @ a.T / dim + 0.3 * np.eye(dim)
    precision = np.linalg.inv(cov)
    return cov, jax.value_and_grad(lambda x: -0.5 * x @ precision @ x)


def low_rank_metric(cov: np.ndarray, rank: int, padded: int):
    """The warm-up's form fitted to ``cov``: ``s`` its scales, ``rank`` leading directions of
    its correlation, padded with unused ones (eigenvalue 1)."""
    s = np.sqrt(np.diag(cov))
    values, vectors = np.linalg.eigh(cov / np.outer(s, s))
    u, lam = np.zeros((len(s), padded)), np.ones(padded)
    u[:, :rank], lam[:rank] = vectors[:, -rank:], values[-rank:]
    return jnp.asarray(s), jnp.asarray(u), jnp.asarray(lam)


def transitions(logdensity_and_grad, metric, positions, step_size, count, seed):
    """``count`` transitions of each row of ``positions``: final positions and the infos."""

    def chain(key, x):
        lp, g = logdensity_and_grad(x)

        def body(state, k):
            state, info = nuts_step(k, state, logdensity_and_grad, step_size, metric)
            return state, info

        state, infos = jax.lax.scan(body, NutsState(x, lp, g), jax.random.split(key, count))
        return state.position, infos

    keys = jax.random.split(jax.random.key(seed), positions.shape[0])
    x, infos = jax.jit(jax.vmap(chain))(keys, jnp.asarray(positions))
    return np.asarray(x), jax.tree.map(np.asarray, infos)


def test_the_metric_velocity_and_momentum_draws_agree():
    """``velocity`` is ``M^-1`` and `momentum_from_normal` draws ``N(0, M)``: with both as
    matrices, ``B B^T M^-1 = I``."""
    cov, _ = gaussian(6)
    metric = low_rank_metric(cov, rank=3, padded=5)
    eye = jnp.eye(6)
    inverse_mass = jax.vmap(lambda e: cn.velocity(metric, e))(eye).T
    root = jax.vmap(lambda e: cn.momentum_from_normal(e, metric))(eye).T
    np.testing.assert_allclose(root @ root.T @ inverse_mass, np.eye(6), atol=1e-10)
    np.testing.assert_allclose(inverse_mass, inverse_mass.T, atol=1e-12)


def test_the_leapfrog_step_is_reversible():
    """Forward ``n`` steps, then ``n`` steps backward, returns to the start (to rounding),
    the carried velocity included."""
    cov, value_and_grad = gaussian(5)
    metric = low_rank_metric(cov, rank=2, padded=5)
    x = jnp.arange(5.0) / 5
    p = jnp.linspace(-1.0, 1.0, 5)
    lp, g = value_and_grad(x)
    leaf = start = cn._leaf(x, p, g, cn.velocity(metric, g), cn.velocity(metric, p), lp)
    for step in (0.3,) * 20 + (-0.3,) * 20:
        leaf = cn._leapfrog(value_and_grad, metric, leaf, step, 5)
    np.testing.assert_allclose(leaf, start, atol=1e-10)
    # the carried velocity stays M^-1 p
    np.testing.assert_allclose(leaf[20:25], cn.velocity(metric, leaf[5:10]), atol=1e-12)


def test_transitions_from_exact_draws_leave_a_correlated_gaussian_invariant():
    """From exact draws of a correlated Gaussian, under a low-rank metric that fits it only
    in part, three transitions per chain keep the mean and second moments: z-scores of
    every mean and every second moment under 4 (8000 chains)."""
    cov, value_and_grad = gaussian(5)
    metric = low_rank_metric(cov, rank=2, padded=3)
    rng = np.random.default_rng(1)
    n = 8000
    start = rng.normal(size=(n, 5)) @ np.linalg.cholesky(cov).T
    x, infos = transitions(value_and_grad, metric, start, 0.6, 3, seed=2)
    z_mean = x.mean(0) / np.sqrt(np.diag(cov) / n)
    second = x[:, :, None] * x[:, None, :]
    z_second = (second.mean(0) - cov) / (second.std(0) / np.sqrt(n))
    assert np.max(np.abs(z_mean)) < 4, z_mean
    assert np.max(np.abs(z_second)) < 4, z_second
    assert not np.any(infos.is_divergent)
    assert np.all((infos.acceptance_rate > 0) & (infos.acceptance_rate <= 1 + 1e-12))


def test_tree_lengths_and_acceptance_match_blackjax_on_a_standard_normal():
    """The same algorithm as BlackJAX's multinomial NUTS: on a standard normal the mean
    leapfrog steps per transition and the mean acceptance statistic agree within 4
    standard errors (without the extra checks across merges, the steps do not)."""
    import blackjax
    from blackjax.mcmc.metrics import LowRankInverseMassMatrix

    dim, step, n = 4, 0.4, 20000
    metric = (jnp.ones(dim), jnp.zeros((dim, 1)), jnp.ones(1))
    value_and_grad = jax.value_and_grad(lambda x: -0.5 * x @ x)
    start = jnp.asarray(np.random.default_rng(3).normal(size=(n, dim)))
    keys = jax.random.split(jax.random.key(4), n)
    kernel = blackjax.nuts.build_kernel()

    def ours(key, x):
        lp, g = value_and_grad(x)
        return nuts_step(key, NutsState(x, lp, g), value_and_grad, step, metric)[1]

    def theirs(key, x):
        state = blackjax.nuts.init(x, lambda y: -0.5 * y @ y)
        return kernel(key, state, lambda y: -0.5 * y @ y, step,
                      LowRankInverseMassMatrix(*metric))[1]

    a, b = (jax.jit(jax.vmap(f))(keys, start) for f in (ours, theirs))
    for field in ("num_integration_steps", "acceptance_rate"):
        x, y = np.asarray(getattr(a, field), float), np.asarray(getattr(b, field), float)
        se = np.sqrt(x.var() / n + y.var() / n)
        assert abs(x.mean() - y.mean()) < 4 * se, (field, x.mean(), y.mean(), se)


def test_a_funnel_neck_diverges_and_the_transition_stops():
    """Neal's funnel in its neck (``v = -6``) with a step made for its mouth: most
    transitions diverge, are flagged, and stop early; a standard normal at a small step
    never diverges."""

    def funnel(z):
        v, x = z[0], z[1:]
        return -v**2 / 18 - 0.5 * jnp.sum(x**2) * jnp.exp(-v) - 0.5 * x.size * v

    value_and_grad = jax.value_and_grad(funnel)
    metric = (jnp.ones(5), jnp.zeros((5, 1)), jnp.ones(1))
    start = np.zeros((200, 5))
    start[:, 0] = -6.0
    start[:, 1:] = np.random.default_rng(5).normal(size=(200, 4)) * np.exp(-3.0)
    _, infos = transitions(value_and_grad, metric, start, 1.0, 1, seed=6)
    assert np.mean(infos.is_divergent) > 0.9
    assert np.all(infos.num_integration_steps[infos.is_divergent] < 64)
    normal = jax.value_and_grad(lambda x: -0.5 * x @ x)
    _, infos = transitions(normal, metric, np.zeros((200, 5)), 0.05, 1, seed=7)
    assert not np.any(infos.is_divergent)


def test_the_tree_stops_at_the_depth_limit():
    """A step far too small to turn within ``2^MAX_DEPTH - 1`` steps takes exactly that
    many, without a divergence."""
    normal = jax.value_and_grad(lambda x: -0.5 * x @ x)
    metric = (jnp.ones(3), jnp.zeros((3, 1)), jnp.ones(1))
    _, infos = transitions(normal, metric, np.ones((4, 3)), 1e-4, 1, seed=8)
    assert np.all(infos.num_integration_steps == 2**cn.MAX_DEPTH - 1)
    assert not np.any(infos.is_divergent)
    np.testing.assert_allclose(infos.acceptance_rate, 1.0, atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_counter_based_uniforms_are_uniform(seed):
    """The per-leaf uniforms: mean, variance and the lag-1 correlation over 2^16 counters
    within 4.5 standard errors of a uniform's."""
    words = jax.random.bits(jax.random.key(seed), (3,), jnp.uint32)
    u = np.asarray(counter_random.uniform(words, jnp.arange(2**16), jnp.float64))
    n = u.size
    assert np.all((u > 0) & (u < 1))
    assert abs(u.mean() - 0.5) < 4.5 * np.sqrt(1 / 12 / n)
    assert abs(u.var() - 1 / 12) < 4.5 * np.sqrt(1 / 180 / n)
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 4.5 / np.sqrt(n)
