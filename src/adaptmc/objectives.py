"""Rewards computed from one super-transition's draws.

Each objective is a pure function ``(positions, stats, num_grads) -> float`` where
``positions: (chains, draws, dim)``, ``stats`` maps per-step statistics to
``(chains, draws)`` arrays (``acceptance_rate``, ``is_divergent``, ...) and ``num_grads`` is
the gradient evaluations the super-transition spent over all chains. Higher is better. A
super-transition with a divergence or too few draws returns NaN, which tuners treat as a
failure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from adaptmc import diagnostics


def standardised(positions: np.ndarray) -> np.ndarray | None:
    """``positions: (chains, draws, dim)`` centred and scaled per coordinate by the mean and
    sd over all chains and draws; None when some sd is zero or not finite (a coordinate no
    chain moved, or a non-finite draw)."""
    sd = positions.std(axis=(0, 1))
    if not np.all(np.isfinite(sd)) or np.any(sd <= 0):
        return None
    return (positions - positions.mean(axis=(0, 1))) / sd


def _diverged(stats: dict) -> bool:
    div = stats.get("is_divergent")
    return div is not None and bool(np.any(div))


def esjd_per_grad(positions: np.ndarray, stats: dict, num_grads: int) -> float:
    """Expected squared jump distance per gradient evaluation: the sum of squared jumps of
    every chain over the gradients spent (Pasarica & Gelman 2010; Wang et al. 2013 use the
    ESJD normalised by sqrt(L))."""
    if _diverged(stats) or positions.shape[1] < 2:
        return float("nan")
    jumps = diagnostics.squared_jumps(positions)
    per_step = jumps.sum() / positions.shape[0] / (positions.shape[1] - 1)
    grads_per_step = num_grads / positions.shape[0] / positions.shape[1]
    return float(per_step / grads_per_step)


def esjd_per_sqrt_cost(positions: np.ndarray, stats: dict, num_grads: int) -> float:
    """Expected squared jump distance per step over the square root of the gradients per step,
    ``ESJD / sqrt(L)`` for HMC with ``L`` leapfrog steps: the reward of Wang, Mohamed & de
    Freitas (2013, Sec. 3), which favours longer trajectories than `esjd_per_grad`."""
    if _diverged(stats) or positions.shape[1] < 2:
        return float("nan")
    jumps = diagnostics.squared_jumps(positions)
    per_step = jumps.sum() / positions.shape[0] / (positions.shape[1] - 1)
    grads_per_step = num_grads / positions.shape[0] / positions.shape[1]
    return float(per_step / np.sqrt(grads_per_step))


def autocorrelation_score(
    positions: np.ndarray, stats: dict, num_grads: int, max_lag: int = 50
) -> float:
    """``h = 1 - (1/l_max) sum_{l=1}^{l_max} |r(l)|`` averaged over coordinates
    (Mahendran, Wang, Hamze & de Freitas 2012, Sec. 3); ``l_max`` is capped at half the
    draws of the super-transition."""
    if _diverged(stats) or positions.shape[1] < 4:
        return float("nan")
    lag = max(1, min(max_lag, positions.shape[1] // 2))
    scores = [
        1.0 - np.mean(np.abs(diagnostics.autocorrelation(positions[..., i], lag)[1:]))
        for i in range(positions.shape[-1])
    ]
    return float(np.mean(scores))


def min_ess_per_grad(positions: np.ndarray, stats: dict, num_grads: int) -> float:
    """Smallest bulk-ESS over coordinates per gradient evaluation (Hoffman & Gelman 2014)."""
    if _diverged(stats) or positions.shape[1] < 4:
        return float("nan")
    return float(diagnostics.ess(positions).min() / num_grads)


def chees_per_grad(positions: np.ndarray, stats: dict, num_grads: int) -> float:
    """The change in the estimator of the expected squared jump, ChEES (Hoffman, Radul &
    Sountsov 2021, Eq. 3), per gradient evaluation: the mean over chains and consecutive
    draws of ``(||x_{t+1} - m||^2 - ||x_t - m||^2)^2 / 4``, with ``m`` the mean of the
    super-transition's draws and every coordinate in units of its standard deviation over
    those draws (so no single wide coordinate decides). Unlike ESJD it gives nothing for the
    antithetic jumps of a trajectory that returns to the mirror point (``x -> -x``), which
    leave every second moment unchanged: it rewards what the robust ESS (of ``x^2``) rewards.
    """
    if _diverged(stats) or positions.shape[1] < 2:
        return float("nan")
    centred = standardised(positions)
    if centred is None:
        return float("nan")
    radius = np.sum(centred**2, axis=-1)
    chees = np.mean(np.diff(radius, axis=1) ** 2) / 4.0
    grads_per_step = num_grads / positions.shape[0] / positions.shape[1]
    return float(chees / grads_per_step)


def lag_one_ess_per_grad(positions: np.ndarray, stats: dict, num_grads: int) -> float:
    """Effective draws per 1000 gradients as an AR(1) chain estimates them from lag one:
    per coordinate ``(1 - rho) / (1 + rho)`` per draw for ``x`` and for ``x^2`` (the moments
    the robust ESS checks, Vehtari et al. 2021), the smaller of the two, and the smallest
    over coordinates, as the robust ESS a run reports is the smallest over its parameters;
    each coordinate in units of its sd over the super-transition's draws. ``rho`` is the
    lag-one autocorrelation pooled over chains, clipped at 0: antithetic draws (``rho < 0``)
    count as independent, not more. Unlike ChEES per gradient, a lag-one measure of ``x^2``
    alone, it sees the diffusive short trajectories (``L = 1, 2``) whose ``x`` mixes slowly:
    on neal-100d ChEES scores ``L = 1`` as high as ``L = 3`` while their robust ESS per
    gradient differs eightfold. The smallest, not the mean, over coordinates: one leapfrog
    step near its stability limit decorrelates every well-preconditioned coordinate in a
    draw or two (about half an effective draw per gradient) while a direction the metric
    left ``k`` times wider than the step takes ``~k^2`` gradients, against ``~k`` for a
    trajectory of ``k`` steps (Neal 2011, Sec. 5.4.4); a mean over many fast coordinates
    would rank ``L = 1`` first where the slowest parameter, the one the summary's robust
    ESS reports, mixes several times faster under the longer trajectory."""
    if _diverged(stats) or positions.shape[1] < 4:
        return float("nan")
    z = standardised(positions)
    if z is None:
        return float("nan")
    factors = lag_one_fractions(z)
    grads_per_draw = num_grads / positions.shape[0] / positions.shape[1]
    return float(1000.0 * np.min(np.minimum(*factors)) / grads_per_draw)


def lag_one_fractions(z: np.ndarray) -> list[np.ndarray]:
    """Effective fraction of draws ``(1 - rho_1) / (1 + rho_1)`` of ``z`` and of ``z^2`` per
    coordinate, ``rho_1`` the lag-one autocorrelation pooled over chains, clipped to [0, 1]
    (an AR(1) chain's ESS over its length). ``z: (chains, draws, dim)``, standardised;
    returns two ``(dim,)`` arrays."""
    factors = []
    for y in (z, z**2):
        y = y - y.mean(axis=(0, 1))
        norm = np.sum(y * y, axis=(0, 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            rho = np.where(norm > 0, np.sum(y[:, 1:] * y[:, :-1], axis=(0, 1)) / norm, 1.0)
        rho = np.clip(rho, 0.0, 1.0)
        factors.append((1.0 - rho) / (1.0 + rho))
    return factors


def robust_ess_per_grad(positions: np.ndarray, stats: dict, num_grads: int) -> float:
    """Effective draws per 1000 gradients of the slowest coordinate and statistic, as the
    summary's robust ESS counts them (Vehtari et al. 2021): per coordinate the smallest of
    the effective fractions (`geyer_fractions`) of ``x``, of ``x^2`` and of the indicators
    of its lower and upper tails (`tail_indicators`), each coordinate in units of its sd
    over the super-transition's draws; the smallest over coordinates. The autocorrelations
    are summed over lags until Geyer's initial positive sequence ends, so a chain that
    alternates sign when it moves and stays put when rejected (a large step of one or two
    leapfrog steps at acceptance ~0.5: lag-one autocorrelation near 0, lag two positive,
    long stays in a tail) is not credited as independent, as the AR(1) model of
    `lag_one_ess_per_grad` credits it."""
    if _diverged(stats) or positions.shape[1] < 4:
        return float("nan")
    z = standardised(positions)
    if z is None:
        return float("nan")
    fractions = [geyer_fractions(y) for y in (z, z**2, *tail_indicators(z))]
    grads_per_draw = num_grads / positions.shape[0] / positions.shape[1]
    return float(1000.0 * np.min(np.minimum.reduce(fractions)) / grads_per_draw)


def tail_indicators(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``z <= q_p`` and ``z >= q_(1-p)`` per coordinate, ``q`` the pooled draws' quantiles:
    the tail-ESS's statistics (Vehtari et al. 2021, Sec. 4.3, ``p = 0.05``), with ``p``
    raised to ``10 / N`` (at most 0.25) for ``N`` draws, so that each tail holds about ten
    draws to estimate from."""
    p = min(0.25, max(0.05, 10.0 / (z.shape[0] * z.shape[1])))
    low, high = np.quantile(z, [p, 1.0 - p], axis=(0, 1))
    return (z <= low).astype(float), (z >= high).astype(float)


def geyer_fractions(y: np.ndarray) -> np.ndarray:
    """``y: (chains, draws, dim) -> (dim,)`` effective draws over draws, ``1 / tau`` clipped
    to [0, 1] (no credit beyond independence for antithetic draws): ``tau = -1 + 2 sum_k
    P_k`` over Geyer's (1992) initial monotone sequence of pair sums ``P_k = rho_2k +
    rho_2k+1``, the autocorrelations ``rho_t`` combined over chains as Stan does (Vehtari et
    al. 2021, Eq. 10: ``1 - (W - mean acov_t) / var+``)."""
    y = np.asarray(y, dtype=float)
    chains, n, _ = y.shape
    centred = y - y.mean(axis=1, keepdims=True)
    spectrum = np.fft.rfft(centred, n=2 * n, axis=1)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), axis=1)[:, :n] / n
    within = acov[:, 0].mean(axis=0) * n / max(n - 1, 1)
    between = y.mean(axis=1).var(axis=0, ddof=1) if chains > 1 else 0.0
    var_plus = within * (n - 1) / n + between
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (within - acov.mean(axis=0)) / var_plus  # (n, dim)
    pairs = rho[: 2 * (n // 2)].reshape(n // 2, 2, -1).sum(axis=1)
    positive = np.cumprod(pairs > 0, axis=0).astype(bool)
    monotone = np.minimum.accumulate(np.where(positive, pairs, np.inf), axis=0)
    tau = -1.0 + 2.0 * np.sum(np.where(positive, monotone, 0.0), axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        fraction = np.where(tau > 0, 1.0 / tau, 1.0)
    return np.clip(np.nan_to_num(fraction, nan=0.0), 0.0, 1.0)


def over_the_run(objective, overhead_per_draw: float):
    """``objective``, an effective-draws-per-gradient reward, as the run's own effective
    draws per gradient would be were this setting frozen: a run that keeps a fixed number
    of draws per chain and has already spent ``overhead_per_draw`` gradients per chain per
    kept draw before the first (warm-up, tuning) reports ``r g / (overhead + g)`` for a
    setting of reward ``r`` costing ``g`` gradients per draw (its robust ESS per gradient,
    tuning included, is what the summary reports). A setting of one leapfrog step may
    make the most effective draws per gradient of its own and yet the fewest per gradient
    of a 1000-draw run whose warm-up cost ten times its sampling phase; with no overhead
    (a very long run) this is ``objective`` itself."""
    if not overhead_per_draw >= 0:
        raise ValueError(f"overhead_per_draw must be >= 0, got {overhead_per_draw}")

    def reward(positions: np.ndarray, stats: dict, num_grads: int) -> float:
        per_grad = objective(positions, stats, num_grads)
        grads_per_draw = num_grads / positions.shape[0] / positions.shape[1]
        return float(per_grad * grads_per_draw / (overhead_per_draw + grads_per_draw))

    reward.__name__ = objective.__name__
    return reward


def tolerating_divergences(objective, max_rate: float):
    """``objective`` that fails (NaN) only when more than ``max_rate`` of the
    super-transition's steps diverged; below that the divergent steps count as the
    rejections they are (the chain stayed put: zero jump, no new information), and the
    objective is computed as if none had diverged. For kernels whose divergences are
    numerical events of an exactly corrected step, e.g. a fixed point of the generalised
    leapfrog that did not converge (`adaptmc.kernels.manifold`): with every divergence a
    failure, a super-transition of ``chains x draws`` steps fails whenever the rate exceeds
    about ``1 / (chains x draws)``, and the tuner is pushed to steps far below those the
    fixed-step pilot accepts. The rate is that of the draws given (with thinning, of the kept
    steps); `adaptmc.tuners.tolerate_divergences` counts every step."""
    if not 0.0 <= max_rate < 1.0:
        raise ValueError(f"max_rate must be in [0, 1), got {max_rate}")

    def tolerant(positions: np.ndarray, stats: dict, num_grads: int) -> float:
        div = stats.get("is_divergent")
        if div is not None and float(np.mean(div)) > max_rate:
            return float("nan")
        return objective(positions, {k: v for k, v in stats.items() if k != "is_divergent"},
                         num_grads)

    tolerant.__name__ = f"{objective.__name__}_tolerating_{max_rate:g}"
    return tolerant


class Objective(NamedTuple):
    """An objective the recipes and the command line name: the reward function and one
    line of help."""

    reward: Callable[[np.ndarray, dict, int], float]
    help: str


# a new objective is one function and one entry; ``--objective``'s help comes from here
OBJECTIVES: dict[str, Objective] = {
    "esjd": Objective(esjd_per_grad, "jump distance per gradient"),
    "esjd-sqrt-l": Objective(esjd_per_sqrt_cost, "ESJD / sqrt(L)"),
    "autocorrelation": Objective(autocorrelation_score, "1 - mean |autocorrelation|"),
    "min-ess": Objective(min_ess_per_grad, "least bulk-ESS per gradient"),
    "chees": Objective(chees_per_grad, "ChEES per gradient"),
    "ess-lag1": Objective(lag_one_ess_per_grad, "lag-one ESS per gradient"),
    "ess-robust": Objective(robust_ess_per_grad, "robust ESS per gradient of the run "
                            "(default)"),
}
