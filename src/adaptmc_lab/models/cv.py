"""Cross-validated predictive rewards: a product chain over n copies of a model.

Wang & de Freitas (2011), "Predictive adaptation of hybrid Monte Carlo with Bayesian
parametric bandits", Sec. 3.2; Wang (2012), Sec. 4.1. For n-fold cross-validation, n copies
of the network run as one product chain, copy k trained on every fold but k; after each
super-transition, copy k predicts its held-out fold from the draws of that super-transition
only, and the mean held-out loss is the bandit's reward (its negative: higher is better;
normalisation to [0, 1] is the tuner's business).

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


def copy_draws(positions: np.ndarray, copies: int) -> np.ndarray:
    """``positions: (chains, draws, copies * dim) -> (copies, chains * draws, dim)``."""
    positions = np.asarray(positions)
    chains, draws, total = positions.shape
    rows = positions.reshape(chains * draws, copies, total // copies)
    return np.moveaxis(rows, 1, 0)


def cv_loss(model: bnn.BNN, masks: np.ndarray, positions: np.ndarray, loss: str = "mse",
            folds: Sequence[int] | None = None, max_draws: int = 200,
            inputs: np.ndarray | None = None) -> float:
    """Mean over folds of the held-out loss of each fold's posterior predictive mean.

    ``positions: (chains, draws, copies * dim)``; ``folds``: the rows of ``masks`` that are
    folds (default: every row whose mask has a zero); at most ``max_draws`` draws, evenly
    thinned, enter each prediction. ``loss``: ``"mse"`` (squared error summed over outputs),
    ``"error_rate"`` or ``"log_loss"`` (`adaptmc_lab.models.bnn.LOSSES`); ``inputs: (copies, n,
    I)``: per-copy inputs (`product_target`).
    """
    if loss not in bnn.LOSSES:
        raise ValueError(f"loss must be one of {sorted(bnn.LOSSES)}, got {loss!r}")
    masks = np.asarray(masks)
    if folds is None:
        folds = [k for k in range(masks.shape[0]) if np.any(masks[k] == 0)]
    draws = copy_draws(positions, masks.shape[0])
    if draws.shape[1] > max_draws:
        draws = draws[:, np.linspace(0, draws.shape[1] - 1, max_draws).round().astype(int)]
    losses = []
    for k in folds:
        held = np.flatnonzero(masks[k] == 0)
        x = model.x if inputs is None else jnp.asarray(inputs[k], model.x.dtype)
        mean = bnn.predictive_mean(model, jnp.asarray(draws[k]), x[held])
        losses.append(float(bnn.LOSSES[loss](mean, model.y[held])))
    return float(np.mean(losses))


def cv_objective(model: bnn.BNN, masks: np.ndarray, loss: str = "mse",
                 folds: Sequence[int] | None = None, log_scale: bool = False,
                 max_draws: int = 200, fail_when_stuck: bool = False,
                 inputs: np.ndarray | None = None):
    """The predictive reward as a run-loop objective ``(positions, stats, num_grads) ->
    float``: minus the mean cross-validated loss of the draws of one super-transition (Wang
    & de Freitas 2011, Sec. 3.2), or minus its log with ``log_scale``. Rejections and
    divergent trajectories are part of the chain and do not void the reward; a non-finite
    loss gives NaN, and so, with ``fail_when_stuck``, does a super-transition in which no
    proposal was accepted (``stats["accepted"]`` all false): it drew nothing new, and the
    prediction of its single repeated state says little about the setting. ``inputs``: see
    `cv_loss`."""

    def objective(positions: np.ndarray, stats: dict, num_grads: int) -> float:
        if positions.shape[1] < 1:
            return float("nan")
        if fail_when_stuck and "accepted" in stats and not np.any(stats["accepted"]):
            return float("nan")
        value = cv_loss(model, masks, positions, loss, folds, max_draws, inputs)
        if not np.isfinite(value) or (log_scale and value <= 0):
            return float("nan")
        return float(-np.log(value) if log_scale else -value)

    return objective
