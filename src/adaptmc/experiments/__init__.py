"""Reproduced tables and figures, one module each; `EXPERIMENTS` maps the name used by
``adaptmc reproduce NAME`` to a function ``(out, quick, force, seed) -> exit code``."""

from __future__ import annotations

from collections.abc import Callable

EXPERIMENTS: dict[str, Callable[..., int]] = {}
