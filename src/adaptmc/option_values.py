"""The Python API's structured option values (``box``, ``grid``, ``inverse_mass``,
``data``) checked before anything is loaded: a value of the wrong shape is one
`adaptmc.options.OptionError` naming the option and the form it takes (the command line
parses its own text forms, ``--box NAME=LOW:HIGH``, in `adaptmc.cli.options`)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from adaptmc.options import OptionError


def check_structured(options: dict[str, Any]) -> None:
    """``box``: a `adaptmc.tuners.Box` or ``{name: (low, high)}``; ``grid``: ``{name:
    [values]}``; ``inverse_mass``: a positive number or an array of finite numbers."""
    if options.get("box") is not None:
        _check_box(options["box"])
    if options.get("grid") is not None:
        _check_grid(options["grid"])
    if options.get("inverse_mass") is not None:
        _numbers("inverse_mass", options["inverse_mass"],
                 "a number or an array of numbers (a .npy file: numpy.load it first)")


def check_data(data: Any) -> None:
    """``data``: None, a dict, JSON text, or the path of a ``.json`` or ``.json.zip``."""
    if data is None or isinstance(data, dict | str | os.PathLike):
        return
    raise OptionError("data", "must be a dict, JSON text or the path of a .json or "
                      f".json.zip file, got a {type(data).__name__} ({data!r:.60})")


def _check_box(box: Any) -> None:
    from adaptmc.tuners import Box

    if isinstance(box, Box):
        return
    form = "a dict {name: (low, high)}, e.g. box={'step_size': (0.01, 1.0)}"
    if not isinstance(box, dict):
        hint = " (NAME=LOW:HIGH is the command line's form)" if isinstance(box, str) else ""
        raise OptionError("box", f"must be {form}, got a {type(box).__name__} "
                          f"{box!r:.60}{hint}")
    for name, bounds in box.items():
        values = _numbers("box", bounds, form)
        if not isinstance(name, str) or values.shape != (2,) or not values[0] < values[1]:
            raise OptionError("box", f"must be {form} with low < high, got {name!r}: "
                              f"{bounds!r:.60}")


def _check_grid(grid: Any) -> None:
    form = "a dict {name: [values]}, e.g. grid={'num_leapfrog': [5, 10]}"
    if not isinstance(grid, dict) or not grid:
        raise OptionError("grid", f"must be {form}, got {grid!r:.60}")
    for name, values in grid.items():
        if not isinstance(name, str) or _numbers("grid", values, form).ndim != 1:
            raise OptionError("grid", f"must be {form}, got {name!r}: {values!r:.60}")


def _numbers(name: str, value: Any, form: str) -> np.ndarray:
    """``value`` as an array of finite real numbers, or `OptionError` saying ``form``."""
    if isinstance(value, str | bytes | dict) or value is None:
        raise OptionError(name, f"must be {form}, got {value!r:.60}")
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise OptionError(name, f"must be {form}, got {value!r:.60}") from None
    if not np.all(np.isfinite(array)):
        raise OptionError(name, f"must hold finite numbers, got {value!r:.60}")
    return array
