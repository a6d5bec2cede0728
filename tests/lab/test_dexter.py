"""Dexter (Wang 2012, Sec. 4.2): loader, feature selection inside cross-validation, the
two-hidden-layer network against a NumPy reference, and the one-layer network unchanged."""

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from adaptmc_lab.datasets import dexter

DATA = dexter.default_dir()
REFERENCE = Path(__file__).parents[1] / "data" / "bnn_one_layer_reference.npz"
needs_data = pytest.mark.skipif(not (DATA / "dexter.param").is_file(),
                                reason=f"Dexter data not found in {DATA}")


@pytest.fixture(scope="module")
def data():
    return dexter.load_dexter(DATA)


@needs_data
def test_loader_reproduces_the_param_checksums(data):
    param = dexter.read_param(DATA / "dexter.param")
    assert param["train"] == (150, 150, 300, 2816528.0)
    for name, split in zip(dexter.SPLITS, data, strict=True):
        assert sp.issparse(split.features) and split.features.shape == (
            dexter.NUM_CASES[name], 20000)
        assert float(split.features.sum()) == param[name][3]
    assert data.test.labels is None
    assert np.sum(data.train.labels == 1) == 150 and np.sum(data.valid.labels == -1) == 150
    # sparse: well under 1% of the entries are stored
    assert data.train.features.nnz < 0.01 * 300 * 20000


def test_loader_says_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="Dexter folder"):
        dexter.load_dexter(tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="dexter.param is missing"):
        dexter.load_dexter(tmp_path)


def test_loader_rejects_a_wrong_checksum(tmp_path):
    lines = ["1:2 3:4", "", "20000:1"]
    (tmp_path / "x.data").write_text("\n".join(lines) + "\n")
    matrix = dexter.read_sparse(tmp_path / "x.data")
    assert matrix.shape == (3, 20000) and matrix[0, 2] == 4 and matrix[2, 19999] == 1
    assert matrix[1].nnz == 0
    with pytest.raises(ValueError, match="sum of values 7"):
        dexter.check_split("train", matrix, None, (0, 0, 3, 8.0))
    (tmp_path / "bad.data").write_text("0:1\n")
    with pytest.raises(ValueError, match="outside"):
        dexter.read_sparse(tmp_path / "bad.data")


def test_rank_test_matches_scipy_mann_whitney():
    rng = np.random.default_rng(0)
    counts = rng.poisson(0.7, size=(40, 6)) * rng.integers(1, 4, size=(40, 6))
    counts[:, 5] = 0
    labels = np.where(rng.random(40) < 0.5, 1, -1)
    z = dexter.rank_test_z(sp.csr_matrix(counts), labels)
    for j in range(5):
        test = stats.mannwhitneyu(counts[labels == 1, j], counts[labels == -1, j],
                                  use_continuity=False, method="asymptotic")
        assert 2 * stats.norm.sf(abs(z[j])) == pytest.approx(test.pvalue, rel=1e-10)
    assert z[5] == 0.0


@needs_data
def test_feature_selection_uses_training_cases_only(data):
    """Poisoning the labels (and values) of held-out cases leaves the selection unchanged, so
    a fold's inputs never see its held-out fold or the validation set."""
    from adaptmc_lab.models import cv

    masks = cv.kfold_masks(300, 10, seed=0)
    training = masks[3] == 1
    chosen = dexter.select_features(data.train.features, data.train.labels, training)
    assert chosen.columns.shape == (295,) and np.all(np.abs(chosen.z[:-1]) >= np.abs(chosen.z[-1]))
    poisoned = data.train.labels.copy()
    poisoned[~training] *= -1
    moved = data.train.features.tolil()
    moved[np.flatnonzero(~training), :50] = 999.0
    again = dexter.select_features(moved.tocsr(), poisoned, training)
    np.testing.assert_array_equal(again.columns, chosen.columns)
    np.testing.assert_array_equal(again.scales, chosen.scales)
    # the held-out labels matter when they are allowed in
    everything = dexter.select_features(data.train.features, poisoned)
    assert not np.array_equal(everything.columns, chosen.columns)
    x = dexter.transform(data.valid.features, chosen)
    assert x.shape == (300, 295) and np.all(x >= 0)
    root_mean_square = np.sqrt(np.mean(dexter.transform(data.train.features[training],
                                                        chosen) ** 2, axis=0))
    np.testing.assert_allclose(root_mean_square, 1.0, rtol=1e-12)


