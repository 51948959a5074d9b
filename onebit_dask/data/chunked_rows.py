"""Features held as consecutive row chunks, read by rows without joining them:
:class:`ChunkedRows`.

A dask array ``X`` given to ``fit`` becomes one (:mod:`onebit_dask.data.dask_inputs`):
in this process its chunks are dask arrays, each computed when rows of it are read (at
most :data:`KEPT_CHUNKS` of them kept), never the whole array at once; on a Dask
cluster the engine computes every chunk on the workers and the label blocks' tasks get a
:class:`ChunkedRows` of the computed chunks
(:meth:`onebit_dask.engine.dask_engine.DaskEngine.share_rows`). Reading rows gives the
very arrays ``X[rows]`` of the whole array would give (a copy of the same values,
C-contiguous), so a fit on the chunks is the fit on the whole array, bit for bit.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

KEPT_CHUNKS = 2
"""Loaded chunks a :class:`ChunkedRows` of lazy chunks keeps (the last ones read): rows
read in order load each chunk once, and the memory held is at most this many chunks."""


class ChunkedRows:
    """``n x d1`` dense features in consecutive row chunks: chunk ``k`` holds rows
    ``[offsets[k], offsets[k + 1])``.

    Parameters
    ----------
    offsets : sequence of int
        ``0 = offsets[0] <= ... <= offsets[-1] = n``.
    chunks : sequence
        The chunks: arrays of shape ``(offsets[k + 1] - offsets[k], d1)`` and dtype
        ``dtype``, or what ``load`` turns into one.
    d1 : int
    dtype : numpy dtype
    load : callable, optional
        ``load(chunk)``: the array of a chunk that is not one (``None``: the chunks are
        arrays).
    """

    ndim = 2

    def __init__(self, offsets, chunks, d1: int, dtype, load=None):
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.chunks = list(chunks)
        self.dtype = np.dtype(dtype)
        self.shape = (int(self.offsets[-1]), int(d1))
        self.load = load
        self._kept = OrderedDict()  # k -> loaded chunk, the most recent last

    def chunk(self, k: int) -> np.ndarray:
        """Chunk ``k`` as an array (loaded, or as held)."""
        if self.load is None:
            return self.chunks[k]
        if k in self._kept:
            self._kept.move_to_end(k)
            return self._kept[k]
        value = self.load(self.chunks[k])
        self._kept[k] = value
        while len(self._kept) > KEPT_CHUNKS:
            self._kept.popitem(last=False)
        return value

    def __getitem__(self, index) -> np.ndarray:
        """Rows ``X[a:b]`` (a slice of step 1) or ``X[rows]`` (1-D integers in
        ``[0, n)``), as arrays of the whole ``X`` would give them."""
        n = self.shape[0]
        if isinstance(index, slice):
            a, b, step = index.indices(n)
            if step != 1:
                raise IndexError("ChunkedRows reads row slices of step 1")
            b = max(a, b)
            first = int(np.searchsorted(self.offsets, a, side="right")) - 1
            parts = []
            for k in range(max(first, 0), len(self.chunks)):
                lo, hi = self.offsets[k], self.offsets[k + 1]
                if lo >= b:
                    break
                if hi > a:
                    parts.append(self.chunk(k)[max(a - lo, 0): min(b, hi) - lo])
            if not parts:
                return np.empty((0, self.shape[1]), dtype=self.dtype)
            return np.ascontiguousarray(parts[0]) if len(parts) == 1 else np.concatenate(parts)
        rows = np.asarray(index)
        if rows.ndim != 1 or rows.dtype.kind not in "iu":
            raise IndexError("ChunkedRows reads rows by a slice or 1-D integer indices")
        out = np.empty((rows.size, self.shape[1]), dtype=self.dtype)
        which = np.searchsorted(self.offsets, rows, side="right") - 1
        for k in np.unique(which):
            at = np.flatnonzero(which == k)
            out[at] = self.chunk(int(k))[rows[at] - self.offsets[k]]
        return out

    def whole(self) -> np.ndarray:
        """Every row in one array (``X[0:n]``)."""
        return self[0: self.shape[0]]


def held_rows(offsets, d1: int, dtype, *chunks) -> ChunkedRows:
    """A :class:`ChunkedRows` of computed ``chunks`` (a task's arguments: on a Dask
    worker, the chunks the futures stand for)."""
    return ChunkedRows(offsets, chunks, d1, dtype)
