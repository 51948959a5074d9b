"""The in-process engine: a batch's shards loaded and multiplied in this process.

An engine turns a list of shard descriptors into a *batch* with

* ``n_obs``: observations in the batch, ``n_active``: rows with a non-zero weight;
* ``apply(P)``: the batch part ``sum_shards [X^T (w * P_bot[j]); scatter(j, w * (X P_top))]``
  of the dilation product, without the constant ``c``, summed in shard order;
* ``release()``: drop the batch.

:class:`onebit_dask.dask_engine.DaskEngine` implements the same on Dask workers.
"""

from __future__ import annotations

import numpy as np

from .kernels import reduce_shards, shard_active_rows, shard_apply


def label_rows(shard, M: np.ndarray):
    """The rows of a ``d2 x l`` matrix a shard needs, and their offset."""
    if shard.label_range is None or M is None:
        return M, 0
    lo, hi = shard.label_range
    return M[lo:hi], lo


def activate_shard(shard, A=None, B=None):
    """Load a shard and keep the rows that take part in the ``H`` products."""
    X, labels, y = shard.load()
    B_rows, offset = label_rows(shard, B)
    return shard_active_rows(X, labels, y, A, B_rows, offset)


def apply_shard(active, shard, P_top, P_bot):
    P_rows, offset = label_rows(shard, P_bot)
    return shard_apply(active, P_top, P_rows, offset)


class LocalBatch:
    def __init__(self, shards, d1: int, d2: int, A=None, B=None):
        self.shards = shards
        self.d1, self.d2 = d1, d2
        self.active = [activate_shard(sh, A, B) for sh in shards]
        self.n_obs = sum(a.n_obs for a in self.active)
        self.n_active = sum(a.labels.size for a in self.active)

    def apply(self, P: np.ndarray) -> np.ndarray:
        P_top, P_bot = P[: self.d1], P[self.d1:]
        products = [apply_shard(a, sh, P_top, P_bot) for a, sh in zip(self.active, self.shards)]
        return reduce_shards(products, self.d1, self.d2, P.shape[1])

    def release(self) -> None:
        self.active = []


class LocalEngine:
    """Runs every shard in this process, one after the other."""

    n_workers = 0

    def open_batch(self, shards, d1, d2, A=None, B=None) -> LocalBatch:
        return LocalBatch(shards, d1, d2, A, B)
