"""Bayesian multilayer perceptrons as in Neal (1996), "Bayesian Learning for Neural Networks".

One or more tanh hidden layers; linear outputs with Gaussian noise (regression), or a
logistic or softmax output (classification). The weights fall in groups, each with its own
precision (inverse variance): input-to-hidden weights (one precision, or one per input under
ARD), hidden biases, for each further hidden layer ``l`` its weights from layer ``l - 1``
(``hidden{l-1}_hidden{l}``) and biases (``hidden{l}_bias``), hidden-to-output weights (from
the last hidden layer), output biases. Each precision has a Gamma
hyperprior, and so does the noise precision (Neal 1996, Chs. 1 and 3; section numbers
are not quoted here because we could not check them offline).

Gamma parametrisation (Neal 1996, Ch. 3): a prior ``width:alpha`` (FBM's notation) puts a
Gamma on the precision ``tau`` with shape ``alpha / 2`` and mean ``omega = 1 / width**2``::

    p(tau) = (alpha / (2 omega))**(alpha/2) / Gamma(alpha/2) tau**(alpha/2 - 1)
             * exp(-tau alpha / (2 omega))

so shape ``a = alpha/2`` and rate ``b = alpha / (2 omega)``. Given ``k`` zero-mean Gaussian
quantities ``w`` of precision ``tau``, the conditional is again Gamma (conjugacy) with
shape ``(alpha + k) / 2`` and rate ``alpha / (2 omega) + sum(w**2) / 2``, i.e. mean
``(alpha + k) / (alpha / omega + sum(w**2))``; `gibbs_precisions` draws from it. An
``alpha`` of ``inf`` fixes the precision at ``omega`` (no hyperparameter).

The sampler's state is one flat vector: the weights (in `ravel_pytree` order of the weight
dict) followed by the log precisions. The joint log density over (weights, log precisions)
includes the Jacobian ``log tau`` of each log precision, so NUTS can sample it directly,
while `adaptmc_lab.models.bnn_hmc` alternates HMC on the weights with Gibbs draws of the
precisions (Neal 1996, Ch. 3).
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jax.scipy.special import gammaln

from adaptmc.targets.base import Target, make_target

Array = jax.Array

LIKELIHOODS = ("gaussian", "bernoulli", "categorical")
WEIGHT_GROUPS = ("input_hidden", "hidden_bias", "hidden_output", "output_bias")
"""The weight groups of a network with one hidden layer (`weight_groups` for any)."""


class MLPSpec(NamedTuple):
    """Architecture: ``num_inputs -> num_hidden (tanh) -> num_outputs``; ``num_hidden`` an int
    (one hidden layer) or a tuple of layer widths, e.g. ``(20, 8)`` for Dexter's network.

    likelihood: ``"gaussian"`` (linear outputs, regression), ``"bernoulli"`` (one logistic
    output) or ``"categorical"`` (softmax over ``num_outputs`` classes); ard: one precision
    per input for the input-to-hidden weights (automatic relevance determination).
    """

    num_inputs: int
    num_hidden: int | tuple[int, ...]
    num_outputs: int
    likelihood: str = "gaussian"
    ard: bool = False

    @property
    def hidden_sizes(self) -> tuple[int, ...]:
        """Widths of the hidden layers, first to last."""
        if isinstance(self.num_hidden, int | np.integer):
            return (int(self.num_hidden),)
        return tuple(int(h) for h in self.num_hidden)


def weight_groups(spec: MLPSpec) -> tuple[str, ...]:
    """Names of the weight groups in prior order: ``WEIGHT_GROUPS`` for one hidden layer, with
    ``hidden{l-1}_hidden{l}`` and ``hidden{l}_bias`` for layers ``l = 2, ...`` inserted after
    the first layer's groups."""
    deeper = tuple(g for l in range(2, len(spec.hidden_sizes) + 1)
                   for g in (f"hidden{l - 1}_hidden{l}", f"hidden{l}_bias"))
    return WEIGHT_GROUPS[:2] + deeper + WEIGHT_GROUPS[2:]


