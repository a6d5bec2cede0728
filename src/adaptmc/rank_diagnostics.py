"""Rank-normalised split R-hat and bulk/tail effective sample sizes (Vehtari, Gelman,
Simpson, Carpenter & Buerkner 2021), vectorised over columns.

The estimators are ArviZ's (``arviz.ess``, ``arviz.rhat``; tests hold them equal to it): split
chains, rank normalisation with Blom's (1958) offset 3/8, Geyer's (1992) initial positive and
monotone sequences over the autocorrelations averaged across chains, the bulk ESS of the
rank-normalised draws, the tail ESS as the smaller of the ESS of the 5% and 95% quantile
indicators, R-hat as the larger of the bulk and folded rank-normalised split R-hats. ArviZ
computes one quantity at a time in Python (about 1.4 ms each); here every column of a
``(chains, draws, k)`` array goes through the same array operations at once, which is what a
run with thousands of transformed quantities needs."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy import fftpack, special

# Internally a column is the first axis: ``(k, chains, draws)``, contiguous per column.


def _columns(x: np.ndarray) -> np.ndarray:
    """``(chains, draws, k) -> (k, chains, draws)`` float, contiguous."""
    return np.ascontiguousarray(np.moveaxis(np.asarray(x, dtype=float), -1, 0))


def split_chains(x: np.ndarray) -> np.ndarray:
    """``(k, chains, draws) -> (k, 2 chains, draws // 2)``: each chain's first and last
    halves as chains of their own (the middle draw of an odd count left out)."""
    half = x.shape[-1] // 2
    return np.concatenate([x[..., :half], x[..., x.shape[-1] - half:]], axis=1)


def z_scale(x: np.ndarray) -> np.ndarray:
    """``(k, chains, draws)``: per column, the normal scores of the average ranks over all
    chains and draws, ``Phi^{-1}((r - 3/8) / (S + 1/4))`` for ``S`` draws (Blom's offset, as
    ArviZ and the posterior package use it). An average rank is a half-integer, so the
    scores come from a table of ``2 S + 1`` values."""
    k, size = x.shape[0], int(np.prod(x.shape[1:]))
    flat = x.reshape(k, size)
    order = np.argsort(flat, axis=1)
    ordered = np.take_along_axis(flat, order, axis=1)
    first = np.ones((k, size), dtype=bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]  # the first of a run of ties
    table = special.ndtri((np.arange(2 * size + 1) / 2 - 0.375) / (size + 0.25))
    position = np.arange(size)
    scores = np.repeat(table[2 * position + 2][None], k, axis=0)  # no ties: r = position + 1
    tied = np.flatnonzero(~first.all(axis=1))
    if tied.size:  # r = (start + end) / 2 over a run of ties, counted from 1
        first = first[tied]
        last = np.ones_like(first)
        last[:, :-1] = first[:, 1:]
        start = np.maximum.accumulate(np.where(first, position, 0), axis=1)
        end = np.minimum.accumulate(np.where(last, position, size - 1)[:, ::-1], axis=1)
        scores[tied] = table[start + end[:, ::-1] + 2]
    out = np.empty((k, size))
    np.put_along_axis(out, order, scores, axis=1)
    return out.reshape(x.shape)


def autocov(x: np.ndarray) -> np.ndarray:
    """``(..., draws) -> (..., draws)``: the autocovariance at every lag along the last axis
    (FFT, divided by the number of draws), as ArviZ's ``autocov``."""
    n = x.shape[-1]
    m = fftpack.next_fast_len(2 * n)
    spectrum = np.fft.rfft(x - x.mean(axis=-1, keepdims=True), n=m, axis=-1)
    return np.fft.irfft(spectrum * np.conjugate(spectrum), n=m, axis=-1)[..., :n] / n


def _autocov_mean(x: np.ndarray) -> np.ndarray:
    """``(k, chains, draws) -> (k, draws)``: each chain's `autocov`, averaged over chains."""
    return autocov(x).mean(axis=1)


def _geyer_tau(rho: np.ndarray) -> np.ndarray:
    """``rho: (k, draws)`` autocorrelations (``rho[:, 0] = 1``) ``-> (k,)`` integrated times
    ``-1 + 2 sum_t rho_t`` truncated by Geyer's initial positive sequence (sums of pairs
    ``rho_{2j} + rho_{2j+1}`` while they are positive) and made monotone (each pair's sum at
    most the one before), as ArviZ computes them."""
    k, n = rho.shape
    pairs_max = max((n - 1) // 2 - 1, 0)  # the positive sequence looks at pairs j < n/2 - 1
    num = pairs_max + 1
    pair = rho[:, : 2 * num].reshape(k, num, 2)
    sums = pair.sum(axis=2)  # (k, num): pair j = (rho_2j, rho_2j+1)
    nonpositive = sums <= 0.0
    first = np.where(nonpositive.any(axis=1), nonpositive.argmax(axis=1), num)
    last = np.minimum(first, pairs_max)  # the last pair the positive sequence looks at
    cols = np.arange(k)
    kept = np.minimum.accumulate(sums, axis=1)
    total = np.where(np.arange(num)[None, :] < last[:, None], kept, 0.0).sum(axis=1)
    even = pair[cols, last, 0]
    stored = (last >= 1) & (sums[cols, last] >= 0.0)
    tail = np.where(last == 0, 1.0, np.where((even > 0.0) | stored, even, 0.0))
    return -1.0 + 2.0 * total + tail


def _ess(x: np.ndarray) -> np.ndarray:
    """``(k, chains, draws) -> (k,)`` ESS of already split (and transformed) chains: a
    column that does not move gets its number of draws (as ArviZ)."""
    _, chains, n = x.shape
    total = chains * n
    acov = _autocov_mean(x)
    mean_var = acov[:, 0] * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if chains > 1:
        var_plus = var_plus + x.mean(axis=-1).var(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var[:, None] - acov) / var_plus[:, None]
        rho[:, 0] = 1.0
        out = total / np.maximum(_geyer_tau(rho), 1.0 / np.log10(total))
    constant = (x.max(axis=(1, 2)) - x.min(axis=(1, 2))) < np.finfo(float).resolution
    return np.where(constant, float(total), out)


def _quantile(x: np.ndarray, prob: float) -> np.ndarray:
    """``(k, chains, draws) -> (k,)`` R's type-7 quantile of each column, with the
    arithmetic of ``scipy.stats.mstats.mquantiles(alphap=1, betap=1)`` (ArviZ's), so that
    the indicator ``x <= q`` agrees with ArviZ's draw for draw."""
    flat = x.reshape(x.shape[0], -1)
    size = flat.shape[1]
    aleph = size * prob + (1.0 - prob)
    low = int(np.floor(np.clip(aleph, 1, size - 1)))
    gamma = float(np.clip(aleph - low, 0.0, 1.0))
    part = np.partition(flat, [low - 1, low], axis=1)
    return (1.0 - gamma) * part[:, low - 1] + gamma * part[:, low]


def _prepared(x: np.ndarray, min_chains: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(columns, valid)``: the draws as `_columns` with NaN columns zeroed, and which
    columns had no NaN (ArviZ returns NaN for the others); None for too few chains or
    draws (fewer than 4)."""
    x = np.asarray(x)
    if x.shape[0] < min_chains or x.shape[1] < 4:
        return None
    columns = _columns(x)
    valid = ~np.isnan(columns).any(axis=(1, 2))
    return np.where(valid[:, None, None], columns, 0.0), valid


def ess_bulk(x: np.ndarray) -> np.ndarray:
    """``(chains, draws, k) -> (k,)`` bulk ESS: the ESS of the rank-normalised split
    chains. NaN for fewer than 4 draws or a column with a NaN."""
    prepared = _prepared(x, 1)
    if prepared is None:
        return np.full(np.shape(x)[-1], np.nan)
    columns, valid = prepared
    return np.where(valid, _ess(z_scale(split_chains(columns))), np.nan)


def ess_tail(x: np.ndarray, prob: float = 0.05) -> np.ndarray:
    """``(chains, draws, k) -> (k,)`` tail ESS: the smaller of the ESS of the indicators
    ``x <= q`` at the ``prob`` and ``1 - prob`` quantiles (R's type 7), split chains."""
    prepared = _prepared(x, 1)
    if prepared is None:
        return np.full(np.shape(x)[-1], np.nan)
    columns, valid = prepared
    return np.where(valid, _tail_ess(columns, prob), np.nan)


def _tail_ess(columns: np.ndarray, prob: float = 0.05) -> np.ndarray:
    """`ess_tail` of `_prepared` columns."""
    low, high = (_ess(split_chains((columns <= _quantile(columns, p)[:, None, None])
                                   .astype(float))) for p in (prob, 1.0 - prob))
    return np.minimum(low, high)


def _split_rhat(x: np.ndarray) -> np.ndarray:
    """``(k, chains, draws) -> (k,)`` the potential scale reduction of (split) chains
    (Gelman et al. 2013, eq. 11.4; NaN where no chain varies)."""
    n = x.shape[-1]
    between = n * x.mean(axis=-1).var(axis=1, ddof=1)
    within = x.var(axis=-1, ddof=1).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def rhat(x: np.ndarray) -> np.ndarray:
    """``(chains, draws, k) -> (k,)`` rank-normalised split R-hat: the larger of the split
    R-hats of the rank-normalised draws and of their folded distances from the median.
    NaN for fewer than 2 chains or 4 draws, a column with a NaN, or one that never moved."""
    prepared = _prepared(x, 2)
    if prepared is None:
        return np.full(np.shape(x)[-1], np.nan)
    columns, valid = prepared
    split = split_chains(columns)
    return np.where(valid, _rank_rhat(split, z_scale(split)), np.nan)


def _rank_rhat(split: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """`rhat` of split chains and their rank-normalised ``scores``."""
    median = np.median(split.reshape(split.shape[0], -1), axis=1)
    bulk = _split_rhat(scores)  # NaN where nothing moved; then the folded's is too
    folded = _split_rhat(z_scale(np.abs(split - median[:, None, None])))
    return np.where(~np.isnan(bulk), np.fmax(bulk, folded), np.nan)


def summary(x: np.ndarray, workers: int | None = None,
            with_rhat: bool = True) -> dict[str, np.ndarray]:
    """``(chains, draws, k) ->`` ``{"bulk", "tail", "bulk_sq", "rhat"}``, each ``(k,)``: the
    bulk and tail ESS of ``x``, the bulk ESS of ``x^2`` and R-hat (NaN without
    ``with_rhat``), as the functions above compute them, with the rank normalisation of the
    split chains shared by the bulk ESS and R-hat, and the columns divided among ``workers``
    threads (default: the machine's cores, at most 4; NumPy's sorts and FFTs run without
    the GIL)."""
    x = np.asarray(x, dtype=float)
    k = x.shape[-1]
    workers = min(workers or os.cpu_count() or 1, 4, max(k // 64, 1))
    if workers == 1:
        return _summary(x, with_rhat)
    parts = np.array_split(np.arange(k), workers)
    with ThreadPoolExecutor(workers) as pool:
        done = list(pool.map(lambda cols: _summary(x[..., cols], with_rhat), parts))
    return {name: np.concatenate([d[name] for d in done]) for name in done[0]}


def _summary(x: np.ndarray, with_rhat: bool) -> dict[str, np.ndarray]:
    """`summary` in this thread; a constant column (a transformed parameter computed from
    data alone, often most of a program's output) costs nothing: ArviZ gives it the number
    of split draws as every ESS, and no R-hat."""
    nan = np.full(x.shape[-1], np.nan)
    prepared = _prepared(x, 1)
    if prepared is None:
        return {"bulk": nan, "tail": nan, "bulk_sq": nan, "rhat": nan}
    columns, valid = prepared
    moving = np.flatnonzero(columns.max(axis=(1, 2)) > columns.min(axis=(1, 2)))
    size = float(2 * x.shape[0] * (x.shape[1] // 2))
    out = {"bulk": np.full(x.shape[-1], size), "tail": np.full(x.shape[-1], size),
           "bulk_sq": np.full(x.shape[-1], size), "rhat": nan.copy()}
    if moving.size:
        found = _moving_summary(columns[moving], with_rhat and x.shape[0] >= 2)
        for name, value in found.items():
            out[name][moving] = value
    return {name: np.where(valid, value, np.nan) for name, value in out.items()}


def _moving_summary(columns: np.ndarray, with_rhat: bool) -> dict[str, np.ndarray]:
    split = split_chains(columns)
    scores = z_scale(split)
    out = {"bulk": _ess(scores), "bulk_sq": _ess(z_scale(split**2)),
           "tail": _tail_ess(columns)}
    if with_rhat:
        out["rhat"] = _rank_rhat(split, scores)
    return out
