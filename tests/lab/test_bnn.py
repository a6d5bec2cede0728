"""Bayesian neural networks, cross-validation product chains and the robot-arm data."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from adaptmc_lab.datasets import robot_arm
from adaptmc_lab.models import bnn, cv
from adaptmc_lab.models.bnn_hmc import BNNHMCParams, bnn_hmc


def small_model(seed=0, num_cases=24, likelihood="gaussian", ard=False):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(num_cases, 2))
    if likelihood == "gaussian":
        y = np.stack([np.sin(x[:, 0]), np.cos(x[:, 1])], axis=1) + 0.1 * rng.normal(
            size=(num_cases, 2))
        spec = bnn.MLPSpec(2, 3, 2, ard=ard)
    elif likelihood == "bernoulli":
        y = (x[:, 0] > 0).astype(float)
        spec = bnn.MLPSpec(2, 3, 1, "bernoulli", ard=ard)
    else:
        y = rng.integers(0, 3, num_cases)
        spec = bnn.MLPSpec(2, 3, 3, "categorical", ard=ard)
    return bnn.make_bnn(spec, x, y)


def test_robot_arm_data_is_seeded_and_in_range():
    a, b = robot_arm.generate(3), robot_arm.generate(3)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    assert a.x_train.shape == (200, 2) and a.y_test.shape == (400, 2)
    x1 = np.abs(np.concatenate([a.x_train[:, 0], a.x_test[:, 0]]))
    assert x1.min() >= 0.453 and x1.max() <= 1.932
    assert np.mean(a.x_train[:, 0] > 0) == pytest.approx(0.5, abs=0.1)
    x2 = np.concatenate([a.x_train[:, 1], a.x_test[:, 1]])
    assert x2.min() >= 0.534 and x2.max() <= 3.142
    # noise sd 0.05 on each output: the floor is 2 * 0.05**2 within sampling error
    floor = robot_arm.true_function_error(a)
    assert abs(floor - robot_arm.NOISE_FLOOR) < 5 * robot_arm.NOISE_FLOOR * math.sqrt(2 / 800)
    assert not np.allclose(robot_arm.generate(4).x_train, a.x_train)


def test_true_function_at_known_angles():
    y = robot_arm.true_function(np.array([[0.0, 0.0], [math.pi / 2, math.pi / 2]]))
    np.testing.assert_allclose(y, [[3.3, 0.0], [-1.3, 2.0]], atol=1e-12)


def test_robot_arm_network_has_82_weights():
    data = robot_arm.generate(0)
    model = bnn.make_bnn(bnn.MLPSpec(2, 16, 2), data.x_train, data.y_train)
    lay = bnn.layout(model)
    assert lay.num_weights == 82
    assert bnn.precision_groups(model) == ("input_hidden", "hidden_bias", "hidden_output",
                                           "noise")


def test_kfold_masks_partition_the_cases():
    masks = cv.kfold_masks(203, 8, seed=1)
    assert masks.shape == (8, 203)
    held = masks == 0
    np.testing.assert_array_equal(held.sum(axis=0), np.ones(203))  # each case held out once
    sizes = held.sum(axis=1)
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == 203
    with pytest.raises(ValueError, match="num_folds"):
        cv.kfold_masks(10, 1)


def test_held_out_cases_never_enter_a_fold():
    model = small_model(seed=2)
    masks = cv.kfold_masks(24, 4, seed=2)
    target = cv.product_target(model, masks)
    position = target.initial_position + 0.3 * jax.random.normal(jax.random.key(2),
                                                                 (target.dim,))
    dim = target.info["copy_dim"]
    held_rows = np.flatnonzero(masks[1] == 0)
    moved = model._replace(y=model.y.at[held_rows].add(100.0),
                           x=model.x.at[held_rows].add(10.0))

    @jax.jit
    def check(row, mask, key):
        grad_y = jax.grad(lambda y: bnn.log_joint(model._replace(y=y), row, mask))(model.y)
        pos = bnn.unravel(model, row)
        gibbs = [bnn.gibbs_precisions(key, m, pos.weights, mask)["noise"] for m in (model, moved)]
        scales = [bnn.step_scales(m, pos.log_precisions, mask) for m in (model, moved)]
        return grad_y, gibbs, scales

    for k in range(4):
        grad_y, gibbs, scales = check(position[k * dim:(k + 1) * dim], jnp.asarray(masks[k]),
                                      jax.random.key(k))
        held = masks[k] == 0
        grad_y = np.asarray(grad_y)
        assert np.all(grad_y[held] == 0.0)
        assert np.all(np.abs(grad_y[~held]).sum(axis=1) > 0)
        if k == 1:  # moving fold 1's held-out cases changes nothing fold 1 uses
            np.testing.assert_allclose(gibbs[0], gibbs[1], rtol=1e-12)
            np.testing.assert_allclose(scales[0], scales[1], rtol=1e-12)


def test_product_target_is_sum_of_copies():
    model = small_model(seed=3)
    masks = np.concatenate([cv.kfold_masks(24, 3, seed=3), np.ones((1, 24))])
    target = cv.product_target(model, masks)
    position = target.initial_position + 0.1
    dim = target.info["copy_dim"]
    # compiled, not op by op (each primitive of the network compiled on its own)
    log_joint = jax.jit(lambda row, mask: bnn.log_joint(model, row, mask))
    total = sum(log_joint(position[k * dim:(k + 1) * dim], jnp.asarray(masks[k]))
                for k in range(4))
    np.testing.assert_allclose(jax.jit(target.logdensity)(position), total, rtol=1e-12)
    pos = target.unravel(position)
    assert pos.weights["input_hidden"].shape == (4, 2, 3)
    assert target.parameter_names[0].startswith("net0.") and len(target.parameter_names) == 4 * dim


@pytest.mark.parametrize("ard", [False, True])
def test_gamma_conditional_matches_analytic(ard):
    """Gibbs draws of each precision against the analytic Gamma conditional (Neal's shape
    (alpha + k)/2, rate alpha/(2 omega) + sum(w^2)/2): KS test and mean in MCSE units."""
    model = small_model(seed=4, ard=ard)
    weights = bnn.initial_position(model, jax.random.key(4)).weights
    mask = jnp.ones(24)
    keys = jax.random.split(jax.random.key(40), 4000)
    draws = jax.jit(jax.vmap(lambda k: bnn.gibbs_precisions(k, model, weights, mask)))(keys)
    for group in bnn.precision_groups(model):
        prior = getattr(model.prior, group)
        if group == "noise":
            resid = model.y - bnn.forward(model.spec, weights, model.x)
            ss, count = float(jnp.sum(resid**2)), 24 * 2
        elif group == "input_hidden" and ard:
            ss, count = np.asarray(jnp.sum(weights[group] ** 2, axis=1)), 3
        else:
            ss, count = float(jnp.sum(weights[group] ** 2)), weights[group].size
        shape = (prior.alpha + count) / 2
        rate = prior.alpha / (2 * prior.mean) + np.asarray(ss) / 2
        tau = np.exp(np.asarray(draws[group])).reshape(4000, -1)
        rate = np.broadcast_to(rate, tau.shape[1:])
        for j in range(tau.shape[1]):
            ks = stats.kstest(tau[:, j], stats.gamma(shape, scale=1 / rate[j]).cdf)
            assert ks.pvalue > 1e-3, (group, j, ks)
            mean, sd = shape / rate[j], math.sqrt(shape) / rate[j]
            z = (tau[:, j].mean() - mean) / (sd / math.sqrt(4000))
            assert abs(z) < 4, (group, j, z)


def test_gibbs_leaves_the_joint_invariant_for_one_precision():
    """Exact draws of (w, tau) from the hierarchical prior (no data) stay exact after a Gibbs
    update of tau: the mean of log tau matches the prior's digamma(a) - log(b)."""
    model = small_model(seed=5)
    model = model._replace(prior=model.prior._replace(
        input_hidden=bnn.GammaPrior(1.0, 4.0)))
    prior = model.prior.input_hidden
    a, b = prior.alpha / 2, prior.alpha / (2 * prior.mean)
    n = 4000
    key_tau, key_w, key_gibbs = jax.random.split(jax.random.key(5), 3)
    tau = jax.random.gamma(key_tau, a, (n,)) / b
    w = jax.random.normal(key_w, (n, 2, 3)) / jnp.sqrt(tau)[:, None, None]
    zeros = bnn.zero_weights(model.spec)

    def update(k, w_ih):
        return bnn.gibbs_precisions(k, model, {**zeros, "input_hidden": w_ih},
                                    jnp.zeros(24))["input_hidden"]

    log_tau = np.asarray(jax.jit(jax.vmap(update))(jax.random.split(key_gibbs, n), w))
    expected_mean = float(jax.scipy.special.digamma(a)) - math.log(b)
    expected_sd = math.sqrt(float(jax.scipy.special.polygamma(1, a)))
    z = (log_tau.mean() - expected_mean) / (expected_sd / math.sqrt(n))
    assert abs(z) < 4
    assert stats.kstest(np.exp(log_tau), stats.gamma(a, scale=1 / b).cdf).pvalue > 1e-3


