"""The run folder of `adaptmc.run.run`: its fingerprint and configuration, checkpoints, draw
chunks and the final netCDF (the file layout is `adaptmc.io`'s).

A checkpoint holds the chain states, the tuner state, the PRNG key data, the counters (the
next super-transition, gradients, chunks, and where the tuner's stop rule ended adaptation)
and the tuning record so far; the draws since the previous checkpoint go to a chunk file
written just before it. A resumed run checks that it is the same run (fingerprint, PRNG
key), drops chunks written after the last checkpoint and goes on from there.
"""

from __future__ import annotations

import contextlib
import io as io_text
import json
import os
import shutil
import sys
from errno import ENOSPC
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from adaptmc import io
from adaptmc.targets.base import compiled_logdensity_and_grad


def fingerprint(target, kernel, params, tuner, num_super_transitions, gradient_budget,
                num_chains, num_warmup, adapt_until, seed, thin, objective=None) -> dict:
    """What makes two runs the same run (a resumed run must match the saved one): the
    target's name, dimension and content (`target_digest`), the kernel and its parameters,
    the tuner (name and its `describe` facts at the start), the objective's name and every
    option of the run."""
    return {
        "target": target.name,
        "target_digest": target_digest(target),
        "dim": target.dim,
        "kernel": kernel.name,
        "params": {k: _jsonable(v) for k, v in params._asdict().items()},
        "tuner": tuner.name,
        "tuner_config": tuner_facts(tuner),
        "objective": None if objective is None else getattr(objective, "__name__",
                                                            type(objective).__name__),
        "num_super_transitions": num_super_transitions,
        "gradient_budget": gradient_budget,
        "num_chains": num_chains,
        "num_warmup": num_warmup,
        "adapt_until": adapt_until,
        "seed": seed,
        "thin": thin,
    }


def _jsonable(value):
    """A parameter as JSON: an array as nested lists, a NamedTuple of arrays (a low-rank
    inverse mass) as a dict of them."""
    if hasattr(value, "_asdict"):
        return {k: _jsonable(v) for k, v in value._asdict().items()}
    return np.asarray(value).tolist()


def target_digest(target, digits: int = 10) -> str:
    """A hash of the target's log density and gradient at a fixed probe point near its
    initial position (so an edited model or changed data is another run), to ``digits``
    significant digits (robust to the last bits of floating point)."""
    import hashlib

    x0 = np.asarray(target.initial_position, dtype=float)
    if not jnp.issubdtype(target.initial_position.dtype, jnp.floating):
        # a discrete target (integer states): its log density at its start, no gradient
        numbers = np.atleast_1d(float(target.logdensity(target.initial_position)))
    else:
        probe = x0 + 0.1 * np.cos(np.arange(x0.size) + 1.0)
        value, grad = compiled_logdensity_and_grad(target)(
            jnp.asarray(probe, dtype=target.initial_position.dtype))
        numbers = np.concatenate([[float(value)], np.ravel(np.asarray(grad, dtype=float))])
    text = ",".join(f"{v:.{digits}g}" for v in numbers)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def tuner_facts(tuner) -> Any:
    """The tuner's `describe` facts at its initial state, as JSON (None without)."""
    if tuner.describe is None:
        return None
    facts = tuner.describe(tuner.init(jax.random.key(0)))
    return json.loads(json.dumps(facts, default=io.json_default))


def check_same_run(saved: dict, now: dict) -> None:
    """Raise `ValueError` naming every field where ``now`` differs from ``saved``."""
    now = json.loads(json.dumps(now))
    diff = [k for k in now if saved.get(k) != now[k]]
    if diff:
        details = ", ".join(f"{k}: saved {saved.get(k)!r}, now {now[k]!r}" for k in diff)
        raise ValueError(f"cannot resume: the run differs from the checkpointed one ({details})")


