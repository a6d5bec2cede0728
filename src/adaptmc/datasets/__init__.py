"""Data set loaders. Each takes a path and says clearly when it is absent."""

from __future__ import annotations

import os
from pathlib import Path


def shared_dir(name: str, env: str) -> Path:
    """``$env`` if set, else ``../shared/<name>`` beside the working directory or beside the
    source tree (a checkout's ``shared/`` sits next to the repository)."""
    if os.environ.get(env):
        return Path(os.environ[env])
    for base in (Path.cwd(), Path(__file__).resolve().parents[3]):
        candidate = base.parent / "shared" / name
        if candidate.is_dir():
            return candidate
    return Path.cwd().parent / "shared" / name
