"""The warm-up's final step size: where the final window's transitions say the acceptance
statistic meets its target, not dual averaging's averaged iterate.

Dual averaging (Hoffman & Gelman 2014, Alg. 5) drives the *mean* acceptance of the steps it
explores to the target ``delta``; its averaged iterate ``xbar`` is the mean of those log
steps. The acceptance falls faster above the right step than it rises below it, so the
explored steps' mean acceptance is below the acceptance at their mean step: over a window
of tens of transitions, as the warm-up's final one, ``exp(xbar)`` is a step whose realised
acceptance is well above ``delta`` (measured in docs/notes/nutseff.md: 0.89-0.90 for a
target of 0.8, NUTS then spending 1.3-1.5 times nutpie's gradients a draw).

Here the acceptance of every transition of the window is modelled by Beskos, Pillai,
Roberts, Sanz-Serna & Stuart's limit for HMC (2013, "Optimal tuning of the hybrid Monte
Carlo algorithm", Bernoulli 19, Sec. 3: ``a = 2 Phi(-l^2 sqrt(Sigma) / 2)`` for steps
``l d^(-1/4)``), ``a(eps) = 2 Phi(-c eps^2)``, for NUTS's statistic (the mean over a
trajectory) an approximation that held to 0.01-0.03 on steps 0.8-1.5 times the averaged
one (docs/notes/nutseff.md). The constant ``c`` is the one
whose modelled mean acceptance over the window's steps equals the realised one (pooled over
chains: they share the metric); the step with ``a = delta``, kept inside the range of
steps the window ran (no extrapolation), over the chains' median averaged step is the
factor every chain's averaged step is corrected by.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr, ndtri

MIN_TRANSITIONS = 20
"""Transitions the fit needs; with fewer, the averaged steps stay."""


def modelled_step(steps: np.ndarray, acceptance: np.ndarray, target: float) -> float | None:
    """The step at which ``a(eps) = 2 Phi(-c eps^2)`` (module docstring), with ``c`` fitted
    to transitions run at ``steps`` with acceptance statistics ``acceptance`` (any shape,
    NaN counted as 0), reaches ``target``; clipped to ``[min steps, max steps]``. None when
    there are fewer than `MIN_TRANSITIONS` or every transition was accepted or rejected
    outright (nothing to fit)."""
    eps = np.asarray(steps, dtype=float).ravel()
    acc = np.nan_to_num(np.asarray(acceptance, dtype=float).ravel(), nan=0.0)
    keep = np.isfinite(eps) & (eps > 0)
    eps, acc = eps[keep], np.clip(acc[keep], 0.0, 1.0)
    mean = float(np.mean(acc)) if eps.size else float("nan")
    if eps.size < MIN_TRANSITIONS or not 0.0 < mean < 1.0:
        return None
    lo, hi = -30.0, 30.0  # log c; the modelled mean falls as c grows
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if np.mean(2.0 * ndtr(-np.exp(mid) * eps**2)) > mean:
            lo = mid
        else:
            hi = mid
    c = np.exp(0.5 * (lo + hi))
    step = np.sqrt(-ndtri(target / 2.0) / c)
    return float(np.clip(step, eps.min(), eps.max()))


def final_step_sizes(averaged: np.ndarray, steps: np.ndarray, acceptance: np.ndarray,
                     target: float) -> np.ndarray:
    """``(chains,)`` the steps to sample with: each chain's ``averaged`` step (dual
    averaging's, per chain as Stan and nutpie keep them) times one factor, `modelled_step`
    of the final window's ``steps, acceptance: (chains, n)`` (pooled) over the chains'
    median averaged step; the averaged steps when there is nothing to fit."""
    averaged = np.asarray(averaged, dtype=float)
    step = modelled_step(steps, acceptance, target)
    return averaged if step is None else averaged * (step / np.median(averaged))
