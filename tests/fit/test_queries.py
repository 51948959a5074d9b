"""Fits under chosen queries (``OneBitMultiLabel(queries=...)``, docs/ALGORITHM.md section
11): the positives found as the label matrix, against closed forms and a dense NumPy
reference; the same fit on Dask; the refusals where there is nothing to choose."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.special
from scipy import stats

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.data.label_matrix import LabelMatrixSource
from onebit_dask.testing import assert_same_fit

PROBLEM = SyntheticProblem(30, 200, 3, positive_rate=(0.005, 0.05), seed=3, n_test=10)
PARAMS = dict(batch_size=20000, n_iter=5, random_state=0, engine="local")


@pytest.fixture(scope="module")
def data():
    X, Y = PROBLEM.full_observation(3000)
    return X, (Y > 0).astype(np.int8)


@pytest.fixture(scope="module")
def fits(data):
    return {q: OneBitMultiLabel(3, queries=q, **PARAMS).fit(*data)
            for q in ("uniform", "popularity", "model")}


def test_uniform_queries_are_the_default_fit(data, fits):
    assert_same_fit(OneBitMultiLabel(3, **PARAMS).fit(*data), fits["uniform"], X=data[0])
    with pytest.raises(AttributeError, match="queries='uniform'"):
        fits["uniform"].queries_asked_


@pytest.mark.parametrize("queries", ["popularity", "model"])
def test_the_thresholds_are_the_shares_of_the_positives_found(data, fits, queries):
    """``b_j = Phi^{-1}((f_j + 1/2) / (n + 1))`` for ``f_j`` positive bits of label ``j``
    over every batch, and ``f`` is what the asked pairs hold."""
    est, (X, Y) = fits[queries], data
    f = est.positives_found_
    np.testing.assert_allclose(est.intercept_,
                               scipy.special.ndtri((f + 0.5) / (X.shape[0] + 1)), rtol=1e-9)
    rows, labels = est.queries_asked_
    np.testing.assert_array_equal(f, np.bincount(labels[Y[rows, labels] > 0], minlength=200))
    assert sum(h["positive_bits"] for h in est.history_) == f.sum()
    repeated = sum(h["repeated_pairs"] for h in est.history_)
    assert rows.size == 6 * 20000 - repeated and est.n_samples_seen_ == 6 * 20000
    assert [h["n_samples"] for h in est.history_] == [20000 * (t + 1) for t in range(6)]


def test_model_queries_find_more_positives_than_uniform_bits(data, fits):
    """Each chosen batch's positive bits against the share of positives in ``Y`` that
    uniform bits find (binomial test, level 1e-3, one-sided); the first batch is uniform
    and passes the same test the other way."""
    share = data[1].mean()
    history = fits["model"].history_
    first = history[0]["positive_bits"]
    assert stats.binomtest(first, 20000, share).pvalue > 1e-3
    for h in history[1:]:
        assert stats.binomtest(h["positive_bits"], 20000, share,
                               alternative="greater").pvalue < 1e-3


def test_the_initial_estimate_is_the_svd_of_the_positives_found(data):
    """With no step (``n_iter=0``), the initial estimate under chosen queries is the
    top-``k`` left singular subspace of ``H = sum_{positive pairs} x_i e_j^T`` of the
    (uniform) initial batch's distinct pairs: a dense NumPy reference."""
    X, Y = data
    est = OneBitMultiLabel(3, batch_size=20000, n_iter=0, queries="model", features="none",
                           init_svd="dense", random_state=0, engine="local").fit(X, Y)
    rows, labels = LabelMatrixSource(X, Y, 0).uniform_pairs(0, 20000, 4)
    keys = np.unique(rows * 200 + labels)  # each pair once: a repeat is not sent
    np.testing.assert_array_equal(keys, est.queries_asked_[0] * 200 + est.queries_asked_[1])
    rows, labels = keys // 200, keys % 200
    found = Y[rows, labels] > 0
    H = np.zeros((X.shape[1], Y.shape[1]))
    np.add.at(H.T, labels[found], X[rows[found]])
    U = np.linalg.svd(H)[0][:, :3]
    basis = scipy.linalg.orth(est.A_)
    assert np.linalg.norm(basis @ basis.T - U @ U.T, 2) < 1e-8
    # a wrong estimate (the negatives' rows subtracted, as uniform bits' centring does) is
    # rejected by the same bound
    np.add.at(H.T, labels[~found], -0.02 * X[rows[~found]])
    V = np.linalg.svd(H)[0][:, :3]
    assert np.linalg.norm(basis @ basis.T - V @ V.T, 2) > 1e-3


def test_same_seed_same_queries(data, fits):
    again = OneBitMultiLabel(3, queries="model", **PARAMS).fit(*data)
    assert_same_fit(fits["model"], again)
    for a, b in zip(again.queries_asked_, fits["model"].queries_asked_):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("queries", ["popularity", "model"])
def test_queries_on_dask_equal_in_process(client2, data, fits, queries):
    with client2.as_current():
        on_dask = OneBitMultiLabel(3, queries=queries, **dict(PARAMS, engine="dask")).fit(*data)
    assert_same_fit(fits[queries], on_dask, X=data[0][:50])
    for a, b in zip(on_dask.queries_asked_, fits[queries].queries_asked_):
        np.testing.assert_array_equal(a, b)


def test_refused_where_there_are_no_queries_to_choose(data, tmp_path):
    X, Y = data
    est = OneBitMultiLabel(3, queries="model", **PARAMS)
    labels, bits = np.arange(100) % 200, np.ones(100)
    with pytest.raises(ValueError, match="queries='model' is not allowed with given bits"):
        est.fit(X[:100], labels, bits, n_labels=200)
    with pytest.raises(ValueError, match="queries='model' is not allowed with a planted"):
        est.fit(PROBLEM)
    with pytest.raises(ValueError, match="queries='model' is not allowed in partial_fit"):
        est.partial_fit(X, Y)
    with pytest.raises(ValueError, match="queries='model' is not allowed with checkpoint"):
        est.fit(X, Y, checkpoint=tmp_path / "ck")
    assert not (tmp_path / "ck").exists()


@pytest.mark.parametrize("params, bad", [
    (dict(step="select"), "step='select'"), (dict(step="paper"), "step='paper'"),
    (dict(threshold="none"), "threshold='none'"),
    (dict(query_explore=1.5), "query_explore"), (dict(query_top_k=0), "query_top_k"),
    (dict(queries="best"), "queries"),
])
def test_bad_query_settings_are_refused_before_any_work(data, params, bad):
    X, Y = data
    with pytest.raises(ValueError, match=bad):
        OneBitMultiLabel(3, **{**PARAMS, "queries": "model", **params}).fit(X, Y)
