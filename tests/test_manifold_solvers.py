"""The generalised leapfrog's implicit half-steps: Anderson-accelerated fixed points solve
the same equations as the plain iteration (to tolerance, in fewer updates), a non-finite
iterate stops at once, the Gauss-Newton quadratic force equals the pullback through ``G``,
and MSD / RMHMC with the accelerated solver stay reversible and leave a correlated Gaussian
and a banana invariant (MCSE z-tests from exact draws)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.kernels import MSDParams, RMHMCParams, msd_kernel, rmhmc_kernel
from adaptmc.kernels.integrators import (
    IntegratorState,
    fixed_point,
    generalized_leapfrog,
    metric_force,
    metric_terms,
)
from adaptmc_lab.models.bnn import MLPSpec
from adaptmc_lab.models.metric_models import bnn_metric_target
from helpers import moment_z_scores
from test_manifold import COV, CURVATURE, _banana, _banana_draws, _gaussian, _run_chains

MEMORY = 3


def _contraction(x):
    """A nonlinear contraction (Lipschitz constant at most 0.9 in the max norm): slow for
    the plain iteration."""
    a = jnp.array([[0.6, 0.2, 0.0], [0.1, 0.5, 0.25], [0.0, 0.2, 0.65]])
    return a @ x + 0.05 * jnp.sin(x) + jnp.array([1.0, -0.5, 0.25])


def test_anderson_reaches_the_plain_fixed_point_in_fewer_updates():
    plain, ok_plain, n_plain = fixed_point(_contraction, jnp.zeros(3), 500, 1e-12)
    fast, ok_fast, n_fast = fixed_point(_contraction, jnp.zeros(3), 500, 1e-12, MEMORY)
    assert bool(ok_plain) and bool(ok_fast)
    np.testing.assert_allclose(fast, plain, atol=1e-10)
    np.testing.assert_allclose(_contraction(fast), fast, atol=1e-10)
    assert int(n_fast) < int(n_plain) // 3, (int(n_fast), int(n_plain))


@pytest.mark.parametrize("memory", [0, MEMORY])
def test_nonfinite_iterate_stops_at_once(memory):
    x, converged, count = fixed_point(lambda v: v + jnp.nan, jnp.zeros(2), 50, 1e-8, memory)
    assert not bool(converged) and int(count) == 1


@pytest.mark.parametrize("memory", [0, MEMORY])
def test_half_steps_satisfy_their_implicit_equations(memory):
    """The returned ``(q', p'')`` of one step: ``p'`` recovered from ``p''`` by the explicit
    last half-step satisfies eq. 16 and ``q'`` satisfies eq. 17 to the tolerance."""
    target, metric = _gaussian()
    q, p = jnp.array([0.7, -0.9]), jnp.array([0.8, 1.1])
    logdensity, grad = target.logdensity_and_grad(q)
    terms = metric_terms(metric, q)
    eps = 0.4
    end, end_terms, info = generalized_leapfrog(
        IntegratorState(q, p, logdensity, grad), eps, target.logdensity_and_grad, metric,
        terms, max_iterations=200, tolerance=1e-13, memory=memory)
    assert bool(info.converged)
    # eq. 16 solved here independently (plain iteration, eagerly), then eqs. 17 and 18
    p_half = p
    for _ in range(200):
        p_half = p + 0.5 * eps * (grad - metric_force(terms, p_half, 1.0))
    residual_16 = p_half - (p + 0.5 * eps * (grad - metric_force(terms, p_half, 1.0)))
    assert float(jnp.max(jnp.abs(residual_16))) < 1e-12
    q_expected = q + 0.5 * eps * (terms.inverse @ p_half + end_terms.inverse @ p_half)
    np.testing.assert_allclose(end.position, q_expected, atol=1e-11)
    p_expected = p_half + 0.5 * eps * (end.logdensity_grad
                                       - metric_force(end_terms, p_half, 1.0))
    np.testing.assert_allclose(end.momentum, p_expected, atol=1e-11)


def test_gauss_newton_quadratic_force_equals_the_pullback():
    spec = MLPSpec(2, 3, 2)
    x = jax.random.normal(jax.random.key(0), (7, 2))
    y = jax.random.normal(jax.random.key(1), (7, 2))
    target = bnn_metric_target(spec, x, y, 400.0, 1.0, key=jax.random.key(2), regulariser=0.1)
    metric = target.info["metric"]
    q = target.initial_position
    v = jax.random.normal(jax.random.key(3), q.shape)
    pullback = jax.vjp(metric.matrix, q)[1]
    expected = pullback(0.5 * jnp.outer(v, v))[0]
    np.testing.assert_allclose(jax.jit(metric.quadratic_gradient)(q, v), expected,
                               rtol=1e-10, atol=1e-10)
    assert metric.quadratic_cost == 2.0


def _flow(target, metric, z, memory, step_size=0.3):
    state = IntegratorState(z[:2], z[2:], *target.logdensity_and_grad(z[:2]))
    end, _, info = generalized_leapfrog(
        state, step_size, target.logdensity_and_grad, metric, metric_terms(metric, z[:2]),
        max_iterations=200, tolerance=1e-13, memory=memory)
    return jnp.concatenate([end.position, end.momentum]), info


# 6-11 s each: the slow tier; the plain iteration's flow: tests/test_manifold.py, the
# accelerated solver's fixed point: test_half_steps_satisfy_their_implicit_equations
@pytest.mark.slow
@pytest.mark.parametrize("make", [_banana, _gaussian])
def test_accelerated_step_is_reversible_and_volume_preserving(make):
    target, metric = make()
    flow = jax.jit(lambda z: _flow(target, metric, z, MEMORY))
    z = jnp.array([0.7, 0.9, 0.4, -0.8])
    forward, info = flow(z)
    assert bool(info.converged)
    back, _ = flow(forward.at[2:].multiply(-1.0))
    np.testing.assert_allclose(back[:2], z[:2], atol=1e-10)
    np.testing.assert_allclose(-back[2:], z[2:], atol=1e-10)
    jacobian = jax.jacfwd(lambda x: _flow(target, metric, x, MEMORY)[0])(z)
    assert abs(float(jnp.linalg.det(jacobian)) - 1.0) < 1e-8


CASES = {
    "msd-gaussian": (_gaussian, msd_kernel, MSDParams(step_size=0.5)),
    "rmhmc-banana": (_banana, rmhmc_kernel, RMHMCParams(step_size=0.3, num_leapfrog=3)),
    "msd-banana": (_banana, msd_kernel, MSDParams(step_size=0.4)),
}


# msd-banana in the fast tier; RMHMC and the Gaussian (whose plain-iteration kernels
# tests/test_manifold.py holds) in the slow one
@pytest.mark.parametrize("case", [c if c == "msd-banana" else
                                  pytest.param(c, marks=pytest.mark.slow) for c in sorted(CASES)])
def test_accelerated_kernels_leave_target_invariant(case):
    make, make_kernel, params = CASES[case]
    target, metric = make()
    key = jax.random.key(13)
    if target.name == "banana":
        starts = _banana_draws(key, 16)
        draws = np.asarray(_banana_draws(jax.random.fold_in(key, 1), 200_000))
        mean, var = np.zeros(2), draws.var(axis=0)
        var[1] = 1.0 + 2.0 * CURVATURE**2
    else:
        starts = jax.random.multivariate_normal(key, jnp.zeros(2), jnp.asarray(COV), (16,))
        mean, var = np.zeros(2), np.diag(COV)
    kernel = make_kernel(metric, memory=MEMORY)
    positions, divergent = _run_chains(kernel, params, target, starts, 400)
    assert divergent.mean() < 0.05
    z_mean, z_var = moment_z_scores(positions, mean, var)
    assert np.all(np.abs(z_mean) < 4), z_mean
    assert np.all(np.abs(z_var) < 4), z_var
