"""Dexter, the text-classification set of the NIPS 2003 feature-selection challenge.

Guyon, Gunn, Ben-Hur & Dror (2004), "Result analysis of the NIPS 2003 feature selection
challenge" (NIPS 17); UCI Machine Learning Repository, "Dexter". Bag-of-words counts of
Reuters articles (about corporate acquisitions or not) with distractor features added:
20,000 integer features, 300 training, 300 validation and 2,000 test cases (test labels
were never released). Files: ``dexter_{train,valid,test}.data`` (one case a line, sparse
``column:value`` pairs with 1-based columns), ``dexter_{train,valid}.labels`` (``+1`` or
``-1`` a line) and ``dexter.param`` (case counts and the sum of all values of each split,
the "check-sums").

The features stay a SciPy CSR matrix (under 1% of the entries are non-zero); only the few
hundred columns kept by `select_features` are ever made dense, by `transform`.

Preprocessing after Neal & Zhang (2006), "High dimensional classification with Bayesian
neural networks and Dirichlet diffusion trees", in Guyon et al. (eds.), *Feature
Extraction: Foundations and Applications*, Ch. 10 (their winning NIPS 2003 entry; abstract
at clopinet.com/isabelle/Projects/NIPS2003/Abstracts/neal.html): the number of inputs is
reduced to a few hundred "by selecting a subset of features using simple univariate
significance tests" (295 for Dexter, as in Wang 2012, Sec. 4.2), and a Bayesian network with
an ARD prior then weighs them. What we could not recover from the sources we could read
offline, and chose:

- the test: a two-sided rank test of association between a feature and the class (the
  Wilcoxon-Mann-Whitney statistic, equivalent to Spearman's rank correlation with a binary
  class), normal approximation with tie correction; rank-based because the counts are
  heavy-tailed and mostly zero. The 295 features with the largest ``|z|`` are kept (ties
  by column index), rather than a p-value threshold that happens to give 295;
- the transformation: ``sqrt(count)`` (the variance-stabilising transform of a count),
  divided by its root mean square over the training cases, so every input has scale 1 and a
  zero count stays an exact zero (no centring, which would make absent words informative).

Both are computed from training cases only (`select_features` takes the cases it may
look at), so inside cross-validation a fold's held-out cases and the validation labels never
influence its inputs (tested in ``tests/test_dexter.py``).
"""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from adaptmc_lab.datasets import LAB_DATA

NUM_FEATURES = 20_000
NUM_SELECTED = 295
SPLITS = ("train", "valid", "test")
NUM_CASES = {"train": 300, "valid": 300, "test": 2000}


def default_dir() -> Path:
    """``$ADAPTMC_DEXTER`` if set, else ``$ADAPTMC_DATA/dexter``, else the copy shipped with
    adaptmc (``adaptmc_lab/data/dexter``, the data files gzipped)."""
    if os.environ.get("ADAPTMC_DEXTER"):
        return Path(os.environ["ADAPTMC_DEXTER"])
    if os.environ.get("ADAPTMC_DATA"):
        return Path(os.environ["ADAPTMC_DATA"]) / "dexter"
    return LAB_DATA / "dexter"


class DexterSplit(NamedTuple):
    """``features: (n, 20000)`` CSR of float64 counts; ``labels: (n,)`` in {-1, +1}, or
    ``None`` for the test split."""

    features: sp.csr_matrix
    labels: np.ndarray | None


class Dexter(NamedTuple):
    train: DexterSplit
    valid: DexterSplit
    test: DexterSplit


def _require(path: Path) -> Path:
    """``path``, or its gzipped copy ``path.gz`` (as shipped), or a clear error."""
    gzipped = path.with_name(path.name + ".gz")
    if not path.is_file() and gzipped.is_file():
        return gzipped
    if not path.is_file():
        raise FileNotFoundError(
            f"Dexter file {path} is missing. Expected dexter_train.data, dexter_train.labels, "
            "dexter_valid.data, dexter_valid.labels, dexter_test.data and dexter.param in "
            f"{path.parent} (set ADAPTMC_DEXTER to another folder; the data are the UCI "
            "'Dexter' set of the NIPS 2003 feature-selection challenge)."
        )
    return path


