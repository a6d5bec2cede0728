"""MAMS's one program (`adaptmc.kernels.mams_chunk`): the padded metric is the inverse mass
it stands for; one transition from exact draws stays exact under each metric kind, with the
program's counter-hash random numbers; thinning keeps every ``k``-th transition (the same
bits as keeping all), and every transition's gradients are counted."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.kernels import LowRankInverseMass
from adaptmc.kernels.mams import MAMSState
from adaptmc.kernels.mams_chunk import as_padded, da_fixed, run_chunk
from adaptmc.kernels.metrics import low_rank_dense
from test_mams import COV_4D, GAUSS_4D, MEAN_4D, NUM_EXACT, _low_rank

# the 4-d Gaussian and rank-1 inverse mass of the kernel's own tests
COV, MEAN, TARGET = COV_4D, MEAN_4D, GAUSS_4D

METRICS = {"unit": 1.0, "diag": np.diag(COV), "dense": COV, "low-rank": _low_rank(COV)}
STEPS = {"unit": 2.0, "diag": 2.0, "dense": 3.0, "low-rank": 2.0}  # the dense metric is
#                                                                     the covariance: larger


def _dense(inverse_mass):
    if isinstance(inverse_mass, LowRankInverseMass):
        return low_rank_dense(inverse_mass)
    return np.asarray(inverse_mass) if np.ndim(inverse_mass) == 2 else \
        np.diag(np.broadcast_to(inverse_mass, (4,)))


@pytest.mark.parametrize("kind", sorted(METRICS))
def test_the_padded_metric_is_the_inverse_mass(kind):
    padded = as_padded(METRICS[kind], 4, 4, np.float64)
    np.testing.assert_allclose(low_rank_dense(LowRankInverseMass(*padded)),
                               _dense(METRICS[kind]), atol=1e-12)


def _exact_states(seed: int, n: int = NUM_EXACT) -> MAMSState:
    z = np.asarray(jax.random.normal(jax.random.key(seed), (n, 4)))
    x = MEAN + z @ np.linalg.cholesky(COV).T
    lp, grad = jax.jit(jax.vmap(TARGET.logdensity_and_grad))(x)
    return MAMSState(x, np.asarray(lp), np.asarray(grad))


def _z_scores(after):
    """z-scores (independent draws) of the means, variances and cross moments."""
    n = after.shape[0]
    i, j = np.triu_indices(4)
    products = (after - MEAN)[:, i] * (after - MEAN)[:, j]
    z_mean = (after.mean(0) - MEAN) / (after.std(0) / math.sqrt(n))
    z_moments = (products.mean(0) - COV[i, j]) / (products.std(0) / math.sqrt(n))
    return np.concatenate([z_mean, z_moments])


@pytest.mark.parametrize("kind", sorted(METRICS))
def test_one_transition_from_exact_draws_stays_exact(kind):
    """x ~ pi exactly (20000 chains); after one transition of the program (large jittered
    steps: acceptance well below 1) the draws keep pi's moments; each chain spent its
    steps' gradients."""
    seed = sorted(METRICS).index(kind)
    states = _exact_states(300 + seed)
    metric = as_padded(METRICS[kind], 4, 4, np.float64)
    out = run_chunk(TARGET, jax.random.key(400 + seed), states, metric, da_fixed(STEPS[kind]),
                    count=1, fixed_steps=3, jitter=0.5)
    acceptance = float(out.acceptance.mean())
    assert 0.3 < acceptance < 0.9, acceptance
    z = _z_scores(np.asarray(out.states.position))
    assert np.max(np.abs(z)) < 4, z
    assert np.mean(np.any(out.states.position != states.position, axis=1)) > 0.3
    assert np.all(out.grads == 3) and out.steps.tolist() == [3]


def test_thinning_keeps_every_kth_transition_and_counts_every_gradient():
    states = _exact_states(9, 4)
    metric = as_padded(1.0, 4, 1, np.float64)
    key = jax.random.key(5)
    every = run_chunk(TARGET, key, states, metric, da_fixed(0.8), count=9, fixed_steps=2,
                      fold=3)
    thinned = run_chunk(TARGET, key, states, metric, da_fixed(0.8), count=9, fixed_steps=2,
                        thin=3, fold=3)
    np.testing.assert_array_equal(thinned.positions, every.positions[:, 2::3])
    np.testing.assert_array_equal(thinned.states.position, every.states.position)
    assert np.all(thinned.grads == 18) and np.all(every.grads == 18)
    np.testing.assert_allclose(thinned.acceptance_sum, every.acceptance.sum(axis=1))
    other = run_chunk(TARGET, key, states, metric, da_fixed(0.8), count=9, fixed_steps=2,
                      fold=4)
    assert not np.array_equal(other.positions, every.positions)  # another block's numbers


def test_the_counter_hash_normals_are_standard():
    """The velocities' normals (Box-Muller over the hash's words) of many transitions:
    mean 0, variance 1, no correlation between consecutive transitions."""
    from adaptmc.adaptation.counter_random import normals, words

    seed = jnp.asarray([0x12345678, 0x9ABCDEF0], jnp.uint32)
    z = np.asarray(jax.jit(jax.vmap(lambda t: normals(words(seed, t, 8)[:6], jnp.float64)))(
        jnp.arange(20_000, dtype=jnp.int32)))
    n = z.size
    assert abs(z.mean()) < 4 / math.sqrt(n) and abs(z.var() - 1) < 4 * math.sqrt(2 / n)
    lag = np.mean(z[1:] * z[:-1])
    assert abs(lag) < 4 / math.sqrt(z[1:].size)
