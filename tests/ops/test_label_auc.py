"""Each label's AUC (onebit_dask.ops.label_auc) equals the definition, bit for bit.

The definition: the fixed-order scores of ``tile_scores``, ranked with ties at their
average rank (``auc_rows``, which ranks tied rows with ``scipy.stats.rankdata``), i.e.
scikit-learn's ``roc_auc_score``; labels with one class get NaN. Both of
``label_aucs``' ways (counting against BLAS scores, sorting fixed-order scores) are
checked on models with exact ties and with scores that differ in their last bits."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import roc_auc_score

from onebit_dask.metrics import auc_rows
from onebit_dask.ops import mips
from onebit_dask.ops.label_auc import label_aucs
from tests.ops.test_mips import bits_equal, model

KINDS = ["plain", "dup", "grid", "zeros", "near", "fitted", "popular"]


def definition(Z, B, b, Y):
    S = mips.tile_scores(Z, B, b)
    return auc_rows(np.ascontiguousarray(Y.T.toarray() > 0), np.ascontiguousarray(S.T))


def labels_of(rng, n, d2):
    """0/1 test labels whose columns hold no positive, one, a few, many, or all."""
    share = rng.choice([0.0, 1.0 / n, 3.0 / n, 0.05, 0.5, 1.0], size=d2)
    Y = rng.random((n, d2)) < share
    Y[rng.integers(0, n, d2), np.arange(d2)] |= share == 1.0 / n
    return sp.csr_matrix(Y.astype(np.int8))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dim", [2, 41])
def test_label_aucs_are_the_definition_bit_for_bit(kind, dim):
    rng = np.random.default_rng(dim)
    B, b, Z = model(rng, 120, dim, 300, kind)
    Y = labels_of(rng, 300, 120)
    want = definition(Z, B, b, Y)
    for limit in (None, 0, 300):  # the default split, every label sorted, every counted
        assert bits_equal(label_aucs(Z, B, b, Y, limit=limit), want)
    assert bits_equal(label_aucs(Z, B, b, Y, tile_bytes=8), want)  # a label per tile
    assert bits_equal(label_aucs(Z, B, None, Y, limit=300), definition(Z, B, None, Y))


def test_the_hard_cases_are_exercised():
    """The grid model has tied scores within a label, and the near model BLAS scores
    that differ from the fixed-order ones: the rescoring of unsure rows is needed."""
    rng = np.random.default_rng(6)
    B, b, Z = model(rng, 120, 6, 300, "grid")
    S = mips.tile_scores(Z, B, b)
    assert (np.sort(S, axis=0)[1:] == np.sort(S, axis=0)[:-1]).any(axis=0).all()
    B, b, Z = model(rng, 120, 41, 300, "near")
    assert (Z @ B.T + b != mips.tile_scores(Z, B, b)).any()


def test_label_aucs_are_scikit_learns():
    rng = np.random.default_rng(1)
    B, b, Z = model(rng, 60, 6, 200, "plain")
    Y = labels_of(rng, 200, 60)
    got = label_aucs(Z, B, b, Y)
    S = Z @ B.T + b
    for j in range(60):
        y = Y[:, j].toarray().ravel()
        if 0 < y.sum() < y.size:
            assert got[j] == pytest.approx(roc_auc_score(y, S[:, j]), rel=1e-12)
        else:
            assert np.isnan(got[j])


def test_a_label_with_a_non_finite_score_gets_nan():
    rng = np.random.default_rng(2)
    B, b, Z = model(rng, 30, 6, 100, "plain")
    Y = labels_of(rng, 100, 30)
    B[3, 0] = np.nan
    got = label_aucs(Z, B, b, Y)
    assert np.isnan(got[3])
    finite = np.ones(30, dtype=bool)
    finite[3] = False
    assert bits_equal(got[finite], definition(Z, B, b, Y)[finite])
    Z[5, 1] = np.inf  # every label has a non-finite score
    assert np.isnan(label_aucs(Z, B, b, Y)).all()


def test_large_counts_duplicates_and_negative_entries():
    """A zero row of ``B`` over 70 000 rows (its rank sum passes 2**31), a positive
    stored twice, and ``-1`` entries (not positive): as the definition."""
    rng = np.random.default_rng(3)
    n = 70_000
    Z = rng.standard_normal((n, 2))
    B, b = np.array([[0.0, 0.0], [1.0, 0.5]]), np.array([0.3, 0.0])
    Y = np.zeros((n, 2), dtype=np.int8)
    Y[: n // 2] = 1
    Y[n // 2: n // 2 + 10, 1] = -1
    want = definition(Z, B, b, sp.csr_matrix(Y))
    assert want[0] == 0.5
    rows, cols = np.nonzero(Y > 0)
    doubled = sp.coo_matrix((np.ones(rows.size + 5, dtype=np.int8),
                             (np.r_[rows, rows[:5]], np.r_[cols, cols[:5]])), shape=(n, 2))
    c = sp.csc_matrix(Y)  # the same, in CSC with column 0's first 5 entries stored twice
    first = c.indices[: c.indptr[1]]
    twice = sp.csc_matrix((np.r_[c.data[: c.indptr[1]], c.data[:5], c.data[c.indptr[1]:]],
                           np.r_[first, first[:5], c.indices[c.indptr[1]:]],
                           [0, c.indptr[1] + 5, c.indptr[2] + 5]), shape=(n, 2))
    for labels in (sp.csr_matrix(Y), doubled, c, twice):
        assert bits_equal(label_aucs(Z, B, b, labels), want)