def open_run_dir(output_dir: str | Path | None, *, resume: bool, force: bool,
                 fingerprint: dict, config: dict | None) -> Path | None:
    """The folder a run writes to: for a new run, a staged temporary sibling of
    ``output_dir`` holding its config (`adaptmc.io.stage_output_dir`), which the driver puts
    in place once the first checkpoint is in it (`adaptmc.io.commit_output_dir`; with
    ``force`` only then is an old run replaced); with ``resume``, the existing folder,
    whose fingerprint must match. None without ``output_dir``."""
    if output_dir is None:
        if resume:
            raise ValueError("resume=True needs output_dir")
        return None
    run_dir = Path(output_dir)
    if resume:
        saved = read_config(run_dir)
        if "fingerprint" not in saved:
            raise ValueError(f"cannot resume: {str(run_dir / io.CONFIG)!r} has no fingerprint "
                             "(damaged or not a run folder)")
        check_same_run(saved["fingerprint"], fingerprint)
        if (run_dir / io.DRAWS).exists():
            raise ValueError(f"the run in {str(run_dir)!r} has finished (draws.nc is written): "
                             "nothing to resume")
        io.remove_temporaries(run_dir)
    else:
        def populate(folder: Path) -> None:
            (folder / io.CHUNKS).mkdir()
            io.write_json(folder / io.CONFIG, {"fingerprint": fingerprint, **(config or {})})

        return io.stage_output_dir(run_dir, force=force, kind="run", populate=populate)
    return run_dir


def read_config(run_dir: Path) -> dict:
    """``config.json`` of a run folder; a missing or unreadable one is one clear error."""
    path = Path(run_dir) / io.CONFIG
    if not path.is_file():
        raise FileNotFoundError(f"no run to resume in {str(run_dir)!r} (no config.json)")
    try:
        saved = json.loads(path.read_text())
    except (ValueError, OSError) as err:
        raise ValueError(f"cannot resume: {str(path)!r} is damaged ({err})") from None
    if not isinstance(saved, dict):
        raise ValueError(f"cannot resume: {str(path)!r} is damaged (not a JSON object)")
    return saved


def load_checkpoint(run_dir: Path, key, states: Any, tuner_state: Any) -> dict | None:
    """The checkpoint of ``run_dir`` as ``{next, total_grads, num_chunks, adapt_stop,
    states, tuner_state, record}`` (``adapt_stop``: None unless the tuner stopped early;
    ``states`` and ``tuner_state`` are templates of the trees to restore), or None when
    there is none; chunks written after it are deleted, those before it are checked
    readable (not loaded: draws stay on disk). A damaged file is one clear `ValueError`."""
    if not (run_dir / io.CHECKPOINT).is_file():
        io.remove_chunks_from(run_dir, 0)
        return None
    path = run_dir / io.CHECKPOINT
    try:
        ckpt = io.load_npz(path)
        meta = json.loads(bytes(ckpt["meta"]).decode())
        restored = jax.tree.map(jnp.asarray, io.arrays_to_tree("chain", ckpt, states))
        tuner_restored = io.arrays_to_tree("tuner", ckpt, tuner_state)
        next_index, num_chunks = int(meta["next"]), int(meta["chunks"])
        adapt_stop = meta.get("adapt_stop")
        adapt_stop = None if adapt_stop is None else int(adapt_stop)
    except (ValueError, KeyError, OSError, EOFError, TypeError) as err:
        raise ValueError(f"cannot resume: {str(path)!r} is damaged ({io.describe_error(err)}); "
                         "start the run again with --force (force=True)") from None
    if not np.array_equal(ckpt["key"], np.asarray(jax.random.key_data(key))):
        raise ValueError("cannot resume: the checkpoint's PRNG key differs from this run's")
    record = {k[len("record/"):]: list(v) for k, v in ckpt.items() if k.startswith("record/")}
    io.remove_chunks_from(run_dir, num_chunks)
    for index in range(num_chunks):
        io.check_npz(io.chunk_path(run_dir, index), f"cannot resume: draws of the checkpoint "
                     f"at super-transition {next_index}")
    return {
        "next": next_index,
        "total_grads": meta["total_grads"],
        "num_chunks": num_chunks,
        "adapt_stop": adapt_stop,
        "states": restored,
        "tuner_state": tuner_restored,
        "record": record,
    }


