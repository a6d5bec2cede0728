"""Per-step dual averaging of step_size (Hoffman & Gelman 2014) wrapped around MALA and HMC:
the acceptance reaches its target during burn-in, the frozen kernel uses the averaged step
size and leaves the target invariant."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.kernels import HMCParams, Kernel, hmc, mala, rwm, with_step_size_adaptation
from adaptmc.kernels.step_size_adaptation import current_step_size
from adaptmc.run import run
from adaptmc.targets import gaussian
from adaptmc.tuners.warmup import switch_after_warmup
from helpers import moment_z_scores

TARGET = gaussian(np.zeros(10), np.linspace(0.5, 2.0, 10) ** 2, name="diag-10d")


def _scan(kernel, params, states, num_steps, seed):
    def one(key, state):
        def body(s, k):
            s, info = kernel.step(k, s, TARGET, params)
            return s, info.acceptance_rate

        return jax.lax.scan(body, state, jax.random.split(key, num_steps))

    keys = jax.random.split(jax.random.key(seed), states.position.shape[0])
    return jax.jit(jax.vmap(one))(keys, states)


def test_mala_reaches_target_acceptance_then_freezes_on_averaged_step_size():
    kernel = with_step_size_adaptation(mala, target_acceptance=0.574)
    assert kernel.Params._fields[-2:] == ("adapt", "target_acceptance")
    states = jax.vmap(lambda x: kernel.init(x, TARGET))(jnp.zeros((2, 10)))
    states, rates = _scan(kernel, kernel.Params(step_size=0.01), states, 3000, seed=1)
    assert abs(float(rates[:, 1500:].mean()) - 0.574) < 0.05
    frozen_params = kernel.Params(step_size=0.01, adapt=0.0)
    expected = np.exp(np.asarray(states.dual_averaging.log_step_size_avg))
    used = jax.vmap(lambda s: current_step_size(s, frozen_params))(states)
    np.testing.assert_allclose(used, expected)
    frozen, rates = _scan(kernel, frozen_params, states, 500, seed=2)
    np.testing.assert_array_equal(np.asarray(frozen.dual_averaging.log_step_size_avg),
                                  np.asarray(states.dual_averaging.log_step_size_avg))
    assert abs(float(rates.mean()) - 0.574) < 0.1


def test_hmc_with_dual_averaging_through_run_loop_recovers_moments():
    """On the 10-d diagonal Gaussian (acceptance decreases monotonically in eps there)."""
    target = TARGET
    kernel = with_step_size_adaptation(hmc, target_acceptance=0.65)
    params = kernel.Params(step_size=0.05, num_leapfrog=10)
    result = run(target, kernel, params, num_super_transitions=12, gradient_budget=2000,
                 num_chains=4, tuner=switch_after_warmup(), num_warmup=4, adapt_until=4,
                 seed=3, progress=False)
    draws = np.asarray(result.idata.posterior["x"].values)
    z_mean, z_var = moment_z_scores(draws, np.zeros(10), np.diag(target.info["cov"]))
    assert np.max(np.abs(np.concatenate([z_mean, z_var]))) < 4.0
    assert abs(float(result.idata.sample_stats["acceptance_rate"].mean()) - 0.65) < 0.1
    assert kernel.cost(params) == 10


def test_wrapping_needs_a_step_size_and_checks_params():
    no_step = Kernel("x", rwm.init, rwm.step, rwm.cost, rwm.check_params,
                     type("P", (), {"_fields": ("scale",)}))
    with pytest.raises(ValueError, match="step_size"):
        with_step_size_adaptation(no_step)
    kernel = with_step_size_adaptation(hmc)
    with pytest.raises(ValueError, match="adapt"):
        kernel.check_params(kernel.Params(adapt=0.3))
    with pytest.raises(ValueError, match="target_acceptance"):
        kernel.check_params(kernel.Params(target_acceptance=1.0))
    with pytest.raises(ValueError, match="num_leapfrog"):
        kernel.check_params(kernel.Params(*HMCParams(num_leapfrog=0)))
