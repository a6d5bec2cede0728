"""Data set loaders. The data the built-in targets need ship inside the package
(``adaptmc/data/``, each folder with its source and licence); an environment variable points
a loader at another copy instead, and a missing file is a clear error."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DATA = Path(__file__).resolve().parents[1] / "data"


def data_dir(name: str, env: str) -> Path:
    """``$env`` if set, else the copy shipped in the package (``adaptmc/data/<name>``)."""
    if os.environ.get(env):
        return Path(os.environ[env])
    return PACKAGE_DATA / name
