"""Make the posteriordb copies that ship with adaptmc (src/adaptmc/data/posteriordb/).

For each posterior folder of a posteriordb checkout (posteriordb, BSD-3, stan-dev) it copies
``model.stan``, ``data.json.zip``, ``posterior.json``, ``mean_value.json``,
``mean_squared_value.json`` and ``reference_draws.info.json`` unchanged and writes

- ``reference_draws.json.zip``: every tenth of the published reference draws (10 chains x 100
  of 1000 per chain), same format: enough for the points the tests evaluate, a tenth the size;
- ``reference_sd.json``: ``names`` and ``sd``, the pooled standard deviation (ddof 1) of *all*
  published reference draws, so accuracy in reference-sd units does not depend on the thinning.

A posterior published with moments only (no reference draws) gets no draws file; its sd
follows from the two moment files.

    python scripts/vendor_posteriordb.py /path/to/posteriordb/posteriors-folder
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np

DEST = Path(__file__).resolve().parents[1] / "src" / "adaptmc" / "data" / "posteriordb"
COPIED = ("model.stan", "data.json.zip", "posterior.json", "mean_value.json",
          "mean_squared_value.json", "reference_draws.info.json")
KEEP_EVERY = 10


def _write_zipped_json(path: Path, name: str, value) -> None:
    info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))  # reproducible bytes
    info.compress_type = zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(info, json.dumps(value, separators=(",", ":")))


def vendor(source: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        if (source / name).is_file():
            shutil.copyfile(source / name, dest / name)
    draws_path = source / "reference_draws.json.zip"
    if not draws_path.is_file():
        return
    with zipfile.ZipFile(draws_path) as archive:
        (member,) = [m for m in archive.namelist() if m.endswith(".json")]
        chains = json.loads(archive.read(member))
    names = list(chains[0])
    sd = [float(np.std(np.asarray([c[k] for c in chains], float), ddof=1)) for k in names]
    (dest / "reference_sd.json").write_text(json.dumps({"names": names, "sd": sd}) + "\n")
    thinned = [{k: chain[k][::KEEP_EVERY] for k in names} for chain in chains]
    _write_zipped_json(dest / "reference_draws.json.zip", member, thinned)


def main(root: str) -> None:
    sources = sorted(p for p in Path(root).iterdir() if (p / "model.stan").is_file())
    lines = []
    for source in sources:
        vendor(source, DEST / source.name)
        for path in sorted((DEST / source.name).iterdir()):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            lines.append(f"{digest}  {source.name}/{path.name}")
    (DEST / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    print(f"{len(sources)} posteriors written to {DEST}")


if __name__ == "__main__":
    main(sys.argv[1])
