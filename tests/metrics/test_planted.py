import numpy as np
import pytest
import sklearn.metrics

from onebit_dask import metrics

from tests.support.dense import label_auc_sums_reference


@pytest.fixture
def factors():
    rng = np.random.default_rng(0)
    A_true, B_true = rng.standard_normal((9, 2)), rng.standard_normal((13, 2))
    A, B = rng.standard_normal((9, 4)), rng.standard_normal((13, 4))
    return A_true, B_true, A, B


def test_spectral_error_matches_dense(factors):
    A_true, B_true, A, B = factors
    dense = A_true @ B_true.T - A @ B.T
    assert metrics.spectral_error(*factors) == pytest.approx(np.linalg.norm(dense, 2), rel=1e-12)


def test_frobenius_error_matches_dense(factors):
    A_true, B_true, A, B = factors
    dense = A_true @ B_true.T - A @ B.T
    assert metrics.frobenius_error(*factors) == pytest.approx(
        np.linalg.norm(dense) / np.sqrt(13), rel=1e-10)
    assert metrics.frobenius_error(A_true, B_true, A_true, B_true) < 1e-7


def test_hamming_and_auc_match_sklearn():
    rng = np.random.default_rng(1)
    Y = np.where(rng.random((300, 12)) < 0.3, 1, -1)
    S = np.round(rng.standard_normal((300, 12)) + 0.7 * Y, 1)  # rounding makes ties
    S[:5, 0] = 0.0  # sign(0) = +1
    assert metrics.hamming_loss(Y, S) == pytest.approx(
        sklearn.metrics.hamming_loss(Y > 0, np.where(S >= 0, 1, -1) > 0), abs=1e-15)
    assert metrics.auc(Y, S) == pytest.approx(
        sklearn.metrics.roc_auc_score(Y > 0, S, average="macro"), rel=1e-12)


def test_auc_per_label_with_and_without_ties_matches_sklearn():
    rng = np.random.default_rng(3)
    Y = np.where(rng.random((400, 6)) < 0.4, 1, -1)
    S = rng.standard_normal((400, 6)) + 0.5 * Y
    S[:, ::2] = np.round(S[:, ::2], 1)  # ties in columns 0, 2, 4 only
    S[:, 5] = 1.0  # one constant column: AUC 1/2
    expected = [sklearn.metrics.roc_auc_score(Y[:, j] > 0, S[:, j]) for j in range(6)]
    np.testing.assert_allclose(metrics.auc_per_label(Y, S), expected, rtol=1e-12)


def test_auc_skips_single_class_labels():
    rng = np.random.default_rng(2)
    Y = np.where(rng.random((100, 4)) < 0.5, 1, -1)
    Y[:, 2] = 1
    S = rng.standard_normal((100, 4)) + Y
    keep = [0, 1, 3]
    assert metrics.auc(Y, S) == pytest.approx(
        sklearn.metrics.roc_auc_score(Y[:, keep] > 0, S[:, keep], average="macro"), rel=1e-12)
    assert np.isnan(metrics.auc(np.ones((5, 2)), np.zeros((5, 2))))


def test_perfect_scores():
    Y = np.array([[1, -1], [-1, 1], [1, 1], [-1, -1]])
    assert metrics.auc(Y, Y * 2.0) == 1.0
    assert metrics.hamming_loss(Y, Y * 2.0) == 0.0


def test_evaluate_in_chunks_matches_whole():
    from onebit_dask import SyntheticProblem

    p = SyntheticProblem(8, 300, 2, n_test=400, seed=3)
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((8, 4)), rng.standard_normal((300, 4))
    ts = p.test_set()
    scores = (ts.X @ A) @ B.T
    chunked = metrics.evaluate(ts, p.truth, A, B, chunk_labels=7)
    assert chunked["auc"] == pytest.approx(
        sklearn.metrics.roc_auc_score(ts.Y > 0, scores, average="macro"), rel=1e-12)
    assert chunked["hamming_loss"] == pytest.approx(metrics.hamming_loss(ts.Y, scores), abs=1e-15)


def test_label_auc_sums_match_sklearn_per_label_with_ties():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 12, 400)
    y = np.where(rng.random(400) < 0.2 + 0.05 * labels, 1, -1)
    scores = np.round(rng.standard_normal(400) + 0.3 * y, 1)  # rounded: many ties
    np.testing.assert_allclose(metrics.label_auc_sums(labels, y, scores),
                               label_auc_sums_reference(labels, y, scores), rtol=1e-12)
    # power: scores of the wrong sign give the complement
    flipped = metrics.label_auc_sums(labels, y, -scores)
    ref = label_auc_sums_reference(labels, y, scores)
    assert flipped[0] == pytest.approx(ref[1] - ref[0])
