"""Twenty-six more posteriordb posteriors (Magnusson et al. 2024; stan-dev/posteriordb, commit
28f8d3d6, BSD-3), shipped with the lab in ``adaptmc_lab/data/posteriordb-extra/<posterior>/``:
posteriordb's ``model.stan``, ``data.json.zip`` and ``posterior.json`` unchanged, and
``info.json`` (``dimension``, ``family``). posteriordb publishes no reference draws for them:
the bench's references are made here, from long runs of two different samplers that agree
(`adaptmc_lab.bench.extra_references`), and kept as JSON in ``references/<posterior>.json``
beside the folders. A file whose ``status`` is ``"reference"`` gives the mean, sd and MCSE
of each quantity; ``"no reference"`` records what disagreed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from adaptmc.targets.base import Reference
from adaptmc_lab.datasets import LAB_DATA

EXTRA_DIR = LAB_DATA / "posteriordb-extra"
REFERENCES_DIR = EXTRA_DIR / "references"


def extra_posteriors() -> tuple[str, ...]:
    """The shipped posteriors' names, cheapest first (by dimension, then name)."""
    folders = [p for p in EXTRA_DIR.iterdir() if (p / "model.stan").is_file()]
    return tuple(p.name for p in sorted(folders, key=lambda p: (info(p.name)["dimension"],
                                                                 p.name)))


def folder(name: str) -> Path | None:
    """The folder of posterior ``name``, or None when the lab ships no such posterior."""
    path = EXTRA_DIR / name
    return path if (path / "model.stan").is_file() else None


def info(name: str) -> dict:
    """``info.json`` of posterior ``name``: ``{"dimension": d, "family": "..."}``."""
    return json.loads((EXTRA_DIR / name / "info.json").read_text())


def reference_path(name: str) -> Path:
    """Where the reference record of posterior ``name`` is kept."""
    return REFERENCES_DIR / f"{name}.json"


def reference_record(name: str) -> dict | None:
    """The reference record of posterior ``name`` (the JSON as written), or None if none
    has been made."""
    path = reference_path(name)
    return json.loads(path.read_text()) if path.is_file() else None


def load_reference(name: str) -> Reference | None:
    """The `Reference` of posterior ``name``: its record's names, means, sds and MCSEs when
    the record's ``status`` is ``"reference"``; None when there is no record or the record
    says ``"no reference"`` (the two samplers disagreed)."""
    record = reference_record(name)
    if record is None or record.get("status") != "reference":
        return None
    return Reference(tuple(record["names"]), *(np.asarray(record[k], dtype=float)
                                               for k in ("mean", "sd", "mcse")))
