"""An observations store (:mod:`onebit_dask.io.observations`) as a source: batch ``b`` is
rows ``[b m, (b + 1) m)``, cut into row-range shards that the workers read."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..io.observations import open_observations, read_observations, read_observed_features
from ..io.stores import paths
from .shards import ShardKind, n_row_batches, row_batch, row_bounds
from .source import BaseSource


@dataclass(frozen=True)
class ZarrShard:
    """Rows ``[lo, hi)`` of an observations store, read where ``load()`` runs."""

    path: str
    lo: int
    hi: int
    label_range: tuple[int, int]
    kind = ShardKind.ROW_RANGE

    @property
    def n_obs(self) -> int:
        return self.hi - self.lo

    def load(self):
        return read_observations(self.path, self.lo, self.hi)


class ZarrSource(BaseSource):
    """An observations store as a source: batch ``b`` of size ``m`` is rows
    ``[b m, (b + 1) m)`` (``m`` at most ``n``), cut into row-range shards.

    Opening it checks the layout, the labels and the bits (they are small) but
    not the features, which each shard checks when it reads them.
    """

    def __init__(self, path):
        store = open_observations(path)
        self.path, self.n, self.d1, self.d2 = store.path, store.n, store.d1, store.d2
        self.labels = store.labels

    def n_batches(self, batch_size: int) -> int:
        return n_row_batches(self.n, batch_size)

    def batch(self, t: int, batch_size: int, n_shards: int) -> list[ZarrShard]:
        lo, hi = row_batch(self.n, t, batch_size)
        bounds = [lo + r for r in row_bounds(hi - lo, min(n_shards, hi - lo))]
        shards = []
        for a, z in zip(bounds[:-1], bounds[1:]):
            labels = self.labels[a:z]
            shards.append(ZarrShard(self.path, a, z, (int(labels.min()), int(labels.max()) + 1)))
        return shards

    def identity(self) -> dict:
        """The store's absolute path and shape, and a SHA-256 of every file's name, size
        and modification time (a store rewritten in place is another store; a local
        directory: for a URL, the path and shape only)."""
        import hashlib

        path = paths.normalise(self.path)
        files = hashlib.sha256()
        for root, dirs, names in os.walk(path):
            dirs.sort()
            for name in sorted(names):
                info = os.stat(os.path.join(root, name))
                files.update(f"{os.path.relpath(os.path.join(root, name), path)} "
                             f"{info.st_size} {info.st_mtime_ns}\n".encode())
        return {"kind": "observations", "path": path, "shape": [self.n, self.d1],
                "n_labels": self.d2, "files_sha256": files.hexdigest()}

    def features(self, chunk_rows: int = 100_000):
        """Every row of ``X``, read ``chunk_rows`` at a time and checked as a shard's."""
        from ..ops.features import RowChunks

        path = self.path

        def read(lo, hi):
            return read_observed_features(path, lo, hi)

        return RowChunks(self.n, self.d1, read, chunk_rows)
