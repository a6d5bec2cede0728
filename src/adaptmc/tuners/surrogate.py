"""Surrogates of the reward over a box: reward normalisation, and the GP and NIG models with
the hyperparameters that define them.

A bandit (Wang 2012, Algorithm 3; Wang & de Freitas 2011, Algorithm 2) models the reward of
a setting from the settings tried so far. Rewards are normalised to ``[0, 1]`` over those
seen, a failed (NaN or divergent) super-transition scoring 0, the worst
(`normalise_rewards`); points are mapped to the unit cube of the box. The hyperparameters
live in small NamedTuples (`GPConfig`, `NIGConfig`) whose ``_asdict()`` is what a tuner
records (``Tuner.describe``) and what `adaptmc.plots` refits with (`gp_config_from`,
`nig_config_from`).

The unit-cube models themselves are `adaptmc.tuners.gp` and `adaptmc.tuners.nig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from adaptmc.tuners.box import Box, to_unit
from adaptmc.tuners.gp import GPPosterior, gp_fit
from adaptmc.tuners.nig import (
    DEFAULT_WIDTHS,
    ParametricModel,
    default_prior,
    fit_parametric,
)

SIGNAL_VAR = 0.1
"""Default GP signal variance on the ``[0, 1]`` scale of normalised rewards. A uniform reward
on ``[0, 1]`` has variance 1/12; with the earlier default 1.0 an unexplored setting's UCB,
``m + p_i sqrt(beta_i) * 1`` with ``sqrt(beta_i)`` about 4-5, beat the best setting by several
times the whole reward range for tens of steps, so GP-UCB kept trying the corners of the box
(e.g. the largest step size, which diverges)."""

NOISE_VAR = 0.01
"""Default GP noise variance: noise sd 0.1 is about the super-transition to super-transition
spread of a reward measured on a few thousand gradients."""

LOG_NOISE_VAR = 0.03
"""GP noise variance for rewards compared on the log scale (``GPConfig.log_rewards``): an
effective-draws-per-gradient reward estimated from one super-transition of ~60 draws per
chain has a relative sd of 0.2-0.5 (so a log sd of 0.3-0.5) at a fixed setting, measured over
40 consecutive super-transitions at each of 20 HMC settings on a posteriordb GP regression,
against a spread of log rewards over a tuning run of about 2-3: sd ~0.17 of the range."""

LENGTHSCALE_FRACTION = 0.2
"""Default GP lengthscales as a fraction of the box widths (``alpha`` of Wang 2012)."""


def log_scale(rewards: np.ndarray) -> np.ndarray:
    """``log r`` of positive rewards, NaN (a failure) for the others."""
    rewards = np.asarray(rewards, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(rewards > 0, np.log(rewards), np.nan)


def normalise_rewards(rewards: np.ndarray, log: bool = False) -> np.ndarray:
    """``rewards: (n,)`` -> ``(n,)`` in ``[0, 1]``: ``(r - min) / (max - min)`` over the finite
    rewards; a non-finite reward (a failed or divergent super-transition) scores 0, the worst.
    All-equal finite rewards score 0.5. With ``log``, the same of ``log r`` (a reward that
    is not positive scores 0): for a positive reward whose estimate's error is relative,
    as an effective sample size's is, so that one lucky super-transition does not stretch
    the scale and squeeze every other setting towards 0."""
    rewards = log_scale(rewards) if log else np.asarray(rewards, dtype=float)
    ok = np.isfinite(rewards)
    out = np.zeros_like(rewards)
    if ok.any():
        low, high = rewards[ok].min(), rewards[ok].max()
        out[ok] = (rewards[ok] - low) / (high - low) if high > low else 0.5
    return out


class GPConfig(NamedTuple):
    """The GP surrogate's hyperparameters: lengthscales ``lengthscale_fraction`` times the box
    widths, signal and noise variances on the ``[0, 1]`` scale of normalised rewards, and
    whether the rewards are normalised on the log scale (`normalise_rewards`)."""

    lengthscale_fraction: float = LENGTHSCALE_FRACTION
    signal_var: float = SIGNAL_VAR
    noise_var: float = NOISE_VAR
    log_rewards: bool = False


def fit_gp(box: Box, state: Mapping, config: GPConfig | None = None) -> GPPosterior:
    """The GP on the normalised rewards of ``state`` (``points: (n, d)`` in box units,
    ``rewards: (n,)`` raw, NaN for failures) in unit coordinates (Wang 2012, Algorithm 3);
    ``config`` defaults to ``GPConfig()``."""
    config = GPConfig() if config is None else config
    return gp_fit(to_unit(box, state["points"]),
                  normalise_rewards(state["rewards"], config.log_rewards),
                  np.full(box.dim, config.lengthscale_fraction), config.signal_var,
                  config.noise_var)


class NIGConfig(NamedTuple):
    """The NIG parametric surrogate's hyperparameters (Wang & de Freitas 2011): the number
    of RBF features, the RBF widths integrated over (unit-cube units) and the prior
    ``a0, b0, w0 = 0, V0 = v0 I``."""

    num_features: int = 20
    widths: tuple[float, ...] = DEFAULT_WIDTHS
    a0: float = 5.0
    b0: float = 10.0
    v0: float = 5.0


def fit_nig(box: Box, state: Mapping, centres: np.ndarray,
            config: NIGConfig | None = None) -> ParametricModel:
    """The NIG width mixture on the normalised rewards of ``state`` with RBF centres
    ``centres: (K, d)`` in unit coordinates; ``config`` defaults to ``NIGConfig()``."""
    config = NIGConfig() if config is None else config
    prior = default_prior(config.num_features, config.a0, config.b0, config.v0)
    return fit_parametric(to_unit(box, state["points"]), normalise_rewards(state["rewards"]),
                          np.asarray(centres), tuple(float(h) for h in config.widths), prior)


def gp_config_from(facts: Mapping) -> GPConfig:
    """The `GPConfig` in a tuner's recorded facts (``Tuner.describe``), defaults for any
    field they lack."""
    fields = {k: float(facts[k]) for k in GPConfig._fields if k in facts}
    return GPConfig(**{**fields, "log_rewards": bool(fields.get("log_rewards", False))})


def nig_config_from(facts: Mapping) -> NIGConfig:
    """The `NIGConfig` in a tuner's recorded facts, defaults for any field they lack."""
    fields = {k: facts[k] for k in NIGConfig._fields if k in facts}
    if "widths" in fields:
        fields["widths"] = tuple(float(h) for h in fields["widths"])
    if "num_features" in fields:
        fields["num_features"] = int(fields["num_features"])
    return NIGConfig(**fields)
