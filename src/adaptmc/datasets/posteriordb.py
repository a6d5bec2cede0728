"""posteriordb posteriors, one folder per posterior.

A posterior folder (Magnusson et al. 2024, "posteriordb: testing, benchmarking and
developing Bayesian inference algorithms", https://github.com/stan-dev/posteriordb) holds:

- ``data.json.zip``: one JSON file with the Stan data block's values;
- ``reference_draws.json.zip``: a JSON list with one dict per chain (10 chains), each mapping a
  parameter name in Stan's flat 1-based notation (``theta[1]``) to its 1000 thinned draws;
- ``mean_value.json``: ``names``, ``mean_value`` and ``mcse_mean`` of those draws;
- ``model.stan`` and ``posterior.json``: the model code and metadata.

The copies shipped with adaptmc (``adaptmc/data/posteriordb``, made by
``scripts/vendor_posteriordb.py``) keep every tenth reference draw and add
``reference_sd.json``, the sd of all published draws; a posterior published with moments only
has ``mean_squared_value.json`` and no draws. `load_posterior` takes a posterior's name
(looked up in `default_posteriordb_dir`) or the folder's path and returns a `Posterior`.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

from adaptmc.datasets import data_dir

POSTERIORS = (
    "eight_schools-eight_schools_noncentered",
    "arK-arK",
    "diamonds-diamonds",
    "gp_pois_regr-gp_pois_regr",
    "low_dim_gauss_mix-low_dim_gauss_mix",
    "garch-garch11",
    "kidiq-kidscore_momiq",
    "nes1972-nes",
    "earnings-earn_height",
    "gp_pois_regr-gp_regr",
    "hudson_lynx_hare-lotka_volterra",
)


def default_posteriordb_dir() -> Path:
    """``$ADAPTMC_POSTERIORDB`` if set, else the copy shipped with adaptmc."""
    return data_dir("posteriordb", "ADAPTMC_POSTERIORDB")


class Posterior(NamedTuple):
    """One posteriordb posterior.

    Attributes
    ----------
    name
        The folder's name, ``<data>-<model>``.
    data
        The Stan data: lists become float or int NumPy arrays, scalars stay Python numbers.
    reference_draws
        Parameter name (``"theta[1]"``) -> ``(chains, draws)`` array, in the file's order;
        empty for a posterior published with moments only.
    reference_mean
        Parameter name -> mean of the reference draws as published in ``mean_value.json``.
    reference_mcse
        Parameter name -> Monte Carlo standard error of that mean.
    reference_sd
        Parameter name -> standard deviation of all published reference draws (chains pooled):
        ``reference_sd.json`` where the folder has it (the shipped copies, whose draws are
        thinned), else from the draws, else from ``mean_squared_value.json``.
    model_code
        The Stan program.
    path
        The folder.
    """

    name: str
    data: dict
    reference_draws: dict[str, np.ndarray]
    reference_mean: dict[str, float]
    reference_mcse: dict[str, float]
    reference_sd: dict[str, float]
    model_code: str
    path: Path


def posterior_dir(name_or_path: str | os.PathLike) -> Path:
    """The folder of a posterior given by name (in `default_posteriordb_dir`) or by path."""
    path = Path(name_or_path)
    if path.is_dir():
        return path
    if str(name_or_path) in POSTERIORS or os.sep not in str(name_or_path):
        path = default_posteriordb_dir() / str(name_or_path)
    if not path.is_dir():
        raise FileNotFoundError(
            f"posteriordb folder {str(path)!r} not found; set ADAPTMC_POSTERIORDB to the folder "
            "that holds <posterior>/data.json.zip, or pass the posterior folder's path"
        )
    return path


def _read_zipped_json(path: Path):
    if not path.is_file():
        raise FileNotFoundError(f"posteriordb file {str(path)!r} not found")
    with zipfile.ZipFile(path) as archive:
        members = [m for m in archive.namelist() if m.endswith(".json")]
        if len(members) != 1:
            raise ValueError(f"{path} must hold exactly one .json file, found {members}")
        return json.loads(archive.read(members[0]))


def _as_array(value):
    if isinstance(value, list):
        arr = np.asarray(value)
        return arr.astype(float) if arr.dtype.kind == "f" else arr
    return value


def _read_json(path: Path):
    if not path.is_file():
        raise FileNotFoundError(f"posteriordb file {str(path)!r} not found")
    return json.loads(path.read_text())


def _read_reference_draws(path: Path) -> dict[str, np.ndarray]:
    """``{name: (chains, draws)}`` from ``reference_draws.json.zip``; ``{}`` if absent."""
    if not (path / "reference_draws.json.zip").is_file():
        return {}
    chains = _read_zipped_json(path / "reference_draws.json.zip")
    if not isinstance(chains, list) or not chains or not isinstance(chains[0], dict):
        raise ValueError(f"{path}/reference_draws.json.zip: expected a list of per-chain dicts")
    try:
        return {k: np.asarray([chain[k] for chain in chains], dtype=float) for k in chains[0]}
    except (KeyError, ValueError) as err:
        raise ValueError(f"{path}: chains of the reference draws disagree ({err})") from err


def _reference_sd(path: Path, draws: dict, means: dict) -> dict[str, float]:
    if (path / "reference_sd.json").is_file():
        table = _read_json(path / "reference_sd.json")
        return dict(zip(table["names"], map(float, table["sd"]), strict=True))
    if draws:
        return {k: float(np.std(v, ddof=1)) for k, v in draws.items()}
    squares = _read_json(path / "mean_squared_value.json")
    second = dict(zip(squares["names"], squares["mean_squared_value"], strict=True))
    return {k: float(np.sqrt(max(second[k] - means[k] ** 2, 0.0))) for k in means}


def load_posterior(name_or_path: str | os.PathLike) -> Posterior:
    """Read a posterior folder: data, reference draws (if published) and reference moments.

    Raises `FileNotFoundError` naming the missing folder or file, and `ValueError` when the
    reference draws are ragged or disagree with ``mean_value.json`` on parameter names.
    """
    path = posterior_dir(name_or_path)
    data = {k: _as_array(v) for k, v in _read_zipped_json(path / "data.json.zip").items()}
    draws = _read_reference_draws(path)
    means = _read_json(path / "mean_value.json")
    if draws and sorted(means["names"]) != sorted(draws):
        raise ValueError(
            f"{path}: mean_value.json names {means['names']} differ from the reference draws' "
            f"{list(draws)}"
        )
    mean = dict(zip(means["names"], map(float, means["mean_value"]), strict=True))
    code_path = path / "model.stan"
    return Posterior(
        name=path.name,
        data=data,
        reference_draws=draws,
        reference_mean=mean,
        reference_mcse=dict(zip(means["names"], map(float, means["mcse_mean"]), strict=True)),
        reference_sd=_reference_sd(path, draws, mean),
        model_code=code_path.read_text() if code_path.is_file() else "",
        path=path,
    )
