"""Cross-validated predictive rewards: a product chain over n copies of a model.

Wang & de Freitas (2011), "Predictive adaptation of hybrid Monte Carlo with Bayesian
parametric bandits", Sec. 3.2; Wang (2012), Sec. 4.1. For n-fold cross-validation, n copies
of the network run as one product chain, copy k trained on every fold but k; after each
super-transition, copy k predicts its held-out fold from the draws of that super-transition
only. The reward is the library's predictive objective (`adaptmc.heldout`) on the held-out
cases' pointwise log-likelihood (`heldout_pointwise`): the log score where the thesis used
the squared error (higher is better; normalisation to [0, 1] is the tuner's business).

Folds are masks, not index sets: every copy sees all n cases with 0/1 case weights, so the
copies have equal shapes and are vmapped; a held-out case has weight 0 in the likelihood
(value and gradient) and in the Gibbs update of the noise precision. Extra rows of ones may
follow the fold masks (a copy trained on the full data, run with the same parameters).

Copies may also differ in their inputs (``inputs: (copies, n, I)``), as when each fold selects
its own features from its own training cases (Dexter, Neal & Zhang 2006): copy k then uses
``model._replace(x=inputs[k])``.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.targets.base import Target
from adaptmc_lab.models import bnn

Array = jax.Array


def kfold_masks(num_cases: int, num_folds: int, seed: int = 0) -> np.ndarray:
    """Training masks of a random n-fold split: ``(num_folds, num_cases)`` with 0 on the
    cases held out by that fold and 1 elsewhere. Fold sizes differ by at most one; every
    case is held out by exactly one fold."""
    if num_folds < 2 or num_folds > num_cases:
        raise ValueError(f"num_folds must be in [2, {num_cases}], got {num_folds}")
    order = np.random.default_rng(seed).permutation(num_cases)
    masks = np.ones((num_folds, num_cases))
    for k, held in enumerate(np.array_split(order, num_folds)):
        masks[k, held] = 0.0
    return masks


def product_target(model: bnn.BNN, masks: np.ndarray, name: str = "bnn-cv",
                   key: Array | None = None, inputs: np.ndarray | None = None) -> Target:
    """The product of ``copies = masks.shape[0]`` joint posteriors, copy k weighting the
    cases by ``masks[k]`` (and, if ``inputs: (copies, n, I)`` is given, reading its inputs
    from ``inputs[k]``). Position ``(copies * dim,)``, copy by copy; ``unravel`` gives a
    `BNNPosition` with a leading ``(copies,)`` axis; names are prefixed ``net{k}.``."""
    masks = jnp.asarray(masks, model.x.dtype)
    if masks.ndim != 2 or masks.shape[1] != model.x.shape[0]:
        raise ValueError(f"masks must have shape (copies, {model.x.shape[0]}), got {masks.shape}")
    if inputs is not None:
        inputs = jnp.asarray(inputs, model.x.dtype)
        if inputs.shape != (masks.shape[0], *model.x.shape):
            raise ValueError(f"inputs must have shape ({masks.shape[0]}, {model.x.shape[0]}, "
                             f"{model.x.shape[1]}), got {inputs.shape}")
    single = bnn.bnn_target(model, key=key)
    copies, dim = masks.shape[0], single.dim

    def logdensity(position):
        rows = position.reshape(copies, dim)
        if inputs is None:
            return jnp.sum(jax.vmap(lambda r, m: bnn.log_joint(model, r, m))(rows, masks))
        return jnp.sum(jax.vmap(lambda r, m, x: bnn.log_joint(model._replace(x=x), r, m))(
            rows, masks, inputs))

    def unravel(position):
        return jax.vmap(lambda r: bnn.unravel(model, r))(position.reshape(copies, dim))

    names = tuple(f"net{k}.{n}" for k in range(copies) for n in single.parameter_names)
    return Target(
        name=name,
        logdensity=logdensity,
        dim=copies * dim,
        unravel=unravel,
        initial_position=jnp.tile(single.initial_position, copies),
        parameter_names=names,
        info={"bnn": model, "masks": masks, "copies": copies, "copy_dim": dim,
              "inputs": inputs},
    )


def heldout_pointwise(model: bnn.BNN, masks: np.ndarray, folds: Sequence[int] | None = None,
                      inputs: np.ndarray | None = None):
    """The pointwise log-likelihood of the held-out cases that the library's predictive
    objective reads (`adaptmc.heldout.predictive_objective`): ``position: (copies * dim,) ->
    (h,)``, for each fold ``k`` (rows of ``masks`` with a zero; default all of them) the
    log-likelihood ``log p(y_c | x_c, theta_k)`` of each case ``c`` that fold holds out, at
    copy ``k``'s parameters (weights and noise precision). With every case held out by one
    fold, the objective's mean over ``h = n`` cases of the log of the Monte Carlo predictive
    density is the k-fold cross-validated log score of one super-transition's draws (Wang &
    de Freitas 2011, Sec. 3.2, with the log score for the squared error). ``inputs``: see
    `product_target`."""
    masks = np.asarray(masks)
    if folds is None:
        folds = [k for k in range(masks.shape[0]) if np.any(masks[k] == 0)]
    held = [jnp.asarray(np.flatnonzero(masks[k] == 0)) for k in folds]
    xs = [model.x if inputs is None else jnp.asarray(inputs[k], model.x.dtype) for k in folds]
    copies = masks.shape[0]

    def pointwise(position: Array) -> Array:
        rows = position.reshape(copies, -1)
        values = []
        for k, cases, x in zip(folds, held, xs, strict=True):
            pos = bnn.unravel(model, rows[k])
            noise = bnn.all_precisions(model, pos.log_precisions)["noise"]
            per_case = bnn.pointwise_log_likelihood(model._replace(x=x), pos.weights, noise)
            values.append(per_case[cases])
        return jnp.concatenate(values)

    return pointwise
