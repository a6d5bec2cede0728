"""Run folders on disk: configuration, checkpoints, draw chunks and the final draws.

Everything is written atomically (a temporary file in the same folder, then ``os.replace``)
and without pickle: arrays go to ``.npz`` (loaded with ``allow_pickle=False``), metadata to
JSON, the final draws to ArviZ's netCDF (InferenceData).

Layout of a run folder::

    config.json        what was run (target, kernel, parameters, tuner, budget, seed)
    checkpoint.npz     chain and tuner state, counters, tuning record so far
    chunks/NNNNNN.npz  draws and per-step statistics since the previous checkpoint
    draws.nc           the InferenceData, written at the end
    summary.txt        the printed summary
"""

from __future__ import annotations

import functools
import glob
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import jax
import numpy as np

from adaptmc.npz import (  # noqa: F401 - the array files' readers, re-exported
    check_npz,
    describe_error,
    load_npy,
    load_npz,
    load_npz_draws,
    load_npz_member,
    npz_headers,
)

CHECKPOINT = "checkpoint.npz"
CONFIG = "config.json"
DRAWS = "draws.nc"
CHUNKS = "chunks"


class WriteError(OSError):
    """A file of a run folder could not be written; the message says what is kept and what
    to do."""


MARKER = ".adaptmc"  # written in every folder adaptmc creates: what --force may replace
# what a run folder holds; anything else in one is a foreign file --force will not delete
RUN_ENTRIES = {MARKER, CONFIG, CHECKPOINT, CHUNKS, DRAWS, "summary.txt", "failure.json",
               "draws.sha256", "warmup.npz"}
RUN_SUFFIXES = (".png", ".pdf", ".svg", ".tmp")


