"""The audit of bad inputs and faults (``scripts/audit_inputs.py``): every check passes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


@pytest.mark.slow
def test_every_bad_input_of_the_audit_is_handled(capsys):
    path = Path(__file__).parents[1] / "scripts" / "audit_inputs.py"
    spec = importlib.util.spec_from_file_location("audit_inputs", path)
    audit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(audit)
    assert audit.main_audit(verbose=False) == 0, capsys.readouterr().out