class GammaPrior(NamedTuple):
    """Neal's ``width:alpha``: precision ~ Gamma(shape alpha/2, mean scale / width**2).

    ``scale`` multiplies the mean precision (FBM's ``x`` prefix scales the hidden-to-output
    precision with the number of hidden units, Neal 1996, Ch. 2). ``alpha = inf``: fixed.
    """

    width: float
    alpha: float
    scale: float = 1.0

    @property
    def mean(self) -> float:
        return self.scale / self.width**2

    @property
    def fixed(self) -> bool:
        return math.isinf(self.alpha)


class BNNPrior(NamedTuple):
    """Hyperpriors per weight group and for the noise precision (regression only);
    ``deeper``: ``(weights, biases)`` priors of hidden layers 2, 3, ... (`group_prior`)."""

    input_hidden: GammaPrior
    hidden_bias: GammaPrior
    hidden_output: GammaPrior
    output_bias: GammaPrior
    noise: GammaPrior
    deeper: tuple[tuple[GammaPrior, GammaPrior], ...] = ()


def group_prior(prior: BNNPrior, group: str) -> GammaPrior:
    """The hyperprior of a weight group (or ``noise``) by name."""
    match = re.fullmatch(r"hidden(\d+)_(hidden\d+|bias)", group)
    if match is None:
        return getattr(prior, group)
    layer = int(match.group(1)) + (1 if match.group(2) != "bias" else 0)
    if not 2 <= layer <= len(prior.deeper) + 1:
        raise ValueError(f"no prior for {group!r}: BNNPrior.deeper has {len(prior.deeper)} "
                         "layers")
    return prior.deeper[layer - 2][0 if match.group(2) != "bias" else 1]


def neal_prior(spec: MLPSpec) -> BNNPrior:
    """The robot-arm priors of Neal (1996, Ch. 3; FBM ``rlog.net``): ``0.05:0.5`` on the
    input-hidden weights, hidden biases and (scaled by the number of hidden units)
    hidden-output weights, output biases fixed at standard deviation 100, noise ``0.05:0.5``.
    Further hidden layers get ``0.05:0.5`` on their biases and on their weights, scaled by
    the width of the layer feeding them."""
    sizes = spec.hidden_sizes
    return BNNPrior(
        input_hidden=GammaPrior(0.05, 0.5),
        hidden_bias=GammaPrior(0.05, 0.5),
        hidden_output=GammaPrior(0.05, 0.5, scale=float(sizes[-1])),
        output_bias=GammaPrior(100.0, math.inf),
        noise=GammaPrior(0.05, 0.5),
        deeper=tuple((GammaPrior(0.05, 0.5, scale=float(sizes[l - 1])), GammaPrior(0.05, 0.5))
                     for l in range(1, len(sizes))),
    )


class BNN(NamedTuple):
    """A network, its priors and its training data.

    ``x: (n, num_inputs)``; ``y: (n, num_outputs)`` (gaussian), ``(n,)`` in {0, 1}
    (bernoulli) or ``(n,)`` integer labels (categorical).
    """

    spec: MLPSpec
    prior: BNNPrior
    x: Array
    y: Array


class BNNPosition(NamedTuple):
    """The parameter pytree: ``weights`` (a dict of the four groups) and ``log_precisions``
    (a dict of the non-fixed groups, plus ``noise`` for regression). Weights come first in
    the flat vector."""

    weights: dict
    log_precisions: dict


