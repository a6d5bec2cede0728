"""A compiled Stan model through its C interface (``adaptmc_stan.cpp``), with ctypes.

`StanModel` holds one model instantiated with its data; its methods take NumPy arrays and
may be called from any thread (ctypes releases the GIL during each call, and the model keeps
one reverse-mode tape per thread).
"""

from __future__ import annotations

import ctypes
import json
import os
import zipfile
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

_DOUBLES = np.ctypeslib.ndpointer(np.float64, flags="C_CONTIGUOUS")
_UINTS = np.ctypeslib.ndpointer(np.uint32, flags="C_CONTIGUOUS")
_ERROR = ctypes.POINTER(ctypes.c_char_p)


class Variable(NamedTuple):
    """A Stan variable: its name, shape (Stan's dims) and block (``parameters``,
    ``transformed parameters`` or ``generated quantities``)."""

    name: str
    shape: tuple[int, ...]
    block: str


@cache
def _library(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    signatures = {
        "adaptmc_model_new": (ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_uint, _ERROR]),
        "adaptmc_model_free": (None, [ctypes.c_void_p]),
        "adaptmc_free_string": (None, [ctypes.c_void_p]),
        "adaptmc_num_unconstrained": (ctypes.c_int, [ctypes.c_void_p]),
        "adaptmc_constrained_names": (ctypes.c_char_p,
                                      [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]),
        "adaptmc_unconstrained_names": (ctypes.c_char_p, [ctypes.c_void_p]),
        "adaptmc_variable_shapes": (ctypes.c_char_p, [ctypes.c_void_p]),
        "adaptmc_log_density_gradient": (ctypes.c_int, [
            ctypes.c_void_p, ctypes.c_int, _DOUBLES, _DOUBLES, _DOUBLES, ctypes.c_int,
            ctypes.c_int, _ERROR]),
        "adaptmc_constrain": (ctypes.c_int, [
            ctypes.c_void_p, ctypes.c_int, _DOUBLES, _DOUBLES, ctypes.c_int, ctypes.c_int,
            ctypes.c_int, _UINTS, _ERROR]),
        "adaptmc_unconstrain": (ctypes.c_int, [ctypes.c_void_p, _DOUBLES, _DOUBLES, _ERROR]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    return lib


def one_line(text: str) -> str:
    """A C++ exception's message on one line."""
    return " ".join(text.split())


class StanModel:
    """One Stan model with its data.

    Parameters
    ----------
    library
        The model's shared library (`adaptmc.targets.stan.build.build_model`).
    data_json
        The data block's values as JSON text (`data_json`), ``""`` for none.
    seed
        Seed of the model's constructor (transformed data may draw random numbers).
    """

    def __init__(self, library: str | Path, data_json: str, seed: int = 0):
        self._lib = _library(str(library))
        error = ctypes.c_char_p()
        handle = self._lib.adaptmc_model_new(data_json.encode(), seed, ctypes.byref(error))
        if not handle:
            raise ValueError(one_line(self._take(error)))
        self._handle = handle
        self.library = Path(library)
        self.on_free: list = []  # called before the model is freed (`ffi.model_id`)
        self.dim = int(self._lib.adaptmc_num_unconstrained(handle))
        self.unconstrained_names = self._names(self._lib.adaptmc_unconstrained_names(handle))
        self.variables = self._variables()

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            for release in getattr(self, "on_free", ()):
                release()
            self._lib.adaptmc_model_free(handle)
            self._handle = None

    @property
    def handle(self) -> int:
        """The C interface's model pointer."""
        return self._handle

    def _take(self, error: ctypes.c_char_p) -> str:
        """The message in ``error``, freed."""
        if not error.value:
            return ""
        text = error.value.decode(errors="replace")
        self._lib.adaptmc_free_string(ctypes.cast(error, ctypes.c_void_p))
        return text

    @staticmethod
    def _names(raw: bytes) -> tuple[str, ...]:
        return tuple(stan_name(n) for n in raw.decode().split("\n")) if raw else ()

    def constrained_names(self, transformed: bool = True, generated: bool = True):
        """Flat constrained names in Stan's order (``theta[1]``, ``Sigma[2,1]``...)."""
        return self._names(self._lib.adaptmc_constrained_names(self._handle, transformed,
                                                               generated))

    def _variables(self) -> tuple[Variable, ...]:
        raw = self._lib.adaptmc_variable_shapes(self._handle).decode()
        shapes = []
        for item in filter(None, raw.split(";")):
            name, _, dims = item.partition(":")
            shapes.append((name, tuple(int(d) for d in dims.split(",") if d)))
        widths = [len(self.constrained_names(t, g)) for t, g in ((0, 0), (1, 0), (1, 1))]
        variables, used = [], 0
        for name, shape in shapes:
            used += int(np.prod(shape, dtype=int))
            block = ("parameters" if used <= widths[0] else
                     "transformed parameters" if used <= widths[1] else "generated quantities")
            variables.append(Variable(name, shape, block))
        if used != widths[2]:  # a shape this reader does not know (a tuple): flat names
            names = self.constrained_names()
            variables = [Variable(n, (), "parameters") for n in names]
        return tuple(variables)

    def log_density_gradient(self, points: np.ndarray, propto: bool = True,
                             jacobian: bool = True) -> tuple[np.ndarray, np.ndarray, str]:
        """``points: (n, dim)`` -> log densities ``(n,)``, gradients ``(n, dim)`` and the
        first rejection's message (``""`` if none); a rejected point has ``-inf`` and a zero
        gradient."""
        points = np.ascontiguousarray(points, dtype=np.float64).reshape(-1, self.dim)
        count = points.shape[0]
        values, grads = np.empty(count), np.empty((count, self.dim))
        error = ctypes.c_char_p()
        self._lib.adaptmc_log_density_gradient(self._handle, count, points, values, grads,
                                               propto, jacobian, ctypes.byref(error))
        return values, grads, one_line(self._take(error))

    def constrain(self, points: np.ndarray, transformed: bool = True,
                  generated: bool = True, seeds: np.ndarray | None = None) -> np.ndarray:
        """``points: (n, dim)`` -> constrained values ``(n, width)`` in Stan's flat order (NaN
        for a point the model rejects); ``seeds: (n,)`` seed generated quantities' random
        numbers (default: from each point's bits)."""
        points = np.ascontiguousarray(points, dtype=np.float64).reshape(-1, self.dim)
        width = len(self.constrained_names(transformed, generated))
        out = np.empty((points.shape[0], width))
        if seeds is None:
            seeds = point_seeds(points)
        error = ctypes.c_char_p()
        self._lib.adaptmc_constrain(self._handle, points.shape[0], points, out, width,
                                    transformed, generated,
                                    np.ascontiguousarray(seeds, dtype=np.uint32),
                                    ctypes.byref(error))
        self._take(error)
        return out

    def unconstrain(self, values: dict[str, Any]) -> np.ndarray:
        """The unconstrained point ``(dim,)`` of the parameters' values ``{name: array}``
        (arrays in Stan's shapes)."""
        flat = []
        for variable in self.variables:
            if variable.block != "parameters":
                continue
            if variable.name not in values:
                raise ValueError(f"no value for parameter {variable.name!r}")
            value = np.asarray(values[variable.name], dtype=float)
            if value.shape != variable.shape:
                raise ValueError(f"parameter {variable.name!r} has shape {value.shape}; "
                                 f"expected {variable.shape}")
            flat.append(value.ravel(order="F"))  # Stan's flat order is column-major
        constrained = np.ascontiguousarray(np.concatenate(flat) if flat else np.zeros(0))
        out = np.empty(self.dim)
        error = ctypes.c_char_p()
        if self._lib.adaptmc_unconstrain(self._handle, constrained, out, ctypes.byref(error)):
            raise ValueError(one_line(self._take(error)))
        return out


def point_seeds(points: np.ndarray) -> np.ndarray:
    """A 32-bit seed per row of ``points``, from its bits: the same point, the same
    generated quantities."""
    rows = np.ascontiguousarray(points, dtype=np.float64).view(np.uint64)
    mixed = np.bitwise_xor.reduce(rows * np.uint64(0x9E3779B97F4A7C15) +
                                  np.arange(rows.shape[1], dtype=np.uint64), axis=1)
    return (mixed ^ (mixed >> np.uint64(32))).astype(np.uint32)


def stan_name(flat: str) -> str:
    """Stan's flat name ``theta.1.2`` as ``theta[1,2]``."""
    base, *index = flat.split(".")
    return f"{base}[{','.join(index)}]" if index else base


def data_json(data: Any) -> str:
    """The data block's values as JSON text: ``None`` (no data), a dict (NumPy arrays as
    nested lists, row-major as Stan's JSON has them), a JSON string, or the path of a
    ``.json`` file or a ``.json.zip`` holding one (posteriordb's ``data.json.zip``)."""
    if data is None:
        return ""
    if isinstance(data, dict):
        return json.dumps(data, default=_to_json)
    if isinstance(data, str) and data.lstrip().startswith("{"):
        return data
    if not isinstance(data, str | os.PathLike):
        raise ValueError(f"data must be a dict, JSON text or a .json/.json.zip file's path, "
                         f"got a {type(data).__name__}")
    path = Path(data)
    if not path.is_file():
        raise ValueError(f"data file {str(path)!r} not found")
    try:
        if path.suffix != ".zip":
            return path.read_text()
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.namelist() if m.endswith(".json")]
            if len(members) != 1:
                raise ValueError(f"{path}: expected one .json file in the archive, found "
                                 f"{len(members)}")
            return archive.read(members[0]).decode()
    except (zipfile.BadZipFile, UnicodeDecodeError, OSError) as err:
        raise ValueError(f"data file {str(path)!r} cannot be read ({err})") from None


def _to_json(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "__array__"):  # a JAX array
        return np.asarray(value).tolist()
    raise TypeError(f"cannot write a {type(value).__name__} as Stan data")
