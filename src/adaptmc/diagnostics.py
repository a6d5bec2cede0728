"""Diagnostics on arrays with ArviZ's ``(chain, draw, ...)`` convention.

Bulk/tail ESS, R-hat and MCSE come from ArviZ (Vehtari et al. 2021); the autocorrelation is
ArviZ's FFT estimate; expected squared jump distance (Pasarica & Gelman 2010) is ours.
Statistics never import plotting.
"""

from __future__ import annotations

import warnings

import numpy as np

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az


def ess(positions: np.ndarray, method: str = "bulk") -> np.ndarray:
    """``positions: (chains, draws, dim) -> (dim,)`` effective sample sizes."""
    positions = np.asarray(positions, dtype=float)
    if positions.shape[1] < 4:
        return np.zeros(positions.shape[-1])
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.array(
            [az.ess(positions[..., i], method=method) for i in range(positions.shape[-1])],
            dtype=float,
        )
    return np.nan_to_num(out, nan=0.0)


def rhat(positions: np.ndarray) -> np.ndarray:
    """``positions: (chains, draws, dim) -> (dim,)`` rank-normalised split R-hat."""
    positions = np.asarray(positions, dtype=float)
    return np.array([az.rhat(positions[..., i]) for i in range(positions.shape[-1])], dtype=float)


def autocorrelation(x: np.ndarray, max_lag: int | None = None) -> np.ndarray:
    """``x: (chains, draws) -> (max_lag + 1,)`` autocorrelation averaged over chains."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[None]
    acf = np.array([az.autocorr(chain) for chain in x]).mean(axis=0)
    acf = np.nan_to_num(acf, nan=1.0)  # a constant chain is fully correlated
    return acf if max_lag is None else acf[: max_lag + 1]


def squared_jumps(positions: np.ndarray) -> np.ndarray:
    """``positions: (chains, draws, dim) -> (chains, draws - 1)`` squared jump distances."""
    positions = np.asarray(positions, dtype=float)
    return np.sum(np.diff(positions, axis=1) ** 2, axis=-1)


def esjd(positions: np.ndarray) -> float:
    """Expected squared jump distance ``E ||x_{t+1} - x_t||^2`` (Pasarica & Gelman 2010)."""
    jumps = squared_jumps(positions)
    return float(jumps.mean()) if jumps.size else 0.0


def summary(idata, var_names=None):
    """ArviZ's summary table (mean, sd, HDI, MCSE, bulk/tail ESS, R-hat) of the posterior."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return az.summary(idata, var_names=var_names, round_to="none")


def format_summary(idata, max_rows: int = 12) -> str:
    """A plain-text report: the run's totals (draws, gradient evaluations, acceptance,
    divergences, min bulk-ESS per 1000 gradients, ESJD) and the ArviZ table, worst R-hat
    first when there are many parameters."""
    attrs = dict(idata.attrs) if hasattr(idata, "attrs") else {}
    if not attrs:
        attrs = dict(idata.posterior.attrs)
    table = summary(idata)
    stats = idata.sample_stats
    positions = np.concatenate(
        [
            np.asarray(v.values).reshape(v.shape[0], v.shape[1], -1)
            for v in idata.posterior.data_vars.values()
        ],
        axis=-1,
    )
    grads = int(attrs.get("total_grad_evals", 0))
    min_ess = float(np.nanmin(table["ess_bulk"])) if len(table) else float("nan")
    lines = [
        f"target {attrs.get('target', '?')}  kernel {attrs.get('kernel', '?')}  "
        f"tuner {attrs.get('tuner', '?')}",
        f"chains {positions.shape[0]}  draws/chain {positions.shape[1]}  "
        f"super-transitions {attrs.get('num_super_transitions', '?')} x "
        f"{attrs.get('gradient_budget', '?')} gradients",
        f"gradient evaluations (all chains, tuning included) {grads:,}",
        f"acceptance {float(stats['acceptance_rate'].mean()):.3f}  divergences "
        f"{int(stats['diverging'].sum())}  ESJD {esjd(positions):.4g}",
        f"min bulk-ESS {min_ess:.1f}  min tail-ESS {float(np.nanmin(table['ess_tail'])):.1f}  "
        f"max R-hat {float(np.nanmax(table['r_hat'])):.4f}",
        f"min bulk-ESS per 1000 gradients {1000 * min_ess / max(grads, 1):.4g}  "
        f"wall {float(attrs.get('wall_s', float('nan'))):.1f} s "
        f"(compile {float(attrs.get('compile_s', float('nan'))):.1f} s)",
        "",
    ]
    cols = ["mean", "sd", "mcse_mean", "ess_bulk", "ess_tail", "r_hat"]
    shown = table[cols]
    if len(shown) > max_rows:
        shown = shown.sort_values("r_hat", ascending=False).head(max_rows)
        lines.append(f"{max_rows} of {len(table)} parameters, largest R-hat first:")
    import pandas as pd

    with pd.option_context("display.width", 120, "display.float_format", "{:.4g}".format):
        lines.append(shown.to_string())
    return "\n".join(lines)
