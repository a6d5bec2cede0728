"""HMC, MALA and RWM recover logistic-regression posterior means and variances against a
long reference run of an independent implementation (BlackJAX NUTS), |z| < 4 in MCSE
units (the two runs' MCSEs combined)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.kernels import HMCParams, MALAParams, RWMParams, hmc, mala, rwm
from adaptmc.run import run
from adaptmc.targets import logistic_dataset
from helpers import mcse_mean


def _reference(target, seed, num_draws, num_warmup=1000, num_chains=4):
    import blackjax

    warmup = blackjax.window_adaptation(blackjax.nuts, target.logdensity)
    (state, params), _ = warmup.run(jax.random.key(seed), target.initial_position,
                                       num_warmup)
    nuts = blackjax.nuts(target.logdensity, **params)

    def one_chain(key):
        def body(s, k):
            s, _ = nuts.step(k, s)
            return s, s.position

        _, draws = jax.lax.scan(body, state, jax.random.split(key, num_draws))
        return draws

    keys = jax.random.split(jax.random.key(seed + 1), num_chains)
    return np.asarray(jax.jit(jax.vmap(one_chain))(keys))


def _z_scores(draws, reference):
    ref_mean = reference.mean(axis=(0, 1))
    z_mean = (draws.mean(axis=(0, 1)) - ref_mean) / np.hypot(mcse_mean(draws),
                                                             mcse_mean(reference))
    sq, sq_ref = (draws - ref_mean) ** 2, (reference - ref_mean) ** 2
    z_var = (sq.mean(axis=(0, 1)) - sq_ref.mean(axis=(0, 1))) / np.hypot(mcse_mean(sq),
                                                                        mcse_mean(sq_ref))
    return np.concatenate([z_mean, z_var])


def _check(name, kernel_cases, reference_draws, seed0, reference_warmup=1000):
    target = logistic_dataset(name)
    reference = _reference(target, seed0, reference_draws, reference_warmup)
    variance = jnp.asarray(reference.var(axis=(0, 1)))
    for i, (kernel, params, budget, thin) in enumerate(kernel_cases(variance)):
        result = run(target, kernel, params, num_super_transitions=10, gradient_budget=budget,
                     num_chains=4, num_warmup=2, seed=seed0 + 10 + i, progress=False, thin=thin,
                     init_jitter=0.1)
        draws = result.idata.posterior["x"].values
        z = _z_scores(draws, reference)
        assert np.max(np.abs(z)) < 4, (kernel.name, z)


def _cases(variance):
    # HMC with unit mass; MALA and RWM preconditioned with the reference's diagonal variance
    return [
        (hmc, HMCParams(0.08, 20, jitter=0.3), 4000, 1),
        (mala, MALAParams(0.7, inverse_mass=variance), 5000, 2),
        (rwm, RWMParams(0.7, inverse_mass=variance), 10000, 5),
    ]


@pytest.mark.slow  # 20-30 s; the kernels' exactness: tests/test_kernels.py's one-step tests
def test_heart_posterior_moments():
    # sizes for the fast tier: the z-scores are in MCSE units of both runs, so fewer draws
    # widen the band by themselves (RWM's ESS is the smallest: about 1,000 per chain)
    _check("heart", _cases, reference_draws=2500, seed0=40, reference_warmup=500)


@pytest.mark.slow
def test_german_posterior_moments():
    def cases(variance):
        return [
            (hmc, HMCParams(0.05, 20, jitter=0.3), 10000, 1),
            (mala, MALAParams(0.55, inverse_mass=variance), 20000, 4),
            (rwm, RWMParams(0.5, inverse_mass=variance), 80000, 20),
        ]

    _check("german", cases, reference_draws=10000, seed0=60)
