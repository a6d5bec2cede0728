"""The bench's comparison with one baseline sampler (issue #42): per posterior and seed, per
sampler, robust ESS per 1000 gradients, the gradients before the first kept draw and their
share, the error against the reference and R-hat, each cell right, wrong or without a
reference (`cell_table`); per sampler, the median ratios to the baseline and the counts
(`summary_table`); and a README-sized table by posterior size (`size_table`). Pure
functions of a bench's results (``results.json``'s ``cells``).

A cell is wrong when its R-hat is 1.01 or more (Vehtari et al. 2021, Section 4.3) or its
largest error of a posterior mean is 0.25 reference standard deviations or more; right
when neither and it has a reference; "no ref" when its posterior has no reference and its
R-hat is below 1.01.
"""

from __future__ import annotations

import math

import numpy as np

BASELINE = "nutpie-low-rank"
WRONG_RHAT = 1.01
WRONG_ERROR_SD = 0.25
SIZE_BANDS = ((1, 10), (11, 100), (101, math.inf))
"""Dimensions of the README table's rows (35 posteriordb data sets in the broad bench are too
many rows for a README)."""


def verdict(cell: dict) -> str:
    """``"failed"``, ``"wrong"``, ``"no ref"`` or ``"right"`` (the module docstring)."""
    if cell.get("failed"):
        return "failed"
    rhat = cell.get("max_rhat")
    if not cell.get("finite", True) or rhat is None or not rhat < WRONG_RHAT:
        return "wrong"
    error = cell.get("max_err_sd")
    if error is None:
        return "no ref"
    return "wrong" if not error < WRONG_ERROR_SD else "right"


def first_draw_grads(cell: dict) -> tuple[int, float]:
    """Gradients (all chains) spent before the first kept draw, warm-up and tuning, and
    their share of the cell's total."""
    before, after = cell["warmup_grads"], cell["sampling_grads"]
    return before, before / max(before + after, 1)


def by_cell(results: list[dict]) -> dict[tuple[str, int], dict[str, dict]]:
    """``{(target, seed_index): {sampler: result}}``, in the order the results came."""
    out: dict[tuple[str, int], dict[str, dict]] = {}
    for r in results:
        c = r["cell"]
        out.setdefault((c["target"], c["seed_index"]), {})[c["sampler"]] = r
    return out


def samplers_of(results: list[dict], baseline: str = BASELINE) -> list[str]:
    """The samplers of ``results``, the baseline last (if there)."""
    names = list(dict.fromkeys(r["cell"]["sampler"] for r in results))
    return [s for s in names if s != baseline] + [s for s in names if s == baseline]


