"""The low-rank-plus-diagonal metric: its functions against the dense metric of the same
matrix, nutpie's estimator from draws and gradients, one-step invariance of HMC, MALA and
RWM under it, and the warm-up's automatic choice."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.adaptation.low_rank import (
    LowRankInverseMass,
    low_rank_dense,
    low_rank_inverse_mass,
)
from adaptmc.adaptation.window import choose_metric, window_warmup
from adaptmc.kernels import HMCParams, MALAParams, RWMParams, hmc, mala, rwm
from adaptmc.kernels.metrics import euclidean_metric
from adaptmc.targets import gaussian


def _orthonormal(rng, dim, k):
    return np.linalg.qr(rng.normal(size=(dim, dim)))[0][:, :k]


def _spiked(rng, dim, values, scales=(0.3, 3.0)):
    """A `LowRankInverseMass` with random orthonormal directions and the given eigenvalues,
    on a diagonal of scales spread over ``scales``."""
    diag = np.exp(rng.uniform(*np.log(scales), size=dim))
    return LowRankInverseMass(diag, _orthonormal(rng, dim, len(values)), np.asarray(values))


def _pair_z(samples, expected):
    """z-scores (independent draws) of ``E[x_i x_j]`` against ``expected[i, j]``, i <= j."""
    i, j = np.triu_indices(samples.shape[1])
    products = samples[:, i] * samples[:, j]
    se = products.std(0) / math.sqrt(samples.shape[0])
    return (products.mean(0) - expected[i, j]) / se


def test_metric_functions_agree_with_the_dense_metric_of_the_same_matrix():
    """Kinetic energy, velocity, M^{-1} v, d^T M d / 2 equal the dense metric's; the scale S
    satisfies S S^T = M^{-1}; the momentum's covariance is M (z-scores in MCSE units)."""
    rng = np.random.default_rng(0)
    low = _spiked(rng, 7, [50.0, 0.02, 4.0])
    inverse_mass = low_rank_dense(low)
    lr, dense = euclidean_metric(low), euclidean_metric(jnp.asarray(inverse_mass))
    x = jnp.zeros(7)
    for v in rng.normal(size=(5, 7)):
        v = jnp.asarray(v)
        for name in ("kinetic_energy", "velocity", "inverse_mass_times", "mass_quadratic"):
            np.testing.assert_allclose(getattr(lr, name)(v, x), getattr(dense, name)(v, x),
                                       rtol=1e-10, atol=1e-12, err_msg=name)
    root = np.asarray(jax.vmap(lambda e: lr.scale(e, x), out_axes=1)(jnp.eye(7)))
    np.testing.assert_allclose(root @ root.T, inverse_mass, rtol=1e-10, atol=1e-12)
    keys = jax.random.split(jax.random.key(1), 40_000)
    momenta = np.asarray(jax.vmap(lambda k: lr.sample_momentum(k, x))(keys))
    z = _pair_z(momenta, np.linalg.inv(inverse_mass))
    assert np.max(np.abs(z)) < 4.5, z  # 28 moments: 4.5 keeps the family-wise level ~1e-4
    z_mean = momenta.mean(0) / (momenta.std(0) / math.sqrt(len(momenta)))
    assert np.max(np.abs(z_mean)) < 4.5, z_mean


def test_a_rank_zero_low_rank_metric_is_the_diagonal_one():
    diag = np.array([0.5, 2.0, 3.0])
    low = LowRankInverseMass(diag, np.zeros((3, 0)), np.zeros(0))
    p, x = jnp.array([1.0, -2.0, 0.5]), jnp.zeros(3)
    np.testing.assert_allclose(euclidean_metric(low).kinetic_energy(p, x),
                               euclidean_metric(jnp.asarray(diag)).kinetic_energy(p, x))


def _exact(rng, cov, n):
    draws = rng.normal(size=(n, cov.shape[0])) @ np.linalg.cholesky(cov).T
    return draws, -np.linalg.solve(cov, draws.T).T