def write_checkpoint(run_dir: Path, pending: list[dict], num_chunks: int, next_index: int,
                     total_grads: int, states, tuner_state, record: dict, key,
                     adapt_stop: int | None = None) -> int:
    """Write the draws since the last checkpoint (``pending``, in order) as a chunk, then
    the state (chains, tuner, PRNG key data, counters, ``adapt_stop``: where the tuner
    stopped adapting early, None if it did not; tuning record), each atomically;
    returns the chunk count. ``pending`` is emptied (its draws are on disk) and the memory
    they held given back (`adaptmc.io.release_freed_memory`)."""
    io.atomic_savez_concatenated(io.chunk_path(run_dir, num_chunks), pending)
    pending.clear()
    num_chunks += 1
    meta = {"next": next_index, "total_grads": total_grads, "chunks": num_chunks,
            "adapt_stop": adapt_stop}
    arrays = {"meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
              "key": np.asarray(jax.random.key_data(key))}
    arrays.update(io.tree_to_arrays("chain", states))
    arrays.update(io.tree_to_arrays("tuner", tuner_state))
    arrays.update({f"record/{k}": np.asarray(v) for k, v in record.items()})
    io.atomic_savez(run_dir / io.CHECKPOINT, arrays)
    io.release_freed_memory()
    return num_chunks


def chunk_arrays(index: int, positions, stats: dict, logdensity, params, tunables) -> dict:
    """One super-transition's draws as chunk arrays: ``positions: (chains, draws, dim)``,
    ``lp`` and ``stat/NAME: (chains, draws)`` for every step statistic, the super-transition
    index, and the value in force of every tunable that names a per-draw ``stat``."""
    shape = positions.shape[:2]
    out = {"positions": positions, "lp": logdensity, **{f"stat/{k}": v for k, v in stats.items()}}
    out["stat/super_transition"] = np.full(shape, index, dtype=np.int32)
    for tunable in tunables:
        if tunable.stat is None:
            continue
        value = getattr(params, tunable.name)
        if tunable.integer:
            out[f"stat/{tunable.stat}"] = np.full(shape, int(value), np.int32)
        else:
            out[f"stat/{tunable.stat}"] = np.full(shape, float(np.mean(value)))
    return out


def merge_chunks(chunks: list[dict]) -> dict:
    """Chunks concatenated along the draw axis."""
    return {k: np.concatenate([c[k] for c in chunks], axis=1) for k in chunks[0]}


def write_draws(run_dir: Path, idata, describe=None):
    """Write the InferenceData to ``draws.nc`` atomically and return it read back lazily.

    Its arrays may be Dask arrays over the chunk files: they are written block by block
    (one block of `adaptmc.run.idata.BLOCK_BYTES` in memory at a time, the memory given
    back after each group), the posterior stored in HDF5 chunks of a few
    coordinates so that ``describe(lazy_idata)`` (which may set attributes of the root and
    of the tuning group: the summary, computed a few coordinates at a time) reads no more
    than it needs; then the chunk files are deleted (the run folder keeps one copy)."""
    tmp = run_dir / (io.DRAWS + ".tmp")
    tmp.unlink(missing_ok=True)
    need = _draws_bytes(run_dir)
    if need > shutil.disk_usage(run_dir).free:
        raise io.WriteError(_no_space(run_dir, need, "not enough free space"))
    complaints = io_text.StringIO()  # HDF5's handles of a failed write complain as they go
    try:
        with contextlib.redirect_stderr(complaints):
            try:
                _write_netcdf(tmp, idata, describe)
            except Exception as err:  # noqa: BLE001 - a failed write leaves no partial file
                _abandon(tmp)
                full = "No space left" in str(err) or getattr(err, "errno", 0) == ENOSPC
                reason = "the disk is full" if full else io.describe_error(err)
                failed = io.WriteError(_no_space(run_dir, need, reason))
                failed.hdf5_broken = True  # HDF5 may crash closing it at exit: see the CLI
                raise failed from None
    finally:
        if "Traceback" not in complaints.getvalue():
            sys.stderr.write(complaints.getvalue())  # warnings of a write that worked
    tmp.replace(run_dir / io.DRAWS)
    shutil.rmtree(run_dir / io.CHUNKS, ignore_errors=True)
    return read_draws(run_dir)


