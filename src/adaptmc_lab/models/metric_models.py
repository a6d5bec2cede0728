"""What a Riemannian metric needs from a model, and targets that carry their metric.

A target carries its metric in ``target.info["metric"]`` (a
`adaptmc.kernels.metrics.RiemannianMetric`), where the ``rmhmc`` and ``msd`` kernels look
for it (`adaptmc.kernels.manifold.metric_of`).

- Bayesian neural network with Gaussian noise, fixed noise precision ``beta`` and prior
  precision ``alpha`` (Zlochin & Baram 2000's robot-arm setting): the network's outputs as
  a function of the flat weights, one case at a time (`bnn_output`), and the Bayesian
  Gauss-Newton metric ``beta J^T J + alpha I`` (`bnn_metric`).
- Bayesian logistic regression: its Fisher form ``X^T diag(s (1 - s)) X`` plus the prior
  precision (`logistic_metric`; Girolami & Calderhead 2011, Sec. 7).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from adaptmc.kernels.metrics import RiemannianMetric, fisher_metric, gauss_newton_metric
from adaptmc.kernels.msd_explicit import MSDGeometry
from adaptmc.targets.base import Target
from adaptmc.targets.logistic import logistic_regression
from adaptmc_lab.models.bnn import (
    BNN,
    BNNPrior,
    GammaPrior,
    MLPSpec,
    bnn_target,
    forward,
    layout,
    make_bnn,
)

Array = jax.Array


def with_metric(target: Target, metric: RiemannianMetric) -> Target:
    """A copy of ``target`` whose ``info["metric"]`` is ``metric``."""
    return dataclasses.replace(target, info={**target.info, "metric": metric})


def fixed_precision_bnn(spec: MLPSpec, x, y, noise_precision: float,
                        prior_precision: float) -> BNN:
    """A regression network whose noise precision ``beta`` and weight precision ``alpha``
    (every group, biases included) are fixed: its position is the weights alone."""
    weight = GammaPrior(1.0 / math.sqrt(prior_precision), math.inf)
    prior = BNNPrior(weight, weight, weight, weight,
                     GammaPrior(1.0 / math.sqrt(noise_precision), math.inf))
    return make_bnn(spec, x, y, prior)


def bnn_output(model: BNN) -> Callable[[Array, Array], Array]:
    """``output(weights_flat, x) -> (K,)``: the network's outputs for one case ``x: (I,)``,
    as a function of the flat weights (the leading ``num_weights`` of a position)."""
    lay = layout(model)

    def output(position, x):
        weights = lay.unravel_weights(position[: lay.num_weights])
        return forward(model.spec, weights, x[None, :])[0]

    return output


def bnn_metric(model: BNN, noise_precision: float, prior_precision: float | Array,
               regulariser: float = 0.0) -> RiemannianMetric:
    """Bayesian Gauss-Newton metric ``beta J^T J + alpha I`` of a Gaussian-noise network
    over its training inputs (Zlochin & Baram 2000, Sec. 3); ``K`` gradient-equivalents
    per evaluation (``K`` outputs per case)."""
    if model.spec.likelihood != "gaussian":
        raise ValueError("the Gauss-Newton metric needs a Gaussian likelihood; use a Fisher "
                         "metric for classification")
    lay = layout(model)
    if lay.num_precisions:
        raise ValueError("bnn_metric needs fixed precisions (see fixed_precision_bnn)")
    return gauss_newton_metric(bnn_output(model), model.x, lay.num_weights,
                               noise_precision, prior_precision, regulariser)


def bnn_msd_geometry(model: BNN, noise_precision: float,
                     prior_precision: float) -> MSDGeometry:
    """The geometry of Zlochin & Baram's explicit MSD (`adaptmc.kernels.msd_explicit`):
    the network's outputs per case over its training inputs, ``beta`` and ``alpha``."""
    if model.spec.likelihood != "gaussian":
        raise ValueError("MSD's Bayesian metric beta J^T J + alpha I needs a Gaussian "
                         "likelihood")
    if layout(model).num_precisions:
        raise ValueError("bnn_msd_geometry needs fixed precisions (see fixed_precision_bnn)")
    return MSDGeometry(bnn_output(model), jnp.asarray(model.x), float(noise_precision),
                       float(prior_precision), int(model.spec.num_outputs))


