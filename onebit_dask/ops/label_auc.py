r"""Each label's exact ROC AUC over held-out rows, from the fixed-order scores (no Dask
here).

Label ``j``'s scores on the rows ``i = 1..n`` are the fixed-order sums
:math:`\tilde s_{ij}` of :func:`~onebit_dask.ops.mips.tile_scores` (the package's
scores, the same bits in any tile). With :math:`P_j` positive and :math:`N_j = n - P_j`
negative rows,

.. math:: \mathrm{AUC}_j = \frac{R_j - P_j (P_j + 1)/2}{P_j N_j}, \qquad
          R_j = \sum_{i \,\text{positive}} \Big(L_{ij} + \frac{E_{ij} + 1}{2}\Big),

:math:`L_{ij}` the rows whose score is below :math:`\tilde s_{ij}` and :math:`E_{ij}`
those equal to it (``i`` included): :math:`R_j` is the positives' rank sum with ties at
their average rank, the Mann-Whitney statistic, which is scikit-learn's
``roc_auc_score`` (ties count 1/2). ``2 R_j`` is an integer, summed exactly, so both
ways below give the same bits. A label with one class gets NaN, and is not scored.

**Few positives: counting.** BLAS scores :math:`\hat s = Z B^T + b` (any summation
order) are within :math:`2 M_i` of the fixed-order ones (:func:`~onebit_dask.ops.mips.
margins`: each is within :math:`M_i` of the exact real score). For a positive of
fixed-order score :math:`v` (:func:`~onebit_dask.ops.mips.pair_scores`), a row with
:math:`\hat s_{ij} - v < -4 M_i` has :math:`\tilde s_{ij} < v`, one with
:math:`\hat s_{ij} - v > 4 M_i` has :math:`\tilde s_{ij} > v` (the margin's room
absorbs the rounding of the difference); the rows in between are rescored in the
fixed order and compared exactly. The result is the fixed-order definition's whatever
the BLAS kernel; the cost is a BLAS product of the label's row and about ``3 n``
comparisons a positive.

**Many positives: sorting.** The label's fixed-order scores (:func:`~onebit_dask.ops.
mips.tile_scores`, ``2 l`` element-wise passes over ``n`` scores) are sorted, and each
positive's :math:`L` and :math:`E` are two binary searches.

A label goes to counting when :math:`P_j \le` :func:`count_limit`: counting
costs about ``3 n P_j``, the fixed-order scores and the sort about ``n (2 l + log2 n)``.
A label whose row of ``B`` is zero has every score equal to ``b_j`` (finite ``Z``): its
AUC is 1/2, with nothing scored. A counted label whose unsure rows (summed over its
positives) outnumber the rows, as when many of its scores are equal, is sorted instead.
Rows or labels that are not finite, or too large for the margins
(:data:`~onebit_dask.ops.mips.HUGE`), go to sorting (a label with a non-finite score
gets NaN).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

from . import mips

GATHER = 2**21
"""Scores gathered at once for the counting (the positives' label rows, ``16 MiB``)."""


def count_limit(components: int) -> int:
    """The most positives a label may have to be counted (:func:`label_aucs`) with
    ``components`` numbers a score (``l``)."""
    return max(8, components)


def label_aucs(Z: np.ndarray, B: np.ndarray, b, Y, *, tile_bytes: int = 64 * 2**20,
               limit: int | None = None) -> np.ndarray:
    r"""The ROC AUC of each label's fixed-order scores against its test labels (module
    docstring); NaN where the label has one class or a non-finite score.

    Parameters
    ----------
    Z : ndarray of shape (n, l)
        The test rows' ``X A``.
    B : ndarray of shape (p, l)
        The labels' rows of ``B``.
    b : ndarray of shape (p,) or None
        The labels' thresholds.
    Y : scipy.sparse matrix of shape (n, p)
        The test labels (above 0: positive).
    tile_bytes : int
        Bytes of scores held at once (a tile of labels x ``n``; at least one label).
    limit : int, optional
        The most positives a label may have to be counted (default
        :func:`count_limit` of ``l``; ``0``: sort every label).

    Returns
    -------
    ndarray of shape (p,)
    """
    Z = np.ascontiguousarray(Z, dtype=np.float64)
    n, components = Z.shape
    Yt = scipy.sparse.csr_matrix(Y.T > 0)
    Yt.sum_duplicates()
    Yt.eliminate_zeros()
    P = np.diff(Yt.indptr).astype(np.int64)
    both = (P > 0) & (P < n)
    twice_rank = np.zeros(B.shape[0], dtype=np.int64)
    finite = np.ones(B.shape[0], dtype=bool)
    width = max(1, tile_bytes // (8 * max(n, 1)))
    limit = count_limit(components) if limit is None else limit
    with np.errstate(over="ignore", invalid="ignore"):
        rho = mips.row_norm_max(B, b)
        safe = bool(np.isfinite(Z).all() and np.isfinite(rho)
                    and (mips.query_norms(Z) * rho <= mips.HUGE).all())
    none = np.zeros_like(both)
    flat = both & ~B.any(axis=1) if safe else none  # every score b_j, every rank (n + 1)/2
    twice_rank[flat] = P[flat] * (n + 1)
    left = both & ~flat
    counted = left & (P <= limit) if safe else none
    if counted.any():
        M = 4.0 * mips.margins(Z, rho)
        labels = np.flatnonzero(counted)
        for a in range(0, labels.size, width):
            at = labels[a: a + width]
            twice_rank[at], tied = _counted(Z, B, b, Yt, at, M)
            counted[at[tied]] = False
    labels = np.flatnonzero(left & ~counted)
    for a in range(0, labels.size, width):
        at = labels[a: a + width]
        twice_rank[at], finite[at] = _sorted(Z, B, b, Yt, at)
    P = P.astype(np.float64)
    u = twice_rank / 2.0 - P * (P + 1) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(both & finite, u / (P * (n - P)), np.nan)


def _counted(Z, B, b, Yt, labels, M):
    """``(2 R_j, tied)`` of the ``labels`` by counting against BLAS scores (module
    docstring); ``tied``: the labels whose unsure pairs outnumber the rows (many equal
    scores, as a zero row of ``B`` gives), left to :func:`_sorted` (their ``2 R_j`` is
    0 here)."""
    n = Z.shape[0]
    S = B[labels] @ Z.T  # (labels, n) BLAS scores
    if b is not None:
        S += b[labels, None]
    sub = Yt[labels]
    starts = sub.indptr
    owner = np.repeat(np.arange(labels.size), np.diff(starts))
    v = mips.pair_scores(Z, B, b, sub.indices, labels[owner])
    twice = np.zeros(owner.size, dtype=np.int64)
    tied = np.zeros(labels.size, dtype=bool)
    chunk = max(1, GATHER // max(n, 1))
    g = 0
    while g < labels.size:  # whole labels at a time, about `chunk` positives
        h = max(g + 1, int(np.searchsorted(starts, starts[g] + chunk, side="right")) - 1)
        c, e = starts[g], starts[h]
        D = S[owner[c:e]]
        D -= v[c:e, None]  # the BLAS scores less the positive's
        below = D < -M
        np.abs(D, out=D)
        unsure = D <= M  # rescored
        per_label = np.bincount(owner[c:e] - g, weights=unsure.sum(axis=1), minlength=h - g)
        tied[g:h] = per_label > n
        unsure[tied[owner[c:e]]] = False
        ai, ar = np.nonzero(unsure)
        exact = mips.pair_scores(Z, B, b, ar, labels[owner[c + ai]])
        at = v[c + ai]
        less = below.sum(axis=1) + np.bincount(ai, weights=exact < at, minlength=e - c)
        equal = np.bincount(ai, weights=exact == at, minlength=e - c)
        twice[c:e] = 2 * less.astype(np.int64) + equal.astype(np.int64) + 1
        g = h
    twice[tied[owner]] = 0
    return np.bincount(owner, weights=twice, minlength=labels.size).astype(np.int64), tied


def _sorted(Z, B, b, Yt, labels):
    """``(2 R_j, finite)`` of the ``labels`` by sorting their fixed-order scores."""
    S = np.ascontiguousarray(mips.tile_scores(Z, B[labels],
                                              None if b is None else b[labels]).T)
    twice = np.zeros(labels.size, dtype=np.int64)
    finite = np.isfinite(S).all(axis=1)
    for t, j in enumerate(labels.tolist()):
        if finite[t]:
            ordered = np.sort(S[t])
            v = S[t, Yt.indices[Yt.indptr[j]: Yt.indptr[j + 1]]]
            lo = np.searchsorted(ordered, v, side="left")
            hi = np.searchsorted(ordered, v, side="right")
            twice[t] = int((lo + hi + 1).sum())
    return twice, finite
