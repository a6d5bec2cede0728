"""The figures a statistician checks a run with, drawn by ArviZ (Vehtari et al. 2021 for
the rank plots; Betancourt 2016 for the energy plot) on matplotlib ``Figure`` objects (no
pyplot state, no display; PNG through the Agg canvas):

- ``trace.png``: trace and density of the worst-mixing parameters (`worst_mixing`);
- ``rank.png``: their rank histograms per chain (uniform when the chains agree);
- ``energy.png``: marginal energy against energy transitions, with each chain's E-BFMI
  (kernels that record the energy: HMC);
- ``pair.png``: the most correlated pairs among the worst-mixing parameters, where
  the draws are correlated (`correlated_parameters`), the warm-up chose a dense or
  low-rank metric or draws diverged (marked in red).

Parameters shown are bounded (`MAX_SHOWN`), so a run of thousands of parameters plots as
fast as one of ten.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from adaptmc.objectives import lag_one_fractions

MAX_SHOWN = 4
"""Parameters in the trace, rank and pair plots at most."""

MIN_CORRELATION = 0.5
"""A pair plot is drawn where two parameters' draws correlate at least this much."""

MAX_CORRELATED = 500
"""Parameters (the worst-mixing first) among which correlations are looked for."""


def flat_draws(idata) -> tuple[np.ndarray, list[str]]:
    """``(chains, draws, dim)`` posterior draws and their flat names (``theta[3]``)."""
    from adaptmc.diagnostics import posterior_array

    return posterior_array(idata)


def worst_mixing(draws: np.ndarray, names: list[str], count: int = MAX_SHOWN) -> list[int]:
    """The indices of the ``count`` parameters that mix worst: the smallest effective draws
    of ``x`` and ``x^2`` estimated from the lag-one autocorrelation (pooled over chains, as
    `adaptmc.objectives.lag_one_ess_per_grad`), the chains' disagreement (their means'
    spread over the within-chain sd) breaking ties; vectorised, so fast for any number of
    parameters."""
    del names
    draws = np.asarray(draws, dtype=float)
    sd = draws.std(axis=(0, 1))
    sd = np.where(sd > 0, sd, 1.0)
    z = (draws - draws.mean(axis=(0, 1))) / sd
    factors = lag_one_fractions(z)
    spread = np.std(z.mean(axis=1), axis=0) if draws.shape[0] > 1 else np.zeros(z.shape[-1])
    score = np.minimum(*factors) - spread
    return [int(i) for i in np.argsort(score, kind="stable")[:count]]


def correlated_parameters(draws: np.ndarray, order: list[int],
                          count: int = MAX_SHOWN) -> tuple[list[int], float]:
    """Among the first `MAX_CORRELATED` parameters of ``order`` (worst-mixing first), the
    ``count`` most involved in the strongest correlation, and that correlation's size:
    the pair with the largest ``|corr|`` first, then the parameters most correlated with
    it."""
    pool = list(order[:MAX_CORRELATED])
    if len(pool) < 2:
        return pool, 0.0
    flat = np.asarray(draws, dtype=float)[..., pool].reshape(-1, len(pool))
    with np.errstate(divide="ignore", invalid="ignore"):
        corr = np.nan_to_num(np.corrcoef(flat, rowvar=False))
    np.fill_diagonal(corr, 0.0)
    a, b = np.unravel_index(int(np.argmax(np.abs(corr))), corr.shape)
    strength = float(abs(corr[a, b]))
    rest = np.argsort(-np.maximum(np.abs(corr[a]), np.abs(corr[b])), kind="stable")
    chosen = [a, b] + [int(i) for i in rest if i not in (a, b)][:max(0, count - 2)]
    return [pool[i] for i in chosen], strength