def make_bnn(spec: MLPSpec, x, y, prior: BNNPrior | None = None) -> BNN:
    """Check shapes and build a `BNN` (float data as ``jnp`` arrays)."""
    if spec.likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {spec.likelihood!r}")
    for name in ("num_inputs", "num_outputs"):
        if int(getattr(spec, name)) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(spec, name)}")
    if not spec.hidden_sizes or min(spec.hidden_sizes) < 1:
        raise ValueError(f"num_hidden must be >= 1 (each layer), got {spec.num_hidden}")
    x = jnp.asarray(x, dtype=jnp.result_type(float))
    if x.ndim != 2 or x.shape[1] != spec.num_inputs:
        raise ValueError(f"x must have shape (n, {spec.num_inputs}), got {x.shape}")
    if spec.likelihood == "gaussian":
        y = jnp.asarray(y, dtype=x.dtype)
        if y.shape != (x.shape[0], spec.num_outputs):
            raise ValueError(f"y must have shape ({x.shape[0]}, {spec.num_outputs}), got {y.shape}")
    else:
        if spec.likelihood == "bernoulli" and spec.num_outputs != 1:
            raise ValueError("a bernoulli network has num_outputs=1")
        y = jnp.asarray(y)
        if y.shape != (x.shape[0],):
            raise ValueError(f"y must have shape ({x.shape[0]},), got {y.shape}")
        y = y.astype(x.dtype if spec.likelihood == "bernoulli" else jnp.int32)
    if not bool(jnp.all(jnp.isfinite(x))):
        raise ValueError("x contains NaN or inf")
    return BNN(spec, prior if prior is not None else neal_prior(spec), x, y)


# ----------------------------------------------------------------------------- structure


def precision_groups(model: BNN) -> tuple[str, ...]:
    """Names of the sampled precisions: the non-fixed weight groups, then ``noise``."""
    groups = tuple(g for g in weight_groups(model.spec) if not group_prior(model.prior, g).fixed)
    if model.spec.likelihood == "gaussian" and not model.prior.noise.fixed:
        groups = groups + ("noise",)
    return groups


def _precision_shape(model: BNN, group: str) -> tuple[int, ...]:
    return (model.spec.num_inputs,) if group == "input_hidden" and model.spec.ard else ()


def zero_weights(spec: MLPSpec, dtype=None) -> dict:
    """``input_hidden: (I, H1)``, ``hidden_bias: (H1,)``, ``hidden{l-1}_hidden{l}: (H{l-1},
    H{l})``, ``hidden{l}_bias: (H{l},)``, ``hidden_output: (HL, K)``, ``output_bias: (K,)``."""
    dtype = dtype or jnp.result_type(float)
    sizes, k = spec.hidden_sizes, spec.num_outputs
    weights = {
        "input_hidden": jnp.zeros((spec.num_inputs, sizes[0]), dtype),
        "hidden_bias": jnp.zeros((sizes[0],), dtype),
        "hidden_output": jnp.zeros((sizes[-1], k), dtype),
        "output_bias": jnp.zeros((k,), dtype),
    }
    for l in range(2, len(sizes) + 1):
        weights[f"hidden{l - 1}_hidden{l}"] = jnp.zeros((sizes[l - 2], sizes[l - 1]), dtype)
        weights[f"hidden{l}_bias"] = jnp.zeros((sizes[l - 1],), dtype)
    return weights


def initial_position(model: BNN, key: Array | None = None, sd: float = 0.5) -> BNNPosition:
    """Neal's start (FBM ``net-gen fix 0.5``): every hyperparameter at standard deviation
    ``sd``; weights zero, or ``N(0, 0.1**2)`` when ``key`` is given."""
    weights = zero_weights(model.spec, model.x.dtype)
    if key is not None:
        leaves, treedef = jax.tree.flatten(weights)
        keys = jax.random.split(key, len(leaves))
        leaves = [
            0.1 * jax.random.normal(k, w.shape, w.dtype)
            for k, w in zip(keys, leaves, strict=True)
        ]
        weights = jax.tree.unflatten(treedef, leaves)
    log_prec = {
        g: jnp.full(_precision_shape(model, g), -2.0 * math.log(sd), model.x.dtype)
        for g in precision_groups(model)
    }
    return BNNPosition(weights, log_prec)


class Layout(NamedTuple):
    """How the flat vector splits: ``num_weights`` then ``num_precisions`` log precisions."""

    num_weights: int
    num_precisions: int
    unravel_weights: Any
    unravel_precisions: Any

    @property
    def dim(self) -> int:
        return self.num_weights + self.num_precisions


def layout(model: BNN) -> Layout:
    pos = initial_position(model)
    w, unravel_w = ravel_pytree(pos.weights)
    h, unravel_h = ravel_pytree(pos.log_precisions)
    return Layout(int(w.size), int(h.size), unravel_w, unravel_h)


