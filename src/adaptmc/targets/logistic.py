"""Bayesian logistic regression with a N(0, prior_variance) prior on every coefficient
(prior variance 100 as in Girolami & Calderhead 2011, Sec. 7)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.datasets.logistic import LogisticData, load_logistic
from adaptmc.targets.base import Target, check_finite_data, make_target


def logistic_regression(
    features, labels, prior_variance: float = 100.0, name: str = "logistic"
) -> Target:
    """Posterior of ``beta: (p,)`` with ``y_i ~ Bernoulli(sigmoid(x_i . beta))``.

    Parameters
    ----------
    features
        ``(n, p)`` design matrix (include an intercept column yourself).
    labels
        ``(n,)`` in {0, 1}.
    """
    x = check_finite_data("features", features)
    y = check_finite_data("labels", labels)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"features must be (n, p) and labels (n,); got {x.shape} and {y.shape}")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("labels must be 0 or 1")
    if prior_variance <= 0:
        raise ValueError("prior_variance must be positive")
    xj, yj = jnp.asarray(x), jnp.asarray(y)

    def logdensity(beta):
        logits = xj @ beta
        loglik = jnp.sum(yj * logits - jax.nn.softplus(logits))
        return loglik - 0.5 * jnp.sum(beta**2) / prior_variance

    return make_target(
        logdensity,
        jnp.zeros(x.shape[1]),
        name=name,
        info={"n": x.shape[0], "prior_variance": prior_variance},
    )


def logistic_dataset(name_or_path: str, prior_variance: float = 100.0) -> Target:
    """`logistic_regression` on one of the shared sets (standardised inputs + intercept)."""
    data: LogisticData = load_logistic(name_or_path)
    return logistic_regression(
        data.features, data.labels, prior_variance, name=f"logistic-{data.name}"
    )
