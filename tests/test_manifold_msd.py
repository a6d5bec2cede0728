"""Zlochin & Baram's explicit MSD (`adaptmc.kernels.msd_explicit`): the step against a
fine-step solution of their eq. (10) (second order), its reversibility, the corrected
variant leaving the Jeffreys-modified posterior (and, with ``log_det = 1``, the posterior)
invariant in one step from exact draws, and persistence keeping ``N(0, G_B)`` invariant."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.kernels.msd_explicit import (
    ExplicitMSDParams,
    MSDGeometry,
    explicit_msd_kernel,
    integrate,
    jacobian,
    jacobian_and_derivative,
    metric_matrix,
    persist,
)
from adaptmc.targets.base import make_target
from adaptmc_lab.models.bnn import MLPSpec
from adaptmc_lab.models.metric_models import bnn_metric_target


def _network():
    """A 2-3-2 tanh network on 7 cases, beta = 400, alpha = 1."""
    x = jax.random.normal(jax.random.key(0), (7, 2))
    y = jax.random.normal(jax.random.key(1), (7, 2))
    return bnn_metric_target(MLPSpec(2, 3, 2), x, y, 400.0, 1.0, key=jax.random.key(2))


def _acceleration(target, geometry):
    """Eq. (10): ``d2q/dt2 = -G_B^-1 (grad E + beta J^T (dJ/dt) dq/dt)``."""

    def accel(q, v):
        jac, djac = jacobian_and_derivative(geometry, q, v)
        force = -jax.grad(target.logdensity)(q) + geometry.noise_precision * jac.T @ (djac @ v)
        return -jnp.linalg.solve(metric_matrix(geometry, jac), force)

    return accel


def _rk4(accel, q, v, time, num):
    h = time / num

    def body(_, z):
        def f(z):
            return jnp.concatenate([z[q.size:], accel(z[:q.size], z[q.size:])])

        k1 = f(z)
        k2 = f(z + 0.5 * h * k1)
        k3 = f(z + 0.5 * h * k2)
        k4 = f(z + h * k3)
        return z + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6

    z = jax.lax.fori_loop(0, num, body, jnp.concatenate([q, v]))
    return z[:q.size], z[q.size:]


def _explicit(target, geometry, q, v, time, num):
    grad = jax.grad(target.logdensity)

    def body(_, qv):
        position, velocity, *_ = integrate(geometry, *qv, grad, time / num)
        return position, velocity

    return jax.lax.fori_loop(0, num, body, (q, v))


def _start(target, geometry):
    q = target.initial_position
    noise = jax.random.normal(jax.random.key(3), q.shape)
    chol = jnp.linalg.cholesky(metric_matrix(geometry, jacobian(geometry, q)))
    return q, jax.scipy.linalg.solve_triangular(chol.T, noise, lower=False)  # N(0, G^-1)


def test_explicit_step_is_second_order_against_a_fine_solution_of_eq_10():
    """Global error at ``t = 0.2`` with ``n`` steps against RK4 with 1000: halving the step
    quarters the error (ratio 4 +/- 25 %), and the error is small."""
    target = _network()
    geometry = target.info["msd_geometry"]
    q, v = _start(target, geometry)
    time = 0.2
    ref_q, ref_v = jax.jit(lambda q, v: _rk4(_acceleration(target, geometry), q, v, time,
                                             1000))(q, v)
    explicit = jax.jit(lambda q, v, n: _explicit(target, geometry, q, v, time, n),
                       static_argnums=2)
    errors = []
    for num in (8, 16, 32):
        end_q, end_v = explicit(q, v, num)
        errors.append(float(jnp.linalg.norm(end_q - ref_q) + jnp.linalg.norm(end_v - ref_v)))
    assert float(jnp.linalg.norm(ref_q - q)) > 20 * errors[0]  # it moved
    for coarse, fine in zip(errors, errors[1:], strict=False):
        assert 3.0 < coarse / fine < 5.0, errors


def test_explicit_step_is_reversible():
    target = _network()
    geometry = target.info["msd_geometry"]
    q, v = _start(target, geometry)
    grad = jax.grad(target.logdensity)
    step = jax.jit(lambda q, v: integrate(geometry, q, v, grad, 0.05)[:2])
    end_q, end_v = step(q, v)
    back_q, back_v = step(end_q, -end_v)
    np.testing.assert_allclose(back_q, q, atol=1e-10)
    np.testing.assert_allclose(-back_v, v, atol=1e-10)
    assert float(jnp.max(jnp.abs(end_q - q))) > 1e-3


# A curve whose G_B is bounded: f(q, x) = tanh(q0 + q1 x), so exact draws of
# pi(q) |G_B|^(1/2) by rejection from the prior.
X = jnp.array([-1.0, 0.5, 1.5])
Y = jnp.array([0.3, -0.2, 0.5])
BETA, ALPHA = 4.0, 1.0


def _curve_output(q, x):
    return jnp.tanh(q[0] + q[1] * x)[None]


def _curve():
    def logdensity(q):
        residual = jax.vmap(lambda x: _curve_output(q, x)[0])(X) - Y
        return -0.5 * BETA * residual @ residual - 0.5 * ALPHA * q @ q

    geometry = MSDGeometry(_curve_output, X, BETA, ALPHA, 1)
    return make_target(logdensity, jnp.zeros(2), name="curve"), geometry


def _exact_draws(key, num, jeffreys: bool):
    """Rejection from ``N(0, I / alpha)``: the likelihood is <= 1 and ``|G_B|`` is largest
    where every ``tanh' = 1``."""
    target, geometry = _curve()
    features = jnp.stack([jnp.ones_like(X), X], axis=1)
    bound = jnp.linalg.det(ALPHA * jnp.eye(2) + BETA * features.T @ features)
    key_q, key_u = jax.random.split(key)
    q = jax.random.normal(key_q, (num, 2)) / jnp.sqrt(ALPHA)

    def weight(q):
        log_lik = target.logdensity(q) + 0.5 * ALPHA * q @ q
        det = jnp.linalg.det(metric_matrix(geometry, jacobian(geometry, q)))
        return jnp.exp(log_lik) * (jnp.sqrt(det / bound) if jeffreys else 1.0)

    keep = jax.random.uniform(key_u, (num,)) < jax.jit(jax.vmap(weight))(q)
    return np.asarray(q[np.asarray(keep)])


