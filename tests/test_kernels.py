"""HMC, MALA and RWM: one-step invariance from exact draws, and recovery of known moments
in MCSE units (|z| < 4)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.kernels import HMCParams, HMCState, MALAParams, RWMParams, hmc, mala, rwm
from adaptmc.run import run
from adaptmc.targets import correlated_2d, gaussian, neal_100d
from helpers import moment_z_scores

NUM_EXACT = 20_000


def _exact_draws(target, key, n=NUM_EXACT):
    chol = np.linalg.cholesky(target.info["cov"])
    z = np.asarray(jax.random.normal(key, (n, target.dim)))
    return jnp.asarray(target.info["mean"] + z @ chol.T)


def _one_step(kernel, params, target, draws, key, init=None):
    init = init or (lambda x: kernel.init(x, target))
    states = jax.vmap(init)(draws)
    keys = jax.random.split(key, draws.shape[0])
    new, info = jax.jit(jax.vmap(lambda k, s: kernel.step(k, s, target, params)))(keys, states)
    return np.asarray(new.position), info


def _iid_z(after, target):
    mean, var = target.info["mean"], np.diag(target.info["cov"])
    n = after.shape[0]
    z_mean = (after.mean(0) - mean) / (after.std(0) / math.sqrt(n))
    sq = (after - mean) ** 2
    z_var = (sq.mean(0) - var) / (sq.std(0) / math.sqrt(n))
    return np.concatenate([z_mean, z_var])


DENSE_2D = correlated_2d(2.0)
ONE_STEP_CASES = {
    "hmc-unit": (hmc, HMCParams(step_size=1.5, num_leapfrog=7)),
    "hmc-diag-jitter": (hmc, HMCParams(1.2, 5, inverse_mass=jnp.array([2.0, 2.0]), jitter=0.5)),
    "hmc-dense": (hmc, HMCParams(1.4, 3, inverse_mass=jnp.asarray(DENSE_2D.info["cov"]))),
    "mala-unit": (mala, MALAParams(step_size=1.5)),
    "mala-dense": (mala, MALAParams(0.9, inverse_mass=jnp.asarray(DENSE_2D.info["cov"]))),
    "rwm-unit": (rwm, RWMParams(step_size=0.5)),
    "rwm-dense": (rwm, RWMParams(1.5, inverse_mass=jnp.asarray(DENSE_2D.info["cov"]))),
}


@pytest.mark.parametrize("case", sorted(ONE_STEP_CASES))
def test_one_step_from_exact_draws_stays_exact(case):
    """x ~ pi exactly; after one step the draws must still have pi's mean and variance.
    Steps are large (acceptance well below 1), so a wrong M-H ratio shows."""
    kernel, params = ONE_STEP_CASES[case]
    seed = sorted(ONE_STEP_CASES).index(case)
    draws = _exact_draws(DENSE_2D, jax.random.key(100 + seed))
    after, info = _one_step(kernel, params, DENSE_2D, draws, jax.random.key(200 + seed))
    acceptance = float(info.acceptance_rate.mean())
    assert 0.2 < acceptance < 0.95, acceptance
    z = _iid_z(after, DENSE_2D)
    assert np.max(np.abs(z)) < 4, z
    # and the chain moved: a kernel that never moves would pass the moment test too
    assert np.mean(np.any(after != np.asarray(draws), axis=1)) > 0.2


def test_one_step_partial_refreshment_with_exact_momentum():
    """Generalised HMC: (x, p) drawn exactly from pi(x) N(p; 0, M); one step with partial
    refreshment and momentum negation on rejection keeps both marginals exact."""
    target = DENSE_2D
    draws = _exact_draws(target, jax.random.key(7))
    momenta = jax.random.normal(jax.random.key(8), draws.shape)
    params = HMCParams(step_size=1.8, num_leapfrog=6, refresh_angle=0.3)

    def init(x_p):
        x, p = x_p
        s = hmc.init(x, target)
        return HMCState(s.position, s.logdensity, s.logdensity_grad, p)

    states = jax.vmap(init)((draws, momenta))
    keys = jax.random.split(jax.random.key(9), draws.shape[0])
    new, info = jax.jit(jax.vmap(lambda k, s: hmc.step(k, s, target, params)))(keys, states)
    assert 0.2 < float(info.acceptance_rate.mean()) < 0.95
    z = _iid_z(np.asarray(new.position), target)
    assert np.max(np.abs(z)) < 4, z
    p = np.asarray(new.momentum)
    zp = np.concatenate([p.mean(0) / (p.std(0) / math.sqrt(len(p))),
                         (np.mean(p**2, 0) - 1) / (np.std(p**2, 0) / math.sqrt(len(p)))])
    assert np.max(np.abs(zp)) < 4, zp


def _assert_moments(result, target, limit=4.0):
    draws = result.idata.posterior["x"].values
    z_mean, z_var = moment_z_scores(draws, target.info["mean"], np.diag(target.info["cov"]))
    assert np.max(np.abs(z_mean)) < limit, z_mean
    assert np.max(np.abs(z_var)) < limit, z_var


NEAL = neal_100d()
NEAL_VAR = jnp.asarray(np.diag(NEAL.info["cov"]))
MIXING_CASES = {
    # unit mass: eps below the stability limit 2 * 0.01, jittered to break resonances
    "hmc-neal-100d": (NEAL, hmc, HMCParams(0.013, 150, jitter=0.5), 300, 30),
    # RWM and MALA preconditioned with the diagonal covariance (a well-estimated mass matrix)
    "mala-neal-100d": (NEAL, mala, MALAParams(0.75, inverse_mass=NEAL_VAR), 10_000, 10, 5),
    "rwm-neal-100d": (NEAL, rwm, RWMParams(0.24, inverse_mass=NEAL_VAR), 40_000, 10, 40),
    "hmc-2d": (DENSE_2D, hmc, HMCParams(0.1, 20, jitter=0.3), 400, 10),
    "mala-2d": (DENSE_2D, mala, MALAParams(0.12), 10_000, 10),
    "rwm-2d": (DENSE_2D, rwm, RWMParams(0.25), 20_000, 10),
    "hmc-2d-v1": (correlated_2d(1.0), hmc, HMCParams(0.05, 30, jitter=0.3), 600, 10),
}


@pytest.mark.parametrize("case", sorted(MIXING_CASES))
def test_chains_recover_gaussian_moments(case):
    target, kernel, params, budget, num_st, *thin = MIXING_CASES[case]
    seed = sorted(MIXING_CASES).index(case)
    result = run(
        target, kernel, params, num_super_transitions=num_st, gradient_budget=budget,
        num_chains=4, num_warmup=max(1, num_st // 5), seed=seed, progress=False,
        thin=thin[0] if thin else 1,
    )
    _assert_moments(result, target)


def test_isotropic_gaussian_dense_mass():
    target = gaussian(np.ones(3), np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 0.5]]))
    params = HMCParams(0.4, 5, inverse_mass=jnp.asarray(target.info["cov"]))
    result = run(target, hmc, params, num_super_transitions=10, gradient_budget=1000,
                 num_chains=4, num_warmup=2, seed=5, progress=False)
    _assert_moments(result, target)
