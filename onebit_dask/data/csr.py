r"""A label matrix in a CSR store (:mod:`onebit_dask.data.csr_store`) as a source: the
rows stay in the store and each worker reads its own row range.

Batch ``t`` draws ``batch_size`` pairs ``(i, j)`` uniformly from the ``n x d2`` grid,
as :class:`~onebit_dask.data.label_matrix.LabelMatrixSource` does in memory, but cut by
rows: the rows are split into ``min(n_shards, n)`` contiguous ranges, range ``r`` gets a
multinomial count of the pairs (probability ``(hi - lo) / n``, from
``SeedSequence([seed, t, 2**32-1])``) and draws them from ``SeedSequence([seed, t, r])``,
rows uniform in ``[lo, hi)`` and labels uniform in ``[0, d2)``: the same law, other
draws. Each range is a row-range shard: the worker that loads it reads rows
``[lo, hi)`` of the store (and nothing else) and the engine hands every label block its
per-label sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import seeding
from .seeding import COUNT_TAG
from .shards import ShardKind, row_bounds
from .source import BaseSource


@dataclass(frozen=True)
class CsrRangeShard:
    """``n_obs`` pairs of batch ``t`` in rows ``[lo, hi)`` of a CSR store (picklable:
    the store object holds its path)."""

    store: object
    seed: int
    t: int
    r: int
    n_obs: int
    lo: int
    hi: int
    kind = ShardKind.ROW_RANGE

    def load(self):
        """``(X, labels, y)``: the pairs' feature rows (CSR), labels and
        ``y = 2 Y_ij - 1``, reading rows ``[lo, hi)`` of the store."""
        X, Y = self.store.rows(self.lo, self.hi)
        rng = seeding.rng(self.seed, self.t, self.r)
        rows = rng.integers(0, self.hi - self.lo, size=self.n_obs, dtype=np.int64)
        labels = rng.integers(0, self.store.d2, size=self.n_obs, dtype=np.int64)
        bits = np.asarray(Y[rows, labels]).ravel().astype(np.float64)
        return X[rows], labels, 2.0 * bits - 1.0


class CsrStoreSource(BaseSource):
    """A CSR store's label matrix (module docstring).

    Parameters
    ----------
    store : CsrStore
        An open store (:func:`onebit_dask.data.csr_store.open_csr_store`).
    seed : int
        Seed of the batches, in ``[0, 2**32 - 1]``.
    """

    def __init__(self, store, seed: int):
        self.store, self.seed = store, int(seed)
        self.n, self.d1, self.d2 = store.n, store.d1, store.d2

    @property
    def row_numbers(self) -> float:
        """The store's stored feature entries a row, ``nnz_x / n``."""
        return self.store.nnz_x / max(self.n, 1)

    def batch(self, t: int, batch_size: int, n_shards: int) -> list[CsrRangeShard]:
        bounds = row_bounds(self.n, min(n_shards, self.n))
        counts = seeding.rng(self.seed, t, COUNT_TAG).multinomial(batch_size,
                                                           np.diff(bounds) / self.n)
        return [CsrRangeShard(self.store, self.seed, t, r, int(counts[r]), lo, hi)
                for r, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])) if counts[r]]

    def identity(self) -> dict:
        """The store's absolute path, sizes and the seed."""
        from ..io.stores.paths import normalise

        return {"kind": "csr_store", "path": normalise(self.store.path),
                "shape": [self.n, self.d1], "n_labels": self.d2, "nnz": self.store.nnz_x,
                "seed": self.seed}

    def features(self, chunk_rows: int = 100_000):
        """Every row of the store, read ``chunk_rows`` at a time (CSR)."""
        from ..ops.features import RowChunks

        store = self.store
        return RowChunks(self.n, self.d1, lambda lo, hi: store.rows(lo, hi)[0], chunk_rows)

    def propensities(self, chunk_rows: int = 100_000) -> np.ndarray:
        """Propensities of the store's labels, reading ``Y`` ``chunk_rows`` rows at a
        time (Jain et al. 2016, ``A = 0.55, B = 1.5``)."""
        import scipy.sparse

        from ..metrics import ranking

        parts = [self.store.rows(lo, min(lo + chunk_rows, self.n))[1]
                 for lo in range(0, self.n, chunk_rows)]
        return ranking.propensities(scipy.sparse.vstack(parts, format="csr"))
