"""The metric that fits: diagonal, low-rank or dense, chosen by what each buys.

Each candidate inverse mass ``M^{-1} = L L^T`` is fitted to one half of the warm-up's last
window (draws and gradients, pooled over chains) and judged on the other half, so a metric
that fits noise is judged by what it does on draws it has not seen:

- its **condition** ``kappa = lambda_max(cov(L^{-1} x)) lambda_max(cov(L^T grad))``: for a
  Gaussian ``N(mu, Sigma)``, ``cov(L^{-1} x) = L^{-1} Sigma L^{-T}`` and ``cov(L^T grad) = L^T
  Sigma^{-1} L``, so ``kappa`` is the ratio of the largest to the smallest variance left after
  preconditioning. The stable step size scales with the smallest scale and the distance a
  trajectory must travel with the largest (Neal 2011, Sec. 4.2), so HMC needs about
  ``sqrt(kappa)`` leapfrog steps per independent draw;
- its **cost per leapfrog step**: the gradient's floating-point operations (XLA's cost
  analysis of the target's compiled gradient) plus the metric's (``M^{-1} p`` twice a step:
  ``2 dim`` diagonal, ``8 dim k`` low-rank of rank ``k``, ``4 dim^2`` dense) plus the
  integrator's own vector work. Where XLA cannot see the gradient (a Stan program through
  the FFI) the cost is unknown and the condition alone ranks them (`leapfrog_flops`).

The candidate with the smallest ``sqrt(kappa) x cost`` wins; a richer one must beat a simpler
one by `RICHER_MARGIN`, since both numbers are estimates from a few hundred draws.

Draws and gradients are pooled over the chains after each chain's own mean is taken out
(`within_chains`: the within-chain covariance ``W`` of Gelman & Rubin 1992), so that a chain
in another mode, or one still on its way in, adds its distance from the others to no
variance; nutpie and Stan estimate each chain's metric from that chain alone.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc.adaptation.low_rank import LowRankInverseMass, low_rank_inverse_mass
from adaptmc.targets.base import lowered_logdensity_and_grad

RICHER_MARGIN = 1.1
"""A richer metric (low-rank over diagonal, dense over both) is chosen only when its
predicted cost per effective draw is below the simpler one's by this factor."""

STEP_OVERHEAD_FLOPS = 2000.0
"""The fixed cost of one NUTS leapfrog step besides the gradient and the metric (loop
bookkeeping, tree weights), in floating-point-operation equivalents (about a microsecond)."""

ORDER = ("diag", "low-rank", "dense")


def whitening_factors(metric: LowRankInverseMass):
    """``(L^{-1}, L^T)`` as functions on ``(n, dim)`` rows, for ``M^{-1} = L L^T`` with
    ``L = D^{1/2} (I + U (Lambda^{1/2} - I) U^T)``."""
    diag, vectors, values = (np.asarray(a, dtype=float) for a in metric)
    root = np.sqrt(diag)

    def rotate(rows, scales):
        return rows + ((rows @ vectors) * (scales - 1.0)) @ vectors.T

    def inverse(x):  # L^{-1} x = (I + U (Lambda^{-1/2} - I) U^T) D^{-1/2} x
        return rotate(x / root, 1.0 / np.sqrt(values))

    def transpose(g):  # L^T g = (I + U (Lambda^{1/2} - I) U^T) D^{1/2} g
        return rotate(g * root, np.sqrt(values))

    return inverse, transpose


def condition(metric: LowRankInverseMass, draws: np.ndarray, grads: np.ndarray) -> float:
    """``kappa`` of ``metric`` on ``draws, grads: (n, dim)`` (see the module docstring)."""
    inverse, transpose = whitening_factors(metric)
    z = inverse(draws - draws.mean(0))
    h = transpose(grads - grads.mean(0))
    top = [float(np.linalg.eigvalsh(np.atleast_2d(np.cov(a.T)))[-1]) for a in (z, h)]
    return max(top[0] * top[1], 1.0)


def candidates(draws: np.ndarray, grads: np.ndarray, rank_budget: int,
               dense: bool) -> dict[str, LowRankInverseMass]:
    """The candidate metrics fitted to ``draws, grads: (n, dim)``, each as a
    `LowRankInverseMass`: ``"diag"`` (``Lambda`` empty), ``"low-rank"`` (at most
    ``rank_budget`` directions outside ``[1/2, 2]``) and, when ``dense``, ``"dense"`` (every
    direction of the Fisher-divergence estimate kept)."""
    low_rank = low_rank_inverse_mass(draws, grads, max_rank=rank_budget)
    dim = draws.shape[-1]
    out = {"diag": LowRankInverseMass(low_rank.diag, np.zeros((dim, 0)), np.zeros(0))}
    if low_rank.rank > 0:
        out["low-rank"] = low_rank
    if dense and dim > 1:
        out["dense"] = low_rank_inverse_mass(draws, grads, cutoff=1.0 + 1e-12)
    return out


def leapfrog_flops(kind: str, dim: int, rank: int, grad_flops: float) -> float:
    """Floating-point operations of one leapfrog step under a metric ``kind``; where the
    gradient's cost is unknown (NaN, or XLA's -1), 1 for every kind: the candidates are then
    ranked by their condition alone, as if the gradient's cost dominated the metric's (a
    Stan gradient costs ~10^6 operations' time against ``8 dim k`` for a low-rank metric).
    Taking -1 as a flop count made every richer metric look dearer than the gradient, so a
    Stan program kept the diagonal metric where a low-rank one was three times better."""
    if not (math.isfinite(grad_flops) and grad_flops > 0):
        return 1.0
    metric = {"diag": 2.0 * dim, "low-rank": 8.0 * dim * rank, "dense": 4.0 * dim * dim}[kind]
    return grad_flops + metric + 20.0 * dim + STEP_OVERHEAD_FLOPS


