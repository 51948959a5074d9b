r"""Streamed top-``k`` prediction: each row's ``k`` best labels, in memory bounded by a tile.

The score of row ``i`` for label ``j`` is ``s_ij = (X A)_i^T B_j + b_j`` (``b_j``: the
label's threshold, ``docs/ALGORITHM.md`` section 9; none for the paper's model). The
``n x d2`` score matrix is never formed: :func:`predict_top_k` cuts the rows into chunks
and runs one task per (row chunk, label block) where the block lives (:func:`top_k`);
the task scores its block's labels a tile of ``rows x width`` at a time, at most
:data:`SCORE_BUDGET` bytes of scores, keeps each row's running best ``k``, and returns
``rows x k`` labels and scores; the client merges the blocks' candidates
(:func:`best_k`) into an ``(n, k)`` result.

The order is: highest score first, ties to the smaller label, i.e. exactly
``np.argsort(-S, axis=1, kind="stable")[:, :k]`` of the full score matrix ``S`` of
:func:`tile_scores`, whatever the chunks, the blocks or the engine, because

1. every score has the same bits whatever the tile it is computed in
   (:func:`tile_scores` adds the ``l`` products in a fixed order; a BLAS product's
   summation order depends on the operands' shapes);
2. each tile's selection is exact with ties (:func:`select`);
3. the order (score, then label) is total, so the best ``k`` of a union are the best
   ``k`` of the parts' best ``k``.

Pure NumPy: the engine that runs :func:`top_k` on the blocks is passed in.
"""

from __future__ import annotations

import numpy as np

SCORE_BUDGET = 64 * 2**20
"""Bytes of float64 scores a prediction task holds at once (a tile of ``rows x width``
scores, ``rows x width x 8 <= SCORE_BUDGET`` unless one row of a block is larger). A
task's working memory is about 1.2 times this (the tile, then either the partition of an
eighth of its rows or its selection's mask), plus its label block and its ``rows x k``
results."""

SLAB = 2**16
"""Scores per slab of a tile in :func:`tile_scores` (512 KiB: the products of a slab
stay in the cache)."""


def tile_shape(n_rows: int, widest: int, budget: int) -> tuple[int, int]:
    """``(rows, width)``: rows per task, so that ``rows`` rows of the ``widest`` block
    fit ``budget`` bytes of scores (at least one row, at most ``n_rows``), and labels per
    tile (at least one), so that ``rows x width x 8 <= budget``."""
    rows = max(1, min(n_rows, budget // (8 * max(widest, 1))))
    return rows, max(1, budget // (8 * rows))


def tile_scores(XA: np.ndarray, B_rows: np.ndarray, b=None) -> np.ndarray:
    r"""The scores ``S = XA B_rows^T + b`` of a tile, ``(n, w)``, every one computed as

    .. math:: s_{ij} = (\dots((a_{i1} \beta_{j1} + a_{i2} \beta_{j2}) + a_{i3} \beta_{j3})
              \dots + a_{il} \beta_{jl}) + b_j

    (element-wise products and sums, in this order, a slab of :data:`SLAB` scores at a
    time), so a score has the same bits in any tile; a BLAS product sums in an order that
    depends on the operands' shapes.

    Parameters
    ----------
    XA : ndarray of shape (n, l)
        The rows' features times the model's ``A``.
    B_rows : ndarray of shape (w, l)
        The tile's rows of ``B``.
    b : ndarray of shape (w,), optional
        The tile's thresholds.
    """
    n, components = XA.shape
    w = B_rows.shape[0]
    S = np.empty((n, w))
    step = max(1, SLAB // max(n, 1))
    tmp = np.empty((n, min(step, w)))
    for c in range(0, w, step):
        out = S[:, c: c + step]
        t = tmp[:, : out.shape[1]]
        np.multiply(XA[:, :1], B_rows[c: c + step, 0], out=out)
        for q in range(1, components):
            np.multiply(XA[:, q: q + 1], B_rows[c: c + step, q], out=t)
            out += t
        if b is not None:
            out += b[c: c + step]
    return S


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


def top_k(block, XA: np.ndarray, k: int, width: int):
    """Block function: ``out = (labels, scores)``, each ``(n, min(k, hi - lo))``, per row
    the block's ``k`` best labels by score (:func:`tile_scores`, with the block's
    thresholds, slot ``"b"``, if it has them), best first; ``n x width`` scores at a time.

    Parameters
    ----------
    block : onebit_dask.engine.blocks.Block
        Its slot ``"B"`` holds the rows of ``B`` of the labels ``[lo, hi)``.
    XA : ndarray of shape (n, l)
    k, width : int
    """
    B_rows, b = block.slots["B"], block.slots.get("b")
    best = no_candidates(XA.shape[0])
    for a in range(0, B_rows.shape[0], width):  # one tile alive at a time
        best = add_tile(best, tile_scores(XA, B_rows[a: a + width],
                                          None if b is None else b[a: a + width]),
                        block.lo + a, k)
    return block.evolve(out=best)


def predict_top_k(engine, XA: np.ndarray, k: int, bounds) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``k`` best labels and their scores, by the label blocks on ``engine``.

    Row chunks of :func:`tile_shape` (with :data:`SCORE_BUDGET`, read at the call) go to
    the blocks one after the other; per chunk every block returns ``rows x k`` candidates,
    merged here (:func:`best_k`). The client holds ``XA``, the result and one chunk's
    candidates; a task, one tile of scores.

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

    Returns
    -------
    labels : ndarray of shape (n, k), int64
        Best first; ties go to the smaller label.
    scores : ndarray of shape (n, k), float64
    """
    n = XA.shape[0]
    rows, width = tile_shape(n, max(hi - lo for lo, hi in zip(bounds[:-1], bounds[1:])),
                             SCORE_BUDGET)
    labels, scores = np.empty((n, k), dtype=np.int64), np.empty((n, k))
    for r in range(0, n, rows):
        parts = engine.map(top_k, XA[r: r + rows], k, width)
        labels[r: r + rows], scores[r: r + rows] = best_k(
            np.hstack([p[0] for p in parts]), np.hstack([p[1] for p in parts]), k)
    return labels, scores
