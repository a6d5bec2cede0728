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
from adaptmc_lab.bench.config import BenchConfig, Cell
from adaptmc_lab.bench.evaluation import compute_cell
from adaptmc_lab.bench.report import fmt
from adaptmc_lab.bench.samplers import row_options


def _cached_cells(cells: list[Cell], config: BenchConfig, cell_dir: Path | None,
                  force: bool, log: Callable[[str], None]) -> tuple[dict[str, dict], list[Cell]]:
    """The results already in ``cell_dir`` computed with ``config`` on the same target
    definition (`target_digest`) and the row's options (`row_options`, defaults included;
    none if ``force``), and the cells still to compute."""
    done: dict[str, dict] = {}
    todo = []
    wanted = json.loads(json.dumps(asdict(config)))
    digests: dict[str, str | None] = {}
    for cell in cells:
        path = None if cell_dir is None else cell_dir / f"{cell.key}.json"
        cached = _read_cached(path)
        if cached is not None and not force and cached.get("config") == wanted and \
                cached.get("sampler_options", {}) == row_options(cell.sampler):
            if cell.target not in digests:
                digests[cell.target] = _digest_or_none(cell.target)
            if cached.get("target_digest") == digests[cell.target] is not None:
                done[cell.key] = cached
                log(f"cached  {cell.key}")
                continue
        todo.append(cell)
    return done, todo


def _read_cached(path: Path | None) -> dict | None:
    if path is None or not path.is_file():
        return None
    try:
        cached = json.loads(path.read_text())
    except (ValueError, OSError):
        return None  # a damaged cell file is computed again
    return cached if isinstance(cached, dict) else None


def _digest_or_none(name: str) -> str | None:
    from adaptmc_lab.bench.references import bench_target_digest
    from adaptmc_lab.targets import get_target

    try:
        return bench_target_digest(get_target(name))
    except Exception:  # noqa: BLE001 - the cell itself will fail and say why
        return None


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
    rerun with the same ``config`` and target definition unless ``force``. Each cell has
    ``retries`` retries on an exception (with Dask, a task whose worker dies is also
    rescheduled: ``allowed_failures``); a cell that still fails is recorded as
    ``{"cell", "key", "failed": True, "error"}`` and the other cells go on.
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

    def fail(cell: Cell, err: BaseException) -> None:
        done[cell.key] = failed_cell(cell, err)
        log(f"FAILED  {cell.key}: {done[cell.key]['error']}")

    if client is None:
        for cell in todo:
            for attempt in range(retries + 1):
                try:
                    finish(compute_cell(cell, config))
                    break
                except Exception as err:  # noqa: BLE001 - a cell's failure is recorded
                    if attempt == retries:
                        fail(cell, err)
    else:
        from distributed import as_completed

        futures = {
            client.submit(compute_cell, cell, config, key=f"adaptmc-bench-{cell.key}",
                          retries=retries, pure=False): cell
            for cell in todo
        }
        for future in as_completed(list(futures)):
            try:
                finish(future.result())
            except Exception as err:  # noqa: BLE001 - the other cells go on
                fail(futures[future], err)
    return [done[cell.key] for cell in cells]


def failed_cell(cell: Cell, err: BaseException) -> dict:
    """The record of a cell that failed after its retries (not cached: a rerun tries it
    again)."""
    text = " ".join(str(err).split()) or "(no message)"
    return {"cell": cell._asdict(), "key": cell.key, "failed": True,
            "error": f"{type(err).__name__}: {text}"}


def make_client(address: str | None, workers: int):
    """A Dask client: to the scheduler at ``address`` (``tcp://host:8786``), or to a new
    ``LocalCluster`` of ``workers`` spawned processes with one thread each."""
    from distributed import Client, LocalCluster

    if address:
        return Client(address)
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=":0")
    return Client(cluster)