def _fmt(value, spec: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return format(value, spec)


def _cell_columns(cell: dict | None) -> list[str]:
    """One sampler's four columns of a posterior and seed: ESS per 1000 gradients (with
    "wrong" or "failed"), gradients before the first draw (share), error / ref sd, R-hat."""
    if cell is None:
        return ["", "", "", ""]
    kind = verdict(cell)
    if kind == "failed":
        return ["failed", "", "", ""]
    before, share = first_draw_grads(cell)
    ess = _fmt(cell["min_ess_per_1k_grads"], ".3g") + (" wrong" if kind == "wrong" else "")
    error = "no ref" if cell.get("max_err_sd") is None else _fmt(cell["max_err_sd"], ".2f")
    return [ess, f"{before:,} ({100 * share:.0f} %)", error, _fmt(cell["max_rhat"], ".3f")]


def cell_table(results: list[dict], baseline: str = BASELINE) -> str:
    """Markdown: one row per posterior and seed, one column group per sampler (robust ESS
    per 1000 gradients, marked "wrong" when wrong; gradients before the first kept draw and
    their share; max |mean - ref| / ref sd, "no ref" without one; max R-hat)."""
    samplers = samplers_of(results, baseline)
    head = ["posterior", "seed"] + [f"{s}: {col}" for s in samplers for col in (
        "ESS / 1k grads", "grads before first draw", "err / sd", "R-hat")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (target, seed), cells in by_cell(results).items():
        row = [target.removeprefix("stan-").removeprefix("pdb-"), str(seed)]
        for sampler in samplers:
            row += _cell_columns(cells.get(sampler))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def ratios(results: list[dict], sampler: str, baseline: str = BASELINE) -> dict:
    """Against ``baseline`` on the same posterior and seed: ``ess``, the ratios of robust
    ESS per gradient over the cells where both are right; ``before``, the ratios of the
    gradients before the first kept draw over the cells where both ran."""
    ess, before = [], []
    for cells in by_cell(results).values():
        mine, base = cells.get(sampler), cells.get(baseline)
        if mine is None or base is None or "failed" in (verdict(mine), verdict(base)):
            continue
        before.append(mine["warmup_grads"] / max(base["warmup_grads"], 1))
        if verdict(mine) == verdict(base) == "right" and base["min_ess_per_1k_grads"] > 0:
            ess.append(mine["min_ess_per_1k_grads"] / base["min_ess_per_1k_grads"])
    return {"ess": ess, "before": before}


def counts(results: list[dict], sampler: str) -> dict[str, int]:
    """``{right, wrong, no ref, failed}``: the sampler's cells of each kind."""
    kinds = [verdict(r) for r in results if r["cell"]["sampler"] == sampler]
    return {k: kinds.count(k) for k in ("right", "wrong", "no ref", "failed")}


def summary_rows(results: list[dict], baseline: str = BASELINE) -> list[dict]:
    """Per sampler: its cells' counts (`counts`), the median, range and count >= 1 of its
    ESS-per-gradient ratios to ``baseline`` (cells where both are right) and the median ratio
    of gradients before the first kept draw (`ratios`)."""
    rows = []
    for sampler in samplers_of(results, baseline):
        r = ratios(results, sampler, baseline)
        ess = np.asarray(r["ess"], dtype=float)
        rows.append({
            "sampler": sampler, **counts(results, sampler), "pairs": len(ess),
            "ess_ratio": float(np.median(ess)) if ess.size else None,
            "ess_low": float(ess.min()) if ess.size else None,
            "ess_high": float(ess.max()) if ess.size else None,
            "at_least_1x": int(np.sum(ess >= 1.0)),
            "before_ratio": float(np.median(r["before"])) if r["before"] else None,
        })
    return rows


def summary_table(results: list[dict], baseline: str = BASELINE) -> str:
    """Markdown of `summary_rows`."""
    head = ("| sampler | right | wrong | no ref | failed | robust ESS / grad vs "
            f"{baseline} (median, range) | >= 1x | cells both right | grads before first "
            f"draw vs {baseline} (median) |")
    lines = [head, "|" + "---|" * 9]
    for row in summary_rows(results, baseline):
        spread = "—" if row["ess_ratio"] is None else (
            f"{row['ess_ratio']:.2f} ({row['ess_low']:.2f}-{row['ess_high']:.2f})")
        lines.append(
            f"| {row['sampler']} | {row['right']} | {row['wrong']} | {row['no ref']} "
            f"| {row['failed']} | {spread} | {row['at_least_1x']} | {row['pairs']} "
            f"| {_fmt(row['before_ratio'], '.2f')} |")
    return "\n".join(lines)


def size_table(results: list[dict], sampler: str, baseline: str = BASELINE) -> str:
    """Markdown, README-sized: per band of dimension (`SIZE_BANDS`), the posteriors, each
    sampler's right / wrong / no-ref cells and the medians of `ratios` of ``sampler`` to
    ``baseline``."""
    head = (f"| dimension | posteriors | {sampler} right / wrong / no ref | {baseline} right / "
            f"wrong / no ref | robust ESS / grad, ratio (median, cells) | grads before "
            "first draw, ratio (median) |")
    lines = [head, "|" + "---|" * 6]
    for low, high in SIZE_BANDS:
        band = [r for r in results if not r.get("failed") and low <= r["dim"] <= high]
        if not band:
            continue
        r = ratios(band, sampler, baseline)
        mine, base = counts(band, sampler), counts(band, baseline)
        ess = _fmt(float(np.median(r["ess"])) if r["ess"] else None, ".2f")
        before = _fmt(float(np.median(r["before"])) if r["before"] else None, ".2f")
        label = f"{low}-{high}" if high < math.inf else f"> {low - 1}"
        lines.append(
            f"| {label} | {len({x['cell']['target'] for x in band})} "
            f"| {mine['right']} / {mine['wrong']} / {mine['no ref']} "
            f"| {base['right']} / {base['wrong']} / {base['no ref']} "
            f"| {ess} ({len(r['ess'])}) | {before} |")
    return "\n".join(lines)


def comparison_report(results: list[dict], sampler: str = "adaptmc-adaptive-hmc",
                      baseline: str = BASELINE) -> str:
    """The three tables as one markdown section; empty without the baseline's cells."""
    if not any(r["cell"]["sampler"] == baseline for r in results):
        return ""
    text = (f"## Against {baseline}\n\nA cell is wrong when R-hat >= {WRONG_RHAT} or the "
            f"largest |mean - ref| >= {WRONG_ERROR_SD} ref sd; \"no ref\": no reference "
            "posterior. Ratios on the same posterior and seed.\n\n"
            f"{summary_table(results, baseline)}\n\n")
    if any(r["cell"]["sampler"] == sampler for r in results):
        text += f"By dimension, {sampler}:\n\n{size_table(results, sampler, baseline)}\n\n"
    return text + f"Per posterior and seed:\n\n{cell_table(results, baseline)}\n"
