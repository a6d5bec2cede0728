"""Benchmark suite: a matrix of targets x samplers x seeds, serially or on Dask.

- `adaptmc_lab.bench.config`: `BenchConfig`, cells and their seeds, the default and quick
  matrices;
- `adaptmc_lab.bench.quantities` and `adaptmc_lab.bench.references`: what is compared and the
  reference it is compared with;
- `adaptmc_lab.bench.samplers`: the samplers, ``(target, seed, config) -> SamplerOutput``;
- `adaptmc_lab.bench.evaluation`: a cell's numbers (ESS per gradient, R-hat, accuracy);
- `adaptmc_lab.bench.distributed`: cells serially or as Dask tasks, cached on disk;
- `adaptmc_lab.bench.report`: the aggregated table, figure and files.

`run_bench` puts them together for ``adaptmc-lab bench``.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from adaptmc_lab.bench.config import (
    DEFAULT_SAMPLERS,
    DEFAULT_TARGETS,
    QUICK_CONFIG,
    QUICK_SAMPLERS,
    QUICK_TARGETS,
    TARGET_SETS,
    BenchConfig,
    Cell,
    SamplerOutput,
    cell_seed,
    expand_targets,
    make_cells,
)
from adaptmc_lab.bench.distributed import make_client, run_cells
from adaptmc_lab.bench.evaluation import compute_cell, deterministic_part, evaluate
from adaptmc_lab.bench.quantities import quantities
from adaptmc_lab.bench.references import reference
from adaptmc_lab.bench.report import aggregate, markdown_table, write_report
from adaptmc_lab.bench.samplers import SAMPLERS


def prepare_references(targets: list[str], log: Callable[[str], None] | None = print) -> None:
    """Compute (or read) every target's reference here, before the cells, so that workers
    sharing this machine's `adaptmc_lab.bench.references.cache_dir` find it instead of each
    computing it again; the Gibbs-within-HMC run of the BNN takes about 40 minutes on one
    core and shows progress."""
    import jax

    from adaptmc_lab.targets import get_target

    jax.config.update("jax_enable_x64", True)
    for name in targets:
        reference(get_target(name), log=log)


def run_bench(
    targets: list[str],
    samplers: list[str],
    num_seeds: int,
    config: BenchConfig,
    out: str | os.PathLike,
    *,
    dask_address: str | None = None,
    workers: int = 0,
    force: bool = False,
    command: str = "adaptmc-lab bench",
    log: Callable[[str], None] | None = print,
) -> list[dict]:
    """The whole suite: cells, serial or Dask (``workers > 1`` or an address), report."""
    unknown = [s for s in samplers if s not in SAMPLERS]
    if unknown:
        raise ValueError(f"unknown samplers {unknown}; choose from {', '.join(SAMPLERS)}")
    cells = make_cells(targets, samplers, num_seeds)
    prepare_references(targets, log)
    if workers == 0:  # auto: a local cluster when there is enough to share
        workers = min(len(cells), os.cpu_count() or 1) if len(cells) >= 4 else 1
    client = None
    if dask_address or workers > 1:
        client = make_client(dask_address, workers)
        log(f"dask: {client.dashboard_link if dask_address else f'{workers} local workers'}")
    try:
        results = run_cells(cells, config, out, client=client, force=force, log=log)
    finally:
        if client is not None:
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None and not dask_address:
                cluster.close()
    write_report(results, out, command)
    return results


__all__ = [
    "DEFAULT_SAMPLERS",
    "DEFAULT_TARGETS",
    "QUICK_CONFIG",
    "QUICK_SAMPLERS",
    "QUICK_TARGETS",
    "SAMPLERS",
    "TARGET_SETS",
    "BenchConfig",
    "Cell",
    "SamplerOutput",
    "aggregate",
    "cell_seed",
    "compute_cell",
    "deterministic_part",
    "evaluate",
    "expand_targets",
    "make_cells",
    "markdown_table",
    "prepare_references",
    "quantities",
    "reference",
    "run_bench",
    "run_cells",
    "write_report",
]
