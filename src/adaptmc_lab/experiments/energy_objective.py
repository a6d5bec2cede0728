"""The Ising reproduction's reward: the autocorrelation of the energy trace over a window
of lags in cost units (Mahendran, Wang, Hamze & de Freitas 2012, Sec. 3), for the discrete
kernels whose moves spend flips, not gradients."""

from __future__ import annotations

import math

import numpy as np

from adaptmc import diagnostics


def windowed_autocorrelation(trace: np.ndarray, cost_per_draw: float,
                             window: tuple[float, float], variance: float | None = None) -> float:
    """The talk's objective ``h = 1 - mean_{l in window} |rho(l)|`` (Mahendran, Wang, Hamze
    & de Freitas 2012, Sec. 3: the autocorrelation of a scalar trace, the energy, averaged
    over a window of lags; higher is better).

    ``trace: (chains, draws)``. Lags are in units of cost (flips, gradients), so settings of
    different cost per draw are compared at equal cost: ``rho`` at ``l`` cost units is the
    chains' autocorrelation at ``l / cost_per_draw`` draws, linearly interpolated between
    whole lags (``rho(0) = 1``), at 32 lags evenly spread over ``window``; lags beyond half
    the draws use the last one available.

    ``variance``: the trace's stationary variance when it is known from elsewhere (a burn-in:
    every setting leaves the same distribution invariant, so it is the same for all). Then
    ``rho(l) = 1 - v(l) / variance`` with ``v(l) = E (x_{t+l} - x_t)^2 / 2`` the
    semivariogram (an identity of stationary processes), and ``h = mean_l v(l) / variance``
    (no absolute value: a jump larger than the variance is not penalised). Without it each
    chain's own mean and variance over the segment are used, and a segment much shorter
    than the autocorrelation time sees only the fast fluctuations: a setting that jitters
    the trace without moving its slow part scores well.
    """
    trace = np.asarray(trace, dtype=float)
    if trace.ndim != 2 or trace.shape[1] < 4 or not np.all(np.isfinite(trace)):
        return float("nan")
    low, high = window
    max_lag = max(1, min(trace.shape[1] // 2, math.ceil(high / cost_per_draw) + 1))
    lags = np.minimum(np.linspace(low, high, 32) / cost_per_draw, max_lag)
    if variance is None:
        acf = diagnostics.autocorrelation(trace, max_lag)
        return float(1.0 - np.mean(np.abs(np.interp(lags, np.arange(acf.size), acf))))
    if not (np.isfinite(variance) and variance > 0):
        raise ValueError(f"variance must be finite and positive, got {variance}")
    whole = np.unique(np.concatenate([np.floor(lags), np.ceil(lags)])).astype(int)
    semivariogram = [0.5 * np.mean((trace[:, k:] - trace[:, : trace.shape[1] - k]) ** 2)
                     for k in whole]
    return float(np.mean(np.interp(lags, whole, semivariogram)) / variance)


def energy_autocorrelation(energy, window: tuple[float, float] = (1.0, 100.0),
                           variance: float | None = None):
    """An objective ``(positions, stats, num_grads) -> h`` from `windowed_autocorrelation` of
    the trace ``energy(positions): (chains, draws, dim) -> (chains, draws)`` (for the
    discrete kernels: the model's energy), ``window`` in cost units (flips); ``variance``:
    the energy's stationary variance, when known (from a burn-in)."""

    def objective(positions: np.ndarray, stats: dict, num_grads: int) -> float:
        # no divergence check: a discrete move with a log ratio below -1000 is only a
        # rejection, though the M-H helper flags it
        if positions.shape[1] < 4:
            return float("nan")
        cost_per_draw = num_grads / (positions.shape[0] * positions.shape[1])
        return windowed_autocorrelation(np.asarray(energy(positions)), cost_per_draw, window,
                                        variance)

    return objective