def read_sparse(path: str | os.PathLike, num_features: int = NUM_FEATURES) -> sp.csr_matrix:
    """Parse ``column:value`` lines (1-based columns) into a CSR matrix ``(lines, num_features)``;
    an empty line is a case with no non-zero feature."""
    indptr, indices, values = [0], [], []
    source = _require(Path(path))
    with (gzip.open(source, "rt") if source.suffix == ".gz" else open(source)) as handle:
        for number, line in enumerate(handle, start=1):
            for item in line.split():
                column, _, value = item.partition(":")
                if not value:
                    raise ValueError(f"{path}:{number}: expected column:value, got {item!r}")
                col = int(column)
                if not 1 <= col <= num_features:
                    raise ValueError(f"{path}:{number}: column {col} outside 1..{num_features}")
                indices.append(col - 1)
                values.append(float(value))
            indptr.append(len(indices))
    matrix = sp.csr_matrix(
        (np.asarray(values), np.asarray(indices, dtype=np.int32), np.asarray(indptr)),
        shape=(len(indptr) - 1, num_features),
    )
    matrix.sum_duplicates()
    return matrix


def read_labels(path: str | os.PathLike) -> np.ndarray:
    """``+1`` / ``-1`` a line -> ``(n,)`` int array."""
    labels = np.loadtxt(_require(Path(path)), dtype=int, ndmin=1)
    if not np.all(np.isin(labels, (-1, 1))):
        raise ValueError(f"{path}: labels must be +1 or -1")
    return labels


def read_param(path: str | os.PathLike) -> dict:
    """``dexter.param`` -> ``{"train": (positives, negatives, total, check_sum), ...}``."""
    table = {}
    for line in _require(Path(path)).read_text().splitlines():
        match = re.match(r"\s*(Train|Valid|Test)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)", line)
        if match:
            name, *counts, check = match.groups()
            table[name.lower()] = (*(int(c) for c in counts), float(check))
    if set(table) != set(SPLITS):
        raise ValueError(f"{path}: expected Train, Valid and Test rows, found {sorted(table)}")
    return table


def load_dexter(directory: str | os.PathLike | None = None, check: bool = True) -> Dexter:
    """Load the three splits from ``directory`` (default `default_dir`).

    With ``check``, each split's number of cases and sum of all values must equal
    ``dexter.param`` (and the labelled splits' class counts), else ``ValueError``.
    """
    directory = Path(directory) if directory is not None else default_dir()
    if not directory.is_dir():
        raise FileNotFoundError(
            f"Dexter folder {directory} not found (set ADAPTMC_DEXTER to a folder holding the "
            "UCI 'Dexter' files)."
        )
    param = read_param(directory / "dexter.param") if check else None
    splits = {}
    for name in SPLITS:
        features = read_sparse(directory / f"dexter_{name}.data")
        labels = None if name == "test" else read_labels(directory / f"dexter_{name}.labels")
        if labels is not None and labels.shape[0] != features.shape[0]:
            raise ValueError(f"{name}: {features.shape[0]} cases but {labels.shape[0]} labels")
        if param is not None:
            check_split(name, features, labels, param[name])
        splits[name] = DexterSplit(features, labels)
    return Dexter(**splits)


