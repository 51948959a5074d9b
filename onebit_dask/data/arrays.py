"""Single-label observations ``(X, labels, y)`` held in memory, as a source."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import scipy.sparse

from .shards import ShardKind, n_row_batches, row_batch, row_bounds


@dataclass(frozen=True)
class ArrayShard:
    """Rows of in-memory observations (a row-range shard)."""

    X: object  # (n_obs, d1) ndarray or CSR
    labels: np.ndarray
    y: np.ndarray
    kind = ShardKind.ROW_RANGE

    @property
    def n_obs(self) -> int:
        return self.X.shape[0]

    def load(self):
        return self.X, self.labels, self.y


class ArraySource:
    """Single-label observations in memory, cut into mini-batches.

    Batch ``b`` of size ``m`` is rows ``[b m, (b + 1) m)`` of the data (the last one may
    be shorter; ``m`` at most ``n``), split into ``n_shards`` contiguous row-range shards.
    Asking for more batches than the data hold cycles over them again (with a warning
    from the fit): reused batches are not the fresh batches the method's theory assumes.

    Parameters
    ----------
    X : ndarray of shape (n, d1) or scipy.sparse CSR matrix
    labels : ndarray of int64 of shape (n,)
    y : ndarray of float64 of shape (n,), values -1 or +1
    n_labels : int
        ``d2``.
    """

    planted = None

    def __init__(self, X, labels, y, n_labels: int):
        self.X, self.labels, self.y = X, labels, y
        self.n, self.d1 = X.shape
        self.d2 = n_labels

    def n_batches(self, batch_size: int) -> int:
        return n_row_batches(self.n, batch_size)

    def batch(self, t: int, batch_size: int, n_shards: int) -> list[ArrayShard]:
        lo, hi = row_batch(self.n, t, batch_size)
        bounds = row_bounds(hi - lo, min(n_shards, hi - lo))
        return [ArrayShard(self.X[lo + a: lo + z], self.labels[lo + a: lo + z],
                           self.y[lo + a: lo + z]) for a, z in zip(bounds[:-1], bounds[1:])]

    def identity(self) -> dict:
        """Shape, dtype, ``d2`` and a SHA-256 of every feature, label and bit."""
        return {"kind": "arrays", "shape": list(self.X.shape), "dtype": str(self.X.dtype),
                "n_labels": int(self.d2),
                "sha256": content_digest(self.X, (self.labels, self.y))}

    def projection(self, A=None):
        return None

    def features(self):
        """The observations' rows (a row observed twice counts twice)."""
        return self.X

    def place(self, engine, bounds):
        return self

    def propensities(self):
        return None


DIGEST_ROWS = 65_536


def content_digest(X, arrays=()) -> str:
    """SHA-256 of every value of ``X`` (dense or CSR, whatever its memory layout) and of
    ``arrays``: one pass, :data:`DIGEST_ROWS` rows at a time (about 1 s for 10^6 x 100
    float32), so a fit resumed from a checkpoint on changed data is refused."""
    digest = hashlib.sha256()
    for start in range(0, X.shape[0], DIGEST_ROWS):
        rows = X[start: start + DIGEST_ROWS]
        parts = ((rows.data, rows.indices, rows.indptr) if scipy.sparse.issparse(rows)
                 else (rows,))
        for part in parts:
            digest.update(np.ascontiguousarray(part))  # a buffer: no copy when contiguous
    for part in arrays:
        digest.update(np.ascontiguousarray(part))
    return digest.hexdigest()