@pytest.mark.parametrize("num_draws", [2000, 35])
def test_estimator_recovers_the_leading_directions_of_a_50d_gaussian(num_draws):
    """Exact draws and gradients of a 50-d Gaussian with three large-variance directions on
    an unequal diagonal: the estimate's three leading eigenvectors span the truth's (cosines
    of the principal angles near 1) and its eigenvalues are close; with fewer draws than
    dimensions (nutpie's subspace) the leading directions are still found."""
    rng = np.random.default_rng(3)
    truth = low_rank_dense(_spiked(rng, 50, [400.0, 150.0, 60.0], scales=(0.5, 2.0)))
    draws, grads = _exact(rng, truth, num_draws)
    estimate = low_rank_inverse_mass(draws, grads)
    assert 3 <= estimate.rank < 50
    vectors = np.asarray(estimate.vectors)
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(estimate.rank), atol=1e-10)
    values, directions = np.linalg.eigh(truth)
    est_values, est_directions = np.linalg.eigh(low_rank_dense(estimate))
    cosines = np.linalg.svd(directions[:, -3:].T @ est_directions[:, -3:], compute_uv=False)
    tolerance = (0.999, 0.05) if num_draws > 50 else (0.97, 0.35)
    assert cosines.min() > tolerance[0], cosines
    np.testing.assert_allclose(est_values[-3:], values[-3:], rtol=tolerance[1])