def check_split(name: str, features: sp.csr_matrix, labels: np.ndarray | None,
                expected: tuple) -> None:
    """Compare a split with its ``dexter.param`` row ``(positives, negatives, total, sum)``."""
    positives, negatives, total, check_sum = expected
    if features.shape[0] != total:
        raise ValueError(f"{name}: {features.shape[0]} cases, dexter.param says {total}")
    value_sum = float(features.sum())
    if value_sum != check_sum:
        raise ValueError(f"{name}: sum of values {value_sum:.0f}, dexter.param says "
                         f"{check_sum:.0f} (a corrupt or different file)")
    if labels is not None and (np.sum(labels == 1), np.sum(labels == -1)) != (positives,
                                                                               negatives):
        raise ValueError(f"{name}: class counts differ from dexter.param")


# ----------------------------------------------------------------------------- preprocessing


def rank_test_z(features: sp.spmatrix, labels: np.ndarray) -> np.ndarray:
    """Wilcoxon-Mann-Whitney ``z`` of every column against the class: ``(num_features,)``.

    ``features: (n, p)`` non-negative (sparse; zeros are tied at the lowest rank);
    ``labels: (n,)`` in {-1, +1}. Positive ``z``: larger values in the ``+1`` class. A
    column with one value throughout has ``z = 0``.
    """
    columns = sp.csc_matrix(features)
    labels = np.asarray(labels)
    positive = labels == 1
    n, n_pos = labels.shape[0], int(positive.sum())
    n_neg = n - n_pos
    z = np.zeros(columns.shape[1])
    if n_pos == 0 or n_neg == 0:
        return z
    for j in np.flatnonzero(np.diff(columns.indptr)):
        start, stop = columns.indptr[j], columns.indptr[j + 1]
        rows, values = columns.indices[start:stop], columns.data[start:stop]
        keep = values != 0
        rows, values = rows[keep], values[keep]
        num_zero = n - rows.size
        ranks = np.full(n, (num_zero + 1) / 2)  # the zeros' average rank
        unique, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
        first = num_zero + np.concatenate([[0], np.cumsum(counts)[:-1]])
        ranks[rows] = (first + (counts + 1) / 2)[inverse]
        ties = np.concatenate([counts, [num_zero]]).astype(float)
        variance = n_pos * n_neg / 12 * ((n + 1) - np.sum(ties**3 - ties) / (n * (n - 1)))
        u = ranks[positive].sum() - n_pos * (n_pos + 1) / 2
        z[j] = (u - n_pos * n_neg / 2) / np.sqrt(variance) if variance > 0 else 0.0
    return z


class Selection(NamedTuple):
    """``columns: (k,)`` 0-based feature indices, most significant first; ``scales: (k,)``
    root mean square of ``sqrt(count)`` over the training cases; ``z: (k,)``."""

    columns: np.ndarray
    scales: np.ndarray
    z: np.ndarray


def select_features(features: sp.spmatrix, labels: np.ndarray, training: np.ndarray | None = None,
                    num: int = NUM_SELECTED) -> Selection:
    """Neal & Zhang's univariate selection (see the module docstring) from the cases
    ``training`` (indices or a boolean mask; default all) of ``features: (n, p)`` and
    ``labels: (n,)``; only those rows are read."""
    features = sp.csr_matrix(features)
    rows = np.arange(features.shape[0]) if training is None else np.asarray(training)
    if rows.dtype == bool:
        rows = np.flatnonzero(rows)
    sub, sub_labels = features[rows], np.asarray(labels)[rows]
    if not 1 <= num <= features.shape[1]:
        raise ValueError(f"num must be in [1, {features.shape[1]}], got {num}")
    z = rank_test_z(sub, sub_labels)
    columns = np.argsort(-np.abs(z), kind="stable")[:num]
    root = np.sqrt(sub[:, columns].toarray())
    scales = np.sqrt(np.mean(root**2, axis=0))
    return Selection(columns, np.where(scales > 0, scales, 1.0), z[columns])


def transform(features: sp.spmatrix, selection: Selection) -> np.ndarray:
    """Network inputs ``(n, k)``: ``sqrt(count) / scale`` of the selected columns (dense)."""
    dense = sp.csr_matrix(features)[:, selection.columns].toarray()
    return np.sqrt(dense) / selection.scales