def bnn_metric_target(spec: MLPSpec, x, y, noise_precision: float, prior_precision: float,
                      name: str = "bnn-fixed", key: Array | None = None,
                      regulariser: float = 0.0) -> Target:
    """The weights' posterior of `fixed_precision_bnn` with its Gauss-Newton metric;
    ``info["bnn"]`` holds the model, ``info["msd_geometry"]`` its `bnn_msd_geometry`."""
    model = fixed_precision_bnn(spec, x, y, noise_precision, prior_precision)
    metric = bnn_metric(model, noise_precision, prior_precision, regulariser)
    target = with_metric(bnn_target(model, name=name, key=key), metric)
    geometry = bnn_msd_geometry(model, noise_precision, prior_precision)
    return dataclasses.replace(target, info={**target.info, "msd_geometry": geometry})


def logistic_metric(features, prior_variance: float = 100.0,
                    regulariser: float = 0.0) -> RiemannianMetric:
    """``X^T diag(s (1 - s)) X + I / prior_variance`` (Girolami & Calderhead 2011, Sec. 7)."""
    return logistic_fisher_metric(jnp.asarray(features), 1.0 / prior_variance, regulariser)


def logistic_metric_target(features, labels, prior_variance: float = 100.0,
                           name: str = "logistic", regulariser: float = 0.0) -> Target:
    """`adaptmc.targets.logistic.logistic_regression` carrying its Fisher metric."""
    target = logistic_regression(features, labels, prior_variance, name=name)
    return with_metric(target, logistic_metric(features, prior_variance, regulariser))


def robot_arm_bnn_target(seed: int = 0, num_hidden: int = 8, noise_precision: float = 400.0,
                         prior_precision: float = 1.0) -> Target:
    """Zlochin & Baram's (2000) robot-arm network: ``2 -> num_hidden tanh -> 2`` on
    MacKay's 200 training cases (`adaptmc_lab.datasets.robot_arm.generate`), noise precision
    ``beta = 400`` and prior precision ``alpha = 1`` fixed, with its Gauss-Newton metric.
    ``info["test"]`` holds the 400 test cases. Usable from the command line as
    ``--target adaptmc_lab.models.metric_models:robot_arm_bnn_target``."""
    from adaptmc_lab.datasets.robot_arm import generate

    data = generate(seed)
    spec = MLPSpec(2, num_hidden, 2)
    target = bnn_metric_target(spec, data.x_train, data.y_train, noise_precision,
                               prior_precision, name="robot-arm-bnn-fixed",
                               key=jax.random.key(seed))
    return dataclasses.replace(target, info={**target.info, "test": (data.x_test, data.y_test)})


def logistic_fisher_metric(
    features: Array, prior_precision: float | Array, regulariser: float = 0.0
) -> RiemannianMetric:
    """Bayesian logistic regression's metric ``X^T diag(s (1 - s)) X + prior precision``,
    ``s = sigmoid(X q)`` (Girolami & Calderhead 2011, Sec. 7; Zlochin & Baram 2000, eq. 9).
    One evaluation is one pass ``X q`` and one weighted ``X^T W X``: counted as one
    gradient-equivalent (its flops are ``n dim^2``, a gradient's ``n dim``; say so)."""
    features = jnp.asarray(features)

    def fisher(position):
        s = jax.nn.sigmoid(features @ position)
        return (features * (s * (1.0 - s))[:, None]).T @ features

    return fisher_metric(fisher, prior_precision, cost=1.0, regulariser=regulariser)