def test_estimator_refuses_too_few_draws_and_a_cutoff_at_one():
    with pytest.raises(ValueError, match="at least 3 draws"):
        low_rank_inverse_mass(np.zeros((2, 4)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="cutoff must exceed 1"):
        low_rank_inverse_mass(np.ones((9, 4)), np.ones((9, 4)), cutoff=1.0)


def _correlated_6d():
    rng = np.random.default_rng(5)
    cov = low_rank_dense(_spiked(rng, 6, [30.0, 0.1]))
    return gaussian(np.zeros(6), cov, name="low-rank-6d"), cov


ONE_STEP = {
    "hmc": (hmc, lambda m: HMCParams(step_size=0.9, num_leapfrog=5, inverse_mass=m,
                                     jitter=0.3)),
    "mala": (mala, lambda m: MALAParams(0.9, inverse_mass=m)),
    "rwm": (rwm, lambda m: RWMParams(1.0, inverse_mass=m)),
}


@pytest.mark.parametrize("name", sorted(ONE_STEP))
def test_one_step_under_a_low_rank_metric_keeps_exact_draws_exact(name):
    """x ~ N(0, Sigma) exactly (a 6-d Gaussian with one long and one short direction); one
    step with a low-rank metric estimated from other draws keeps the mean and every second
    moment (|z| < 4.5 over 27 moments) and moves most draws."""
    target, cov = _correlated_6d()
    rng = np.random.default_rng(6)
    metric = low_rank_inverse_mass(*_exact(rng, cov, 500))
    assert metric.rank >= 1
    kernel, make = ONE_STEP[name]
    params = make(jax.tree.map(jnp.asarray, metric))
    kernel.check_params(params, dim=6)
    draws = jnp.asarray(_exact(rng, cov, 20_000)[0])
    states = jax.vmap(lambda x: kernel.init(x, target))(draws)
    keys = jax.random.split(jax.random.key(7 + sorted(ONE_STEP).index(name)), draws.shape[0])
    new, info = jax.jit(jax.vmap(lambda k, s: kernel.step(k, s, target, params)))(keys, states)
    after = np.asarray(new.position)
    assert 0.2 < float(info.acceptance_rate.mean()) < 0.97
    z_mean = after.mean(0) / (after.std(0) / math.sqrt(len(after)))
    z = np.concatenate([z_mean, _pair_z(after, cov)])
    assert np.max(np.abs(z)) < 4.5, z
    assert np.mean(np.any(after != np.asarray(draws), axis=1)) > 0.2


def test_kernels_refuse_a_malformed_low_rank_metric():
    rng = np.random.default_rng(8)
    good = _spiked(rng, 4, [5.0])
    with pytest.raises(ValueError, match="orthonormal"):
        hmc.check_params(HMCParams(inverse_mass=good._replace(vectors=2 * good.vectors)), 4)
    with pytest.raises(ValueError, match="low-rank"):
        hmc.check_params(HMCParams(inverse_mass=good), 5)
    with pytest.raises(ValueError, match="positive"):
        hmc.check_params(HMCParams(inverse_mass=good._replace(values=np.array([-1.0]))), 4)


def _strongly_correlated(dim, seed):
    rng = np.random.default_rng(seed)
    cov = low_rank_dense(_spiked(rng, dim, [300.0, 100.0], scales=(0.5, 2.0)))
    return gaussian(np.zeros(dim), cov, name=f"spiked-{dim}d"), cov


def test_auto_metric_rules():
    """Strong correlation above dense_max_dim (or with too few draws for dense) gives
    low-rank; an independent Gaussian stays diagonal; a correlation that needs most
    directions, where dense is allowed, gives dense."""
    rng = np.random.default_rng(9)
    _, cov = _strongly_correlated(40, 10)
    draws, grads = _exact(rng, cov, 400)
    assert choose_metric(draws[None], grads[None], dense_max_dim=20) == "low-rank"
    assert choose_metric(draws[None, :60], grads[None, :60], dense_max_dim=100) == "low-rank"
    independent = rng.normal(size=(1, 400, 40)) * np.linspace(0.1, 3, 40)
    grads_ind = -independent / np.linspace(0.1, 3, 40) ** 2
    assert choose_metric(independent, grads_ind, dense_max_dim=20) == "diag"
    assert choose_metric(independent, grads_ind, dense_max_dim=100) == "diag"
    dense_cov = 0.9 * np.ones((8, 8)) + 0.1 * np.eye(8)
    dense_cov[:4, 4:] = dense_cov[4:, :4] = -0.5
    dense_cov = dense_cov @ dense_cov.T + 0.01 * np.eye(8)
    draws, grads = _exact(rng, dense_cov, 400)
    assert choose_metric(draws[None], grads[None], dense_max_dim=100) == "dense"


@pytest.mark.slow  # 12 s; choose_metric is tested fast
def test_window_warmup_auto_picks_low_rank_above_the_dense_dimension():
    """A 16-d Gaussian with two directions of variance 300 and 100 times the rest: with
    dense_max_dim=4 the warm-up runs a low-rank NUTS stage after the diagonal one and
    returns its (pooled) low-rank metric."""
    target, cov = _strongly_correlated(16, 11)
    positions = np.random.default_rng(12).normal(size=(4, 16))
    warm = window_warmup(target, positions, jax.random.key(13), num_steps=150,
                         metric="auto", dense_max_dim=4, max_extensions=0)
    assert warm.metric == "low-rank", warm.stages
    assert warm.stages[-1] == "low-rank"
    assert isinstance(warm.inverse_mass, LowRankInverseMass)
    assert 2 <= warm.inverse_mass.rank <= 4  # at most ceil(dim / 4)
    top = np.linalg.eigh(cov)[1][:, -1]
    found = np.linalg.eigh(low_rank_dense(warm.inverse_mass))[1][:, -1]
    assert abs(top @ found) > 0.9
    hmc.check_params(HMCParams(inverse_mass=warm.inverse_mass), dim=16)


def test_cli_and_recipe_take_the_low_rank_metric():
    from adaptmc import recipes
    from adaptmc.cli import build_parser, recipe_options

    args = build_parser().parse_args(["sample", "--target", "gauss-2d-v1", "--out", "x",
                                      "--metric", "low-rank"])
    assert recipe_options(args)["metric"] == "low-rank"
    plan = recipes.build("adaptive-hmc", _correlated_6d()[0], metric="low-rank")
    assert plan.options["metric"] == "low-rank"
