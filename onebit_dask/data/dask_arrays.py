"""Single-label observations whose features are a dask array, as a source: batch ``b``
is rows ``[b m, (b + 1) m)``, cut into row-range shards; each shard's rows are computed
where its task runs (on Dask, by a worker), from the array's own graph, and checked
there. The client holds the labels and the bits only (one number each a row).

No dask import here: a dask array is recognised by its ``__dask_graph__``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..utils.validation import check_features
from .shards import ShardKind, n_row_batches, row_batch, row_bounds
from .source import BaseSource


def is_dask_array(X) -> bool:
    """Whether ``X`` is a dask collection of rows (a dask array)."""
    return callable(getattr(X, "__dask_graph__", None)) and hasattr(X, "chunks")


@dataclass(frozen=True)
class DaskRowsShard:
    """Rows ``[lo, hi)`` of a dask array ``X`` (``rows``: the dask array of those rows),
    their labels and bits."""

    rows: object
    lo: int
    labels: np.ndarray
    y: np.ndarray
    kind = ShardKind.ROW_RANGE

    @property
    def n_obs(self) -> int:
        return self.labels.shape[0]

    def load(self):
        """``(X, labels, y)``: the rows computed here, in this thread (no scheduler is
        asked: on a worker the task computes its own rows), checked as ``fit`` checks an
        array (float32 kept, other dtypes as float64, non-finite entries refused, naming
        the row)."""
        rows = self.rows  # a dask array (or its rows, where a scheduler computed them)
        X = np.asarray(rows.compute(scheduler="sync") if is_dask_array(rows) else rows)
        return check_features(X, row_offset=self.lo), self.labels, self.y


class DaskArraySource(BaseSource):
    """Observations ``(X, labels, y)`` with ``X`` a dask array of shape ``(n, d1)``
    (known chunk sizes), cut into mini-batches as :class:`~.arrays.ArraySource` cuts
    arrays in memory: the same batches and shards, so the same fit.

    Parameters
    ----------
    X : dask.array.Array of shape (n, d1)
        Numbers (not checked here: each shard checks its rows where it is computed).
    labels : ndarray of int64 of shape (n,)
    y : ndarray of float64 of shape (n,), values -1 or +1
    n_labels : int
        ``d2``.
    """

    def __init__(self, X, labels, y, n_labels: int):
        self.X, self.labels, self.y = X, labels, y
        self.n, self.d1 = (int(v) for v in X.shape)
        self.d2 = n_labels

    def n_batches(self, batch_size: int) -> int:
        return n_row_batches(self.n, batch_size)

    def batch(self, t: int, batch_size: int, n_shards: int) -> list[DaskRowsShard]:
        lo, hi = row_batch(self.n, t, batch_size)
        bounds = [lo + r for r in row_bounds(hi - lo, min(n_shards, hi - lo))]
        return [DaskRowsShard(self.X[a:z], a, self.labels[a:z], self.y[a:z])
                for a, z in zip(bounds[:-1], bounds[1:])]

    def identity(self) -> dict:
        """Shape, dtype, ``d2``, the array's dask name (a token of its graph: of the
        values for an array made from memory, of the reading tasks for an array read from
        files) and a SHA-256 of the labels and bits."""
        from .arrays import content_digest

        return {"kind": "dask_array", "shape": [self.n, self.d1], "dtype": str(self.X.dtype),
                "n_labels": int(self.d2), "dask_name": str(self.X.name),
                "sha256": content_digest(np.zeros((0, 1)), (self.labels, self.y))}

    def features(self):
        """Every row of ``X``, computed where this runs in the chunks of rows that
        :func:`~onebit_dask.ops.features.as_chunks` cuts an array in memory into (so the
        feature map is the same), checked as a shard's rows."""
        from ..ops.features import CHUNK_BYTES, RowChunks

        X = self.X

        def read(lo, hi):
            return check_features(np.asarray(X[lo:hi].compute()), row_offset=lo)

        return RowChunks(self.n, self.d1, read, max(1, CHUNK_BYTES // (8 * self.d1)))


def dask_source(X, labels, bits, n_labels) -> DaskArraySource:
    """A :class:`DaskArraySource` of the dask array ``X`` and the given labels and bits
    (computed here if they are dask arrays: one number a row), checked before any work:
    ``X`` 2-D, numeric, of known chunk sizes, ``labels`` and ``bits`` as
    :func:`~onebit_dask.utils.validation.check_observations` checks them."""
    from ..utils.validation import check_observations

    if X.ndim != 2:
        raise ValueError(f"X is a dask array of shape {X.shape}: X must be 2-D "
                         "(n_samples, n_features)")
    if any(np.isnan(s) for s in X.shape):
        raise ValueError(f"X is a dask array of unknown shape {X.shape}: call "
                         "X.compute_chunk_sizes() first (the batches are row ranges)")
    if X.dtype.kind not in "biuf":
        raise TypeError(f"X is a dask array of dtype {X.dtype}: X must hold numbers")
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X is a dask array of shape {X.shape}: at least one row and one "
                         "feature are needed")
    labels, bits = (np.asarray(v.compute()) if is_dask_array(v) else v for v in (labels, bits))
    _, labels, y, d2 = check_observations(np.zeros((X.shape[0], 1)), labels, bits,
                                          n_labels=n_labels)
    return DaskArraySource(X, labels, y, d2)