def _draws_bytes(run_dir: Path) -> int:
    """About the bytes ``draws.nc`` will take: its chunks' (the netCDF holds the same
    numbers), plus a tenth and a megabyte for its metadata and tuning group."""
    chunks = sum(p.stat().st_size for p in (run_dir / io.CHUNKS).glob("*.npz"))
    return int(1.1 * chunks) + 2**20


def _no_space(run_dir: Path, need: int, reason: str) -> str:
    free = shutil.disk_usage(run_dir).free
    more = f" (free {(need - free) / 1e6:.1f} MB more)" if need > free else ""
    return (f"cannot write {str(run_dir / io.DRAWS)!r} ({reason}): it needs about "
            f"{need / 1e6:.1f} MB and {free / 1e6:.1f} MB are free{more}; the run's checkpoint "
            f"and draws are kept: free space, then `adaptmc resume {run_dir}` (resume=True) "
            "writes it")


def _abandon(tmp: Path) -> None:
    """After a failed write of ``tmp``: free its space first (HDF5 flushes what it still
    holds when a handle closes), mark h5netcdf's handles on it closed (their own close would
    flush a broken file: a crash) and close their HDF5 files, then delete it."""
    import gc

    import h5netcdf

    if tmp.exists():
        os.truncate(tmp, 0)
    for handle in [o for o in gc.get_objects() if issubclass(type(o), h5netcdf.File)]:
        if handle._closed or Path(handle._filename).resolve() != tmp.resolve():
            continue
        h5file, handle._closed = handle._File__h5file, True
        try:
            if h5file is not None:
                h5file.close()
        except Exception:  # noqa: BLE001, S110 - closing what is left, whatever it says
            pass
    tmp.unlink(missing_ok=True)


def _write_netcdf(tmp: Path, idata, describe) -> None:
    """`write_draws`'s netCDF, written to ``tmp``."""
    import warnings

    import dask
    import h5netcdf

    groups = [g for g in idata.groups() if g != "tuning"]
    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for group in groups:
            dataset = idata[group]
            encoding = {name: {"chunksizes": _hdf5_chunks(var)}
                        for name, var in dataset.data_vars.items() if var.ndim >= 2}
            dataset.to_netcdf(str(tmp), mode="a" if tmp.exists() else "w", group=group,
                              engine="h5netcdf", encoding=encoding)
            io.release_freed_memory()
        lazy = _open_groups(tmp, groups)
        lazy.add_groups({"tuning": idata.tuning})
        lazy.attrs.update(idata.attrs)
        if describe is not None:
            describe(lazy)
        for group in groups:
            lazy[group].close()
        lazy.tuning.to_netcdf(str(tmp), mode="a", group="tuning", engine="h5netcdf")
        with h5netcdf.File(str(tmp), "a") as handle:
            for key, value in lazy.attrs.items():
                handle.attrs[key] = value


def _hdf5_chunks(var) -> tuple:
    """HDF5 chunks over ``(chain, draw, ...)``: every chain, the draws of one Dask block
    (each is written once, whole) at most about 4 MiB, and 8 coordinates of the first event
    axis, so `adaptmc.diagnostics.summary_in_blocks` reads only what it
    summarises."""
    shape, itemsize = var.shape, var.dtype.itemsize
    rest = tuple(min(n, 8) if i == 0 else min(n, 1) for i, n in enumerate(shape[2:]))
    per_draw = shape[0] * itemsize * int(np.prod(rest, dtype=int))
    block = max(var.chunks[1]) if var.chunks else shape[1]
    draws = int(max(1, min(block, 2**22 // max(per_draw, 1))))
    return (shape[0], draws, *rest)


def _open_groups(path: Path, groups: list[str]):
    import arviz as az
    import xarray as xr

    return az.InferenceData(**{g: xr.open_dataset(str(path), group=g, engine="h5netcdf")
                               for g in groups})


def read_draws(run_dir: Path):
    """``draws.nc`` of a finished run, read lazily; a damaged file is one clear error."""
    import warnings

    path = Path(run_dir) / io.DRAWS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz as az

        try:
            return az.from_netcdf(str(path), engine="h5netcdf")
        except (OSError, ValueError, KeyError) as err:
            raise ValueError(f"{str(path)!r} is damaged ({io.describe_error(err)}); its draws "
                             "are lost: run again with --force (force=True)") from None
