"""Reading the ``.npz`` and ``.npy`` files of a run folder, never unpickled: whole files,
one member, a range of draws of one member (only those bytes read), the members' headers,
a completeness check; `describe_error` turns a reader's error into one line."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np


def describe_error(err: BaseException) -> str:
    """A one-line cause, with numpy's pickle advice replaced by what it means."""
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    if "allow_pickle" in text or "pickle" in text.lower():
        return "it holds Python objects, which adaptmc never loads"
    return text


def load_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file, never unpickled; a damaged or truncated file (or one
    holding objects) is a `ValueError` saying so (numpy's advice to allow pickle is never
    passed on)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as err:
        raise ValueError(f"{str(path)!r} is damaged or not an adaptmc array file "
                         f"({describe_error(err)})") from None


def load_npz_member(path: str | os.PathLike, name: str) -> np.ndarray:
    """One array of an ``.npz`` file (the others are not read)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return data[name]
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as err:
        raise ValueError(f"{str(path)!r} is damaged or not an adaptmc array file "
                         f"({describe_error(err)})") from None


def load_npz_draws(path: str | os.PathLike, name: str, start: int, stop: int) -> np.ndarray:
    """``array[:, start:stop]`` of the member ``name`` of an ``.npz`` file written by
    `atomic_savez` (stored uncompressed, C order): only those bytes are read, one read per
    index of the first axis, into one new array (nothing else is allocated)."""
    try:
        with open(path, "rb") as fh:
            shape, dtype, data_start = _stored_npy(fh, name)
            if not 0 <= start <= stop <= shape[1]:
                raise ValueError(f"draws {start}:{stop} outside 0:{shape[1]} of {name!r}")
            out = np.empty((shape[0], stop - start, *shape[2:]), dtype)
            row = int(np.prod(shape[2:], dtype=int)) * dtype.itemsize  # bytes of one draw
            for index in range(shape[0] if out.size else 0):
                fh.seek(data_start + (index * shape[1] + start) * row)
                if fh.readinto(memoryview(out[index]).cast("B")) != out[index].nbytes:
                    raise ValueError(f"member {name!r} is truncated")
        return out
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as err:
        raise ValueError(f"{str(path)!r} is damaged or not an adaptmc array file "
                         f"({describe_error(err)})") from None


def _stored_npy(fh, name: str) -> tuple[tuple, np.dtype, int]:
    """``(shape, dtype, offset of the data in the file)`` of the ``.npy`` member ``name`` of
    the open zip ``fh``; refuses compressed members, Fortran order and Python objects."""
    with zipfile.ZipFile(fh) as archive:
        info = archive.getinfo(name + ".npy")
    if info.compress_type != zipfile.ZIP_STORED:
        raise ValueError(f"member {name!r} is compressed")
    fh.seek(info.header_offset)
    local = fh.read(30)  # the local file header: signature ... name and extra field lengths
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise ValueError(f"member {name!r} has no local header")
    name_length, extra_length = np.frombuffer(local[26:30], dtype="<u2")
    fh.seek(info.header_offset + 30 + int(name_length) + int(extra_length))
    major, _ = np.lib.format.read_magic(fh)
    read = (np.lib.format.read_array_header_1_0 if major == 1
            else np.lib.format.read_array_header_2_0)
    shape, fortran_order, dtype = read(fh)
    if fortran_order or dtype.hasobject or len(shape) < 2:
        raise ValueError(f"member {name!r} is not a C-order numeric array of draws")
    return shape, dtype, fh.tell()


def npz_headers(path: str | os.PathLike) -> dict[str, tuple[tuple, np.dtype]]:
    """``{name: (shape, dtype)}`` of the arrays of an ``.npz`` file, from their headers
    (no data read)."""
    out = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                with archive.open(member) as fh:
                    major, _ = np.lib.format.read_magic(fh)
                    read = (np.lib.format.read_array_header_1_0 if major == 1
                            else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read(fh)
                out[member.removesuffix(".npy")] = (shape, dtype)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise ValueError(f"{str(path)!r} is damaged ({describe_error(err)})") from None
    return out


def load_npy(path: Path) -> np.ndarray:
    """One array from a ``.npy`` file, never unpickled (see `load_npz`)."""
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise ValueError(f"{str(path)!r} is damaged or holds no plain numeric array "
                         f"({describe_error(err)})") from None


def check_npz(path: Path, context: str) -> None:
    """Raise `ValueError` (``context``: what is lost) unless ``path`` is a complete ``.npz``
    (every member's checksum read, nothing loaded into memory at once)."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (OSError, zipfile.BadZipFile, EOFError) as err:
        bad = describe_error(err)
    if bad is not None:
        raise ValueError(f"{context}: {str(path)!r} is damaged ({bad}); start the run again "
                         "with --force (force=True)")
