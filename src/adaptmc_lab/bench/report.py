"""The bench's report: one row per (target, sampler) aggregated over seeds (`aggregate`),
its markdown table, the ESS-per-gradient figure and the files of `write_report`."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from adaptmc import io
from adaptmc_lab.bench.comparison import comparison_report

PEER_BASELINE = "blackjax-nuts"
SECOND_BASELINE = "numpyro-nuts"
MAX_RHAT = 1.1  # above this a row's ESS is not compared (Vehtari et al. 2021 ask for < 1.01)


def fmt(value, spec: str = ".3g") -> str:
    """``value`` formatted with ``spec``; an em dash for None or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return format(value, spec)


def aggregate(results: list[dict]) -> list[dict]:
    """One row per (target, sampler): medians over seeds of ESS rates, worst-case accuracy,
    R-hat and total divergences, and the ratio of min ESS per gradient to `PEER_BASELINE`
    on the same target. The ratio is None unless both rows have max R-hat <= `MAX_RHAT`:
    the ESS of chains that have not mixed means nothing."""
    rows: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        rows.setdefault((r["cell"]["target"], r["cell"]["sampler"]), []).append(r)
    table = []
    for (target, sampler), cells in rows.items():
        def med(key, cells=cells):
            return float(np.median([c[key] for c in cells]))

        def worst(key, cells=cells):
            vals = [c[key] for c in cells if c[key] is not None]
            return max(vals) if vals else None

        table.append({
            "target": target, "sampler": sampler, "seeds": len(cells),
            "warmup_grads": med("warmup_grads"), "sampling_grads": med("sampling_grads"),
            "wall_s": med("wall_s"), "compile_s": med("compile_s"),
            "host_s": float(np.median([c.get("host_s", 0.0) for c in cells])),
            "jax_compile_s": float(np.median([c.get("jax_compile_s", np.nan) for c in cells])),
            "min_ess": med("min_ess"), "median_ess": med("median_ess"),
            "min_ess_per_1k_grads": med("min_ess_per_1k_grads"),
            "min_ess_per_s": med("min_ess_per_s"), "max_rhat": worst("max_rhat"),
            "divergences": int(sum(c["divergences"] for c in cells)),
            "max_err_sd": worst("max_err_sd"), "max_err_mcse": worst("max_err_mcse"),
        })
    for row in table:
        row["converged"] = row["max_rhat"] is not None and row["max_rhat"] <= MAX_RHAT
    baseline = {row["target"]: row["min_ess_per_1k_grads"] for row in table
                if row["sampler"] == PEER_BASELINE and row["converged"]}
    for row in table:
        base = baseline.get(row["target"])
        usable = base and row["converged"]
        row["ratio_to_nuts"] = row["min_ess_per_1k_grads"] / base if usable else None
    for peer in (PEER_BASELINE, SECOND_BASELINE):
        per_s = {row["target"]: row["min_ess_per_s"] for row in table
                 if row["sampler"] == peer and row["converged"]}
        for row in table:
            base = per_s.get(row["target"])
            row[f"per_s_ratio_to_{peer}"] = (row["min_ess_per_s"] / base
                                             if base and row["converged"] else None)
    return table


def speed_table(results: list[dict]) -> str:
    """Per second, everything included (issue 14): the seconds from the call to the draws
    (compilation, warm-up and tuning included), the compilation (the sampler's own account
    of its main programs, and JAX's of every program it traced and compiled, eager
    operations included: `adaptmc.run.compile_clock`), the tuner's and the objective's host
    seconds as a share of the call, the gradients spent before the first kept draw (warm-up
    and tuning), min ESS per second, and its ratio to each NUTS, as markdown."""
    header = ("| target | sampler | call to draws s | compile s | all JAX compile s | host % "
              f"| grads before first draw | min ESS / s | ratio to {PEER_BASELINE} | ratio to "
              f"{SECOND_BASELINE} |")
    lines = [header, "|" + "---|" * 10]
    for row in aggregate(results):
        total = row["wall_s"] + (0.0 if math.isnan(row["compile_s"]) else row["compile_s"])
        lines.append(
            f"| {row['target']} | {row['sampler']} | {total:.2f} "
            f"| {fmt(row['compile_s'], '.2f')} | {fmt(row['jax_compile_s'], '.2f')} "
            f"| {100 * row['host_s'] / max(total, 1e-9):.2f} "
            f"| {row['warmup_grads']:,.0f} | {row['min_ess_per_s']:.3g} "
            f"| {fmt(row['per_s_ratio_to_' + PEER_BASELINE], '.2f')} "
            f"| {fmt(row['per_s_ratio_to_' + SECOND_BASELINE], '.2f')} |")
    return "\n".join(lines)


