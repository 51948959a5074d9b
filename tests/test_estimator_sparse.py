"""Sparse (CSR) features: never densified, and equal to a dense run of the same data to
rounding (rtol 1e-12 on Q_ after a fit; the kernels' sums to 1e-12)."""

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.utils.validation import check_features
from onebit_dask.ops.kernels import residuals, weighted_label_sums

CLOSE = dict(rtol=1e-12, atol=1e-14)


@pytest.fixture(scope="module")
def observations():
    """Planted single-label observations with 70% of the features set to zero."""
    X, labels, y = SyntheticProblem(12, 9, 2, seed=2).draw_batches(range(4), 500, 1)
    rng = np.random.default_rng(0)
    X = np.where(rng.random(X.shape) < 0.3, X, 0).astype(np.float64)
    return X, labels, y


def test_check_features_keeps_csr():
    X = sp.random(5, 4, density=0.5, format="coo", random_state=0, dtype=np.float32)
    out = check_features(X)
    assert sp.issparse(out) and out.format == "csr" and out.dtype == np.float32
    assert check_features(sp.csr_matrix(np.eye(3, dtype=int))).dtype == np.float64
    bad = sp.csr_matrix(np.eye(3))
    bad.data[1] = np.inf
    with pytest.raises(ValueError, match=r"X\[1, 1\]=inf is not allowed: X must be finite"):
        check_features(bad)
    with pytest.raises(ValueError, match="X has 3 features, but the estimator was fitted with 4"):
        check_features(sp.csc_matrix(np.eye(3)), n_features=4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernels_equal_dense(observations, dtype):
    X, labels, y = observations
    X = X.astype(dtype)
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((12, 4)), rng.standard_normal((9, 4))
    r_dense = residuals(X, labels, y, A, B)
    r_sparse = residuals(sp.csr_matrix(X), labels, y, A, B)
    assert np.count_nonzero(r_dense != r_sparse) <= (0 if dtype == np.float64 else 2)
    rows = np.flatnonzero(r_dense)
    u1, S1 = weighted_label_sums(X, labels, r_dense, rows)
    u2, S2 = weighted_label_sums(sp.csr_matrix(X), labels, r_dense, rows)
    assert sp.issparse(S2)
    np.testing.assert_array_equal(u1, u2)
    np.testing.assert_allclose(S2.toarray(), S1, **CLOSE)


STEPS = ["averaged", "moment"]  # the residual steps (scores of every row) and the moment step


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("init_svd", ["dense", "randomized"])
def test_fit_equals_dense(observations, init_svd, step):
    """The paper's model: ``Q_`` itself equal (the thresholded model's randomised start
    is compared through ``W`` in its own test below)."""
    X, labels, y = observations
    params = dict(batch_size=500, n_iter=3, n_shards=3, init_svd=init_svd, random_state=1,
                  threshold="none", step=step, features="none")
    dense = OneBitMultiLabel(2, **params).fit(X, labels, y)
    sparse = OneBitMultiLabel(2, **params).fit(sp.csr_matrix(X), labels, y)
    np.testing.assert_allclose(sparse.Q_, dense.Q_, **CLOSE)
    assert [h["n_active"] for h in sparse.history_] == [h["n_active"] for h in dense.history_]
    X_new = sp.csr_matrix(X[:30])
    np.testing.assert_allclose(sparse.decision_function(X_new), dense.decision_function(X[:30]),
                               **CLOSE)
    np.testing.assert_array_equal(sparse.predict(X_new), dense.predict(X[:30]))
    np.testing.assert_array_equal(sparse.predict_top_k(X_new, 3)[0],
                                  dense.predict_top_k(X[:30], 3)[0])


@pytest.mark.parametrize("step", STEPS)
def test_label_matrix_and_partial_fit_equal_dense(observations, step):
    X, labels, y = observations
    Y = np.zeros((X.shape[0], 9), dtype=bool)
    Y[np.arange(X.shape[0]), labels] = y > 0
    params = dict(batch_size=400, n_iter=2, n_shards=2, random_state=3, step=step)
    dense = OneBitMultiLabel(2, **params).fit(X, Y)
    sparse = OneBitMultiLabel(2, **params).fit(sp.csr_matrix(X), sp.csr_matrix(Y))
    np.testing.assert_allclose(sparse.Q_, dense.Q_, **CLOSE)
    a, b = (OneBitMultiLabel(2, random_state=0, step=step) for _ in range(2))
    for lo in (0, 500, 1000):
        a.partial_fit(X[lo: lo + 500], labels[lo: lo + 500], y[lo: lo + 500], n_labels=9)
        b.partial_fit(sp.csr_matrix(X[lo: lo + 500]), labels[lo: lo + 500], y[lo: lo + 500],
                      n_labels=9)
    np.testing.assert_allclose(b.Q_, a.Q_, **CLOSE)


@pytest.mark.parametrize("step", STEPS)
def test_dask_equals_in_process(client2, observations, step):
    X, labels, y = observations
    X = sp.csr_matrix(X)
    params = dict(batch_size=500, n_iter=2, n_shards=3, random_state=1, step=step)
    local = OneBitMultiLabel(2, **params).fit(X, labels, y)
    with client2.as_current():
        on_dask = OneBitMultiLabel(2, engine="dask", **params).fit(X, labels, y)
    np.testing.assert_array_equal(local.Q_, on_dask.Q_)


def test_memory_follows_the_non_zeros():
    """200 000 features, 5 non-zeros a row: the dense X alone would be 480 MB."""
    n, d1, d2 = 300, 200_000, 5
    rng = np.random.default_rng(0)
    cols = rng.integers(0, d1, size=(n, 5))
    X = sp.csr_matrix((rng.standard_normal(n * 5), (np.repeat(np.arange(n), 5), cols.ravel())),
                      shape=(n, d1))
    Y = rng.random((n, d2)) < 0.3
    tracemalloc.start()
    try:
        est = OneBitMultiLabel(1, batch_size=600, n_iter=2, n_shards=2, random_state=0).fit(X, Y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert est.A_.shape == (d1, 2)
    assert peak < 60e6  # a few d1 x 8 float64 arrays (1.6 MB each) and their products


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("init_svd", ["dense", "randomized"])
def test_thresholded_fit_equals_dense(observations, init_svd, step):
    """With thresholds the basis ``Q_`` of the randomised initialisation is not unique (a
    repeated singular value: the two runs pick other bases of one subspace), so the
    estimate ``W`` is compared."""
    X, labels, y = observations
    params = dict(batch_size=500, n_iter=3, n_shards=3, init_svd=init_svd, random_state=1,
                  threshold="estimated", step=step, features="none")
    dense = OneBitMultiLabel(2, **params).fit(X, labels, y)
    sparse = OneBitMultiLabel(2, **params).fit(sp.csr_matrix(X), labels, y)
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=1e-12, atol=1e-13)
    assert [h["n_active"] for h in sparse.history_] == [h["n_active"] for h in dense.history_]
    np.testing.assert_allclose(sparse.decision_function(sp.csr_matrix(X[:20])),
                               dense.decision_function(X[:20]), rtol=1e-12, atol=1e-13)