# ----------------------------------------------------------------------------- the network


def numpy_log_joint(prior, x, y, mask, weights, log_prec):
    """The two-hidden-layer logistic network's joint log density and its gradient with
    respect to every weight and log precision, by hand (backpropagation) in NumPy."""
    w1, b1, w2, b2, w3, b3 = (weights[g] for g in ("input_hidden", "hidden_bias",
                                                   "hidden1_hidden2", "hidden2_bias",
                                                   "hidden_output", "output_bias"))
    h1 = np.tanh(x @ w1 + b1)
    h2 = np.tanh(h1 @ w2 + b2)
    f = (h2 @ w3 + b3)[:, 0]
    value = np.sum(mask * (y * -np.logaddexp(0, -f) + (1 - y) * -np.logaddexp(0, f)))
    d_f = mask * (y - 1 / (1 + np.exp(-f)))  # d loglik / d f
    grads = {"output_bias": np.array([d_f.sum()]), "hidden_output": h2.T @ d_f[:, None]}
    d_a2 = (d_f[:, None] @ w3.T) * (1 - h2**2)
    grads["hidden2_bias"], grads["hidden1_hidden2"] = d_a2.sum(0), h1.T @ d_a2
    d_a1 = (d_a2 @ w2.T) * (1 - h1**2)
    grads["hidden_bias"], grads["input_hidden"] = d_a1.sum(0), x.T @ d_a1
    grad_prec = {}
    for group, w in weights.items():
        gp = group_prior_of(prior, group)
        tau = np.asarray(gp.mean) if gp.fixed else np.exp(log_prec[group])
        if group == "input_hidden":  # ARD: one precision per input (row)
            ss, count = np.sum(w * w, axis=1), w.shape[1]
            tau_w = tau[:, None]
        else:
            ss, count, tau_w = np.sum(w * w), w.size, tau
        value += np.sum(0.5 * count * (np.log(tau) - np.log(2 * np.pi)) - 0.5 * tau * ss)
        grads[group] = grads[group] - tau_w * w
        if not gp.fixed:
            a, b = gp.alpha / 2, gp.alpha / (2 * gp.mean)
            value += np.sum(a * np.log(b) - math.lgamma(a) + (a - 1) * np.log(tau) - b * tau
                            + np.log(tau))
            # d/d log tau of: count/2 log tau - tau ss/2 + a log tau - b tau
            grad_prec[group] = 0.5 * count - 0.5 * tau * ss + a - b * tau
    return value, grads, grad_prec


def group_prior_of(prior, group):
    from adaptmc_lab.models import bnn

    return bnn.group_prior(prior, group)