def _features(q):
    return np.stack([q[:, 0], q[:, 1], q[:, 0] ** 2, q[:, 1] ** 2, q[:, 0] * q[:, 1]], axis=1)


def _z_two_samples(a, b):
    fa, fb = _features(a), _features(b)
    return (fa.mean(0) - fb.mean(0)) / np.sqrt(fa.var(0) / len(fa) + fb.var(0) / len(fb))


def _one_step(kernel, params, target, starts, key):
    def step(key, q):
        state = kernel.init(q, target)
        state, info = kernel.step(key, state, target, params)
        return state.position, info.accepted

    keys = jax.random.split(key, starts.shape[0])
    positions, accepted = jax.jit(jax.vmap(step))(keys, jnp.asarray(starts))
    return np.asarray(positions), np.asarray(accepted)


@pytest.mark.parametrize("log_det", [0.0, pytest.param(1.0, marks=pytest.mark.slow)])
def test_corrected_step_keeps_its_target_from_exact_draws(log_det):
    """From exact draws of ``pi |G_B|^((1 - w)/2)`` (and ``v ~ N(0, G_B^-1)``, the kernel's
    first step) one corrected step at a long step size leaves five moments unchanged
    (|z| < 4 against independent exact draws); the two laws differ (|z| > 4), so the test
    tells a step that kept the wrong one. (Without the step's Jacobian term the moments of
    ``q^2`` moved by z = -16, without ``|G_B|``'s by z = -6: the test sees either.)"""
    target, geometry = _curve()
    jeffreys = log_det == 0.0
    starts = _exact_draws(jax.random.key(10), 2_000_000, jeffreys)
    reference = _exact_draws(jax.random.key(11), 2_000_000, jeffreys)
    other = _exact_draws(jax.random.key(12), 2_000_000, not jeffreys)
    kernel = explicit_msd_kernel(geometry, metropolis=True)
    params = ExplicitMSDParams(step_size=1.2, log_det=log_det)
    moved, accepted = _one_step(kernel, params, target, starts, jax.random.key(13))
    assert 0.3 < accepted.mean() < 0.95, accepted.mean()
    assert np.all(np.abs(_z_two_samples(moved, reference)) < 4), _z_two_samples(moved, reference)
    assert np.max(np.abs(_z_two_samples(other, reference))) > 4


def test_persistence_keeps_n_0_g_invariant():
    """``p = G_B v`` after ``v <- v cos + eta sin`` from ``p ~ N(0, G_B)``: whitened by
    ``L^-1`` (``G_B = L L^T``) it is standard normal (means and covariances, |z| < 4)."""
    target = _network()
    geometry = target.info["msd_geometry"]
    q = target.initial_position
    metric = metric_matrix(geometry, jacobian(geometry, q))
    chol = jnp.linalg.cholesky(metric)
    num = 40_000
    keys = jax.random.split(jax.random.key(4), num)
    first = jax.vmap(lambda k: persist(k, jnp.full(q.shape, jnp.nan), chol, 0.3))(keys)
    keys = jax.random.split(jax.random.key(5), num)
    after = jax.vmap(lambda k, v: persist(k, v, chol, 0.3))(keys, first)
    for velocity in (first, after):
        white = np.asarray(jax.scipy.linalg.solve_triangular(chol, (metric @ velocity.T),
                                                             lower=True).T)
        z_mean = white.mean(0) * np.sqrt(num)
        cov = white.T @ white / num
        z_cov = (cov - np.eye(q.size)) * np.sqrt(num / (1 + np.eye(q.size)))
        assert np.max(np.abs(z_mean)) < 4.5 and np.max(np.abs(z_cov)) < 4.5
    # correlated with the start: the persistence keeps cos(theta) of it
    corr = float(np.mean(np.sum(np.asarray(first * (metric @ after.T).T), axis=1)) / q.size)
    assert abs(corr - np.cos(0.3)) < 0.02


def test_uncorrected_variant_refuses_the_posterior_itself():
    _, geometry = _curve()
    kernel = explicit_msd_kernel(geometry)
    with pytest.raises(ValueError, match="needs the Metropolis correction"):
        kernel.check_params(ExplicitMSDParams(log_det=1.0))
    with pytest.raises(TypeError, match="MSDGeometry"):
        explicit_msd_kernel(None)
