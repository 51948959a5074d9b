"""Ranking metrics against dense NumPy references, scikit-learn and closed forms."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import ndcg_score, roc_auc_score

from onebit_dask import metrics
from onebit_dask.metrics.ranking import (
    ndcg_at_k,
    precision_at_k,
    propensities,
    psp_at_k,
    top_k_metrics,
)


def _problem(seed=0, n=200, d2=30, k=5):
    """0/1 labels with a power-law label frequency (some rows with no label) and scores
    correlated with them; the top ``k`` labels of the scores, best first."""
    rng = np.random.default_rng(seed)
    freq = 0.4 / np.arange(1, d2 + 1) ** 0.8
    Y = (rng.random((n, d2)) < freq).astype(np.int8)
    scores = Y + rng.normal(scale=0.8, size=(n, d2))
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return Y, scores, top


def _dense_precision(Y, top, k):
    return np.mean([Y[i, top[i, :k]].sum() / k for i in range(len(Y))])


def _dense_ndcg(Y, top, k, ideal_k=None):
    out = []
    for i in range(len(Y)):
        dcg = sum(Y[i, top[i, j]] / np.log2(j + 2) for j in range(k))
        m = min(k, Y[i].sum()) if ideal_k is None else ideal_k
        idcg = sum(1 / np.log2(j + 2) for j in range(m))
        out.append(dcg / idcg if Y[i].sum() else 0.0)
    return np.mean(out)


def _dense_psp(Y, top, p, k):
    w = 1 / p
    gained = sum(Y[i, top[i, :k]] @ w[top[i, :k]] for i in range(len(Y)))
    best = sum(np.sort(w[Y[i] > 0])[::-1][:k].sum() for i in range(len(Y)))
    return gained / best


@pytest.mark.parametrize("k", [1, 3, 5])
def test_precision_and_ndcg_equal_dense_references_and_sklearn(k):
    Y, scores, top = _problem()
    assert (Y.sum(axis=1) == 0).any() and (Y.sum(axis=1) > k).any()  # both edge cases occur
    for Y_true in (Y, sp.csr_matrix(Y), Y.astype(bool)):
        assert precision_at_k(Y_true, top, k) == pytest.approx(_dense_precision(Y, top, k),
                                                               rel=1e-12)
        assert ndcg_at_k(Y_true, top, k) == pytest.approx(_dense_ndcg(Y, top, k), rel=1e-12)
    # scikit-learn on scores that put the top k first in order (ranks beyond k are ties)
    ranked = np.zeros(Y.shape)
    np.put_along_axis(ranked, top[:, :k], np.arange(k, 0, -1, dtype=float)[None, :], axis=1)
    assert ndcg_at_k(Y, top, k) == pytest.approx(ndcg_score(Y, ranked, k=k), rel=1e-12)
    assert ndcg_at_k(Y, top, k) == pytest.approx(ndcg_score(Y, scores, k=k), rel=1e-12)


def test_ndcg_reference_rejects_a_wrong_ideal_dcg():
    # normalising by the ideal DCG of k positives (not min(k, |P_i|)) is a different number
    Y, _, top = _problem()
    assert abs(ndcg_at_k(Y, top, 5) - _dense_ndcg(Y, top, 5, ideal_k=5)) > 0.01


def test_closed_forms_and_rows_without_labels():
    Y = np.array([[1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 1, 0]])
    top = np.array([[1, 2], [0, 1], [3, 2]])
    # row 0: hits (1, 0); row 1: none (no positives: counts 0); row 2: hits (0, 1)
    assert precision_at_k(Y, top, 1) == pytest.approx(1 / 3)
    assert precision_at_k(Y, top, 2) == pytest.approx((1 / 2 + 0 + 1 / 2) / 3)
    idcg2 = 1 + 1 / np.log2(3)
    assert ndcg_at_k(Y, top, 2) == pytest.approx((1 / idcg2 + 0 + (1 / np.log2(3)) / 1) / 3)


def test_perfect_ranking_scores_one():
    Y, _, _ = _problem(seed=1)
    Y = Y[Y.sum(axis=1) > 0]
    top = np.argsort(-(Y + np.arange(Y.shape[1]) * 1e-3), axis=1)[:, :5]  # positives first
    assert ndcg_at_k(Y, top, 5) == pytest.approx(1.0)
    p = propensities(Y)
    best = np.argsort(-(Y / p), axis=1, kind="stable")[:, :5]  # rarest positives first
    for k in (1, 3, 5):
        assert psp_at_k(Y, best, p, k) == pytest.approx(1.0)


def test_propensities_closed_form():
    Y = np.zeros((100, 3), dtype=int)
    Y[:50, 0] = 1
    Y[:2, 1] = 1
    p = propensities(Y)
    C = (np.log(100) - 1) * 2.5**0.55
    expected = 1 / (1 + C * (np.array([50, 2, 0]) + 1.5) ** -0.55)
    np.testing.assert_allclose(p, expected, rtol=1e-12)
    assert p[0] > p[1] > p[2]  # rarer labels have smaller propensities
    np.testing.assert_allclose(propensities(sp.csr_matrix(Y), A=0.5, B=0.4),
                               1 / (1 + (np.log(100) - 1) * 1.4**0.5
                                    * (np.array([50, 2, 0]) + 0.4) ** -0.5), rtol=1e-12)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_psp_equals_dense_reference(k):
    Y, _, top = _problem(seed=2)
    Y_train, _, _ = _problem(seed=3, n=500)
    p = propensities(Y_train)
    assert psp_at_k(sp.csr_matrix(Y), top, p, k) == pytest.approx(_dense_psp(Y, top, p, k),
                                                                   rel=1e-12)
    # a wrong normalisation (the mean of per-row ratios) is a different number
    w = 1 / p
    rows = [i for i in range(len(Y)) if Y[i].sum()]
    per_row = np.mean([(Y[i, top[i, :k]] @ w[top[i, :k]]) / np.sort(w[Y[i] > 0])[::-1][:k].sum()
                       for i in rows])
    assert abs(psp_at_k(Y, top, p, k) - per_row) > 1e-3


def test_top_k_metrics_keys_and_values():
    Y, _, top = _problem(seed=4)
    p = propensities(_problem(seed=5)[0])
    out = top_k_metrics(sp.csr_matrix(Y), top, p)
    assert list(out) == [f"{m}_at_{k}" for m in ("precision", "ndcg", "psp") for k in (1, 3, 5)]
    assert out["precision_at_3"] == precision_at_k(Y, top, 3)
    assert out["psp_at_5"] == psp_at_k(Y, top, p, 5)
    assert "psp_at_1" not in top_k_metrics(Y, top)


def test_macro_auc_equals_sklearn():
    Y, scores, _ = _problem(seed=6, n=120, d2=12)
    Y[:, -1] = 0
    both = (Y.min(axis=0) == 0) & (Y.max(axis=0) == 1)
    assert not both.all()  # a label with one class in the test set is left out
    expected = roc_auc_score(Y[:, both], scores[:, both], average="macro")
    assert metrics.auc(Y, scores) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("call, match", [
    (lambda Y, t: precision_at_k(Y, t, 6), "k=6 is not allowed"),
    (lambda Y, t: precision_at_k(Y, t, 0), "k=0 is not allowed"),
    (lambda Y, t: precision_at_k(Y * 2, t, 1), "0/1 indicator"),
    (lambda Y, t: precision_at_k(Y, t[:5], 1), "top_labels has shape"),
    (lambda Y, t: precision_at_k(Y, t + 100, 1), "top_labels holds the label"),
    (lambda Y, t: precision_at_k(Y, np.zeros_like(t), 2), "repeats a label"),
    (lambda Y, t: psp_at_k(Y, t, np.ones(3), 1), "propensities has shape"),
    (lambda Y, t: top_k_metrics(Y, t, ks=()), "ks=()"),
])
def test_bad_input(call, match):
    Y, _, top = _problem(n=20)
    with pytest.raises(ValueError, match=match):
        call(Y, top)
