"""The warm-up's final step (`adaptmc.adaptation.final_step`): the step where the modelled
acceptance ``2 Phi(-c eps^2)`` meets the target, fitted to explored steps; and on a Gaussian
the realised acceptance at the fitted step is nearer the target than at dual averaging's
averaged step."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ndtr

from adaptmc.adaptation import early
from adaptmc.adaptation.dual_averaging import da_final_step_size_on_host
from adaptmc.adaptation.final_step import final_step_sizes, modelled_step
from adaptmc.adaptation.nuts_sampling import nuts_arm, nuts_sample
from adaptmc.targets.base import make_target


def test_the_modelled_step_is_recovered_from_exact_acceptances():
    c = 0.3
    steps = np.exp(np.linspace(np.log(0.3), np.log(3.0), 50))
    acceptance = 2.0 * ndtr(-c * steps**2)
    right = np.sqrt(0.2533471031357997 / c)  # 2 Phi(-c eps^2) = 0.8
    assert abs(modelled_step(steps, acceptance, 0.8) - right) < 1e-6


def test_no_fit_without_enough_transitions_or_any_rejection():
    assert modelled_step(np.ones(5), np.full(5, 0.5), 0.8) is None
    assert modelled_step(np.ones(50), np.ones(50), 0.8) is None
    averaged = np.array([0.5, 0.6])
    assert np.array_equal(final_step_sizes(averaged, np.ones((2, 5)), np.ones((2, 5)), 0.8),
                          averaged)


def test_the_step_stays_inside_the_steps_run():
    steps = np.full(40, 0.1)
    steps[::2] = 0.2
    acceptance = np.full(40, 0.999)  # the model's step for 0.8 is far above 0.2
    assert modelled_step(steps, acceptance, 0.8) == 0.2


def test_chains_keep_their_spread_and_share_one_factor():
    averaged = np.array([0.8, 1.0, 1.2])
    steps = np.exp(np.linspace(-1.0, 1.0, 60)).reshape(3, 20)
    acceptance = 2.0 * ndtr(-0.5 * steps**2)
    out = final_step_sizes(averaged, steps, acceptance, 0.8)
    assert np.allclose(out / averaged, out[1] / averaged[1])
    assert abs(out[1] - modelled_step(steps, acceptance, 0.8)) < 1e-12


def test_on_a_gaussian_the_fitted_step_accepts_nearer_the_target():
    """NUTS at the warm-up's final steps realises an acceptance within 0.05 of the 0.8
    target on a 20-dimensional Gaussian; dual averaging's averaged steps of the same
    warm-up are smaller than the fitted ones."""
    dim = 20
    scales = jnp.linspace(0.5, 2.0, dim)
    target = make_target(lambda x: -0.5 * jnp.sum((x / scales) ** 2), jnp.zeros(dim))
    starts = np.asarray(jax.random.normal(jax.random.key(3), (4, dim)))
    run = early.start_chains(target, starts, jax.random.key(4), num_steps=200, progress=False)
    while not run.done():
        run.advance()
        run.adapt()
    fitted = early.final_steps(run)
    averaged = np.asarray(da_final_step_size_on_host(run.da))
    assert np.median(fitted) > np.median(averaged)
    draws = nuts_sample(nuts_arm(run), run.state, jax.random.key(5), 400)
    assert draws.acceptance.shape == (4, 400)
    assert abs(float(np.mean(draws.acceptance)) - 0.8) < 0.05
