"""Riemannian dynamics: the generalised leapfrog (reversible, volume-preserving, failures
counted), the metrics (Gauss-Newton, logistic Fisher) and the RMHMC / MSD kernels leaving
a correlated Gaussian and a banana invariant (MCSE z-tests from exact draws)."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.kernels import MSDParams, RMHMCParams, msd_kernel, rmhmc_kernel
from adaptmc.kernels.integrators import (
    IntegratorState,
    fixed_point,
    integrate_implicit,
    metric_terms,
)
from adaptmc.kernels.metrics import gauss_newton_metric, user_metric
from adaptmc.targets.base import make_target
from adaptmc_lab.models.bnn import MLPSpec
from adaptmc_lab.models.metric_models import bnn_metric_target, logistic_metric_target
from helpers import moment_z_scores

CURVATURE = 0.5
COV = np.array([[1.0, 0.8], [0.8, 1.0]])
PRECISION = np.linalg.inv(COV)


def _twist(q):
    """Banana: ``(q0, q1 - b (q0^2 - 1))`` is standard normal (unit Jacobian)."""
    return jnp.stack([q[0], q[1] - CURVATURE * (q[0] ** 2 - 1.0)])


def _banana():
    target = make_target(lambda q: -0.5 * jnp.sum(_twist(q) ** 2), jnp.zeros(2), name="banana")
    metric = gauss_newton_metric(lambda q, x: _twist(q), jnp.zeros((1, 1)), 2, 1.0, 0.0)
    return target, metric


def _banana_draws(key, n):
    z = jax.random.normal(key, (n, 2))
    return jnp.stack([z[:, 0], z[:, 1] + CURVATURE * (z[:, 0] ** 2 - 1.0)], axis=1)


def _gaussian():
    """Correlated 2-d Gaussian with a metric that varies with the position."""
    prec = jnp.asarray(PRECISION)
    target = make_target(lambda q: -0.5 * q @ prec @ q, jnp.zeros(2), name="gauss")
    metric = user_metric(lambda q: prec + 0.5 * jnp.diag(q**2), cost=1.0)
    return target, metric


def _state(target, position, momentum):
    logdensity, grad = target.logdensity_and_grad(position)
    return IntegratorState(position, momentum, logdensity, grad)


@partial(jax.jit, static_argnums=(0, 1, 3))
def _flow(target, metric, z, num_steps=3, step_size=0.3):
    state = _state(target, z[:2], z[2:])
    end, _, info = integrate_implicit(
        state, step_size, num_steps, target.logdensity_and_grad, metric,
        metric_terms(metric, state.position), tolerance=1e-13, max_iterations=200,
    )
    return jnp.concatenate([end.position, end.momentum]), info


@pytest.mark.parametrize("make", [_banana, _gaussian])
def test_generalized_leapfrog_is_reversible_and_volume_preserving(make):
    target, metric = make()
    z = jnp.array([0.7, 0.9, 0.4, -0.8])
    forward, info = _flow(target, metric, z)
    assert bool(info.converged)
    back, _ = _flow(target, metric, forward.at[2:].multiply(-1.0))
    np.testing.assert_allclose(back[:2], z[:2], atol=1e-10)
    np.testing.assert_allclose(-back[2:], z[2:], atol=1e-10)
    jacobian = jax.jacfwd(lambda x: _flow(target, metric, x, num_steps=1)[0])(z)
    assert abs(float(jnp.linalg.det(jacobian)) - 1.0) < 1e-8
    assert float(jnp.max(jnp.abs(forward[:2] - z[:2]))) > 0.1  # it moved


def test_generalized_leapfrog_energy_error_is_second_order():
    target, metric = _banana()

    def energy_error(step_size):
        num = int(round(1.0 / step_size))
        z, _ = _flow(target, metric, jnp.array([0.7, 0.9, 0.4, -0.8]), num, step_size)
        start = 0.5 * (jnp.sum(_twist(jnp.array([0.7, 0.9])) ** 2))
        # |G| = 1 here, so H = -log pi + p^T G^-1 p / 2
        kinetic = [0.5 * p @ jnp.linalg.solve(metric.matrix(q), p)
                   for q, p in ((jnp.array([0.7, 0.9]), jnp.array([0.4, -0.8])), (z[:2], z[2:]))]
        end = 0.5 * jnp.sum(_twist(z[:2]) ** 2)
        return abs(float(end + kinetic[1] - start - kinetic[0]))

    ratio = energy_error(0.1) / energy_error(0.05)
    assert 3.0 < ratio < 5.5


def test_fixed_point_that_cannot_converge_is_reported():
    x, converged, count = fixed_point(lambda v: 2.0 * v + 1.0, jnp.zeros(3), 15, 1e-8)
    assert not bool(converged) and int(count) == 15


def test_nonconvergence_is_a_counted_divergence():
    """A step far too long for the metric's curvature: every fixed point fails; each step is
    a rejected divergence and the chain stays finite where it was."""
    target, metric = _banana()
    kernel = rmhmc_kernel(metric)
    params = RMHMCParams(step_size=20.0, num_leapfrog=2, max_iterations=10)
    start = jnp.array([2.0, 1.0])
    state = kernel.init(start, target)
    step = jax.jit(lambda key, s: kernel.step(key, s, target, params))
    for i in range(5):
        state, info = step(jax.random.key(i), state)
        assert bool(info.is_divergent) and not bool(info.accepted)
        assert int(info.num_grads) > 0
    np.testing.assert_array_equal(state.position, start)
    assert bool(jnp.all(jnp.isfinite(state.logdensity_grad)))


def test_gauss_newton_metric_matches_explicit_jacobian():
    spec = MLPSpec(2, 3, 2)
    x = jax.random.normal(jax.random.key(0), (7, 2))
    y = jax.random.normal(jax.random.key(1), (7, 2))
    target = bnn_metric_target(spec, x, y, 400.0, 1.0, key=jax.random.key(2))
    metric = target.info["metric"]
    q = target.initial_position
    model = target.info["bnn"]
    from adaptmc_lab.models.metric_models import bnn_output

    output = bnn_output(model)
    jac = jax.jit(jax.jacfwd(lambda w: jax.vmap(lambda xi: output(w, xi))(x).reshape(-1)))(q)
    expected = 400.0 * jac.T @ jac + jnp.eye(q.size)
    np.testing.assert_allclose(jax.jit(metric.matrix)(q), expected, rtol=1e-10, atol=1e-10)
    assert metric.cost == 2.0  # two outputs per case: two reverse sweeps


def test_logistic_metric_is_the_analytic_fisher_matrix():
    key_x, key_y, key_b = jax.random.split(jax.random.key(3), 3)
    x = np.asarray(jax.random.normal(key_x, (30, 4)))
    y = np.asarray(jax.random.bernoulli(key_y, 0.4, (30,)), dtype=float)
    target = logistic_metric_target(x, y, prior_variance=100.0)
    beta = jax.random.normal(key_b, (4,))
    s = 1.0 / (1.0 + np.exp(-x @ np.asarray(beta)))
    analytic = x.T @ np.diag(s * (1 - s)) @ x + np.eye(4) / 100.0
    metric = jax.jit(target.info["metric"].matrix)
    np.testing.assert_allclose(metric(beta), analytic, rtol=1e-10)
    # for a canonical link the Fisher information is also minus the Hessian
    hessian = jax.jit(jax.hessian(target.logdensity))(beta)
    np.testing.assert_allclose(-hessian, analytic, rtol=1e-8)


def _run_chains(kernel, params, target, starts, num_steps):
    def chain(key, start):
        def body(state, k):
            state, info = kernel.step(k, state, target, params)
            return state, (state.position, info.is_divergent)

        return jax.lax.scan(body, kernel.init(start, target), jax.random.split(key, num_steps))[1]

    keys = jax.random.split(jax.random.key(7), starts.shape[0])
    positions, divergent = jax.jit(jax.vmap(chain))(keys, starts)
    return np.asarray(positions), np.asarray(divergent)


CASES = {
    "msd-gaussian": (_gaussian, msd_kernel, MSDParams(step_size=0.5)),
    "rmhmc-gaussian": (_gaussian, rmhmc_kernel, RMHMCParams(step_size=0.5, num_leapfrog=3)),
    "msd-banana": (_banana, msd_kernel, MSDParams(step_size=0.4)),
    "rmhmc-banana": (_banana, rmhmc_kernel, RMHMCParams(step_size=0.3, num_leapfrog=3)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_kernels_leave_target_invariant(case):
    make, make_kernel, params = CASES[case]
    target, metric = make()
    key = jax.random.key(11)
    if target.name == "banana":
        starts = _banana_draws(key, 16)
        draws = np.asarray(_banana_draws(jax.random.fold_in(key, 1), 200_000))
        mean, var = np.zeros(2), draws.var(axis=0)
        var[1] = 1.0 + 2.0 * CURVATURE**2  # exact: Var(z1) + b^2 Var(z0^2)
    else:
        starts = jax.random.multivariate_normal(key, jnp.zeros(2), jnp.asarray(COV), (16,))
        mean, var = np.zeros(2), np.diag(COV)
    positions, divergent = _run_chains(make_kernel(metric), params, target, starts, 400)
    assert divergent.mean() < 0.05
    z_mean, z_var = moment_z_scores(positions, mean, var)
    assert np.all(np.abs(z_mean) < 4), z_mean
    assert np.all(np.abs(z_var) < 4), z_var


@pytest.mark.parametrize("log_det", [1.0, 0.0])
def test_log_det_term_exact_or_jeffreys(log_det):
    """With ``log|G|`` MSD samples pi; without it, pi |G|^(1/2) (the Jeffreys variant).
    pi = N(0, 1), G(q) = 1 + q^2: moments of the tilted law by quadrature."""
    target = make_target(lambda q: -0.5 * jnp.sum(q**2), jnp.zeros(1), name="normal")
    metric = user_metric(lambda q: jnp.eye(1) * (1.0 + q @ q), cost=1.0)
    grid = np.linspace(-12, 12, 200_001)
    density = np.exp(-0.5 * grid**2) * (1.0 + grid**2) ** (0.5 * (1.0 - log_det))
    second = np.sum(grid**2 * density) / np.sum(density)
    starts = jax.random.normal(jax.random.key(5), (16, 1)) * np.sqrt(second)
    params = MSDParams(step_size=0.5, log_det=log_det, refresh_angle=1.0)
    positions, divergent = _run_chains(msd_kernel(metric), params, target, starts, 2000)
    assert divergent.mean() < 0.05
    z_mean, z_var = moment_z_scores(positions, np.zeros(1), np.array([second]))
    assert np.all(np.abs(z_mean) < 4) and np.all(np.abs(z_var) < 4), (z_mean, z_var)
    other = 1.417 if log_det == 1.0 else 1.0  # the other law's second moment (quadrature)
    _, z_other = moment_z_scores(positions, np.zeros(1), np.array([other]))
    assert np.all(np.abs(z_other) > 4), z_other  # the test tells the two laws apart
