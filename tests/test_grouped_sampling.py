"""Frozen super-transitions run as one device call (issue 14): the grouping never changes
the draws, and the same programs run many vmapped chains."""

import jax
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


def test_a_fixed_setting_gets_a_buffer_for_its_own_draws_and_the_same_draws():
    """A run whose tuner changes nothing keeps budget // L draws per super-transition; its
    buffer holds a power of two above that (not one draw per gradient), and the draws equal
    those of the loop with the large buffer."""
    from adaptmc.run import SuperTransitionLoop
    from adaptmc.run.loop import init_states, super_transition_keys

    target = make_target(lambda x: -0.5 * jnp.sum((x / SCALES) ** 2), jnp.zeros(5))
    params = HMCParams(step_size=0.3, num_leapfrog=50)
    result = run(target, hmc, params, num_super_transitions=2, gradient_budget=1000,
                 num_chains=2, progress=False, seed=1)
    capacities = {key[3] for key in target.programs
                  if isinstance(key, tuple) and key[0] == "super_transition"}
    assert capacities == {32}  # 1000 // 50 = 20 draws, not 1024
    assert result.idata.posterior["x"].shape == (2, 40, 5)

    starts = jnp.stack([jnp.full(5, 0.1), jnp.full(5, -0.2)])
    for capacity in (20, 1000):
        loop = SuperTransitionLoop(target, hmc, 2, max_kept=capacity)
        keys = super_transition_keys(jax.random.key(0), 0, 2, 1)[1]
        states = init_states(target, hmc, starts)
        _, positions, _, _, _ = loop(keys, states, params, 20)
        if capacity == 20:
            small = positions
    assert np.array_equal(small, positions)


def test_the_draws_a_super_transition_returns_do_not_hold_its_buffer():
    """The loop's buffer holds one draw per gradient (a tuner may pick L = 1); a run that keeps
    a few draws per super-transition must not keep a view of that buffer per
    super-transition (the robot arm's 200 x 24,000 protocol grew to 18 GB that way)."""
    from adaptmc.run import SuperTransitionLoop
    from adaptmc.run.loop import init_states, super_transition_keys

    target = make_target(lambda x: -0.5 * jnp.sum((x / SCALES) ** 2), jnp.zeros(5))
    loop = SuperTransitionLoop(target, hmc, 2, max_kept=4096)
    keys = super_transition_keys(jax.random.key(0), 0, 2, 1)[1]
    states = init_states(target, hmc, jnp.zeros((2, 5)))
    _, positions, stats, logdensity, totals = loop(
        keys, states, HMCParams(step_size=0.3, num_leapfrog=100), 4)
    assert positions.shape == (2, 1, 4, 5)
    for array in (positions, logdensity, *stats.values(), *totals):
        assert array.base is None or array.base.nbytes == array.nbytes