def prepare_output_dir(path: str | os.PathLike, force: bool = False) -> Path:
    """Check that ``path`` may be written: absent or empty, or (``force``) an adaptmc output
    folder that `replace_refusal` allows replacing. Creates and deletes nothing: call
    `create_output_dir` once every other check has passed.

    Raises
    ------
    FileExistsError
        ``path`` is a file, or a non-empty folder without ``force`` (the message says what
        ``force`` would delete), or one ``force`` may not replace (the message says why).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"output path {str(path)!r} exists and is not a folder")
    if not path.exists() or not any(path.iterdir()):
        return path
    refusal = replace_refusal(path)
    if refusal is not None:
        raise FileExistsError(f"output folder {str(path)!r} already exists and {refusal}; "
                              "choose another output folder")
    if not force:
        raise FileExistsError(
            f"output folder {str(path)!r} already exists; --force (force=True) would delete "
            f"it and everything in it ({_describe_entries(path)}); `adaptmc resume DIR` "
            "(resume=True) continues its run"
        )
    return path


def replace_refusal(path: Path) -> str | None:
    """Why ``force`` may not replace the existing folder ``path`` (None: it may): it is the
    current folder or holds it, or the home or root folder; it has no adaptmc marker (or, for
    folders written before markers, a run's ``config.json``); a run folder holds files a run
    does not write."""
    resolved = path.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        return "is the current folder or one of its parents, which --force never deletes"
    if resolved in (Path.home().resolve(), Path(resolved.anchor)):
        return "is the home or root folder, which --force never deletes"
    kind = _output_kind(path)
    if kind is None:
        return (f"was not written by adaptmc (no {MARKER} marker or run config.json), so "
                "--force will not delete it")
    if kind == "run":
        foreign = sorted(e.name for e in path.iterdir() if e.name not in RUN_ENTRIES
                         and not e.name.endswith(RUN_SUFFIXES) and not e.name.startswith("."))
        if foreign:
            return (f"holds files an adaptmc run does not write ({', '.join(foreign[:5])}), "
                    "so --force will not delete it")
    return None


def _output_kind(path: Path) -> str | None:
    """``"run"``, another kind recorded in the marker, or None (not adaptmc's)."""
    marker = path / MARKER
    if marker.is_file():
        try:
            return str(json.loads(marker.read_text()).get("kind", "output"))
        except (ValueError, OSError, AttributeError):
            return "output"
    config = path / CONFIG
    if config.is_file():
        try:
            return "run" if "fingerprint" in json.loads(config.read_text()) else None
        except (ValueError, OSError, TypeError):
            return None
    return None


def _describe_entries(path: Path) -> str:
    entries = sorted(e.name + ("/" if e.is_dir() else "") for e in path.iterdir())
    more = f", ... {len(entries) - 8} more" if len(entries) > 8 else ""
    return f"{len(entries)} entries: {', '.join(entries[:8])}{more}"


def check_output_place(path: str | os.PathLike, resume: bool = False) -> None:
    """Before any work, that the run folder ``path`` can be made where it is: a file can
    be written in it (``resume``) or in the folder that will hold it (its nearest existing
    ancestor: not read-only, not refused), and it is not a mount point (a new run is
    written in a sibling on the parent's filesystem and moved in, which a mount point does
    not allow). Raises `WriteError` saying which and what to do."""
    path = Path(path).absolute()
    if not resume and path.is_dir() and _is_mount_point(path):
        raise WriteError(f"output folder {str(path)!r} is a mount point (another filesystem "
                         "than its parent): a run is written beside it and moved in, which a "
                         f"mount point does not allow; use a folder inside it, e.g. "
                         f"{str(path / 'run')!r}")
    folder = path if resume else path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".adaptmc-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise WriteError(f"cannot write the output folder {str(path)!r}: {str(folder)!r} "
                         f"refuses a new file ({err.strerror or err}); choose a folder you "
                         "can write") from None


def _is_mount_point(path: Path) -> bool:
    return os.path.ismount(path) or path.stat().st_dev != path.parent.stat().st_dev


def create_output_dir(path: str | os.PathLike, force: bool = False, kind: str = "output",
                      populate=None) -> Path:
    """Create the output folder ``path`` at once: `stage_output_dir` then
    `commit_output_dir` (for outputs with nothing to run first)."""
    staged = stage_output_dir(path, force, kind, populate)
    try:
        return commit_output_dir(staged, path, force)
    except BaseException:
        discard_staged(staged)
        raise


def stage_output_dir(path: str | os.PathLike, force: bool = False, kind: str = "output",
                     populate=None) -> Path:
    """Check ``path`` (`prepare_output_dir`) and make its contents (the marker and what
    ``populate(folder)`` writes) in a new temporary sibling ``.NAME.new-*``, returned;
    ``path`` itself is not touched until `commit_output_dir` (or the sibling is dropped
    with `discard_staged`), so a run that fails before its first checkpoint leaves the
    disk as it was."""
    path = prepare_output_dir(path, force=force)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.new-"))
    try:
        _fill(tmp, kind, populate)
    except BaseException:
        discard_staged(tmp)
        raise
    return tmp


def commit_output_dir(staged: Path, path: str | os.PathLike, force: bool = False) -> Path:
    """Put the staged folder ``staged`` in place as ``path`` (checked again): renamed when
    ``path`` is absent; moved in entry by entry when it is an empty folder (possibly the
    current one); with ``force``, an existing adaptmc folder is moved aside, replaced by
    the rename and only then deleted."""
    path = prepare_output_dir(path, force=force)
    if not path.exists():
        os.rename(staged, path)
    elif not any(path.iterdir()):
        for entry in staged.iterdir():
            os.replace(entry, path / entry.name)
        staged.rmdir()
    else:
        trash = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.old-"))
        os.replace(path, trash / path.name)
        os.replace(staged, path)
        shutil.rmtree(trash, ignore_errors=True)
    return path


def discard_stale_siblings(path: str | os.PathLike) -> None:
    """Delete the staging (``.NAME.new-*``) and trash (``.NAME.old-*``) siblings of the run
    folder ``path`` that killed runs left. Only while holding the folder's lock
    (`adaptmc.run.lock`): no live process is then writing them."""
    path = Path(path).absolute()
    for kind in ("new", "old"):
        for sibling in path.parent.glob(f".{glob.escape(path.name)}.{kind}-*"):
            if sibling.is_dir() and not sibling.is_symlink():
                shutil.rmtree(sibling, ignore_errors=True)


def discard_staged(staged: Path | None) -> None:
    """Delete a staged folder of `stage_output_dir` that was never committed."""
    if staged is not None and staged.name.startswith(".") and ".new-" in staged.name:
        shutil.rmtree(staged, ignore_errors=True)


def _fill(folder: Path, kind: str, populate) -> None:
    folder.chmod(0o755)  # mkdtemp's folders are private; an output folder is not
    (folder / MARKER).write_text(json.dumps({"kind": kind}) + "\n")
    if populate is not None:
        populate(folder)


def atomic_write(path: Path, write, shared: bool = False) -> None:
    """``write(file)`` into a temporary file in ``path``'s folder, synced, then renamed over
    ``path`` (``os.replace``): readers see the old file or the whole new one, never part.
    The file is the user's alone, or (``shared``) readable as ``open`` would make it (the
    umask's permissions: the summary, the plots)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if shared:
            mask = os.umask(0)
            os.umask(mask)
            os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: Path, data: bytes, shared: bool = False) -> None:
    atomic_write(path, lambda fh: fh.write(data), shared)


def save_figure(fig, path: str | os.PathLike, dpi: int) -> Path:
    """A Matplotlib figure saved through `atomic_write`, in the format of ``path``'s suffix:
    a full disk leaves the old image or none, never part of one."""
    path = Path(path)
    atomic_write(path, lambda fh: fig.savefig(fh, format=path.suffix[1:] or "png", dpi=dpi),
                 shared=True)
    return path


def write_json(path: str | os.PathLike, obj: Any, indent: int = 2) -> None:
    """Write ``obj`` as JSON to ``path`` atomically; NumPy and JAX arrays and scalars become
    lists and numbers (`json_default`), NaN is written as ``NaN``. The one JSON writer of
    the package: run folders, the bench and the experiments."""
    atomic_write_bytes(Path(path), json.dumps(obj, indent=indent, default=json_default).encode())


def json_default(obj):
    """``json.dumps(..., default=json_default)``: NumPy and JAX arrays to (nested) lists,
    NumPy scalars to Python numbers; anything else raises `TypeError`."""
    if isinstance(obj, np.generic | np.ndarray | jax.Array):
        return np.asarray(obj).tolist()
    raise TypeError(f"cannot write {type(obj).__name__} to JSON")


def atomic_savez(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``np.savez`` through `atomic_write` (written straight to disk: no second copy of the
    arrays in memory)."""
    atomic_write(path, lambda fh: np.savez(fh, **{k: np.asarray(v) for k, v in arrays.items()}))


def atomic_savez_concatenated(path: Path, pieces: list[dict[str, np.ndarray]]) -> None:
    """`atomic_savez` of ``{k: np.concatenate([p[k] for p in pieces], axis=1)}`` without
    making the concatenation: each member is written row by row (first axis) from the
    pieces, as ``np.savez`` would write it (uncompressed, ``.npy`` format 2.0)."""
    def write(fh) -> None:
        with zipfile.ZipFile(fh, "w", allowZip64=True) as archive:
            for key in pieces[0]:
                parts = [np.asarray(piece[key]) for piece in pieces]
                shape = (parts[0].shape[0], sum(p.shape[1] for p in parts), *parts[0].shape[2:])
                header = {"descr": np.lib.format.dtype_to_descr(parts[0].dtype),
                          "fortran_order": False, "shape": shape}
                with archive.open(key + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array_header_2_0(member, header)
                    for row in range(shape[0]):
                        for part in parts:
                            member.write(np.ascontiguousarray(part[row]).data)

    atomic_write(path, write)


def release_freed_memory() -> None:
    """Give the memory this process has freed back to the operating system (glibc's
    ``malloc_trim``; nothing where there is no glibc).

    After a block of up to 32 MiB is freed, glibc raises its mmap threshold and serves the
    next such blocks (a super-transition's draws, a checkpoint's chunk) from heaps it trims
    only when their top is free, one heap per thread arena: without this, draws already on
    disk stay in the resident set (Dask's worker memory documentation describes the same)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def tree_to_arrays(prefix: str, tree: Any) -> dict[str, np.ndarray]:
    """Flatten a pytree into ``{prefix/i: leaf}`` (structure comes back from a template)."""
    leaves = jax.tree.leaves(tree)
    return {f"{prefix}/{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)}


def arrays_to_tree(prefix: str, arrays: dict[str, np.ndarray], template: Any) -> Any:
    """Inverse of `tree_to_arrays`, given a template pytree with the same structure."""
    treedef = jax.tree.structure(template)
    leaves = [arrays[f"{prefix}/{i}"] for i in range(treedef.num_leaves)]
    return jax.tree.unflatten(treedef, leaves)


def chunk_path(run_dir: Path, index: int) -> Path:
    return Path(run_dir) / CHUNKS / f"{index:06d}.npz"


def remove_temporaries(run_dir: Path) -> None:
    """Delete the temporary files of writes a killed run left (`atomic_write`'s
    ``.NAME.*.tmp``, the final ``draws.nc.tmp``) in the run folder and its chunks."""
    for folder in (Path(run_dir), Path(run_dir) / CHUNKS):
        for path in folder.glob("*.tmp") if folder.is_dir() else ():
            if path.is_file() and (path.name.startswith(".") or path.name == DRAWS + ".tmp"):
                path.unlink()


def remove_chunks_from(run_dir: Path, first_stale: int) -> None:
    """Delete chunk files written after the last checkpoint (a run killed between writing a
    chunk and its checkpoint)."""
    for path in sorted((Path(run_dir) / CHUNKS).glob("*.npz")):
        if not (path.stem.isdigit() and len(path.stem) == 6):
            raise ValueError(f"{str(path)!r} is not a chunk adaptmc writes (chunks/NNNNNN.npz)"
                             ": move it out of the run folder, then resume")
        if int(path.stem) >= first_stale:
            path.unlink()


def jsonable(value):
    """``json.dumps``'s ``default``: NumPy arrays as lists, scalars as numbers, else repr."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return repr(value)