def unravel(model: BNN, position: Array) -> BNNPosition:
    """``position: (dim,)`` -> `BNNPosition`."""
    lay = layout(model)
    return BNNPosition(
        lay.unravel_weights(position[: lay.num_weights]),
        lay.unravel_precisions(position[lay.num_weights :]),
    )


# ----------------------------------------------------------------------------- densities


def forward(spec: MLPSpec, weights: dict, x: Array) -> Array:
    """Network outputs (before the link): ``x: (n, I) -> (n, K)``."""
    hidden = jnp.tanh(x @ weights["input_hidden"] + weights["hidden_bias"])
    for l in range(2, len(spec.hidden_sizes) + 1):
        hidden = jnp.tanh(hidden @ weights[f"hidden{l - 1}_hidden{l}"] + weights[f"hidden{l}_bias"])
    return hidden @ weights["hidden_output"] + weights["output_bias"]


def all_precisions(model: BNN, log_precisions: dict) -> dict:
    """Precision of every weight group and the noise, fixed ones included."""
    out = {}
    for g in weight_groups(model.spec) + ("noise",):
        if g in log_precisions:
            out[g] = jnp.exp(log_precisions[g])
        else:
            out[g] = jnp.asarray(group_prior(model.prior, g).mean, model.x.dtype)
    return out


def _sum_squares(model: BNN, weights: dict, group: str) -> tuple[Array, int]:
    """Sum of squared weights of ``group`` (per input under ARD) and the count per precision."""
    w = weights[group]
    if group == "input_hidden" and model.spec.ard:
        return jnp.sum(w * w, axis=1), model.spec.hidden_sizes[0]
    return jnp.sum(w * w), int(np.prod(w.shape))


def log_likelihood(model: BNN, weights: dict, noise_precision: Array, mask: Array) -> Array:
    """``sum_c mask_c log p(y_c | x_c, w)``; ``mask: (n,)`` of 0/1 case weights, so held-out
    cases of a cross-validation fold contribute exactly zero (value and gradient)."""
    return jnp.sum(mask * pointwise_log_likelihood(model, weights, noise_precision))


def pointwise_log_likelihood(model: BNN, weights: dict, noise_precision: Array) -> Array:
    """``log p(y_c | x_c, w, tau)`` of each case: ``(n,)``; a case of a Gaussian network is
    its row of ``K`` outputs."""
    f = forward(model.spec, weights, model.x)
    if model.spec.likelihood == "gaussian":
        resid = model.y - f
        per_case = 0.5 * (
            f.shape[1] * (jnp.log(noise_precision) - math.log(2 * math.pi))
            - noise_precision * jnp.sum(resid * resid, axis=1)
        )
    elif model.spec.likelihood == "bernoulli":
        logit = f[:, 0]
        per_case = model.y * jax.nn.log_sigmoid(logit) + (1 - model.y) * jax.nn.log_sigmoid(-logit)
    else:
        logp = jax.nn.log_softmax(f, axis=1)
        per_case = jnp.take_along_axis(logp, model.y[:, None], axis=1)[:, 0]
    return per_case


def log_prior_weights(model: BNN, weights: dict, precisions: dict) -> Array:
    """Zero-mean Gaussian prior of each group at its precision (normalised)."""
    total = jnp.asarray(0.0, model.x.dtype)
    for g in weight_groups(model.spec):
        ss, count = _sum_squares(model, weights, g)
        tau = precisions[g]
        log_norm = 0.5 * count * (jnp.log(tau) - math.log(2 * math.pi))
        total = total + jnp.sum(log_norm - 0.5 * tau * ss)
    return total


def log_gamma_density(tau: Array, prior: GammaPrior) -> Array:
    """``log p(tau)`` for Gamma(shape alpha/2, rate alpha/(2 mean))."""
    shape = prior.alpha / 2
    rate = prior.alpha / (2 * prior.mean)
    return shape * jnp.log(rate) - gammaln(shape) + (shape - 1) * jnp.log(tau) - rate * tau


