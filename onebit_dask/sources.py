"""Where the observations of a batch come from.

A *source* cuts a batch into shard descriptors; a descriptor is small and
picklable and its ``load()`` returns ``(X, labels, y)`` wherever it runs. Its
``label_range`` is ``(lo, hi)`` when every label of the shard lies in
``[lo, hi)`` (then only those rows of the ``d2 x l`` factors travel to it), or
``None``.

* :class:`onebit_dask.synthetic.SyntheticProblem` draws fresh batches.
* :class:`ArraySource` cuts in-memory arrays into consecutive mini-batches.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np


def row_bounds(n: int, parts: int) -> list[int]:
    """Boundaries of ``parts`` contiguous, nearly equal pieces of ``range(n)``."""
    return [p * n // parts for p in range(parts + 1)]


def source_warn_if_cycling(source, n_batches: int) -> None:
    """Warn when a source of ``source.n_batches`` batches is asked for more."""
    if n_batches > source.n_batches:
        size = getattr(source, "requested_batch_size", source.batch_size)
        held = (f"{source.n_batches} batches of it" if size == source.batch_size else
                f"{source.n} rows, one batch of {source.batch_size}")
        warnings.warn(
            f"{n_batches} batches of batch_size={size} were asked for, but the data hold "
            f"{held}: batches are reused. Pass more observations, a smaller batch_size or "
            f"a smaller n_iter for fresh batches.",
            UserWarning, stacklevel=3,
        )


@dataclass(frozen=True)
class ArrayShard:
    X: np.ndarray
    labels: np.ndarray
    y: np.ndarray
    label_range = None

    @property
    def n_obs(self) -> int:
        return self.X.shape[0]

    def load(self):
        return self.X, self.labels, self.y


class ArraySource:
    """Single-label observations held in memory, cut into mini-batches.

    Batch ``b`` is rows ``[b m, (b + 1) m)`` of the data (the last one may be
    shorter), split into ``n_shards`` contiguous shards. Asking for more batches
    than the data hold cycles over them again, with a warning: reused batches
    are not the fresh batches the method's theory assumes.
    """

    def __init__(self, X, labels, y, n_labels: int, batch_size: int):
        self.X, self.labels, self.y = X, labels, y
        self.d1 = X.shape[1]
        self.d2 = n_labels
        self.n = X.shape[0]
        self.requested_batch_size = batch_size
        self.batch_size = min(batch_size, X.shape[0])
        self.n_batches = -(-X.shape[0] // self.batch_size)

    def batch(self, t: int, n_shards: int) -> list[ArrayShard]:
        b = t % self.n_batches
        lo = b * self.batch_size
        hi = min(lo + self.batch_size, self.X.shape[0])
        bounds = row_bounds(hi - lo, min(n_shards, hi - lo))
        return [
            ArrayShard(self.X[lo + a: lo + z], self.labels[lo + a: lo + z], self.y[lo + a: lo + z])
            for a, z in zip(bounds[:-1], bounds[1:])
        ]