@pytest.mark.parametrize("likelihood", ["gaussian", "bernoulli", "categorical"])
def test_predict_shapes_and_losses(likelihood):
    model = small_model(seed=6, likelihood=likelihood)
    dim = bnn.layout(model).dim
    positions = 0.5 * jax.random.normal(jax.random.key(7), (5, dim))
    preds, mean = jax.jit(lambda p: (bnn.predict_flat(model, p, model.x[:7]),
                                     bnn.predictive_mean(model, p, model.x[:7])))(positions)
    k = model.spec.num_outputs
    assert preds.shape == (5, 7, k)
    assert mean.shape == (7, k)
    if likelihood == "gaussian":
        assert float(bnn.squared_error(mean, model.y[:7])) >= 0
    else:
        assert 0 <= float(bnn.error_rate(mean, model.y[:7])) <= 1
        assert float(bnn.log_loss(mean, model.y[:7])) > 0
        if likelihood == "categorical":
            np.testing.assert_allclose(mean.sum(axis=-1), 1.0, rtol=1e-12)


@pytest.mark.slow  # 11 s
def test_joint_density_gradient_is_finite_and_kernel_moves():
    model = small_model(seed=8)
    masks = np.concatenate([cv.kfold_masks(24, 2, seed=8), np.ones((1, 24))])
    target = cv.product_target(model, masks, key=jax.random.key(8))
    state = bnn_hmc.init(target.initial_position, target)
    params = BNNHMCParams(step_size=0.2, num_leapfrog=10)

    @jax.jit
    def steps(state):
        def body(state, key):
            state, info = bnn_hmc.step(key, state, target, params)
            return state, info
        return jax.lax.scan(body, state, jax.random.split(jax.random.key(8), 20))

    state, infos = steps(state)
    accepted = int(np.sum(infos.accepted))
    assert bnn_hmc.cost(params) == 11
    assert np.all(np.asarray(infos.num_grads) == 11)
    np.testing.assert_allclose(state.logdensity, jax.jit(target.logdensity)(state.position),
                               rtol=1e-9)
    assert accepted > 5
    assert not np.allclose(state.position, target.initial_position)