def _subset(draws: np.ndarray, names: list[str], chosen: list[int], stats=None):
    """An InferenceData of the ``chosen`` flat parameters (and ``stats``, a sample_stats
    dict), for ArviZ."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz as az

        return az.from_dict(posterior={names[i]: draws[..., i] for i in chosen},
                            sample_stats=stats)


def _metric(idata) -> str | None:
    record = (getattr(idata, "attrs", None) or {}).get("warmup")
    if isinstance(record, str):
        record = json.loads(record)
    return (record or {}).get("metric")


def write_posterior_plots(idata, out_dir: str | Path, dpi: int = 90,
                          count: int = MAX_SHOWN) -> list[Path]:
    """Write ``trace.png``, ``rank.png``, ``energy.png`` (where the kernel recorded energy)
    and ``pair.png`` (where parameters correlate, `MIN_CORRELATION`, or the warm-up chose a
    dense or low-rank metric) into ``out_dir``, of at most ``count`` parameters each;
    returns the paths written."""
    from matplotlib.figure import Figure

    from adaptmc.diagnostics import ebfmi

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    draws, names = flat_draws(idata)
    from adaptmc.diagnostics import derived_variables

    derived = derived_variables(idata)  # generated quantities: not plotted as parameters
    keep = [i for i, name in enumerate(names) if name.split("[")[0] not in derived]
    draws, names = draws[..., keep], [names[i] for i in keep]
    order = worst_mixing(draws, names, max(count, MAX_CORRELATED))
    shown = order[:count]
    written = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz as az

        subset = _subset(draws, names, shown)
        fig = Figure(figsize=(9, 1.9 * len(shown) + 0.6), layout="constrained")
        axes = fig.subplots(len(shown), 2, squeeze=False)
        az.plot_trace(subset, axes=axes, compact=False)
        fig.suptitle("Draws of the worst-mixing parameters (left: density per chain, "
                     "right: draws in order)")
        written.append(_save(fig, out_dir / "trace.png", dpi))

        fig = Figure(figsize=(3.2 * len(shown), 3.0), layout="constrained")
        axes = fig.subplots(1, len(shown), squeeze=False)[0]
        az.plot_rank(subset, ax=axes)
        fig.suptitle("Rank histograms per chain (flat when the chains agree)")
        written.append(_save(fig, out_dir / "rank.png", dpi))

        if ebfmi(idata) is not None and draws.shape[1] >= 4:
            energy = {"energy": np.asarray(idata.sample_stats["energy"].values, float)}
            fig = Figure(figsize=(6, 4), layout="constrained")
            az.plot_energy(_subset(draws, names, shown[:1], energy), ax=fig.subplots())
            fig.suptitle("Energy: marginal and transitions (E-BFMI per chain; below 0.3: "
                         "the tails are poorly explored)", fontsize=9)
            written.append(_save(fig, out_dir / "energy.png", dpi))

        pair_plot = _pair_plot(idata, draws, names, order, count)
        if pair_plot is not None:
            written.append(_save(pair_plot, out_dir / "pair.png", dpi))
    return written


def _pair_plot(idata, draws, names, order, count: int):
    """The pair plot of the most correlated among the ``2 count`` worst-mixing parameters
    (``order``), divergent draws in red; None where there is nothing to show (no pair
    correlates, nothing diverged and the metric is diagonal)."""
    import arviz as az
    from matplotlib.figure import Figure

    # among the worst-mixing: where the sampler struggles, not a trivial pair elsewhere
    pair, strength = correlated_parameters(draws, order[:2 * count], count)
    stats = idata.sample_stats
    diverging = {"diverging": np.asarray(stats["diverging"].values, bool)} \
        if "diverging" in stats else None
    diverged = diverging is not None and bool(diverging["diverging"].any())
    if len(pair) >= 2 and (strength >= MIN_CORRELATION or diverged or
                           _metric(idata) in ("dense", "low-rank")):
        fig = Figure(figsize=(2.4 * len(pair), 2.4 * len(pair)), layout="constrained")
        axes = fig.subplots(len(pair) - 1, len(pair) - 1, squeeze=False)
        alpha = float(np.clip(400 / max(draws.shape[0] * draws.shape[1], 1), 0.05, 0.8))
        az.plot_pair(_subset(draws, names, pair, diverging), ax=axes, kind="scatter",
                     scatter_kwargs={"alpha": alpha, "s": 4}, textsize=8,
                     divergences=diverging is not None,
                     divergences_kwargs={"color": "red", "markersize": 3})
        count_text = "" if diverging is None else \
            f"; divergent draws: {int(diverging['diverging'].sum())}, red"
        fig.suptitle(f"Pairs of the most correlated among the worst-mixing parameters "
                     f"(largest |correlation| {strength:.2f}{count_text})", fontsize=9)
        return fig
    return None


def _save(fig, path: Path, dpi: int) -> Path:
    from adaptmc.io import save_figure

    return save_figure(fig, path, dpi)