def log_joint(model: BNN, position: Array, mask: Array | None = None) -> Array:
    """Joint log density of (weights, log precisions): likelihood, Gaussian weight priors,
    Gamma hyperpriors and the Jacobian ``sum log tau``. ``position: (dim,)``."""
    mask = jnp.ones(model.x.shape[0], model.x.dtype) if mask is None else mask
    pos = unravel(model, position)
    precisions = all_precisions(model, pos.log_precisions)
    total = log_likelihood(model, pos.weights, precisions["noise"], mask)
    total = total + log_prior_weights(model, pos.weights, precisions)
    for g, log_tau in pos.log_precisions.items():
        prior = group_prior(model.prior, g)
        total = total + jnp.sum(log_gamma_density(jnp.exp(log_tau), prior) + log_tau)
    return total


def bnn_target(model: BNN, name: str = "bnn", key: Array | None = None) -> Target:
    """The joint posterior over (weights, log precisions) as a `Target` on the full data;
    ``info["bnn"]`` holds the model for `adaptmc_lab.models.bnn_hmc`."""
    mask = jnp.ones(model.x.shape[0], model.x.dtype)
    return make_target(
        lambda pos: log_joint(model, jnp.concatenate([ravel_pytree(pos.weights)[0],
                                                      ravel_pytree(pos.log_precisions)[0]]),
                              mask),
        initial_position(model, key),
        name=name,
        info={"bnn": model, "masks": None},
    )


# ----------------------------------------------------------------------------- Gibbs


def gamma_conditional(model: BNN, weights: dict, mask: Array) -> dict:
    """Shape and rate of the Gamma conditional of each sampled precision given the weights
    (and, for the noise, the residuals of the cases with ``mask = 1``)."""
    out = {}
    for g in precision_groups(model):
        prior = group_prior(model.prior, g)
        if g == "noise":
            resid = model.y - forward(model.spec, weights, model.x)
            ss = jnp.sum(mask * jnp.sum(resid * resid, axis=1))
            count = jnp.sum(mask) * model.spec.num_outputs
        else:
            ss, count = _sum_squares(model, weights, g)
        shape = (prior.alpha + count) / 2
        rate = prior.alpha / (2 * prior.mean) + ss / 2
        out[g] = (shape * jnp.ones_like(ss), rate)
    return out


def gibbs_precisions(key: Array, model: BNN, weights: dict, mask: Array) -> dict:
    """Draw every sampled precision from its Gamma conditional; returns log precisions.

    Neal (1996), Ch. 3: the hyperparameters are updated by Gibbs sampling between HMC
    trajectories on the weights.
    """
    cond = gamma_conditional(model, weights, mask)
    keys = jax.random.split(key, max(len(cond), 1))[: len(cond)]
    out = {}
    for k, (g, (shape, rate)) in zip(keys, cond.items(), strict=True):
        draw = jax.random.gamma(k, shape, dtype=model.x.dtype)
        out[g] = jnp.log(draw) - jnp.log(rate)
    return out


# ----------------------------------------------------------------------------- step sizes


