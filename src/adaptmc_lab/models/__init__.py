"""Models with structure beyond a log density: Bayesian neural networks (priors, Gibbs
updates of hyperparameters, predictions) and cross-validated product chains over them."""

from adaptmc_lab.models.bnn import (
    BNN,
    BNNPosition,
    BNNPrior,
    GammaPrior,
    MLPSpec,
    bnn_target,
    make_bnn,
    neal_prior,
)
from adaptmc_lab.models.bnn_hmc import BNNHMCParams, BNNState, bnn_hmc
from adaptmc_lab.models.cv import heldout_pointwise, kfold_masks, product_target

__all__ = [
    "BNN",
    "BNNHMCParams",
    "BNNPosition",
    "BNNPrior",
    "BNNState",
    "GammaPrior",
    "MLPSpec",
    "bnn_hmc",
    "bnn_target",
    "heldout_pointwise",
    "kfold_masks",
    "make_bnn",
    "neal_prior",
    "product_target",
]
