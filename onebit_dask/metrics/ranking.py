"""Held-out ranking metrics of multi-label predictions: precision@k, nDCG@k, PSP@k.

The definitions are those of the Extreme Classification Repository (and of its
evaluation code, pyxclib's ``xclib/evaluation/xc_metrics.py``). For ``n`` test rows
with positive label sets ``P_i`` and predicted labels ``t_i1, t_i2, ...`` (best
first), with ``h_ij = 1[t_ij in P_i]``:

* ``P@k = (1/n) sum_i (1/k) sum_{j<=k} h_ij``
* ``nDCG@k = (1/n) sum_i DCG_i@k / IDCG_i@k`` with ``DCG_i@k = sum_{j<=k} h_ij / log2(j+1)``
  and ``IDCG_i@k = sum_{j<=min(k, |P_i|)} 1 / log2(j+1)``
* ``PSP@k = sum_i sum_{j<=k} h_ij / p_{t_ij}  /  sum_i max_{|S|<=k, S in P_i} sum_{l in S} 1/p_l``,
  the propensity-scored precision divided by the best one achievable with ``k``
  predictions (pyxclib's ``psprecision``: a ratio of the two means over the rows).

Rows with no positive label count as zero in ``P@k`` and ``nDCG@k`` (they stay in
the mean ``1/n``, as pyxclib does and as scikit-learn's ``ndcg_score`` does) and add
zero to both sums of ``PSP@k``.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

from ..utils.checks import check_float, check_int
from .names import RANKING_KS


def _positives(Y_true) -> sp.csr_matrix:
    """``Y_true`` (dense or sparse 0/1) as a canonical CSR matrix of ones."""
    Y = sp.csr_matrix(Y_true) if sp.issparse(Y_true) else sp.csr_matrix(np.asarray(Y_true))
    if Y.ndim != 2:
        raise ValueError(f"Y_true has shape {Y.shape}: it must be (n, d2)")
    Y.sum_duplicates()
    Y.eliminate_zeros()
    if Y.nnz and not np.all(Y.data == 1):
        value = Y.data[Y.data != 1][0]
        raise ValueError(f"Y_true holds the value {value!r}: Y_true must be a 0/1 indicator "
                         "matrix")
    return Y


def _top(top_labels, n: int, d2: int, k: int) -> np.ndarray:
    """The first ``k`` columns of ``top_labels``, checked."""
    top = np.asarray(top_labels)
    if top.ndim != 2 or top.shape[0] != n:
        raise ValueError(f"top_labels has shape {top.shape}: it must be (n, k) with n = {n} "
                         "rows (one per row of Y_true)")
    if not np.issubdtype(top.dtype, np.integer):
        raise TypeError(f"top_labels has dtype {top.dtype}: it must hold integer labels")
    if top.shape[1] < k:
        raise ValueError(f"k={k} is not allowed: top_labels has {top.shape[1]} columns; give "
                         f"k <= {top.shape[1]} or predict more labels")
    top = top[:, :k].astype(np.int64)
    if top.size and (top.min() < 0 or top.max() >= d2):
        bad = top[(top < 0) | (top >= d2)][0]
        raise ValueError(f"top_labels holds the label {bad}: labels are in 0..{d2 - 1}")
    ordered = np.sort(top, axis=1)
    if (ordered[:, 1:] == ordered[:, :-1]).any():
        row = int(np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))[0])
        raise ValueError(f"top_labels row {row} repeats a label ({top[row].tolist()}): each "
                         "row must list distinct labels")
    return top


def _check_k(k) -> int:
    return check_int("k", k, low=1)


def _hits(Y: sp.csr_matrix, top: np.ndarray) -> np.ndarray:
    """``h_ij = 1[top[i, j] in P_i]`` as a boolean ``(n, k)`` array."""
    n, d2 = Y.shape
    keys = np.repeat(np.arange(n, dtype=np.int64), np.diff(Y.indptr)) * d2 + Y.indices
    query = (np.arange(n, dtype=np.int64)[:, None] * d2 + top).ravel()
    at = np.minimum(np.searchsorted(keys, query), max(keys.size - 1, 0))
    found = keys[at] == query if keys.size else np.zeros(query.size, dtype=bool)
    return found.reshape(top.shape)


def _discounts(k: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, k + 2))


def precision_at_k(Y_true, top_labels, k: int) -> float:
    """Precision@k: the mean over rows of the fraction of the top ``k`` labels that are
    positive.

    Parameters
    ----------
    Y_true : array-like or sparse matrix of shape (n, d2), 0/1
    top_labels : array-like of int of shape (n, K), K >= k
        Predicted labels, best first (as :meth:`OneBitMultiLabel.predict_top_k`).
    k : int

    Returns
    -------
    float
        ``(1/n) sum_i (1/k) sum_{j<=k} 1[top_labels[i, j] in P_i]``.
    """
    k = _check_k(k)
    Y = _positives(Y_true)
    return float(_hits(Y, _top(top_labels, *Y.shape, k)).sum() / (k * Y.shape[0]))


def ndcg_at_k(Y_true, top_labels, k: int) -> float:
    """nDCG@k with binary relevance, as the Extreme Classification Repository defines it.

    ``DCG_i@k = sum_{j<=k} h_ij / log2(j + 1)`` over the top ``k`` predictions, divided by
    the ideal ``sum_{j<=min(k, |P_i|)} 1 / log2(j + 1)``; a row with no positive label
    scores 0 and stays in the mean. This equals scikit-learn's
    ``ndcg_score(Y_true, s, k=k)`` for scores ``s`` that rank ``top_labels[i, :k]``
    first, in that order, above every other label (scikit-learn ranks all ``d2`` labels
    by their scores and averages ties, which this function, given only the top labels,
    does not need).

    Parameters
    ----------
    Y_true : array-like or sparse matrix of shape (n, d2), 0/1
    top_labels : array-like of int of shape (n, K), K >= k
    k : int

    Returns
    -------
    float
    """
    k = _check_k(k)
    Y = _positives(Y_true)
    hits = _hits(Y, _top(top_labels, *Y.shape, k))
    discounts = _discounts(k)
    dcg = hits @ discounts
    ideal = np.concatenate([[0.0], np.cumsum(discounts)])[np.minimum(np.diff(Y.indptr), k)]
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(np.where(ideal > 0, dcg / ideal, 0.0).mean())


def propensities(Y_train, A: float = 0.55, B: float = 1.5) -> np.ndarray:
    """Label propensities of Jain, Prabhu and Varma (2016) from the training labels.

    ``p_l = 1 / (1 + C (N_l + B)^(-A))`` with ``C = (log N - 1) (B + 1)^A``, where ``N``
    is the number of training rows and ``N_l`` the number of them with label ``l``.
    ``A = 0.55, B = 1.5`` are the paper's default (0.5, 0.4 for Wikipedia; 0.6, 2.6 for
    Amazon). A label seen rarely has a small propensity (``p_l -> 1 / (1 + C B^-A)``),
    a frequent one a propensity near 1.

    Parameters
    ----------
    Y_train : array-like or sparse matrix of shape (N, d2), 0/1
    A, B : float

    Returns
    -------
    ndarray of shape (d2,)
    """
    A = check_float("A", A, low=0.0)
    B = check_float("B", B, low=0.0)
    Y = _positives(Y_train)
    N = Y.shape[0]
    if N < 1:
        raise ValueError("Y_train has no rows: propensities need the training labels")
    counts = np.bincount(Y.indices, minlength=Y.shape[1]).astype(np.float64)
    C = (np.log(N) - 1.0) * (B + 1.0) ** A
    return 1.0 / (1.0 + C * (counts + B) ** -A)


def psp_at_k(Y_true, top_labels, propensities, k: int) -> float:
    """Propensity-scored precision@k, normalised as the Extreme Classification
    Repository reports it.

    ``PSP@k = sum_i sum_{j<=k} h_ij / p_{t_ij}  /  sum_i sum_{l in B_i} 1 / p_l``, where
    ``B_i`` holds the (at most ``k``) positive labels of row ``i`` with the smallest
    propensities: the propensity-scored precision of the predictions divided by the
    best one achievable (pyxclib's ``psprecision``, a ratio of two means over the
    rows; rows with no positive label add zero to both). 1 for a perfect ranking.

    Parameters
    ----------
    Y_true : array-like or sparse matrix of shape (n, d2), 0/1
    top_labels : array-like of int of shape (n, K), K >= k
    propensities : array-like of shape (d2,)
        From :func:`propensities` on the training labels.
    k : int

    Returns
    -------
    float
        NaN when no row has a positive label.
    """
    k = _check_k(k)
    Y = _positives(Y_true)
    top = _top(top_labels, *Y.shape, k)
    p = np.asarray(propensities, dtype=np.float64)
    if p.shape != (Y.shape[1],) or not (np.isfinite(p).all() and (p > 0).all()):
        raise ValueError(f"propensities has shape {p.shape}: it must be ({Y.shape[1]},) "
                         "(one per label) with finite values > 0")
    weights = 1.0 / p
    gained = float((_hits(Y, top) * weights[top]).sum())
    rows = np.repeat(np.arange(Y.shape[0]), np.diff(Y.indptr))
    w = weights[Y.indices]
    order = np.lexsort((-w, rows))  # by row, then largest weight first
    rank = np.arange(order.size) - Y.indptr[rows[order]]
    best = float(w[order][rank < k].sum())
    return gained / best if best > 0 else float("nan")


def top_k_metrics(Y_true, top_labels, propensities=None, ks=RANKING_KS) -> dict:
    """Precision@k, nDCG@k and (with propensities) PSP@k for each ``k`` in ``ks``.

    Parameters
    ----------
    Y_true : array-like or sparse matrix of shape (n, d2), 0/1
    top_labels : array-like of int of shape (n, K), K >= max(ks)
    propensities : array-like of shape (d2,), optional
        From :func:`propensities` on the training labels; without them no ``psp_at_k``.
    ks : sequence of int, default (1, 3, 5)
        :data:`onebit_dask.metric_names.RANKING_KS`.

    Returns
    -------
    dict
        ``{"precision_at_1": ..., "precision_at_3": ..., ..., "ndcg_at_5": ...,
        "psp_at_1": ..., ...}`` (floats; keys in that order).
    """
    if isinstance(ks, numbers.Integral) or len(ks) == 0:
        raise ValueError(f"ks={ks!r} is not allowed: give a non-empty sequence of k >= 1")
    ks = [check_int("k", k, low=1) for k in ks]
    Y = _positives(Y_true)
    top = _top(top_labels, *Y.shape, max(ks))
    out = {f"precision_at_{k}": precision_at_k(Y, top, k) for k in ks}
    out.update({f"ndcg_at_{k}": ndcg_at_k(Y, top, k) for k in ks})
    if propensities is not None:
        out.update({f"psp_at_{k}": psp_at_k(Y, top, propensities, k) for k in ks})
    return out
