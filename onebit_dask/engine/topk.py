r"""Streamed top-``k`` prediction: each row's ``k`` best labels, in memory bounded by a tile.

The score of row ``i`` for label ``j`` is ``s_ij = (X A)_i^T B_j + b_j`` (``b_j``: the
label's threshold, ``docs/ALGORITHM.md`` section 9; none for the paper's model). The
``n x d2`` score matrix is never formed: :func:`predict_top_k` cuts the rows into chunks
and runs one task per (row chunk, label block) where the block lives (:func:`top_k`);
the client merges the blocks' ``rows x k`` candidates (:func:`best_k`) into an
``(n, k)`` result.

A task does not score every label of its block: it searches the block's label index
(:mod:`onebit_dask.ops.mips`: the rows ``[B_j, b_j]`` clustered into leaves with bounds
on their scores, bitwise-equal rows collapsed), BLAS-scores only the leaves that can
hold a top-``k`` label, and rescores the candidates within a rounding margin of the
``k``-th score in the fixed order of :func:`tile_scores`. Where the index cannot prune
(high rank, ``k`` close to the block's labels) it screens the block by cache-sized BLAS
tiles instead (:func:`~onebit_dask.ops.mips.screen_top_k`), with the same rescoring. The
index is built at the block's first top-``k`` where the block lives, and kept while the
block holds the same ``B`` and ``b`` arrays (:func:`label_index`: a step, a commit or a
restored state gives new arrays, hence a new index; never a stale one). It is not part
of the model store: a loaded model rebuilds it at its first top-``k``. A block whose
rows are not finite is scored tile by tile (:func:`tiled_top_k`, every label).

The order is: highest score first, ties to the smaller label, i.e. exactly
``np.argsort(-S, axis=1, kind="stable")[:, :k]`` of the full score matrix ``S`` of
:func:`tile_scores`, whatever the chunks, the blocks, the engine or the BLAS kernel,
because

1. every score has the same bits whatever the tile it is computed in
   (:func:`tile_scores` adds the ``l`` products in a fixed order; a BLAS product's
   summation order depends on the operands' shapes);
2. the index and the screen only prune: a label they drop is proved (by bounds widened
   by a rounding margin, :mod:`onebit_dask.ops.mips`) to score below the ``k``-th
   fixed-order score, every label tied with it is kept, and every returned score is the
   fixed-order one; each tile's selection of :func:`tiled_top_k` is exact with ties
   (:func:`select`);
3. the order (score, then label) is total, so the best ``k`` of a union are the best
   ``k`` of the parts' best ``k``.

Pure NumPy: the engine that runs :func:`top_k` on the blocks is passed in.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from ..ops import mips
from ..ops.mips import tile_scores

SCORE_BUDGET = 64 * 2**20
"""Bytes of float64 scores a prediction task holds at once (a tile of ``rows x width``
scores, ``rows x width x 8 <= SCORE_BUDGET`` unless one row of a block is larger). A
task's working memory is about 1.2 times this (the tile, then either the partition of an
eighth of its rows or its selection's mask), plus its label block and its ``rows x k``
results. With a label index a task holds far less: the bounds of a tile of rows
(:func:`onebit_dask.ops.mips.top_k`'s ``tile_bytes``) and a few candidates a row."""

CHUNK_ROWS = 4096
"""Rows per task at least (read at the call): a task searches its block's index for this
many rows at a time, and holds its ``rows x k`` results and ``rows x l`` products."""

LEAF_SIZE = 256
"""Labels per leaf of a block's index (read at the call;
:func:`~onebit_dask.ops.mips.build_index`)."""


def tile_shape(n_rows: int, widest: int, budget: int) -> tuple[int, int]:
    """``(rows, width)``: rows per task, so that ``rows`` rows of the ``widest`` block
    fit ``budget`` bytes of scores (at least one row, at most ``n_rows``), and labels per
    tile (at least one), so that ``rows x width x 8 <= budget``."""
    rows = max(1, min(n_rows, budget // (8 * max(widest, 1))))
    return rows, max(1, budget // (8 * rows))


def select(S: np.ndarray, k: int) -> np.ndarray:
    """The columns of each row's ``k`` highest scores, ties to the smaller column: an
    ``(n, k)`` array, each row's columns in increasing order (not by score).

    Each row's ``k``-th highest score ``t`` is found by a partition (an eighth of the
    rows at a time); the row keeps its scores above ``t`` and, of those equal to ``t``,
    the leftmost ones up to ``k`` in all.
    """
    n, w = S.shape
    if n == 0 or k >= w:
        return np.broadcast_to(np.arange(w), (n, w))
    group = max(1, -(-n // 8))
    t = np.empty((n, 1))
    for r in range(0, n, group):  # one partitioned copy alive at a time
        t[r: r + group, 0] = np.partition(S[r: r + group], w - k, axis=1)[:, w - k]
    keep = S >= t
    over = np.flatnonzero(keep.sum(axis=1) > k)  # rows with ties at t
    for r in range(0, over.size, group):
        rows = over[r: r + group]
        sub, tr = S[rows], t[rows]
        above = sub > tr
        equal = sub == tr
        room = k - above.sum(axis=1, keepdims=True)
        keep[rows] = above | (equal & (np.cumsum(equal, axis=1, dtype=np.int32) <= room))
    return np.nonzero(keep)[1].reshape(n, k)


def best_k(labels: np.ndarray, scores: np.ndarray, k: int):
    """Per row, the ``k`` best candidates (highest score, then smallest label), best first.

    Parameters
    ----------
    labels : ndarray of shape (n, c), int
        Each row's candidate labels, distinct within a row.
    scores : ndarray of shape (n, c)
    k : int

    Returns
    -------
    labels, scores : ndarray of shape (n, min(k, c))
    """
    order = np.argsort(labels, axis=1, kind="stable")
    labels, scores = (np.take_along_axis(a, order, axis=1) for a in (labels, scores))
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(labels, order, axis=1), np.take_along_axis(scores, order, axis=1)


def no_candidates(n: int):
    """The running best of ``n`` rows before any tile: ``(n, 0)`` labels and scores."""
    return np.empty((n, 0), dtype=np.int64), np.empty((n, 0))


def add_tile(best, S: np.ndarray, first: int, k: int):
    """The running best ``(labels, scores)`` merged with a tile's scores ``S`` of the
    labels ``first, first + 1, ...``; each row keeps ``min(k, candidates)``."""
    cols = select(S, min(k, S.shape[1]))
    labels, scores = best
    return best_k(np.hstack([labels, cols + first]),
                  np.hstack([scores, np.take_along_axis(S, cols, axis=1)]), k)


_INDEXES: dict = {}
"""``id(B) -> (weakref(B), weakref(b) or None, leaf_size, index)``: this process's label
indexes, each dropped with its ``B`` array."""

_LOCK = threading.Lock()


_FLOORED: dict = {}
"""``id(b) -> (weakref(b), (scale, floor), max(scale b, floor))``: the thresholds scaled
and with a floor, one array per block's ``b``, scale and floor, so that the row chunks of
one top-``k`` find one label index (:func:`label_index` keys on the arrays' identity);
each dropped with its ``b``."""


def floored(b: np.ndarray, floor: float | None, scale: float | None = None) -> np.ndarray:
    """``max(scale b, floor)`` (``None``: no floor, a scale of 1), the same array for the
    same ``b`` array, scale and floor."""
    key = (scale, floor)
    with _LOCK:
        hit = _FLOORED.get(id(b))
        if hit is not None and hit[0]() is b and hit[1] == key:
            return hit[2]
        out = b if scale is None else scale * b
        out = out if floor is None else np.maximum(out, floor)
        _FLOORED[id(b)] = (weakref.ref(b), key, out)
        weakref.finalize(b, _FLOORED.pop, id(b), None)
        return out


def label_index(B_rows: np.ndarray, b, leaf_size: int):
    """The label index of a block's rows ``B_rows`` and thresholds ``b`` (``None``: none),
    built at the first call and kept while these very arrays live (it is found by their
    identity, so a block whose ``B`` or ``b`` was replaced gets a new one; block functions
    never modify an array in place); ``None`` if the rows cannot be indexed (not finite).
    One build at a time in a process (a worker's threads may ask for the same block)."""
    with _LOCK:
        hit = _INDEXES.get(id(B_rows))
        if (hit is not None and hit[0]() is B_rows and hit[2] == leaf_size
                and (None if hit[1] is None else hit[1]()) is b):
            return hit[3]
        try:
            index = mips.build_index(B_rows, b, leaf_size=leaf_size,
                                     min_leaf=max(1, leaf_size // 8))
        except ValueError:
            index = None
        _INDEXES[id(B_rows)] = (weakref.ref(B_rows), None if b is None else weakref.ref(b),
                                leaf_size, index)
        weakref.finalize(B_rows, _INDEXES.pop, id(B_rows), None)
        return index


def tiled_top_k(B_rows: np.ndarray, b, lo: int, XA: np.ndarray, k: int, width: int):
    """Per row the ``k`` best of the labels ``lo, lo + 1, ...`` of ``B_rows`` (thresholds
    ``b``), best first: every label scored, ``n x width`` scores at a time
    (:func:`tile_scores`, :func:`add_tile`)."""
    best = no_candidates(XA.shape[0])
    for a in range(0, B_rows.shape[0], width):  # one tile alive at a time
        best = add_tile(best, tile_scores(XA, B_rows[a: a + width],
                                          None if b is None else b[a: a + width]),
                        lo + a, k)
    return best


def top_k(block, XA: np.ndarray, k: int, width: int, rows: int | None = None,
          leaf_size: int | None = None, floor: float | None = None,
          scale: float | None = None):
    """Block function: ``out = (labels, scores)``, each ``(n, min(k, hi - lo))``, per row
    the block's ``k`` best labels by score (:func:`tile_scores`, with the block's
    thresholds, slot ``"b"``, if it has them), best first.

    Through the block's label index (:func:`label_index`,
    :func:`onebit_dask.ops.mips.top_k`) when ``leaf_size`` is given and the rows can be
    indexed (rows with a non-finite entry are then sorted as the definition says, by a
    stable argsort of their scores, a bounded tile of rows at a time); otherwise by
    :func:`tiled_top_k` (``rows x width`` scores at a time).

    Parameters
    ----------
    block : onebit_dask.engine.blocks.Block
        Its slot ``"B"`` holds the rows of ``B`` of the labels ``[lo, hi)``.
    XA : ndarray of shape (n, l)
    k, width : int
    rows : int, optional
        Rows per tile of :func:`tiled_top_k` (default: all).
    leaf_size : int, optional
        The index's labels per leaf (:data:`LEAF_SIZE`); ``None``: no index.
    floor : float, optional
        Score with the thresholds ``max(b_j, floor)`` (the query rule of chosen queries,
        ``docs/ALGORITHM.md`` section 11); ``None``: ``b`` as it is.
    scale : float, optional
        Score with the thresholds ``scale b_j`` (before the floor; the calibrated ranking
        of :meth:`~onebit_dask.OneBitMultiLabel.predict_top_k`, section 12); ``None``: 1.
    """
    B_rows, b = block.slots["B"], block.slots.get("b")
    if (floor is not None or scale is not None) and b is not None:
        b = floored(b, floor, scale)
    n = XA.shape[0]
    k = min(k, block.hi - block.lo)
    rows = n if rows is None else max(1, rows)
    index = None if leaf_size is None or k == 0 else label_index(B_rows, b, leaf_size)
    if index is not None:
        labels, scores = mips.top_k(index, XA, k)
        labels += block.lo
        return block.evolve(out=(labels, scores))
    labels, scores = np.empty((n, k), dtype=np.int64), np.empty((n, k))
    for r in range(0, n, rows):
        labels[r: r + rows], scores[r: r + rows] = tiled_top_k(
            B_rows, b, block.lo, XA[r: r + rows], k, width)
    return block.evolve(out=(labels, scores))


def predict_top_k(engine, XA: np.ndarray, k: int, bounds, floor: float | None = None,
                  scale: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``k`` best labels and their scores, by the label blocks on ``engine``.

    Row chunks of at least :data:`CHUNK_ROWS` rows go to the blocks one after the other;
    per chunk every block returns ``rows x k`` candidates from its label index
    (:func:`top_k`, leaves of :data:`LEAF_SIZE` labels), merged here (:func:`best_k`).
    The tiles of the rows scored label by label are :func:`tile_shape`'s (with
    :data:`SCORE_BUDGET`); the three constants are read at the call. The client holds
    ``XA``, the result and one chunk's candidates; a task, the bounds of a tile of rows
    or one tile of scores, and its block's index.

    Parameters
    ----------
    engine : LocalEngine or DaskEngine
        Holds the blocks (slot ``"B"``, and ``"b"`` for a thresholded model).
    XA : ndarray of shape (n, l)
        The rows' features times the model's ``A``.
    k : int
        ``1 <= k <= d2``.
    bounds : list of int
        The blocks' label bounds ``[0, ..., d2]``.
    floor : float, optional
        The thresholds taken as ``max(b_j, floor)`` (:func:`top_k`).
    scale : float, optional
        The thresholds taken as ``scale b_j`` (:func:`top_k`).

    Returns
    -------
    labels : ndarray of shape (n, k), int64
        Best first; ties go to the smaller label.
    scores : ndarray of shape (n, k), float64
    """
    n = XA.shape[0]
    rows, width = tile_shape(n, max(hi - lo for lo, hi in zip(bounds[:-1], bounds[1:])),
                             SCORE_BUDGET)
    chunk = max(rows, min(n, CHUNK_ROWS))
    labels, scores = np.empty((n, k), dtype=np.int64), np.empty((n, k))
    for r in range(0, n, chunk):
        parts = engine.map(top_k, XA[r: r + chunk], k, width, rows, LEAF_SIZE, floor,
                           scale)
        labels[r: r + chunk], scores[r: r + chunk] = best_k(
            np.hstack([p[0] for p in parts]), np.hstack([p[1] for p in parts]), k)
    return labels, scores
