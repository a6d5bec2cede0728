"""The logistic-regression sets of Girolami & Calderhead (2011) and Titsias & Dellaportas
(2019): MATLAB files with one matrix ``X`` whose last column is the label.

australian 690x14, german 1000x24 (labels 1/2), heart 270x13 (labels 1/2), pima 532x7,
ripley 250x2, caravan 5822x85.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from adaptmc.datasets import PACKAGE_DATA

LOGISTIC_SETS = ("australian", "german", "heart", "pima", "ripley", "caravan")


def default_data_dir() -> Path:
    """``$ADAPTMC_DATA`` if set, else the copy shipped with adaptmc (``adaptmc/data``)."""
    return Path(os.environ["ADAPTMC_DATA"]) if os.environ.get("ADAPTMC_DATA") else PACKAGE_DATA


class LogisticData(NamedTuple):
    """``features: (n, p)`` standardised with an intercept column first; ``labels: (n,)`` in
    {0, 1}."""

    features: np.ndarray
    labels: np.ndarray
    name: str


def load_logistic(name_or_path: str | os.PathLike, standardise: bool = True) -> LogisticData:
    """Load a logistic-regression set by name (from `default_data_dir`) or by path.

    Inputs are standardised to zero mean and unit variance (Girolami & Calderhead 2011,
    Sec. 7) and an intercept column is prepended. Labels are mapped to {0, 1}.
    """
    path = Path(name_or_path)
    if path.suffix != ".mat":
        if str(name_or_path) not in LOGISTIC_SETS:
            raise ValueError(
                f"unknown logistic data set {str(name_or_path)!r}; choose one of "
                f"{', '.join(LOGISTIC_SETS)} or give a path to a .mat file"
            )
        path = default_data_dir() / "logistic" / f"{name_or_path}.mat"
    if not path.is_file():
        raise FileNotFoundError(
            f"logistic data file {str(path)!r} not found; set ADAPTMC_DATA to the folder that "
            "holds logistic/*.mat or pass the file's path"
        )
    from scipy.io import loadmat

    mat = loadmat(path)
    if "X" not in mat:
        raise ValueError(f"{path} has no matrix 'X' (features then a label column)")
    matrix = np.asarray(mat["X"], dtype=float)
    if not np.all(np.isfinite(matrix)):
        raise ValueError(f"{path} contains NaN or inf")
    x, y = matrix[:, :-1], matrix[:, -1]
    values = np.unique(y)
    if values.size != 2:
        raise ValueError(f"{path}: labels must take two values, found {values}")
    labels = (y == values[1]).astype(float)
    if standardise:
        sd = x.std(axis=0)
        sd[sd == 0] = 1.0
        x = (x - x.mean(axis=0)) / sd
    features = np.concatenate([np.ones((x.shape[0], 1)), x], axis=1)
    return LogisticData(features=features, labels=labels, name=path.stem)