def test_heldout_pointwise_is_each_held_out_case_under_the_copy_that_held_it_out():
    """The pointwise log-likelihood the library's predictive objective reads: case ``c``
    held out by fold ``k``, Gaussian in both outputs at copy ``k``'s weights and noise
    precision (a NumPy/SciPy computation, not the network's own)."""
    model = small_model(seed=9)
    masks = np.concatenate([cv.kfold_masks(24, 3, seed=9), np.ones((1, 24))])
    target = cv.product_target(model, masks, key=jax.random.key(9))
    position = np.asarray(target.initial_position) + np.random.default_rng(9).normal(
        0.0, 0.05, target.dim)
    values = np.asarray(jax.jit(cv.heldout_pointwise(model, masks))(position))
    dim = target.info["copy_dim"]
    expected = []
    for k in range(3):
        row = position[k * dim:(k + 1) * dim]
        pos = bnn.unravel(model, jnp.asarray(row))
        w = {g: np.asarray(v) for g, v in pos.weights.items()}
        sd = np.exp(-0.5 * float(pos.log_precisions["noise"]))
        held = np.flatnonzero(masks[k] == 0)
        f = np.tanh(np.asarray(model.x)[held] @ w["input_hidden"] + w["hidden_bias"])
        f = f @ w["hidden_output"] + w["output_bias"]
        expected.append(stats.norm.logpdf(np.asarray(model.y)[held], f, sd).sum(axis=1))
    assert values.shape == (24,)  # every case held out by exactly one fold; not the 4th copy
    np.testing.assert_allclose(values, np.concatenate(expected), rtol=1e-10)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="x must have shape"):
        bnn.make_bnn(bnn.MLPSpec(3, 2, 1), np.zeros((4, 2)), np.zeros((4, 1)))
    with pytest.raises(ValueError, match="likelihood"):
        bnn.make_bnn(bnn.MLPSpec(2, 2, 1, "poisson"), np.zeros((4, 2)), np.zeros((4, 1)))
    with pytest.raises(ValueError, match="masks"):
        cv.product_target(small_model(), np.ones((2, 5)))
    with pytest.raises(ValueError, match="num_leapfrog"):
        bnn_hmc.check_params(BNNHMCParams(0.1, 0))
