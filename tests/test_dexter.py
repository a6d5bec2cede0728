"""Dexter (Wang 2012, Sec. 4.2): loader, feature selection inside cross-validation, the
two-hidden-layer network against a NumPy reference, and the one-layer network unchanged."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from adaptmc.datasets import dexter

DATA = dexter.default_dir()
needs_data = pytest.mark.skipif(not (DATA / "dexter.param").is_file(),
                                reason=f"Dexter data not found in {DATA}")


@pytest.fixture(scope="module")
def data():
    return dexter.load_dexter(DATA)


@needs_data
def test_loader_reproduces_the_param_checksums(data):
    param = dexter.read_param(DATA / "dexter.param")
    assert param["train"] == (150, 150, 300, 2816528.0)
    for name, split in zip(dexter.SPLITS, data, strict=True):
        assert sp.issparse(split.features) and split.features.shape == (
            dexter.NUM_CASES[name], 20000)
        assert float(split.features.sum()) == param[name][3]
    assert data.test.labels is None
    assert np.sum(data.train.labels == 1) == 150 and np.sum(data.valid.labels == -1) == 150
    # sparse: well under 1% of the entries are stored
    assert data.train.features.nnz < 0.01 * 300 * 20000


def test_loader_says_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="Dexter folder"):
        dexter.load_dexter(tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="dexter.param is missing"):
        dexter.load_dexter(tmp_path)


def test_loader_rejects_a_wrong_checksum(tmp_path):
    lines = ["1:2 3:4", "", "20000:1"]
    (tmp_path / "x.data").write_text("\n".join(lines) + "\n")
    matrix = dexter.read_sparse(tmp_path / "x.data")
    assert matrix.shape == (3, 20000) and matrix[0, 2] == 4 and matrix[2, 19999] == 1
    assert matrix[1].nnz == 0
    with pytest.raises(ValueError, match="sum of values 7"):
        dexter.check_split("train", matrix, None, (0, 0, 3, 8.0))
    (tmp_path / "bad.data").write_text("0:1\n")
    with pytest.raises(ValueError, match="outside"):
        dexter.read_sparse(tmp_path / "bad.data")


def test_rank_test_matches_scipy_mann_whitney():
    rng = np.random.default_rng(0)
    counts = rng.poisson(0.7, size=(40, 6)) * rng.integers(1, 4, size=(40, 6))
    counts[:, 5] = 0
    labels = np.where(rng.random(40) < 0.5, 1, -1)
    z = dexter.rank_test_z(sp.csr_matrix(counts), labels)
    for j in range(5):
        test = stats.mannwhitneyu(counts[labels == 1, j], counts[labels == -1, j],
                                  use_continuity=False, method="asymptotic")
        assert 2 * stats.norm.sf(abs(z[j])) == pytest.approx(test.pvalue, rel=1e-10)
    assert z[5] == 0.0


@needs_data
def test_feature_selection_uses_training_cases_only(data):
    """Poisoning the labels (and values) of held-out cases leaves the selection unchanged, so
    a fold's inputs never see its held-out fold or the validation set."""
    from adaptmc.models import cv

    masks = cv.kfold_masks(300, 10, seed=0)
    training = masks[3] == 1
    chosen = dexter.select_features(data.train.features, data.train.labels, training)
    assert chosen.columns.shape == (295,) and np.all(np.abs(chosen.z[:-1]) >= np.abs(chosen.z[-1]))
    poisoned = data.train.labels.copy()
    poisoned[~training] *= -1
    moved = data.train.features.tolil()
    moved[np.flatnonzero(~training), :50] = 999.0
    again = dexter.select_features(moved.tocsr(), poisoned, training)
    np.testing.assert_array_equal(again.columns, chosen.columns)
    np.testing.assert_array_equal(again.scales, chosen.scales)
    # the held-out labels matter when they are allowed in
    everything = dexter.select_features(data.train.features, poisoned)
    assert not np.array_equal(everything.columns, chosen.columns)
    x = dexter.transform(data.valid.features, chosen)
    assert x.shape == (300, 295) and np.all(x >= 0)
    root_mean_square = np.sqrt(np.mean(dexter.transform(data.train.features[training],
                                                        chosen) ** 2, axis=0))
    np.testing.assert_allclose(root_mean_square, 1.0, rtol=1e-12)
