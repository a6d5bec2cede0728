"""The compile census: every program a run compiled, named, with its seconds."""

import json
import subprocess
import sys

import pytest

import adaptmc
from adaptmc.diagnostics import format_summary

SMALL = dict(chains=2, draws=50, warmup_steps=150, tuning=6, progress=False,
             compile_cache=False)


def test_the_run_record_names_every_program_compiled_and_sums_to_compile_s():
    idata = adaptmc.sample("gauss-2d-v1", seed=3, **SMALL)
    programs = json.loads(idata.attrs["compile_census"])
    assert all(set(p) == {"name", "trace_s", "lower_s", "compile_s"} for p in programs)
    assert all(min(p["trace_s"], p["lower_s"], p["compile_s"]) >= 0 for p in programs)
    total = sum(p["trace_s"] + p["lower_s"] + p["compile_s"] for p in programs)
    assert total == pytest.approx(idata.attrs["compile_s"], abs=1e-9)
    compiled = sum(1 for p in programs if p["compile_s"] > 0)
    assert f"compiled {compiled} programs in {total:.1f} s" in format_summary(idata)
