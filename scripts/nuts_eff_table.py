"""Before/after table of bench cells for the NUTS-efficiency note (issue #42): per cell the
robust min ESS per 1000 gradients (all, and sampling only), sampling gradients per draw
and the ratio to nutpie low-rank's cell of the same row.

    python scripts/nuts_eff_table.py runs/nutseff-before runs/nutseff-after
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROWS = ("adaptmc-adaptive-hmc", "adaptmc-adaptive-hmc-nuts-always")


def cells(folder: str) -> dict:
    out = {}
    for path in Path(folder, "cells").glob("*.json"):
        cell = json.loads(path.read_text())
        target, sampler, seed = path.stem.split("__")
        out[target, sampler, seed] = cell
    return out


def main() -> None:
    runs = [cells(folder) for folder in sys.argv[1:]]
    names = [Path(folder).name for folder in sys.argv[1:]]
    print("| posterior | seed | row | " + " | ".join(
        f"{n}: ESS/1k grads, sampling ESS/1k, grads/draw, ratio" for n in names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    ratios = {(n, row): [] for n in names for row in ROWS}
    bad = {n: 0 for n in names}
    for target, sampler, seed in sorted(runs[0]):
        if sampler not in ROWS:
            continue
        parts = []
        for name, run in zip(names, runs, strict=True):
            cell, peer = run.get((target, sampler, seed)), run.get((target, "nutpie-low-rank",
                                                                     seed))
            if cell is None or peer is None:
                parts.append("—")
                continue
            ratio = cell["min_ess_per_1k_grads"] / peer["min_ess_per_1k_grads"]
            ratios[name, sampler].append(ratio)
            wrong = cell["max_rhat"] >= 1.01 or (cell["max_err_sd"] or 0) >= 0.25
            bad[name] += wrong
            parts.append(f"{cell['min_ess_per_1k_grads']:.1f}, "
                         f"{cell['min_ess_per_1k_sampling_grads']:.1f}, "
                         f"{cell['sampling_grads'] / 4000:.2f}, {ratio:.2f}x"
                         + (" WRONG" if wrong else ""))
        short = target.removeprefix("pdb-").split("-")[0]
        print(f"| {short} | {seed} | {sampler.removeprefix('adaptmc-')} | "
              + " | ".join(parts) + " |")
    print()
    for (name, row), values in ratios.items():
        if values:
            print(f"{name} {row}: median ratio to nutpie low-rank "
                  f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f}), "
                  f"{len(values)} cells, wrong cells {bad[name]}")


if __name__ == "__main__":
    main()