def markdown_table(results: list[dict]) -> str:
    """The aggregated table as GitHub markdown."""
    header = ("| target | sampler | seeds | warm-up grads | sampling grads | wall s (compile) "
              "| robust min / median ESS | min ESS / 1k grads | ratio to NUTS | min ESS / s "
              "| max R-hat | div | max abs err / sd | max err / MCSE |")
    lines = [header, "|" + "---|" * 14]
    for row in aggregate(results):
        lines.append(
            f"| {row['target']} | {row['sampler']} | {row['seeds']} "
            f"| {row['warmup_grads']:,.0f} | {row['sampling_grads']:,.0f} "
            f"| {row['wall_s']:.1f} ({fmt(row['compile_s'], '.1f')}) "
            f"| {row['min_ess']:.0f} / {row['median_ess']:.0f} "
            f"| {row['min_ess_per_1k_grads']:.3g} | {fmt(row['ratio_to_nuts'], '.2f')} "
            f"| {row['min_ess_per_s']:.3g} | {fmt(row['max_rhat'], '.4g')} "
            f"| {row['divergences']} | {fmt(row['max_err_sd'], '.3g')} "
            f"| {fmt(row['max_err_mcse'], '.1f')} |"
        )
    return "\n".join(lines)


def plot_results(results: list[dict], path: str | os.PathLike) -> None:
    """Two panels: min ESS per 1000 gradients (tuning included) by target and sampler, log
    scale; and its ratio to BlackJAX NUTS."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = aggregate(results)
    targets = list(dict.fromkeys(r["target"] for r in table))
    samplers = list(dict.fromkeys(r["sampler"] for r in table))
    lookup = {(r["target"], r["sampler"]): r for r in table}
    width = 0.8 / max(len(samplers), 1)
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 1.1 * len(targets) + 3), 8), sharex=True)
    x = np.arange(len(targets))
    for j, sampler in enumerate(samplers):
        ess = [lookup.get((t, sampler), {}).get("min_ess_per_1k_grads", np.nan) for t in targets]
        ratio = [lookup.get((t, sampler), {}).get("ratio_to_nuts") for t in targets]
        ratio = [np.nan if r is None else r for r in ratio]
        offset = x + (j - (len(samplers) - 1) / 2) * width
        axes[0].bar(offset, np.maximum(ess, 1e-4), width, label=sampler)
        axes[1].bar(offset, np.maximum(ratio, 1e-4), width, label=sampler)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("robust min ESS per 1000 gradients\n(tuning included)")
    axes[1].set_yscale("log")
    axes[1].axhline(1.0, color="k", lw=0.8)
    axes[1].set_ylabel(f"ratio to {PEER_BASELINE}")
    axes[1].set_xticks(x)
    axes[1].set_xticklabels([t.removeprefix("pdb-") for t in targets], rotation=40, ha="right",
                            fontsize=8)
    axes[0].legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(results: list[dict], out: str | os.PathLike, command: str) -> Path:
    """``results.json``, ``results.md`` (the command, the table and, with nutpie's
    low-rank cells, the comparison with them: `comparison_report`) and
    ``ess_per_grad.png`` in ``out``; returns the markdown's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    io.write_json(out / "results.json", {"command": command, "cells": results}, indent=1)
    comparison = comparison_report(results)  # failed cells counted there
    failed = [r for r in results if r.get("failed")]
    results = [r for r in results if not r.get("failed")]
    failures = "".join(f"- {r['key']}: {r['error']}\n" for r in failed)
    failures = f"\n**Failed cells** (not in the table):\n\n{failures}" if failed else ""
    text = (f"Generated by `{command}`.\n\n{markdown_table(results)}\n{failures}\n"
            f"Per second, everything included:\n\n{speed_table(results)}\n\n"
            "Plot: ess_per_grad.png. Logistic regression is compared with a long NUTS run "
            "(8 x 5000 draws, `nuts_reference`); the BNN's quantities are each draw's "
            "training and test mean squared error and its log noise precision "
            "(`bnn_quantities`), "
            "compared with a long Gibbs-within-HMC run (`bnn_reference`); accuracy columns are "
            "empty where a target has no reference; the ratio to NUTS is empty where "
            f"either max R-hat exceeds {MAX_RHAT}.\n" + (f"\n{comparison}" if comparison else ""))
    (out / "results.md").write_text(text)
    plot_results(results, out / "ess_per_grad.png")
    return out / "results.md"
