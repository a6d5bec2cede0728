"""Running cells serially or on Dask (`run_cells`).

With a Dask ``Client`` (``--dask ADDRESS`` or a ``LocalCluster(processes=True)``: spawned
worker processes, so JAX is never forked) each cell is one task, submitted with ``retries``;
a worker that dies mid-cell has its task rescheduled on another (Dask's
``allowed_failures``), so the run completes. Every finished cell is written at once to
``<out>/cells/<cell>.json``; a rerun skips finished cells unless ``force``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from adaptmc import io
from adaptmc.bench.config import BenchConfig, Cell
from adaptmc.bench.evaluation import compute_cell
from adaptmc.bench.report import fmt


def _cached_cells(cells: list[Cell], config: BenchConfig, cell_dir: Path | None,
                  force: bool, log: Callable[[str], None]) -> tuple[dict[str, dict], list[Cell]]:
    """The results already in ``cell_dir`` computed with ``config`` (none if ``force``), and
    the cells still to compute."""
    done: dict[str, dict] = {}
    todo = []
    wanted = json.loads(json.dumps(asdict(config)))
    for cell in cells:
        path = None if cell_dir is None else cell_dir / f"{cell.key}.json"
        cached = json.loads(path.read_text()) if path is not None and path.is_file() else None
        if cached is not None and not force and cached.get("config") == wanted:
            done[cell.key] = cached
            log(f"cached  {cell.key}")
        else:
            todo.append(cell)
    return done, todo


def open_bench_dir(out: str | os.PathLike) -> Path:
    """The bench's output folder: created (with adaptmc's marker) when absent; an existing
    one must be empty or a bench folder (marker or ``cells/``), never another folder the
    bench would litter."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"bench output {str(out)!r} exists and is not a folder")
    if not out.exists():
        return io.create_output_dir(out, kind="bench")
    is_bench = (out / io.MARKER).is_file() or (out / "cells").is_dir()
    if any(out.iterdir()) and not is_bench:
        raise FileExistsError(f"bench output folder {str(out)!r} already holds files the "
                              "bench did not write; choose another --out")
    if not (out / io.MARKER).is_file():
        io.write_json(out / io.MARKER, {"kind": "bench"})
    return out


def run_cells(
    cells: list[Cell],
    config: BenchConfig,
    out: str | os.PathLike | None = None,
    *,
    client=None,
    force: bool = False,
    retries: int = 2,
    log: Callable[[str], None] | None = None,
) -> list[dict]:
    """Compute ``cells`` serially (``client=None``) or as Dask tasks on ``client``.

    Finished cells are written to ``<out>/cells/<key>.json`` as they arrive and reused on a
    rerun with the same ``config`` unless ``force``. With Dask each task has ``retries``
    retries on an exception, and a task whose worker dies is rescheduled by the scheduler
    (``allowed_failures``).
    Returns the results in the order of ``cells``.
    """
    log = log or (lambda text: None)
    cell_dir = None if out is None else open_bench_dir(out) / "cells"
    if cell_dir is not None:
        cell_dir.mkdir(parents=True, exist_ok=True)
    done, todo = _cached_cells(cells, config, cell_dir, force, log)

    def finish(result: dict) -> None:
        done[result["key"]] = result
        if cell_dir is not None:
            io.write_json(cell_dir / f"{result['key']}.json", result, indent=1)
        log(f"done    {result['key']}: min ESS/1k grads {result['min_ess_per_1k_grads']:.3g}, "
            f"max err/sd {fmt(result['max_err_sd'])}")

    if client is None:
        for cell in todo:
            finish(compute_cell(cell, config))
    else:
        from distributed import as_completed

        futures = [
            client.submit(compute_cell, cell, config, key=f"adaptmc-bench-{cell.key}",
                          retries=retries, pure=False)
            for cell in todo
        ]
        for future in as_completed(futures):
            finish(future.result())
    return [done[cell.key] for cell in cells]


def make_client(address: str | None, workers: int):
    """A Dask client: to the scheduler at ``address`` (``tcp://host:8786``), or to a new
    ``LocalCluster`` of ``workers`` spawned processes with one thread each."""
    from distributed import Client, LocalCluster

    if address:
        return Client(address)
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=":0")
    return Client(cluster)