def test_two_layer_network_matches_numpy_reference():
    import jax
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree

    from adaptmc_lab.models import bnn

    rng = np.random.default_rng(7)
    x = np.sqrt(rng.poisson(0.3, size=(37, 12)))
    y = (rng.random(37) < 0.5).astype(float)
    spec = bnn.MLPSpec(12, (5, 3), 1, "bernoulli", ard=True)
    model = bnn.make_bnn(spec, x, y)
    target = bnn.bnn_target(model)
    position = jnp.asarray(rng.normal(scale=0.4, size=target.dim))
    mask = jnp.asarray((rng.random(37) < 0.8).astype(float))
    # compiled: op by op, every primitive of the network would be compiled on its own
    value, grad = jax.jit(jax.value_and_grad(lambda p: bnn.log_joint(model, p, mask)))(position)
    pos = bnn.unravel(model, position)
    weights = {g: np.asarray(w) for g, w in pos.weights.items()}
    log_prec = {g: np.asarray(v) for g, v in pos.log_precisions.items()}
    ref_value, ref_w, ref_p = numpy_log_joint(model.prior, x, y, np.asarray(mask),
                                              weights, log_prec)
    np.testing.assert_allclose(float(value), ref_value, rtol=1e-12)
    expected = np.concatenate([ravel_pytree({g: jnp.asarray(v) for g, v in ref_w.items()})[0],
                               ravel_pytree({g: jnp.asarray(v) for g, v in ref_p.items()})[0]])
    np.testing.assert_allclose(np.asarray(grad), expected, rtol=1e-10, atol=1e-10)
    assert set(pos.weights) == {"input_hidden", "hidden_bias", "hidden1_hidden2",
                                "hidden2_bias", "hidden_output", "output_bias"}


def test_dexter_network_size():
    """295-20-8-1: 6,097 weights and biases, as Wang (2012, Sec. 4.2) counts; the sampled
    state adds 299 log precisions (295 ARD input precisions, one each for the first-layer
    biases, second-layer weights, second-layer biases and output weights; the output bias
    precision is fixed)."""
    from adaptmc_lab.models import bnn

    spec = bnn.MLPSpec(295, (20, 8), 1, "bernoulli", ard=True)
    model = bnn.make_bnn(spec, np.zeros((3, 295)), np.zeros(3))
    lay = bnn.layout(model)
    assert lay.num_weights == 295 * 20 + 20 + 20 * 8 + 8 + 8 + 1 == 6097
    assert lay.num_precisions == 299 and lay.dim == 6396
    scales = bnn.step_scales(model, bnn.initial_position(model).log_precisions,
                             np.ones(3))
    assert scales.shape == (6097,) and np.all(np.isfinite(scales)) and np.all(scales > 0)


@pytest.mark.slow
def test_one_layer_network_is_unchanged():
    """Log densities, gradients, step scales, Gibbs draws and three product-chain transitions
    of one-hidden-layer networks are bit-identical to the values computed before `MLPSpec`
    took several layers (``tests/data/make_bnn_one_layer_reference.py``).

    Slow (20 s of eager compiles): in the fast tier the one-hidden-layer regression network's
    log density, gradient, step scales, Gibbs draws and product-chain HMC are held
    bit-identical by `test_robot_arm.py::test_smoke_numbers_are_unchanged`, and the ARD
    Bernoulli network's log joint and gradient by
    `test_two_layer_network_matches_numpy_reference`."""
    import sys

    sys.path.insert(0, str(REFERENCE.parent))
    try:
        from make_bnn_one_layer_reference import reference_values
    finally:
        sys.path.remove(str(REFERENCE.parent))
    stored = np.load(REFERENCE)
    now = reference_values()
    for key in stored:
        np.testing.assert_array_equal(now[key], stored[key], err_msg=key)


SMOKE_CONFIG = dict(num_super_transitions=3, gradient_budget=40, num_leapfrog_box=(4, 12),
                    expert={"step_size": 0.3, "num_leapfrog": 9}, nuts_warmup=3, start_steps=10,
                    num_folds=3, num_features=12, hidden=(3, 2), tuner_burn_in=1)