def step_scales(model: BNN, log_precisions: dict, mask: Array) -> Array:
    """Neal's per-weight step-size scales from the current precisions: ``(num_weights,)``.

    Neal (1996), Ch. 3 (FBM ``net-mc``): the step for weight ``w`` is
    ``eps * s_w`` with ``s_w = H_w**(-1/2)``, where ``H_w`` estimates the second derivative of
    minus the log posterior: the prior precision of its group plus, for the likelihood, the
    sum over training cases of the squared source-unit value times the second derivative
    with respect to the destination unit. Tanh hidden values are bounded by 1; the
    output-unit curvature is the noise precision (1/4 for logistic and softmax outputs); the
    hidden-unit curvature sums, over outputs, the output curvature times the prior variance
    of a hidden-output weight (not the weights themselves, so the scales depend only on the
    hyperparameters and the training inputs). With several hidden layers the unit curvature
    is propagated back the same way, layer by layer (width of the next layer times its unit
    curvature over the precision of the weights into it).
    """
    spec, sizes = model.spec, model.spec.hidden_sizes
    prec = all_precisions(model, log_precisions)
    num_cases = jnp.sum(mask)
    out_curv = prec["noise"] if spec.likelihood == "gaussian" else jnp.asarray(0.25, model.x.dtype)
    # curvature of a unit of each hidden layer, propagated back from the outputs
    unit_curv = [spec.num_outputs * out_curv / prec["hidden_output"]]
    for l in range(len(sizes), 1, -1):
        unit_curv.insert(0, sizes[l - 1] * unit_curv[0] / prec[f"hidden{l - 1}_hidden{l}"])
    hidden_curv = unit_curv[0]
    input_sq = jnp.sum(mask[:, None] * model.x * model.x, axis=0)  # (I,)
    tau_in = jnp.broadcast_to(prec["input_hidden"], (spec.num_inputs,))
    curvature = {
        "input_hidden": jnp.broadcast_to(
            (tau_in + input_sq * hidden_curv)[:, None], (spec.num_inputs, sizes[0])
        ),
        "hidden_bias": jnp.full((sizes[0],), prec["hidden_bias"] + num_cases * hidden_curv),
        "hidden_output": jnp.full(
            (sizes[-1], spec.num_outputs), prec["hidden_output"] + num_cases * out_curv
        ),
        "output_bias": jnp.full((spec.num_outputs,), prec["output_bias"] + num_cases * out_curv),
    }
    for l in range(2, len(sizes) + 1):  # tanh sources: squared values at most 1 per case
        into = f"hidden{l - 1}_hidden{l}"
        curvature[into] = jnp.full((sizes[l - 2], sizes[l - 1]),
                                   prec[into] + num_cases * unit_curv[l - 1])
        curvature[f"hidden{l}_bias"] = jnp.full(
            (sizes[l - 1],), prec[f"hidden{l}_bias"] + num_cases * unit_curv[l - 1])
    flat, _ = ravel_pytree(curvature)
    return 1.0 / jnp.sqrt(flat)


# ----------------------------------------------------------------------------- prediction


def predict(model: BNN, weight_draws: dict, x: Array) -> Array:
    """Per-draw predictions: ``weight_draws`` has a leading ``(draws,)`` axis on every leaf;
    ``x: (n, I)`` -> ``(draws, n, K)``: means (gaussian), ``P(y=1)`` (bernoulli, K = 1) or
    class probabilities (categorical)."""
    f = jax.vmap(lambda w: forward(model.spec, w, x))(weight_draws)
    if model.spec.likelihood == "bernoulli":
        return jax.nn.sigmoid(f)
    if model.spec.likelihood == "categorical":
        return jax.nn.softmax(f, axis=-1)
    return f


def predict_flat(model: BNN, positions: Array, x: Array) -> Array:
    """`predict` from flat positions ``(draws, dim)`` -> ``(draws, n, K)``."""
    lay = layout(model)
    weights = jax.vmap(lay.unravel_weights)(positions[:, : lay.num_weights])
    return predict(model, weights, x)


def predictive_mean(model: BNN, positions: Array, x: Array) -> Array:
    """Posterior predictive mean ``(n, K)`` averaged over ``positions: (draws, dim)``."""
    return jnp.mean(predict_flat(model, positions, x), axis=0)


def squared_error(mean: Array, y: Array) -> Array:
    """Mean over cases of the squared error summed over outputs; ``mean, y: (n, K)``."""
    return jnp.mean(jnp.sum((mean - y) ** 2, axis=-1))


def error_rate(probs: Array, y: Array) -> Array:
    """Fraction misclassified; ``probs: (n, 1)`` (bernoulli) or ``(n, K)``; ``y: (n,)``."""
    if probs.shape[-1] == 1:
        guess = (probs[:, 0] > 0.5).astype(y.dtype)
    else:
        guess = jnp.argmax(probs, axis=-1).astype(y.dtype)
    return jnp.mean(guess != y)


def log_loss(probs: Array, y: Array, floor: float = 1e-12) -> Array:
    """Mean negative log predictive probability of the labels ``y: (n,)``."""
    if probs.shape[-1] == 1:
        p = jnp.where(y > 0.5, probs[:, 0], 1.0 - probs[:, 0])
    else:
        p = jnp.take_along_axis(probs, y.astype(jnp.int32)[:, None], axis=-1)[:, 0]
    return -jnp.mean(jnp.log(jnp.maximum(p, floor)))
