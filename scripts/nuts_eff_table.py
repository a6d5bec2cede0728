"""Tables of bench cells for the NUTS-efficiency note (issue #42): per cell and run folder,
the robust min ESS per 1000 gradients of the whole run, per 1000 sampling gradients,
sampling gradients per draw and the whole-run ratio to nutpie low-rank's cell of the same
row; then per row and folder the median ratios (whole run and per sampling gradient).

    python scripts/nuts_eff_table.py ROW[,ROW...] FOLDER [FOLDER ...]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

PEER = "nutpie-low-rank"


def cells(folder: str) -> dict:
    out = {}
    for path in Path(folder, "cells").glob("*.json"):
        target, sampler, seed = path.stem.split("__")
        out[target, sampler, seed] = json.loads(path.read_text())
    return out


def ratios(run: dict, row: str, key: str) -> list[float]:
    return [cell[key] / run[t, PEER, s][key] for (t, r, s), cell in sorted(run.items())
            if r == row and (t, PEER, s) in run]


def describe(run: dict, row: str) -> str:
    whole, sampling = ratios(run, row, "min_ess_per_1k_grads"), ratios(
        run, row, "min_ess_per_1k_sampling_grads")
    wrong = sum(c["max_rhat"] >= 1.01 or (c["max_err_sd"] or 0) >= 0.25
                for (_, r, _), c in run.items() if r == row)
    if not whole:
        return "—"
    return (f"{statistics.median(whole):.2f}x ({min(whole):.2f}-{max(whole):.2f}); per "
            f"sampling gradient {statistics.median(sampling):.2f}x "
            f"({min(sampling):.2f}-{max(sampling):.2f}); {len(whole)} cells, {wrong} wrong")


def main() -> None:
    rows, folders = sys.argv[1].split(","), sys.argv[2:]
    runs = [cells(folder) for folder in folders]
    print("| posterior | seed | row | " + " | ".join(Path(f).name for f in folders) + " |")
    print("|---|---|---|" + "---|" * len(folders))
    keys = sorted({k for run in runs for k in run if k[1] in rows})
    for target, row, seed in keys:
        parts = []
        for run in runs:
            cell, peer = run.get((target, row, seed)), run.get((target, PEER, seed))
            if cell is None or peer is None:
                parts.append("—")
                continue
            parts.append(f"{cell['min_ess_per_1k_grads']:.1f}, "
                         f"{cell['min_ess_per_1k_sampling_grads']:.1f}, "
                         f"{cell['sampling_grads'] / 4000:.2f}, "
                         f"{cell['min_ess_per_1k_grads'] / peer['min_ess_per_1k_grads']:.2f}x")
        short = target.removeprefix("pdb-").split("-")[0]
        print(f"| {short} | {seed} | {row.removeprefix('adaptmc-adaptive-hmc')} | "
              + " | ".join(parts) + " |")
    print()
    print("| row | " + " | ".join(Path(f).name for f in folders) + " |")
    print("|---|" + "---|" * len(folders))
    for row in rows:
        print(f"| {row} | " + " | ".join(describe(run, row) for run in runs) + " |")


if __name__ == "__main__":
    main()
