"""The final draws of a run folder, ``draws.nc`` (ArviZ's netCDF, through h5netcdf): written
block by block from the chunk files, checked against the free space first, never left half
written (a failed write removes its partial file, the checkpoint and chunks stay), with a
SHA-256 of its bytes beside it (``draws.sha256``) that every read checks."""

from __future__ import annotations

import contextlib
import io as io_text
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np

from adaptmc import io
from adaptmc.disk import full_disk, space_needed, telling_a_full_disk

CHECKSUM = "draws.sha256"  # beside draws.nc: the SHA-256 of its bytes


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
                abandon(tmp)
                full = full_disk(err)
                reason = "the disk is full" if full else io.describe_error(err)
                failed = io.WriteError(_no_space(run_dir, need, reason))
                failed.hdf5_broken = True  # HDF5 may crash closing it at exit: see the CLI
                raise failed from None
            except BaseException:  # Ctrl-C: no partial file, no handle closed at exit
                abandon(tmp)
                raise
    finally:
        if "Traceback" not in complaints.getvalue():
            sys.stderr.write(complaints.getvalue())  # warnings of a write that worked

    def discard() -> None:  # the draws are written again by the resume
        tmp.unlink(missing_ok=True)
        (run_dir / CHECKSUM).unlink(missing_ok=True)

    with telling_a_full_disk(f"{str(run_dir / io.DRAWS)!r} (its checksum)", run_dir, need,
                             _KEPT.format(run_dir=run_dir), cleanup=discard):
        digest = sha256(tmp)
        io.atomic_write_bytes(run_dir / CHECKSUM, f"{digest}  {io.DRAWS}\n".encode())
        _record_checksum(run_dir, digest)
    tmp.replace(run_dir / io.DRAWS)
    shutil.rmtree(run_dir / io.CHUNKS, ignore_errors=True)
    io.remove_temporaries(run_dir)  # of writes a kill interrupted before a resume
    return read_draws(run_dir)


def sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes (read into one buffer of 64 KiB)."""
    import hashlib

    digest, buffer = hashlib.sha256(), bytearray(2**16)
    view = memoryview(buffer)
    with open(path, "rb") as fh:
        while count := fh.readinto(buffer):
            digest.update(view[:count])
    return digest.hexdigest()


def _record_checksum(run_dir: Path, digest: str) -> None:
    """Keep the draws' SHA-256 in ``config.json`` too (``draws_sha256``): deleting the
    sidecar does not hide damage, and a finished run is known as one."""
    config_path = run_dir / io.CONFIG
    config = json.loads(config_path.read_text())
    io.write_json(config_path, {**config, "draws_sha256": digest})


def _checksums(run_dir: Path) -> set[str]:
    """The SHA-256s the run folder recorded for its draws (sidecar and config.json)."""
    found = set()
    record = run_dir / CHECKSUM
    if record.is_file():
        found.update(record.read_text().split()[:1])
    try:
        saved = json.loads((run_dir / io.CONFIG).read_text()).get("draws_sha256")
    except (OSError, ValueError, AttributeError):
        saved = None
    if isinstance(saved, str):
        found.add(saved)
    return found


def finished_without_draws(run_dir: str | os.PathLike) -> str | None:
    """The message for a finished run (its ``config.json`` records the draws' checksum and
    its chunks are gone) whose ``draws.nc`` was deleted; None for any other folder."""
    run_dir = Path(run_dir)
    if (run_dir / io.DRAWS).exists() or (run_dir / io.CHUNKS).exists():
        return None
    try:
        saved = json.loads((run_dir / io.CONFIG).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or "draws_sha256" not in saved:
        return None
    return (f"the run in {str(run_dir)!r} had finished, but its draws.nc was deleted "
            "(config.json records its checksum; the draws were kept only there): its draws "
            "are lost: run again with --force (force=True)")


def verify_draws(run_dir: Path) -> None:
    """Raise `ValueError` naming ``draws.nc`` when its bytes differ from the SHA-256 written
    with it (``draws.sha256``, and ``draws_sha256`` in ``config.json``, so deleting one
    does not hide damage; a folder written before checksums is not checked)."""
    path = Path(run_dir) / io.DRAWS
    expected = _checksums(Path(run_dir))
    if not expected:
        return
    if expected != {sha256(path)}:
        raise ValueError(f"{str(path)!r} is damaged: its bytes differ from the checksum "
                         f"written with it ({CHECKSUM}); its draws cannot be trusted: run "
                         "again with --force (force=True)")


def _draws_bytes(run_dir: Path) -> int:
    """About the bytes ``draws.nc`` will take: its chunks' (the netCDF holds the same
    numbers), plus a tenth and a megabyte for its metadata and tuning group."""
    chunks = sum(p.stat().st_size for p in (run_dir / io.CHUNKS).glob("*.npz"))
    return int(1.1 * chunks) + 2**20


_KEPT = ("the run's checkpoint and draws are kept: free space, then `adaptmc resume "
         "{run_dir}` (resume=True) writes it")


def _no_space(run_dir: Path, need: int, reason: str) -> str:
    return (f"cannot write {str(run_dir / io.DRAWS)!r} ({reason}): "
            f"{space_needed(run_dir, need)}; {_KEPT.format(run_dir=run_dir)}")


def abandon(tmp: Path) -> None:
    """After a failed write of ``tmp``: free its space first (HDF5 flushes what it still
    holds when a handle closes), mark h5netcdf's handles on it closed (their own close would
    flush a broken file: a crash) and close their HDF5 files, then delete it."""
    import gc

    import h5netcdf

    if tmp.exists():
        os.truncate(tmp, 0)
    for handle in [o for o in gc.get_objects() if issubclass(type(o), h5netcdf.File)]:
        if not hasattr(handle, "_closed"):  # interrupted while it opened: nothing to close
            handle._closed = True
            continue
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
            idata = az.from_netcdf(str(path), engine="h5netcdf")
        except (OSError, ValueError, KeyError) as err:
            raise ValueError(f"{str(path)!r} is damaged ({io.describe_error(err)}); its draws "
                             "are lost: run again with --force (force=True)") from None
    if "posterior" not in idata.groups():
        raise ValueError(f"{str(path)!r} has no posterior group (its groups: "
                         f"{', '.join(idata.groups()) or 'none'}): not the draws of a "
                         "finished adaptmc run")
    return idata
