"""The bench's comparison tables (`adaptmc_lab.bench.comparison`) over the cells of one or more
bench folders: ``python scripts/bench_tables.py OUT [OUT ...]`` reads every ``OUT/cells/*.json``
(a later folder's cell replaces an earlier one's of the same posterior, sampler and seed) and
prints the summary against nutpie low-rank, the table by dimension for adaptmc's default and
every cell. One bench run whose samplers ran as separate processes (the same commit, config
and day) reads as one table this way; cells of another bench config, another definition of
a target (its digest) or other options of a row are refused, as the bench itself would not
reuse them (`adaptmc_lab.bench.distributed`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from adaptmc_lab.bench.comparison import comparison_report


def cells(folders: list[str]) -> list[dict]:
    """Every cell of ``folders``, keyed by its bench key (later folders win)."""
    out: dict[str, dict] = {}
    for folder in folders:
        for path in sorted(Path(folder, "cells").glob("*.json")):
            cell = json.loads(path.read_text())
            out[cell["key"]] = cell
    check_one_bench(list(out.values()))
    return list(out.values())


def check_one_bench(results: list[dict]) -> None:
    """Exit with a message unless ``results`` share one bench config, one digest per target
    and one set of options per sampler row."""
    seen: dict[str, object] = {}
    for cell in results:
        for what, value in (("config", cell.get("config")),
                            (f"target {cell['cell']['target']}", cell.get("target_digest")),
                            (f"sampler {cell['cell']['sampler']}", cell.get("sampler_options"))):
            first = seen.setdefault(what, value)
            if first != value:
                raise SystemExit(f"{cell['key']}: another {what} than the other cells' "
                                 f"({value!r} against {first!r}); not one bench")


if __name__ == "__main__":
    print(comparison_report(cells(sys.argv[1:])))
