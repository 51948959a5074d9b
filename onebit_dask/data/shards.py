r"""The shards of a batch: the two kinds the engines know, and what reads them.

A source (:mod:`onebit_dask.data.source`) cuts batch ``t`` into shards, small picklable
descriptors; each declares its :class:`ShardKind`, and the engines ask that, never what
attributes a shard happens to have:

* :attr:`ShardKind.LABEL_BLOCK`: the observations of one label block ``[lo, hi)``
  (synthetic problems, label matrices). The engine hands shard ``s`` to label block
  ``s``, whose task calls ``shard.activate(model, B_rows)`` where the block lives: the
  data are drawn (or read from the workers' copy) next to the block's rows of ``B``.
* :attr:`ShardKind.ROW_RANGE`: a range of rows whose labels fall anywhere (in-memory
  observations, observations stores). ``shard.load()`` returns ``(X, labels, y)``; the
  engine loads it once per step on a worker, :func:`active_sums` reads it once and
  every label block gets its :class:`Pieces`.

``step="select"`` also scores every bit of a batch with each branch's iterate
(:mod:`onebit_dask.progressive`): a label-block shard's ``shard.scored(model, B_rows)``,
or a row-range shard read by :func:`scored_bits`, whose bits every label block gets as
its :class:`ScoredPieces`; either way ``(labels, y, s)``.

Both end in the same thing per label block: an ``ActiveRows`` of per-label sums
``S_j = sum_i w_i x_i`` over the active rows (``w = y`` for the initial batch, the
residual ``r = y - sign(x_i^T A b_{j_i})`` for a step), in float64, and the number of
active rows. ``X`` may be a dense array (float32 or float64) or a ``scipy.sparse`` CSR
matrix; for CSR the sums stay sparse and the cost follows the batch's non-zeros.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np
import scipy.sparse

from .chunked_rows import ChunkedRows
from ..ops.kernels import (ActiveRows, aligned, bit_scores, label_mass, residuals,
                           weighted_label_sums)


class ShardKind(enum.Enum):
    """How the engines treat a shard (module docstring)."""

    LABEL_BLOCK = "label_block"
    ROW_RANGE = "row_range"


def row_bounds(n: int, parts: int) -> list[int]:
    """Boundaries of ``parts`` contiguous, nearly equal pieces of ``range(n)``."""
    return [p * n // parts for p in range(parts + 1)]


def n_row_batches(n: int, batch_size: int) -> int:
    """How many consecutive mini-batches of ``batch_size`` rows ``n`` rows hold."""
    return -(-n // min(batch_size, n))


def row_batch(n: int, t: int, batch_size: int) -> tuple[int, int]:
    """Rows ``[lo, hi)`` of batch ``t`` of ``n`` rows cut into consecutive mini-batches of
    ``batch_size`` (the last may be shorter), cycling over them."""
    size = min(batch_size, n)
    lo = (t % n_row_batches(n, batch_size)) * size
    return lo, min(lo + size, n)


def row_scaled(w, X):
    """``w_i x_i`` for the rows of ``X`` (dense, or CSR for sparse features)."""
    if scipy.sparse.issparse(X):
        return scipy.sparse.csr_matrix(X.multiply(np.asarray(w)[:, None]))
    return np.asarray(w)[:, None] * X


def rows_of_bits(X, rows):
    """``(X_b, at)`` with bit ``i``'s row ``X_b[at_i]`` (``at`` ``None``: row ``i``), for
    bits on the rows ``rows`` of ``X``: ``X`` itself and ``at = rows`` where the bits
    outnumber the rows (each row then read once, :func:`active_sums`; features in row
    chunks joined, fewer numbers than the gathered rows), else the gathered ``X[rows]``."""
    if rows.size <= X.shape[0]:
        return X[rows], None
    return (X.whole() if isinstance(X, ChunkedRows) else X), rows


def block_activation(bits, model, B_rows, lo: int, hi: int, b_rows=None):
    """``(ActiveRows, n_active)`` of one label block ``[lo, hi)`` whose shard holds the
    bits ``bits = (X, labels, y, at)`` (:func:`active_sums` of that block alone; ``at`` as
    there, from :func:`rows_of_bits`, or ``None``)."""
    X, labels, y, at = bits
    return active_sums(X, labels, y, model, [B_rows], [lo, hi],
                       None if b_rows is None else [b_rows], at)[0]


def block_scores(bits, model, B_rows, lo: int, hi: int):
    """``(labels, y, s)``: one label block's bits ``(X, labels, y, at)`` scored by the
    model without thresholds (:func:`scored_bits` of that block alone)."""
    X, labels, y, at = bits
    return scored_bits(X, labels, y, model, [B_rows], [lo, hi], at=at)[0]


def active_sums(X, labels, y, model, B_rows, bounds, b_rows=None, at=None) -> list:
    """One shard's share of every label block ``[bounds[s], bounds[s+1])``:
    ``[(ActiveRows, n_active)]``, one per block.

    Parameters
    ----------
    X : ndarray of shape (n, d1) or scipy.sparse CSR matrix
    labels : ndarray of int of shape (n,)
        Global label indices in ``[bounds[0], bounds[-1])``.
    y : ndarray of shape (n,)
        The bits, ``-1`` or ``+1``.
    model : StepModel
        ``model.A`` of shape ``(d1, l)``, or ``None`` for the initial batch (every row
        weighted by its bit); ``model.thresholds``: the thresholded model;
        ``model.features``: a :class:`~onebit_dask.features.FeatureMap` (or ``None``),
        through which the scores are computed and with which the sums are kept in
        homogeneous coordinates ``[S_j, sum_i w_i]``.
    B_rows : list of ndarray, or None
        The blocks' rows of ``B`` (``None`` for the initial batch).
    bounds : sequence of int
    b_rows : list of ndarray, or None
        The blocks' thresholds (``None`` for the paper's model): the scores are then
        ``x_i^T A b_{j_i} + b_{j_i}``.
    at : ndarray of int of shape (m,), optional
        Bit ``i``'s row is ``X[at_i]`` (``labels`` and ``y`` then have ``m`` entries):
        the scores and the sums read each row of ``X`` once
        (:func:`~onebit_dask.kernels.row_label_sums`), whatever the number of bits on it.

    Notes
    -----
    ``X`` is read once for the scores ``X A`` of all its rows, in its own dtype
    (:func:`onebit_dask.kernels.residuals`); then only the active rows are read again,
    into per-label sums in float64 (the products of a step depend on the rows only
    through these sums). No float64 copy of ``X``. With thresholds each piece also
    carries the batch's :class:`~onebit_dask.thresholds.LabelCounts`, and the initial
    batch's sums are kept apart for the positive and the negative bits (their weights
    ``y - sign(b_j)`` need the thresholds of the whole batch).
    """
    from ..ops import thresholds

    X, labels = aligned(X), aligned(np.asarray(labels))
    y = aligned(np.asarray(y))
    bounds = np.asarray(bounds)
    S_neg = None
    features = model.features
    if model.A is None and model.thresholds:
        uniq, S, S_neg = _signed_label_sums(X, labels, y, at)
        rows = None
        if features is not None:
            positive = np.asarray(y) > 0
            S = features.homogeneous(S, label_mass(uniq, labels[positive],
                                                   np.ones(positive.sum())))
            S_neg = features.homogeneous(S_neg, label_mass(uniq, labels[~positive],
                                                           np.ones((~positive).sum())))
    else:
        if model.A is None:
            weights, rows = np.asarray(y, dtype=np.float64), None
        else:
            b = None if b_rows is None else np.concatenate(b_rows)
            weights = residuals(X, labels, y, aligned(model.A), np.concatenate(B_rows),
                                bounds[0], b, features, at)
            rows = np.flatnonzero(weights)
        uniq, S = weighted_label_sums(X, labels, weights, rows, at)
        if features is not None:
            S = features.homogeneous(S, label_mass(
                uniq, *((labels, weights) if rows is None else (labels[rows], weights[rows]))))
    n_blocks = bounds.size - 1
    owner = np.searchsorted(bounds, labels, side="right") - 1
    n_obs = np.bincount(owner, minlength=n_blocks)
    n_active = n_obs if rows is None else np.bincount(owner[rows], minlength=n_blocks)
    cut = np.searchsorted(uniq, bounds)
    counts = None
    if model.thresholds:
        counts = thresholds.count_bits(labels, y, None if model.A is None else weights)
    count_cut = None if counts is None else np.searchsorted(counts.labels, bounds)
    pieces = []
    for s, (a, z) in enumerate(zip(cut[:-1], cut[1:])):
        part = None if counts is None else thresholds.LabelCounts(
            *(v[count_cut[s]: count_cut[s + 1]] for v in counts))
        pieces.append((ActiveRows(S[a:z], uniq[a:z], np.ones(z - a), int(n_obs[s]), counts=part,
                                  X_neg=None if S_neg is None else S_neg[a:z],
                                  features=features),
                       int(n_active[s])))
    return pieces


def scored_bits(X, labels, y, model, B_rows, bounds, b_rows=None, at=None) -> list:
    """One shard's bits scored by the current model, cut by label block: ``[(labels, y,
    s)]``, one per block ``[bounds[s], bounds[s+1])``, with ``s_i = x_i^T A B[j_i] +
    b[j_i]`` (:func:`~onebit_dask.kernels.bit_scores`; arguments as :func:`active_sums`,
    ``model.A`` not ``None``). What a block needs to score its labels' bits
    (:func:`onebit_dask.metrics.label_auc_sums`), whichever shard holds them."""
    X, labels = aligned(X), aligned(np.asarray(labels, dtype=np.int64))
    y = np.where(np.asarray(y) > 0, 1, -1)
    bounds = np.asarray(bounds)
    b = None if b_rows is None else np.concatenate(b_rows)
    s = bit_scores(X, labels, aligned(model.A), np.concatenate(B_rows), bounds[0], b,
                   model.features, at)
    owner = np.searchsorted(bounds, labels, side="right") - 1
    return [(labels[owner == k], y[owner == k], s[owner == k])
            for k in range(bounds.size - 1)]


class ScoredPieces(NamedTuple):
    """One label block's scored bits of the row-range shards of a batch (what
    :func:`scored_bits` gave it from each shard, in shard order)."""

    parts: list

    def scored(self, model, B_rows):
        """``(labels, y, s)`` of the block's bits (``model`` and ``B_rows`` were used when
        the shards were read, as in :meth:`Pieces.activate`)."""
        return tuple(np.concatenate([p[i] for p in self.parts]) for i in range(3))


def _signed_label_sums(X, labels, y, at=None):
    """``(uniq, S_pos, S_neg)``: per label, the sums of the rows of its positive and of its
    negative bits, in one pass (one key per label and sign); CSR sums for a CSR ``X``."""
    positive = np.asarray(y) > 0
    keys, S2 = weighted_label_sums(X, 2 * np.asarray(labels, dtype=np.int64) + positive,
                                   np.ones(labels.shape[0]), at=at)
    uniq = np.unique(keys // 2)
    row = np.searchsorted(uniq, keys // 2)  # each key's row of the sums
    sign = keys % 2 == 1
    if scipy.sparse.issparse(S2):
        def pick(chosen):
            where = np.flatnonzero(chosen)
            E = scipy.sparse.csr_matrix((np.ones(where.size), (row[where], where)),
                                        shape=(uniq.size, keys.size))
            return scipy.sparse.csr_matrix(E @ S2)
        return uniq, pick(sign), pick(~sign)
    S_pos, S_neg = np.zeros((uniq.size, X.shape[1])), np.zeros((uniq.size, X.shape[1]))
    S_pos[row[sign]] = S2[sign]
    S_neg[row[~sign]] = S2[~sign]
    return uniq, S_pos, S_neg


def merged_sums(parts):
    """One :class:`~onebit_dask.ops.kernels.ActiveRows` of the per-label sums of ``parts``
    (``ActiveRows`` of the same labels' block and model) added in the order given: one row
    per label of any part, the counts merged, the first part's ``exact`` kept."""
    from ..ops import thresholds

    if len(parts) == 1:
        return parts[0]
    uniq = np.unique(np.concatenate([a.labels for a in parts]))
    counts = None if parts[0].counts is None else thresholds.merge_counts(
        a.counts for a in parts)
    n_obs = sum(a.n_obs for a in parts)
    if scipy.sparse.issparse(parts[0].X):
        where = np.concatenate([np.searchsorted(uniq, a.labels) for a in parts])
        E = scipy.sparse.csr_matrix((np.ones(where.size), (where, np.arange(where.size))),
                                    shape=(uniq.size, where.size))
        S = scipy.sparse.csr_matrix(E @ scipy.sparse.vstack(
            [row_scaled(a.weights, a.X) for a in parts], format="csr"))
        S_neg = None if parts[0].X_neg is None else scipy.sparse.csr_matrix(
            E @ scipy.sparse.vstack([a.X_neg for a in parts], format="csr"))
    else:
        S = np.zeros((uniq.size, parts[0].X.shape[1]))
        S_neg = None if parts[0].X_neg is None else np.zeros_like(S)
        for a in parts:
            at = np.searchsorted(uniq, a.labels)
            S[at] += a.weights[:, None] * a.X
            if S_neg is not None:
                S_neg[at] += a.X_neg
    return ActiveRows(S, uniq, np.ones(uniq.size), n_obs, counts=counts,
                      X_neg=S_neg, features=parts[0].features, exact=parts[0].exact)


class Pieces(NamedTuple):
    """One label block's pieces of the row-range shards of a batch (what
    :func:`active_sums` gave it from each shard, in shard order)."""

    parts: list

    def activate(self, model, B_rows, b_rows=None):
        """``(ActiveRows, n_active)``: the pieces' per-label sums added in shard order
        (``model``, ``B_rows`` and ``b_rows`` were used when the shards were read)."""
        n_active = sum(n for _, n in self.parts)
        return merged_sums([a for a, _ in self.parts]), n_active