def choose(draws: np.ndarray, grads: np.ndarray, *, grad_flops: float, rank_budget: int,
           dense: bool, allowed=ORDER) -> tuple[str, dict]:
    """The metric kind to use, and what each candidate measured.

    ``draws, grads: (chains, n, dim)``, the warm-up's last window; candidates are fitted to
    the first half of the draws and judged on the second (`condition`), and the one with the
    smallest ``sqrt(kappa) x leapfrog_flops`` wins (a richer one by `RICHER_MARGIN`).
    ``allowed``: the kinds that may be chosen (a low-rank one that finds no direction
    outside ``[1/2, 2]`` is the diagonal one)."""
    dim = draws.shape[-1]
    half = draws.shape[1] // 2
    fit = [a[:, :half].reshape(-1, dim) for a in (draws, grads)]
    held = [a[:, half:].reshape(-1, dim) for a in (draws, grads)]
    measured, best, best_score = {}, None, math.inf
    for kind, metric in candidates(*fit, rank_budget, dense).items():
        if kind not in allowed:
            continue
        kappa = condition(metric, *held)
        flops = leapfrog_flops(kind, dim, metric.rank, grad_flops)
        score = math.sqrt(kappa) * flops
        measured[kind] = {"condition": kappa, "leapfrog_flops": flops, "score": score,
                          "rank": metric.rank}
        if best is None or score * RICHER_MARGIN < best_score:
            best, best_score = kind, score
    return best or "diag", measured


def fit(kind: str, draws: np.ndarray, grads: np.ndarray, rank_budget: int
        ) -> LowRankInverseMass:
    """The metric ``kind`` fitted to ``draws, grads: (..., dim)`` (pooled)."""
    dim = draws.shape[-1]
    x, g = draws.reshape(-1, dim), grads.reshape(-1, dim)
    return candidates(x, g, rank_budget, kind == "dense").get(kind) or candidates(
        x, g, rank_budget, False)["diag"]


def grad_flops(target) -> float:
    """Floating-point operations of one gradient of ``target``, from XLA's cost analysis of
    the lowered (not compiled) program; NaN where XLA cannot see the gradient (a foreign
    function, as a Stan program through the FFI, for which it reports -1): `leapfrog_flops`
    then ranks the metrics by their condition alone. Timing the gradient instead would make
    the run's draws depend on the machine's load. The program is lowered for the CPU
    whatever JAX's default device: the count is the function's, and a GPU client gives no
    cost analysis of an uncompiled program."""
    try:
        if jax.default_backend() == "cpu" and getattr(target, "programs", None) is not None:
            lowered = lowered_logdensity_and_grad(target)  # the run's own: traced once
        else:
            cpu = jax.devices("cpu")[0]
            lowered = jax.jit(target.logdensity_and_grad).lower(jax.device_put(jnp.asarray(
                target.initial_position), cpu))
        analysis = lowered.cost_analysis()
        analysis = analysis[0] if isinstance(analysis, list) else analysis
        flops = float(analysis.get("flops", math.nan))
    except Exception:  # noqa: BLE001 - a cost model must not stop a run
        return math.nan
    return flops if math.isfinite(flops) and flops > 0 else math.nan


def within_chains(values: np.ndarray) -> np.ndarray:
    """``values: (chains, n, dim)`` less each chain's mean over its ``n`` transitions (a
    single transition per chain is left as it is: its mean is itself)."""
    values = np.asarray(values, dtype=float)
    if values.shape[1] < 2:
        return values
    return values - values.mean(axis=1, keepdims=True)


def estimate(draws: np.ndarray, grads: np.ndarray, kind: str, rank: int, current):
    """The warm-up's foreground estimate from ``draws, grads: (chains, n, dim)``: the
    diagonal one (``kind`` ``"diag"``), or the low-rank-plus-diagonal one with at most
    ``rank`` directions (`adaptmc.adaptation.low_rank`); ``current`` when there are fewer
    than 3 draws."""
    dim = draws.shape[-1]
    x, g = within_chains(draws).reshape(-1, dim), within_chains(grads).reshape(-1, dim)
    if x.shape[0] < 3:
        return current
    found = low_rank_inverse_mass(x, g, max_rank=rank)
    if kind == "diag":
        return LowRankInverseMass(found.diag, np.zeros((dim, 0)), np.zeros(0))
    return found


def choose_final(draws: np.ndarray, grads: np.ndarray, target, metric: str, rank: int):
    """``(kind, inverse mass, measured)``: the warm-up's final metric from ``draws, grads:
    (chains, n, dim)``, chosen by `choose` (or the kind ``metric`` names) and `fit` to
    them, with at most ``rank`` directions."""
    dim = draws.shape[-1]
    draws, grads = within_chains(draws), within_chains(grads)
    allowed = ORDER if metric == "auto" else (metric,)
    budget = min(rank, max(1, math.ceil(dim / 4)))
    flops = grad_flops(target)
    kind, measured = choose(draws, grads, grad_flops=flops, rank_budget=budget,
                            dense=rank >= dim, allowed=allowed)
    fitted = fit(kind, draws, grads, budget)
    if kind == "low-rank" and fitted.rank == 0:
        kind = "diag"
    return kind, fitted, {"grad_flops": flops, **measured}
