"""Kernels against a dense NumPy construction of H, W and the dilation."""

import numpy as np
import pytest

from onebit_dask.ops.kernels import LAMBDA, column_norms, scatter_rows
from onebit_dask.fit.steps import RULES, is_moment_step, pools_after, step_size

D1, D2, L = 7, 5, 4


def test_lemma1_expectation_of_sign_times_x():
    """E[sign(x^T w) x] = sqrt(2/pi) w for x ~ N(0, I) and a unit w (Monte Carlo)."""
    rng = np.random.default_rng(11)
    d, n = 6, 400_000
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    X = rng.standard_normal((n, d))
    mean = (np.where(X @ w >= 0, 1.0, -1.0)[:, None] * X).mean(axis=0)
    # each coordinate has variance <= 1, so its standard error is <= 1/sqrt(n)
    assert np.abs(mean - LAMBDA * w).max() < 5 / np.sqrt(n)
    assert LAMBDA == pytest.approx(np.sqrt(2 / np.pi))


def test_column_norms_are_those_of_w():
    rng = np.random.default_rng(2)
    Q = rng.standard_normal((D1 + D2, L))
    V = rng.standard_normal((D1 + D2, L))
    W = Q[:D1] @ V[D1:].T
    np.testing.assert_allclose(column_norms(Q[:D1], V[D1:]), np.linalg.norm(W, axis=0),
                               rtol=1e-12)


def test_scatter_rows_matches_add_at():
    rng = np.random.default_rng(6)
    labels = rng.integers(0, 50, 400)
    rows = rng.standard_normal((400, 3))
    ref = np.zeros((50, 3))
    np.add.at(ref, labels, rows)
    uniq, sums = scatter_rows(labels, rows)
    np.testing.assert_allclose(sums, ref[uniq], rtol=1e-12)
    assert set(uniq) == set(labels)


def test_scatter_rows_adds_the_weighted_rows_in_row_order():
    # the sums are those of a loop over the rows in order, to the bit (float64, from
    # zero), whatever the rows' dtype: shard results do not depend on the summation's plan
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 20, 3000)
    weights = rng.choice([-1.0, 0.0, 1.0], 3000) * rng.random(3000)
    for rows in (rng.standard_normal((3000, 4)), rng.standard_normal((3000, 4)).astype(np.float32)):
        ref = np.zeros((20, 4))
        for label, weight, row in zip(labels, weights, rows.astype(np.float64)):
            ref[label] += weight * row
        uniq, sums = scatter_rows(labels, rows, weights)
        np.testing.assert_array_equal(uniq, np.unique(labels))
        assert sums.dtype == np.float64 and sums.tobytes() == ref[uniq].tobytes()


def test_step_size_rules():
    assert [step_size("paper", t) for t in range(6)] == [1.0] * 6
    assert [step_size("averaged", t) for t in range(6)] == [1.0, 1.0, 1.0, 0.5, 1 / 3, 0.25]
    for rule in ("harmonic", "moment", "refine"):
        assert [step_size(rule, t) for t in range(3)] == [1 / 2, 1 / 3, 1 / 4]


def test_refine_takes_pooled_steps_for_the_first_half():
    pooled = [RULES["refine"].pooled(t, 5) for t in range(5)]
    assert pooled == [True, True, False, False, False]
    assert not any(is_moment_step("refine", t, 5) for t in range(5))
    assert all(is_moment_step("moment", t, 5) for t in range(5))
    assert not any(is_moment_step(rule, t, 5) for rule in ("paper", "averaged", "harmonic")
                   for t in range(5))
    # the blocks keep their pools while a step to come pools, a branch's included
    assert [pools_after("refine", t, 5) for t in range(6)] == [True, True, False, False,
                                                               False, False]
    assert all(pools_after("select", t, 5) for t in range(5))
    assert not pools_after("select", 5, 5) and not RULES["moment"].keeps_pool


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_weighted_label_sums_match_add_at(monkeypatch, dtype):
    from onebit_dask.ops import kernels

    monkeypatch.setattr(kernels, "SUM_BYTES", 8 * 9 * 37)  # blocks of 37 rows
    rng = np.random.default_rng(8)
    X = rng.standard_normal((500, 9)).astype(dtype)
    labels = rng.integers(0, 40, 500)
    r = rng.choice([-2.0, 0.0, 2.0], 500)
    for rows, w in ((None, np.sign(r) + (r == 0)), (np.flatnonzero(r), r)):
        uniq, S = kernels.weighted_label_sums(X, labels, w, rows)
        keep = np.arange(500) if rows is None else rows
        ref = np.zeros((40, 9))
        np.add.at(ref, labels[keep], w[keep, None] * X[keep].astype(np.float64))
        assert S.dtype == np.float64
        np.testing.assert_array_equal(uniq, np.unique(labels[keep]))
        np.testing.assert_allclose(S, ref[uniq], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense X", "CSR X"])
@pytest.mark.parametrize("m", [60, 4000], ids=["C sparse", "C dense"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_label_sums_equal_the_sums_of_the_gathered_rows(sparse, m, dtype):
    """weighted_label_sums(X, ..., at) by row of X equals the sums over the gathered rows
    X[at] to float64 rounding, for the bits with a weight; sparse X gives CSR sums."""
    import scipy.sparse as sp

    from onebit_dask.ops.kernels import weighted_label_sums

    rng = np.random.default_rng(m)
    n, d1 = 50, 20
    X = rng.standard_normal((n, d1)).astype(dtype)
    if sparse:
        X = sp.csr_matrix(np.where(rng.random((n, d1)) < 0.3, X, 0))
    at, labels = rng.integers(0, n, m), rng.integers(3, 11, m)
    weights, rows = rng.choice([-2.0, 2.0], m), np.flatnonzero(rng.random(m) < 0.4)
    dense = X.toarray() if sparse else X
    expected = np.zeros((11, d1))
    np.add.at(expected, labels[rows], weights[rows, None] * dense[at[rows]].astype(np.float64))
    uniq, S = weighted_label_sums(X, labels, weights, rows, at)
    assert sp.issparse(S) == sparse
    np.testing.assert_array_equal(uniq, np.unique(labels[rows]))
    np.testing.assert_allclose(S.toarray() if sparse else S, expected[uniq], rtol=0, atol=1e-12)
