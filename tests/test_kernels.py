"""HMC, MALA and RWM: one-step invariance from exact draws, and recovery of known moments
in MCSE units (|z| < 4)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.kernels import (
    KERNELS,
    HMCParams,
    HMCState,
    MALAParams,
    RWMParams,
    hmc,
    mala,
    rwm,
)
from adaptmc.recipes import hmc_box
from adaptmc.run import run
from adaptmc.targets import correlated_2d, gaussian, neal_100d
from adaptmc.tuners.box import box_from_tunables
from adaptmc_lab.models.bnn_hmc import bnn_hmc
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
    """z-scores (independent draws: MCSE = sd / sqrt(n)) of the means, the variances and the
    cross moments ``E[(x_i - m_i)(x_j - m_j)] = Sigma_ij`` (i < j) against the target's; a
    kernel that kept the marginals but broke the correlation fails on the last."""
    mean, cov = target.info["mean"], target.info["cov"]
    n = after.shape[0]
    centred = after - mean
    i, j = np.triu_indices(target.dim)  # diagonal: variances; above it: cross moments
    products = centred[:, i] * centred[:, j]
    z_mean = (after.mean(0) - mean) / (after.std(0) / math.sqrt(n))
    z_moments = (products.mean(0) - cov[i, j]) / (products.std(0) / math.sqrt(n))
    return np.concatenate([z_mean, z_moments])


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
    """x ~ pi exactly; after one step the draws must still have pi's mean and covariance
    (variances and the cross moment E[x1 x2] of the correlated 2-d Gaussian). Steps are large
    (acceptance well below 1), so a wrong M-H ratio shows."""
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


DIAGONAL_CASES = {
    # a diagonal inverse mass, as the neal-100d runs use (slow): unequal scales per coordinate
    "mala-diag": (mala, MALAParams(1.2, inverse_mass=jnp.array([2.0, 0.5]))),
    "rwm-diag": (rwm, RWMParams(1.5, inverse_mass=jnp.array([2.0, 0.5]))),
}


@pytest.mark.parametrize("case", sorted(DIAGONAL_CASES))
def test_one_step_with_a_diagonal_inverse_mass_stays_exact(case):
    """As above, for MALA and RWM preconditioned by a diagonal inverse mass (acceptance 0.77
    and 0.47): the fast tier's check of the preconditioned kernels that the 100-d runs of
    `test_chains_recover_gaussian_moments` exercise in the slow tier."""
    kernel, params = DIAGONAL_CASES[case]
    seed = 50 + sorted(DIAGONAL_CASES).index(case)
    draws = _exact_draws(DENSE_2D, jax.random.key(100 + seed))
    after, info = _one_step(kernel, params, DENSE_2D, draws, jax.random.key(200 + seed))
    assert 0.2 < float(info.acceptance_rate.mean()) < 0.95
    z = _iid_z(after, DENSE_2D)
    assert np.max(np.abs(z)) < 4, z
    assert np.mean(np.any(after != np.asarray(draws), axis=1)) > 0.2


def test_one_step_partial_refreshment_with_exact_momentum():
    """Generalised HMC: (x, p) drawn exactly from pi(x) N(p; 0, M); one step with partial
    refreshment and momentum negation on rejection keeps both marginals exact (means,
    variances and the cross moment of x)."""
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
    # unit mass: eps below the stability limit 2 * 0.01, jittered to break resonances; 120
    # super-transitions (192 kept transitions a chain): with 30 (48) the MCSE of x^2 came
    # out too small, |z| of a variance > 4 on 6 of 8 seeds (9 of 10 below 4 with 120)
    "hmc-neal-100d": (NEAL, hmc, HMCParams(0.013, 150, jitter=0.5), 300, 120),
    # RWM and MALA preconditioned with the diagonal covariance (a well-estimated mass matrix)
    "mala-neal-100d": (NEAL, mala, MALAParams(0.75, inverse_mass=NEAL_VAR), 10_000, 10, 5),
    # (RWM's ESS: about 430 per chain; the z-scores are in MCSE units)
    "rwm-neal-100d": (NEAL, rwm, RWMParams(0.24, inverse_mass=NEAL_VAR), 20_000, 10, 20),
    "hmc-2d": (DENSE_2D, hmc, HMCParams(0.1, 20, jitter=0.3), 400, 10),
    "mala-2d": (DENSE_2D, mala, MALAParams(0.12), 10_000, 10),
    "rwm-2d": (DENSE_2D, rwm, RWMParams(0.25), 20_000, 10),
    "hmc-2d-v1": (correlated_2d(1.0), hmc, HMCParams(0.05, 30, jitter=0.3), 600, 10),
}


# slow: the preconditioned MALA and RWM runs on neal-100d (400,000 and 800,000 steps of a
# 100-d chain, 13 s each): the same kernels with a diagonal inverse mass are held exact in
# the fast tier by `test_one_step_with_a_diagonal_inverse_mass_stays_exact` (20,000 exact
# draws, one step), and their long runs through the run loop by the mala-2d and rwm-2d cases
SLOW_MIXING = ("mala-neal-100d", "rwm-neal-100d")


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_MIXING
                                  else c for c in sorted(MIXING_CASES)])
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


def test_correlation_breaking_kernel_fails_the_cross_moment_test():
    """The one-step test can fail on the correlation alone: exact draws with x2 shuffled
    keep both marginals but not E[x1 x2]."""
    draws = np.asarray(_exact_draws(DENSE_2D, jax.random.key(300)))
    shuffled = draws.copy()
    shuffled[:, 1] = np.random.default_rng(0).permutation(shuffled[:, 1])
    z = _iid_z(shuffled, DENSE_2D)  # means, then Sigma_11, Sigma_12, Sigma_22
    assert np.max(np.abs(z[[0, 1, 2, 4]])) < 4  # means and variances still fine
    assert abs(z[3]) > 10  # the cross moment E[x1 x2] is not


ALL_KERNELS = {**KERNELS, "bnn-hmc": bnn_hmc}
SCALAR_STEP = ("mams", "msd", "rmhmc")


@pytest.mark.parametrize("name", sorted(ALL_KERNELS))
def test_every_kernel_declares_tunables_that_are_params_fields(name):
    kernel = ALL_KERNELS[name]
    names = [t.name for t in kernel.tunables]
    if not kernel.Params._fields:  # Kawasaki's pair exchange has nothing to tune
        assert names == []
        return
    assert names and set(names) <= set(kernel.Params._fields)
    assert "adapt" not in names
    assert all(t.label for t in kernel.tunables)
    box = box_from_tunables(kernel.tunables)
    assert box.names == tuple(names)
    assert box.integer.tolist() == [t.integer for t in kernel.tunables]


def test_hmc_tunables_and_box():
    by_name = {t.name: t for t in hmc.tunables}
    assert by_name["step_size"].label == "eps" and by_name["step_size"].stat == "step_size"
    assert by_name["num_leapfrog"].integer and by_name["num_leapfrog"].stat == "n_steps"
    box = hmc_box()
    assert box.names == ("step_size", "num_leapfrog")
    np.testing.assert_allclose(box.lower, [0.01, 1])
    np.testing.assert_allclose(box.upper, [1.0, 100])
    assert box.integer.tolist() == [False, True] and not box.log.any()
    assert hmc_box(log=True).log.tolist() == [True, True]
    narrow = box_from_tunables(hmc.tunables, {"num_leapfrog": (2, 8)}, log=("step_size",))
    np.testing.assert_allclose(narrow.upper, [1.0, 8])
    assert narrow.log.tolist() == [True, False]
    with pytest.raises(ValueError, match="not tunable"):
        box_from_tunables(hmc.tunables, {"inverse_mass": (0.1, 1.0)})


@pytest.mark.parametrize("name", sorted(ALL_KERNELS))
def test_check_params_with_dim_refuses_wrong_shapes(name):
    kernel = ALL_KERNELS[name]
    params = kernel.Params()
    kernel.check_params(params, dim=3)
    if name in SCALAR_STEP:  # a position-dependent metric (or, for mams, the
        # isokinetic velocity) scales the step itself
        with pytest.raises(ValueError, match="step_size must be a scalar"):
            kernel.check_params(params._replace(step_size=np.full(3, 0.1)), dim=3)
        return
    if "step_size" not in kernel.Params._fields:  # discrete moves: nothing of the dimension
        return
    kernel.check_params(params._replace(step_size=np.full(3, 0.1)), dim=3)
    with pytest.raises(ValueError, match=r"step_size has shape \(2,\)"):
        kernel.check_params(params._replace(step_size=np.full(2, 0.1)), dim=3)
    kernel.check_params(params._replace(step_size=np.full(2, 0.1)))  # no dim: no shape check
    if "inverse_mass" in kernel.Params._fields:
        kernel.check_params(params._replace(inverse_mass=np.eye(3)), dim=3)
        with pytest.raises(ValueError, match=r"inverse_mass has shape \(2, 2\)"):
            kernel.check_params(params._replace(inverse_mass=np.eye(2)), dim=3)
