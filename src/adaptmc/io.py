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

import io
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import jax
import numpy as np

CHECKPOINT = "checkpoint.npz"
CONFIG = "config.json"
DRAWS = "draws.nc"
CHUNKS = "chunks"


def prepare_output_dir(path: str | os.PathLike, force: bool = False) -> Path:
    """Raise `FileExistsError` if ``path`` exists and is not empty (unless ``force``, which
    empties it). Creates nothing: call `create_output_dir` once every check has passed."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"output path {str(path)!r} exists and is not a folder")
    if path.exists() and any(path.iterdir()) and not force:
        raise FileExistsError(
            f"output folder {str(path)!r} already exists; pass --force (force=True) to "
            "overwrite it, or `adaptmc resume DIR` (resume=True) to continue its run"
        )
    return path


def create_output_dir(path: Path, force: bool = False) -> None:
    if force and path.exists():
        shutil.rmtree(path)
    (path / CHUNKS).mkdir(parents=True, exist_ok=True)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
    buffer = io.BytesIO()
    np.savez(buffer, **{k: np.asarray(v) for k, v in arrays.items()})
    atomic_write_bytes(path, buffer.getvalue())


def load_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


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


def remove_chunks_from(run_dir: Path, first_stale: int) -> None:
    """Delete chunk files written after the last checkpoint (a run killed between writing a
    chunk and its checkpoint)."""
    for path in sorted((Path(run_dir) / CHUNKS).glob("*.npz")):
        if int(path.stem) >= first_stale:
            path.unlink()