@needs_data
@pytest.mark.slow  # 36 s of compilation; its parts: the loader, selection and network tests
def test_experiment_runs_end_to_end(tmp_path, data):
    """A small network through every method: outputs, equal budgets, a prediction file in the
    challenge's format."""
    import json

    from adaptmc_lab.experiments import dexter as experiment

    config = experiment.Config(**SMOKE_CONFIG)
    results = experiment.run_experiment(config, seed=1, out=tmp_path, log=lambda *a: None,
                                        data=data)
    methods = results["methods"]
    assert set(methods) == {"adaptive gp-ucb", "adaptive parametric", "expert", "NUTS"}
    budget = 3 * 40
    for label, m in methods.items():
        assert m["num_grads"] <= budget, label
        if label != "NUTS":
            assert len(m["valid_errors"]) == 3 and 0 <= m["vote"] <= 1
            assert m["median"] == pytest.approx(np.median(m["valid_errors"]))
    assert len(methods["adaptive gp-ucb"]["reward"]) == 3
    lines = (tmp_path / "dexter_test.resu").read_text().split()
    assert len(lines) == 2000 and set(lines) <= {"1", "-1"}
    table = (tmp_path / "table.md").read_text()
    assert "0.0667" in table and "NUTS" in table and "expert" in table
    stored = json.loads((tmp_path / "results.json").read_text())
    assert stored["config"]["gradient_budget"] == 40


def test_vote_breaks_ties_by_the_mean_probability():
    from adaptmc_lab.experiments.dexter import vote

    probs = np.array([[0.9, 0.2, 0.6], [0.4, 0.3, 0.45]])
    np.testing.assert_array_equal(vote(probs), [1.0, 0.0, 1.0])


@pytest.mark.slow
@needs_data
def test_quick_mode_from_the_command_line(tmp_path):
    from adaptmc_lab.cli import main

    out = tmp_path / "quick"
    assert main(["reproduce", "dexter", "--quick", "--out", str(out)]) == 0
    assert len((out / "dexter_test.resu").read_text().split()) == 2000


@pytest.mark.slow  # 14-25 s
@needs_data
def test_reward_is_the_library_predictive_objective(data):
    """The bandit's reward is `adaptmc.heldout.predictive_objective` of the folds' held-out
    pointwise log-likelihood (as the robot arm's and a user's ``objective="predictive"``):
    the rows the segment keeps are `cv.heldout_pointwise` at the chain's states, and the score
    of draws equals the library objective on those draws and minus the held-out log loss of
    their predictive mean (the reward Dexter had)."""
    import jax
    import jax.numpy as jnp

    from adaptmc.heldout import predictive_objective
    from adaptmc_lab.experiments import dexter as experiment
    from adaptmc_lab.models import cv
    from adaptmc_lab.models.bnn_hmc import BNNState

    config = experiment.Config(**SMOKE_CONFIG)
    problem = experiment.prepare(config, 1, data)
    pointwise = cv.heldout_pointwise(problem.model, problem.masks,
                                     inputs=problem.inputs[:, :300])
    start, _ = experiment.find_start(problem, 10)
    rows = experiment.max_steps(config)
    segment = experiment.make_segment(problem, rows)
    state = BNNState(start, problem.target.logdensity(start))
    state, _, values, _, _ = segment(jax.random.key(0), state, 0.05, 4, 3)
    values = np.asarray(values)
    assert values.shape == (rows, 300) and not values[3:].any()
    np.testing.assert_allclose(values[2], pointwise(state.position), rtol=1e-12)

    draws = np.asarray(start) + 0.05 * np.random.default_rng(0).standard_normal((5, start.size))
    score = experiment.cv_log_score(np.stack([pointwise(jnp.asarray(d)) for d in draws]))
    assert score == pytest.approx(predictive_objective(pointwise)(draws, {}, 0), rel=1e-12)
    probs = np.mean([experiment.make_predictor(problem)(jnp.asarray(d)) for d in draws], 0)
    held = [np.flatnonzero(mask == 0) for mask in problem.masks]
    log_loss = np.mean([-np.mean(np.log(np.where(problem.y_train[h] > 0.5, probs[k, h],
                                                 1 - probs[k, h])))
                        for k, h in enumerate(held)])
    assert score == pytest.approx(-log_loss, rel=1e-10)
