"""Frozen super-transitions run as one device call (issue 14): the grouping never changes
the draws, and the same programs run many vmapped chains."""

import jax.numpy as jnp
import numpy as np

import adaptmc
from adaptmc import tuners
from adaptmc.kernels import HMCParams, hmc
from adaptmc.run import run
from adaptmc.targets import make_target

SCALES = jnp.arange(1.0, 6.0)


def _draws(checkpoint_every: int) -> np.ndarray:
    target = make_target(lambda x: -0.5 * jnp.sum((x / SCALES) ** 2), jnp.zeros(5))
    box = tuners.make_box({"step_size": (0.05, 0.5), "num_leapfrog": (2, 12)},
                          integer=("num_leapfrog",), log=("step_size",))
    result = run(target, hmc, HMCParams(step_size=0.2, num_leapfrog=5),
                 num_super_transitions=14, gradient_budget=300, num_chains=3,
                 tuner=tuners.gp_ucb(box), adapt_until=4, checkpoint_every=checkpoint_every,
                 progress=False, seed=3)
    return np.asarray(result.idata.posterior["x"].values)


def test_grouping_frozen_super_transitions_does_not_change_the_draws():
    # checkpoint_every=1: one super-transition per device call; 10: the ten frozen ones in one
    one_by_one, grouped = _draws(1), _draws(10)
    assert one_by_one.shape == grouped.shape
    assert np.array_equal(one_by_one, grouped)


def test_many_vmapped_chains_give_right_moments():
    """128 chains through the default recipe (warm-up, tuning and grouped sampling): each
    coordinate's mean and second moment within 4 MCSE of the truth."""
    chains = 128
    idata = adaptmc.sample(
        (lambda x: -0.5 * jnp.sum((x / SCALES[:3]) ** 2), jnp.zeros(3)), chains=chains,
        seed=0, progress=False, warmup_steps=150, tuning=3, draws=40)
    draws = np.asarray(idata.posterior["x"].values)
    assert draws.shape[0] == chains
    for i, sd in enumerate(np.asarray(SCALES[:3])):
        for values, truth, spread in ((draws[..., i], 0.0, sd),
                                      (draws[..., i] ** 2, sd**2, np.sqrt(2.0) * sd**2)):
            ess = adaptmc.diagnostics.robust_ess(values[..., None])[0]
            z = (values.mean() - truth) / (spread / np.sqrt(ess))
            assert abs(z) < 4.0, (i, z, ess)
