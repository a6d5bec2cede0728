"""The NUTS window warm-up: Hoffman & Gelman's first step, one compiled program for a
diagonal and a dense stage, and the metric it measures on known Gaussians."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.adaptation.window import reasonable_step_size, window_warmup
from adaptmc.targets import gaussian


def _reference_step(target, key, position, step_size=1.0, max_iter=100):
    """Hoffman & Gelman (2014, Alg. 4) written as a plain host loop: the step and the number
    of gradients it took (the start, then one per trial)."""
    momentum = np.asarray(jax.random.normal(key, position.shape, position.dtype))
    logdensity, grad = (np.asarray(v) for v in target.logdensity_and_grad(position))
    grads = 1

    def log_accept(eps):
        nonlocal grads
        grads += 1
        p = momentum + 0.5 * eps * grad
        new_logdensity, new_grad = target.logdensity_and_grad(position + eps * p)
        p = p + 0.5 * eps * np.asarray(new_grad)
        delta = float(new_logdensity) - 0.5 * p @ p - float(logdensity) + \
            0.5 * momentum @ momentum
        return delta if math.isfinite(delta) else -math.inf

    eps = step_size
    first = log_accept(eps) > math.log(0.5)
    for _ in range(max_iter):
        trial = eps * (2.0 if first else 0.5)
        eps = trial
        if (log_accept(trial) > math.log(0.5)) != first:
            break
    return eps, grads


@pytest.mark.parametrize("scale", [1e-3, 0.3, 1.0, 40.0])
def test_first_step_is_hoffman_and_gelmans_with_its_gradients_counted(scale):
    target = gaussian(np.zeros(3), np.diag([scale**2, (2 * scale) ** 2, (scale / 3) ** 2]))
    key = jax.random.key(7)
    position = jnp.full(3, 2.0 * scale)
    step, grads = jax.jit(lambda k, x: reasonable_step_size(k, target, x))(key, position)
    expected_step, expected_grads = _reference_step(target, key, position)
    assert float(step) == pytest.approx(expected_step, rel=1e-12)
    assert int(grads) == expected_grads
    # the heuristic lands within a factor of a few of the smallest scale
    assert scale / 20 < float(step) < 4 * scale


def _correlated(dim, rho, scales):
    corr = np.full((dim, dim), rho) + (1 - rho) * np.eye(dim)
    return gaussian(np.zeros(dim), corr * np.outer(scales, scales), name=f"corr{dim}")


def _window_programs(target):
    return [k for k in target.programs if isinstance(k, tuple) and k[0] == "window_warmup"]


def test_a_diagonal_then_dense_warmup_compiles_one_program_and_finds_the_covariance():
    scales = np.array([0.01, 1.0, 100.0, 3.0])
    target = _correlated(4, 0.99, scales)
    starts = np.asarray(target.initial_position)[None] + np.linspace(-1, 1, 4)[:, None] * scales
    warm = window_warmup(target, starts, jax.random.key(0), num_steps=300)
    assert warm.stages[0] == "diag" and warm.stages[-1] == "dense" and warm.metric == "dense"
    assert len(_window_programs(target)) == 1
    cov = target.info["cov"]
    # 2 x 150 pooled draws per chain x 4 chains, correlated: the estimate within 25 % on the
    # variances and the correlation within 0.02 (a wrong metric is off by orders of magnitude)
    est = np.asarray(warm.inverse_mass)
    np.testing.assert_allclose(np.diag(est), np.diag(cov), rtol=0.25)
    est_corr = est / np.sqrt(np.outer(np.diag(est), np.diag(est)))
    off = ~np.eye(4, dtype=bool)
    assert np.max(np.abs(est_corr[off] - 0.99)) < 0.02


@pytest.mark.slow  # the choice rule itself: tests/test_low_rank.py::test_auto_metric_rules
def test_an_independent_target_stays_diagonal_with_nutpies_estimate():
    scales = np.array([1e-3, 0.5, 1.0, 20.0, 1e3])
    target = gaussian(np.zeros(5), np.diag(scales**2), name="indep5")
    starts = np.asarray(jax.random.normal(jax.random.key(1), (4, 5))) * scales
    warm = window_warmup(target, starts, jax.random.key(2), num_steps=300)
    assert warm.metric == "diag" and warm.stages == ("diag",)
    assert len(_window_programs(target)) == 1
    # sqrt(var(x) / var(grad)) is the variance itself on a Gaussian (nutpie)
    np.testing.assert_allclose(warm.inverse_mass, scales**2, rtol=0.3)
