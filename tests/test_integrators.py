"""Leapfrog: time reversibility to 1e-10 in float64 and energy error of order eps^2."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from adaptmc.kernels.integrators import (
    LEAPFROG,
    MCLACHLAN,
    IntegratorState,
    integrate,
    leapfrog,
    make_integrator,
    num_grads_per_step,
)
from adaptmc.kernels.metrics import euclidean_metric
from adaptmc.targets import banana, correlated_2d, funnel


def _start(target, key):
    position = target.initial_position + 0.3 * jax.random.normal(key, (target.dim,))
    momentum = jax.random.normal(jax.random.fold_in(key, 1), (target.dim,))
    logdensity, grad = target.logdensity_and_grad(position)
    return IntegratorState(position, momentum, logdensity, grad)


@pytest.mark.parametrize("make", [lambda: correlated_2d(2.0), banana, lambda: funnel(5)])
@pytest.mark.parametrize("inverse_mass", ["unit", "diag", "dense"])
def test_leapfrog_is_time_reversible(make, inverse_mass):
    target = make()
    dim = target.dim
    inv = {
        "unit": 1.0,
        "diag": jnp.linspace(0.5, 2.0, dim),
        "dense": jnp.eye(dim) + 0.3 * jnp.ones((dim, dim)),
    }[inverse_mass]
    metric = euclidean_metric(inv)
    start = _start(target, jax.random.key(11))
    forward = integrate(leapfrog, start, 0.05, 40, target.logdensity_and_grad, metric)
    flipped = forward._replace(momentum=-forward.momentum)
    back = integrate(leapfrog, flipped, 0.05, 40, target.logdensity_and_grad, metric)
    assert float(jnp.max(jnp.abs(back.position - start.position))) < 1e-10
    assert float(jnp.max(jnp.abs(back.momentum + start.momentum))) < 1e-10


def _energy_error(target, step_size, trajectory_length, coefficients=LEAPFROG):
    metric = euclidean_metric(1.0)
    integrator = make_integrator(coefficients)
    start = _start(target, jax.random.key(3))
    num = int(round(trajectory_length / step_size))
    end = integrate(integrator, start, step_size, num, target.logdensity_and_grad, metric)
    h0 = -start.logdensity + metric.kinetic_energy(start.momentum, start.position)
    h1 = -end.logdensity + metric.kinetic_energy(end.momentum, end.position)
    return abs(float(h1 - h0))


def test_leapfrog_energy_error_is_second_order():
    """Over a fixed trajectory length, halving eps divides the energy error by about 4."""
    target = correlated_2d(2.0)
    errors = [_energy_error(target, eps, 1.6) for eps in (0.04, 0.02, 0.01, 0.005)]
    slopes = np.diff(np.log(errors)) / np.diff(np.log([0.04, 0.02, 0.01, 0.005]))
    np.testing.assert_allclose(slopes, 2.0, atol=0.15)


def test_mclachlan_is_second_order_and_costs_two_gradients():
    target = banana()
    errors = [_energy_error(target, eps, 1.0, MCLACHLAN) for eps in (0.05, 0.025, 0.0125)]
    slopes = np.diff(np.log(errors)) / np.diff(np.log([0.05, 0.025, 0.0125]))
    np.testing.assert_allclose(slopes, 2.0, atol=0.2)
    assert num_grads_per_step(MCLACHLAN) == 2 and num_grads_per_step(LEAPFROG) == 1


def test_integrator_coefficients_must_be_palindromic():
    with pytest.raises(ValueError, match="palindrome"):
        make_integrator((0.5, 1.0))
