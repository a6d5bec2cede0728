"""Diagnostics on arrays with ArviZ's ``(chain, draw, ...)`` convention.

Bulk/tail ESS and R-hat are ArviZ's estimators (Vehtari et al. 2021) computed for all
columns at once (`adaptmc.rank_diagnostics`); the autocorrelation is ArviZ's FFT estimate;
expected squared jump distance (Pasarica & Gelman 2010) is ours. Statistics never import
plotting.
"""

from __future__ import annotations

import json

import numpy as np

from adaptmc import rank_diagnostics, run_facts
from adaptmc.run_facts import far_chain_warnings, share_lines


def ess(positions: np.ndarray, method: str = "bulk") -> np.ndarray:
    """``positions: (chains, draws, dim) -> (dim,)`` bulk (``method="bulk"``) or tail
    effective sample sizes, ArviZ's estimators computed for every column at once
    (`adaptmc.rank_diagnostics`). A parameter that no chain moved gets 0: ArviZ returns the
    number of draws for a constant array (a known constant), which would credit a sampler
    that rejected every proposal with a perfect ESS."""
    positions = np.asarray(positions, dtype=float)
    if positions.shape[1] < 4:
        return np.zeros(positions.shape[-1])
    estimator = {"bulk": rank_diagnostics.ess_bulk, "tail": rank_diagnostics.ess_tail}
    return _credited(positions, estimator[method](positions))


def _credited(positions: np.ndarray, found: np.ndarray) -> np.ndarray:
    """ESS as adaptmc credits them: 0 for a column no chain moved, and where there is none
    (NaN: too few draws, a NaN draw)."""
    unmoved = np.all(positions.max(axis=1) == positions.min(axis=1), axis=0)
    return np.where(unmoved, 0.0, np.nan_to_num(found, nan=0.0))


def robust_ess(positions: np.ndarray) -> np.ndarray:
    """``positions: (chains, draws, dim) -> (dim,)``: per parameter the smallest of the
    bulk-ESS of ``x``, the bulk-ESS of ``x^2`` and the tail-ESS of ``x`` (Vehtari et al.
    2021, Sec. 4.3 recommend both bulk- and tail-ESS; the second moment's ESS keeps an
    antithetic sampler, whose bulk-ESS of ``x`` exceeds the number of draws, from being
    credited with effective draws it does not give for variances)."""
    bulk, tail, square, _ = _ess_and_rhat(positions, with_rhat=False)
    return np.minimum.reduce([bulk, square, tail])


def _ess_and_rhat(positions: np.ndarray, with_rhat: bool = True):
    """``(bulk ESS of x, tail ESS of x, bulk ESS of x^2, R-hat)`` per column, in one pass
    (`adaptmc.rank_diagnostics.summary`), the ESS as `ess` gives them (`_credited`)."""
    positions = np.asarray(positions, dtype=float)
    found = rank_diagnostics.summary(positions, with_rhat=with_rhat)
    return (*(_credited(positions, found[k]) for k in ("bulk", "tail", "bulk_sq")),
            found["rhat"])


def rhat(positions: np.ndarray) -> np.ndarray:
    """``positions: (chains, draws, dim) -> (dim,)`` rank-normalised split R-hat
    (`adaptmc.rank_diagnostics.rhat`); NaN for one chain (it needs two), and where no chain
    moved."""
    return rank_diagnostics.rhat(np.asarray(positions, dtype=float))


