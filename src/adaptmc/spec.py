"""``package.module:function`` references, the one way a user's code (a target, a reward)
or a lazily imported experiment is named on the command line."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any


def load_object(spec: str, what: str) -> Any:
    """Import ``module`` (from the environment, else from the current folder) and return its
    attribute ``function`` for ``spec = "module:function"``; raise `ValueError` naming
    ``what`` (e.g. "target") when it cannot."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{what} {spec!r}: expected 'module:function'")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # the user's module in the current folder, as `python -m`
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name is None or not module_name.startswith(err.name):
            raise ValueError(f"cannot import module {module_name!r} for {what} {spec!r}: "
                             f"{err}") from err
        raise ValueError(
            f"cannot import module {module_name!r} for {what} {spec!r}: no module "
            f"{err.name!r} in the current folder ({os.getcwd()}) or the installed packages; "
            f"run from the folder that holds {err.name.replace('.', '/')}.py, add that "
            "folder to PYTHONPATH, or install it") from err
    except ImportError as err:
        raise ValueError(
            f"cannot import module {module_name!r} for {what} {spec!r}: {err}"
        ) from err
    if not hasattr(module, attr):
        raise ValueError(f"module {module_name!r} has no {attr!r} for {what} {spec!r}")
    obj = getattr(module, attr)
    if not callable(obj):
        raise ValueError(f"{what} {spec!r} is not callable")
    return obj
