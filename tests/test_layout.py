"""Small clear code (STYLE.md): in the library, no function over 60 lines and no module over
400, docstrings included."""

from __future__ import annotations

import ast
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[1] / "src" / "adaptmc"
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400

ALLOWED: set[str] = set()  # none: every module of the library keeps the limits


def modules():
    for path in sorted(LIBRARY.rglob("*.py")):
        name = path.relative_to(LIBRARY).as_posix()
        if name not in ALLOWED:
            yield name, path.read_text()


def test_every_module_is_at_most_400_lines():
    long = {name: len(text.splitlines()) for name, text in modules()
            if len(text.splitlines()) > MAX_MODULE_LINES}
    assert long == {}


def test_every_function_is_at_most_60_lines():
    long = {}
    for name, text in modules():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{name}:{node.name}"] = lines
    assert long == {}