def autocorrelation(x: np.ndarray, max_lag: int | None = None) -> np.ndarray:
    """``x: (chains, draws) -> (max_lag + 1,)`` autocorrelation averaged over chains."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[None]
    cov = rank_diagnostics.autocov(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        acf = (cov / cov[:, :1]).mean(axis=0)
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


MAX_RHAT = 1.01  # Vehtari et al. (2021): use draws only when R-hat < 1.01
MIN_ESS = 400  # Vehtari et al. (2021): ESS > 100 per chain for 4 chains
MIN_BFMI = 0.3  # Betancourt (2016), Sec. 6.1; Stan's threshold
EDGE = 0.02  # a setting within this fraction of an axis's span of a bound lies at that edge


def ebfmi(idata) -> np.ndarray | None:
    """Per chain, the energy Bayesian fraction of missing information (Betancourt 2016,
    eq. 6.3 estimated as in Sec. 6.1): ``sum_n (E_n - E_{n-1})^2 / sum_n (E_n - mean E)^2``
    of the energies the kernel recorded (``sample_stats.energy``, the Hamiltonian at each
    kept draw). Low values (below `MIN_BFMI`): the momentum resampling moves between
    energy levels too slowly to explore the posterior's tails. None where the kernel records
    no energy (no momentum: MALA, RWM) or too few draws."""
    stats = getattr(idata, "sample_stats", None)
    if stats is None or "energy" not in stats:
        return None
    energy = np.asarray(stats["energy"].values, dtype=float)
    if energy.ndim != 2 or energy.shape[1] < 4 or not np.all(np.isfinite(energy)):
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.sum(np.diff(energy, axis=1) ** 2, axis=1) / \
            np.sum((energy - energy.mean(axis=1, keepdims=True)) ** 2, axis=1)
    return out


def posterior_blocks(idata, max_bytes: int = 2**25, skip=()):
    """Yield ``(draws: (chains, draws, k), names)`` blocks of the posterior's flat
    coordinates (its variables but those named in ``skip``), a few at a time (at most about
    ``max_bytes`` of draws in memory), so a lazily read InferenceData (a run folder's
    ``draws.nc``) is never loaded whole. Indices count from the posterior's
    ``index_origin`` attribute (1 for a Stan program: ``beta[1]``)."""
    origin = int(idata.posterior.attrs.get("index_origin", 0))
    for name, value in idata.posterior.data_vars.items():
        if name in skip:
            continue
        num_draws = value.shape[0] * value.shape[1]
        if value.ndim == 2:
            yield np.asarray(value.values, float)[..., None], [name]
            continue
        # slice along the first event axis, lazily (``.data`` would read the whole array)
        first, rest = value.dims[2], value.shape[3:]
        per_index = max(1, num_draws * int(np.prod(rest, dtype=int)) * 8)
        step = max(1, max_bytes // per_index)
        step -= step % 8 if step >= 8 else 0  # whole HDF5 chunks of a run folder's file
        for start in range(0, value.shape[2], step):
            block = value.isel({first: slice(start, start + step)}).values
            block = np.asarray(block, dtype=float).reshape(*value.shape[:2], -1)
            names = [f"{name}[{','.join(str(k + origin) for k in (start + i[0], *i[1:]))}]"
                     for i in np.ndindex(block.shape[2] // max(int(np.prod(rest)), 1), *rest)]
            yield block, names


def summary_in_blocks(idata, max_bytes: int = 2**25, parameters_only: bool = False):
    """`summary_table` of the posterior computed block by block (`posterior_blocks`), with a
    column ``judged``: False for the variables named in the posterior's ``derived``
    attribute (a Stan program's generated quantities: summarised, not judged). With
    ``parameters_only``, the judged rows alone (what `convergence_warnings` reads: a
    program's thousands of generated quantities cost seconds to summarise)."""
    return _summary_and_esjd(idata, max_bytes, parameters_only)[0]


def derived_variables(idata) -> set[str]:
    """Posterior variables that are not parameters (generated quantities): the
    posterior's ``derived`` attribute, a JSON list."""
    found = idata.posterior.attrs.get("derived", "[]")
    return set(json.loads(found) if isinstance(found, str) else found)


def judged(table):
    """The rows of a summary table that diagnostics judge: the parameters."""
    return table[table["judged"]] if "judged" in table else table


def _summary_and_esjd(idata, max_bytes: int = 2**25, parameters_only: bool = False):
    """``(summary_table, esjd, (chains, draws))`` in one pass over `posterior_blocks` (the
    squared jump sums over coordinates, so the blocks' ESJDs add)."""
    import pandas as pd

    tables, jump, shape = [], 0.0, (0, 0)
    derived = derived_variables(idata)
    skip = derived if parameters_only else ()
    for block, names in posterior_blocks(idata, max_bytes, skip):
        table = summary_table(block, names)
        table["judged"] = [name.split("[")[0] not in derived for name in names]
        tables.append(table)
        jump += esjd(block) if table["judged"].all() else 0.0
        shape = block.shape[:2]
    return _known_constants(pd.concat(tables)), jump, shape


def _known_constants(table):
    """The table with its constant quantities (sd 0 over every chain and draw: a transformed
    parameter computed from data alone, as dogs' ``n_avoid``) not judged and without ESS or
    R-hat (NaN, as Stan's summary prints them), provided some judged quantity moved; when
    nothing moved, the sampler is stuck and the constants stay judged (ESS 0)."""
    constant = (table["sd"] == 0).to_numpy()
    if not np.any(table["judged"].to_numpy() & ~constant):
        return table
    table.loc[constant, ["ess_bulk", "ess_tail", "ess_robust", "r_hat"]] = np.nan
    table.loc[constant, "judged"] = False
    return table


def posterior_array(idata, group: str = "posterior") -> tuple[np.ndarray, list[str]]:
    """``(chains, draws, dim)`` flat draws of an InferenceData group and the flat names
    (``theta[3]``)."""
    data = getattr(idata, group)
    origin = int(idata.posterior.attrs.get("index_origin", 0))
    arrays, names = [], []
    for name, value in data.data_vars.items():
        values = np.asarray(value.values, dtype=float)
        event = values.shape[2:]
        arrays.append(values.reshape(values.shape[0], values.shape[1], -1))
        names.extend([name] if event == () else
                     [f"{name}[{','.join(str(k + origin) for k in i)}]"
                      for i in np.ndindex(*event)])
    return np.concatenate(arrays, axis=-1), names


def summary_table(positions: np.ndarray, names: list[str]):
    """Mean, sd, MCSE of the mean, bulk-, tail- and robust ESS and R-hat per parameter, as a
    pandas DataFrame (no HDI: seconds for many draws, where ``arviz.summary`` takes minutes).
    """
    import pandas as pd

    positions = np.asarray(positions, dtype=float)
    bulk, tail, square, r_hat = _ess_and_rhat(positions)
    robust = np.minimum.reduce([bulk, tail, square])
    sd = positions.std(axis=(0, 1), ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mcse = sd / np.sqrt(bulk)
    return pd.DataFrame({"mean": positions.mean(axis=(0, 1)), "sd": sd, "mcse_mean": mcse,
                         "ess_bulk": bulk, "ess_tail": tail, "ess_robust": robust,
                         "r_hat": r_hat}, index=names)


def _run_attrs(idata) -> dict:
    """The run's attributes: the InferenceData's own, else its posterior group's."""
    attrs = dict(idata.attrs) if hasattr(idata, "attrs") else {}
    return attrs or dict(idata.posterior.attrs)


def divergences_by_phase(idata) -> dict[str, int]:
    """Divergent transitions of a run per phase, ``{"warmup", "tuning", "sampling"}``.

    ``warmup``: the recipe's warm-up before the run (``attrs["warmup"]``, a JSON record with
    ``"divergences"``; 0 without one). ``tuning``: the super-transitions flagged ``warmup`` in
    the tuning group (the bandit's arm pulls, a mass warm-up), whose draws are not kept.
    ``sampling``: the other super-transitions, counted over every step, thinned away or kept;
    without a tuning record, the kept draws' ``sample_stats.diverging``."""
    record = _run_attrs(idata).get("warmup")
    if isinstance(record, str):
        record = json.loads(record)
    counts = {"warmup": int((record or {}).get("divergences", 0))}
    tuning = getattr(idata, "tuning", None)
    if tuning is not None and "divergences" in tuning and "warmup" in tuning:
        divergent = np.asarray(tuning["divergences"].values, dtype=int)
        tuned = np.asarray(tuning["warmup"].values, dtype=bool)
        counts["tuning"] = int(divergent[tuned].sum())
        counts["sampling"] = int(divergent[~tuned].sum())
    else:
        counts["tuning"] = 0
        counts["sampling"] = int(np.asarray(idata.sample_stats["diverging"].values).sum())
    return counts


def non_finite_energies(idata) -> int:
    """Transitions of the sampling phase whose proposal's energy was not finite (a kernel
    records its energy error as +inf when the log density or its gradient was NaN or
    infinite there): ``sample_stats.energy_error``; 0 without it. NaN is "not recorded"
    (NUTS blocks, `adaptmc.run.nuts_stage`), not counted."""
    stats = getattr(idata, "sample_stats", None)
    if stats is None or "energy_error" not in stats:
        return 0
    values = np.asarray(stats["energy_error"].values, dtype=float)
    return int(np.sum(np.isinf(values)))


def _nan_clause(count: int) -> str:
    if not count:
        return ""
    return (f"; {count} of them where the log density or its gradient was NaN or infinite "
            "(a non-finite energy): check the model where it is undefined")


def convergence_warnings(idata, table=None) -> list[str]:
    """What may make the draws wrong, one sentence each: max R-hat above `MAX_RHAT`,
    divergences in the sampling phase (`divergences_by_phase`; those of the warm-up and the
    tuning are named alongside), robust min ESS below `MIN_ESS`, E-BFMI below `MIN_BFMI` in
    a chain (`ebfmi`), a tuner that saw only failed (NaN) rewards. Where tuning ended is no
    warning (`tuning_notes`)."""
    if table is None:
        table = summary_table(*posterior_array(idata))
    table = judged(table)
    out = []
    if float(table["r_hat"].max()) > MAX_RHAT:  # NaN (one chain: no R-hat) is not
        worst = table["r_hat"].idxmax()
        out.append(f"max R-hat {float(table['r_hat'].max()):.3f} > {MAX_RHAT} ({worst}): the "
                   "chains disagree; the draws are not from the posterior yet")
    phases = divergences_by_phase(idata)
    if phases["sampling"]:
        out.append(f"{phases['sampling']} divergent transitions in the sampling phase (after "
                   f"warm-up and tuning, which had {phases['warmup']} and {phases['tuning']}): "
                   "the sampler may miss regions of high curvature; the draws may be biased"
                   + _nan_clause(non_finite_energies(idata)))
    if float(table["ess_robust"].min()) < MIN_ESS:
        out.append(f"robust min ESS {float(table['ess_robust'].min()):.0f} < {MIN_ESS} "
                   f"({table['ess_robust'].idxmin()}): too few effective draws for reliable "
                   "estimates")
    fractions = ebfmi(idata)
    if fractions is not None and np.any(fractions < MIN_BFMI):
        low = ", ".join(f"{i} ({v:.2f})" for i, v in enumerate(fractions) if v < MIN_BFMI)
        out.append(f"E-BFMI below {MIN_BFMI} in chain {low}: the momentum moves between "
                   "energy levels too slowly to explore the tails (heavy tails or a poor "
                   "metric); the draws may be biased")
    out.extend(far_chain_warnings(_run_attrs(idata)))
    tuning = getattr(idata, "tuning", None)
    if tuning is not None and "reward" in tuning and \
            tuning.attrs.get("objective", "none") != "none":
        rewards = np.asarray(tuning["reward"].values, dtype=float)
        if rewards.size and np.all(np.isnan(rewards)):
            out.append("every tuning reward was NaN (each setting tried diverged or kept too "
                       "few draws): the tuner learned nothing, the frozen setting is a guess")
    return out


def tuning_notes(idata, box: dict | None, integer=()) -> list[str]:
    """Where tuning ended, for the run's record (never a warning: a setting at the edge of
    the search ``box``, ``{name: (low, high)}``, is no sign that the draws are wrong): one
    sentence per frozen setting within `EDGE` of an edge. A bound the setting cannot cross
    (an ``integer`` parameter at 1, such as ``num_leapfrog``) says so; any other edge is
    one a wider box (or, for a moving box, a longer tuning) might improve on."""
    tuning = getattr(idata, "tuning", None)
    out = []
    for name, (low, high) in (box or {}).items():
        if tuning is None or name not in tuning:
            continue
        frozen = float(np.asarray(tuning[name].values)[-1])
        span = np.log(high / low) if low > 0 else high - low
        gap = min(np.log(frozen / low), np.log(high / frozen)) if low > 0 else \
            min(frozen - low, high - frozen)
        if gap > EDGE * span:
            continue
        if name in integer and frozen <= 1 and frozen - low <= high - frozen:
            out.append(f"{name} = {frozen:.4g}, its smallest possible value (the lower edge "
                       f"of the search box [{low:.4g}, {high:.4g}])")
        else:
            out.append(f"{name} = {frozen:.4g} ended at an edge of the search box "
                       f"[{low:.4g}, {high:.4g}]; a wider box might sample a little faster")
    return out


def _recorded_warnings(idata, attrs: dict, table) -> list[str]:
    if "warnings" not in attrs:
        return convergence_warnings(idata, table)
    found = attrs["warnings"]
    return json.loads(found) if isinstance(found, str) else list(found)


def _extreme(values, reduce) -> float:
    """``reduce`` (``np.nanmin`` or ``np.nanmax``) of ``values``; NaN, silently, when every
    value is NaN (one chain's R-hat)."""
    values = np.asarray(values, dtype=float)
    return float(reduce(values)) if np.any(~np.isnan(values)) else float("nan")


def format_summary(idata, max_rows: int = 12) -> str:
    """A plain-text report: the run's totals (draws, gradient evaluations, acceptance,
    divergences per phase, robust min ESS per 1000 gradients with all tuning counted, ESJD,
    E-BFMI where the kernel records energy), quiet notes (`_notes`), the warnings that the
    draws may be wrong (`convergence_warnings`, or those the run recorded in
    ``attrs["warnings"]``) and the per-parameter table, worst R-hat first when there are
    many parameters."""
    attrs = _run_attrs(idata)
    table, jump, (num_chains, num_draws) = _summary_and_esjd(idata)  # never all draws at once
    stats = idata.sample_stats
    grads = int(attrs.get("total_grad_evals", 0))
    robust = _extreme(judged(table)["ess_robust"], np.nanmin)
    found = _recorded_warnings(idata, attrs, table)
    fractions = ebfmi(idata)
    bfmi = "" if fractions is None else f"  min E-BFMI {float(np.min(fractions)):.2f}"
    lines = [
        *run_facts.header_lines(attrs, num_chains, num_draws),
        f"gradient evaluations (all chains, tuning included) {grads:,}",
        f"acceptance {float(stats['acceptance_rate'].mean()):.3f}  divergences: "
        + "  ".join(f"{phase} {count}" for phase, count in divergences_by_phase(idata).items())
        + f"  ESJD {jump:.4g}",
        f"robust min ESS {robust:.1f} (min of bulk-ESS of x, of x^2, tail-ESS)  "
        f"max R-hat {_extreme(judged(table)['r_hat'], np.nanmax):.4f}{bfmi}",
        f"robust min ESS per 1000 gradients {1000 * robust / max(grads, 1):.4g}  "
        f"wall {float(attrs.get('wall_s', float('nan'))):.1f} s "
        f"(compile {float(attrs.get('compile_s', float('nan'))):.1f} s)",
        *run_facts.census_lines(attrs),
        *share_lines(idata, _run_attrs(idata)),
        *run_facts.stop_lines(idata),
        *run_facts.portfolio_lines(attrs),
        *run_facts.notes(attrs, num_chains),
        "",
    ]
    if found:
        lines += ["WARNING: not converged or not trustworthy:"] + [f"  - {w}" for w in found]
        lines.append("")
    cols = ["mean", "sd", "mcse_mean", "ess_bulk", "ess_tail", "ess_robust", "r_hat"]
    shown = table[cols]
    if len(shown) > max_rows:
        shown = shown.sort_values("r_hat", ascending=False).head(max_rows)
        lines.append(f"{max_rows} of {len(table)} parameters, largest R-hat first:")
    import pandas as pd

    with pd.option_context("display.width", 120, "display.float_format", "{:.4g}".format):
        lines.append(shown.to_string())
    return "\n".join(lines)
