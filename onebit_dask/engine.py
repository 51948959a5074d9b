"""The in-process engine: a batch's shards loaded and multiplied in this process.

An engine ``load``s a list of shard descriptors (the Dask engine starts drawing
them at once, behind the current step) and opens the loaded shards as a *batch* with

* ``n_obs``: observations in the batch, ``n_active``: rows with a non-zero weight;
* ``apply(P)``: the batch part ``sum_shards [X^T (w * P_bot[j]); scatter(j, w * (X P_top))]``
  of the dilation product, without the constant ``c``, summed in shard order;
* ``release()``: drop the batch.

:class:`onebit_dask.dask_engine.DaskEngine` does the same on Dask workers, with the
same two shard functions below, so both engines give the same numbers.
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from .kernels import (add_label_rows, reduce_shards, shard_active_rows, shard_apply,
                      shard_label_sums)


def label_rows(shard, M: np.ndarray | None):
    """The rows of a ``d2 x l`` matrix that a shard needs, and their offset."""
    if shard.label_range is None or M is None:
        return M, 0
    lo, hi = shard.label_range
    return M[lo:hi], lo


def load_shard(shard):
    """Draw or read a shard's ``(X, labels, y)``."""
    return shard.load()


def activate_loaded(data, A=None, B_rows=None, offset: int = 0):
    """Keep the rows of loaded shard data that take part in the ``H`` products."""
    X, labels, y = data
    return shard_active_rows(X, labels, y, A, B_rows, offset)


def label_sums_loaded(data):
    """One shard's ``(n_obs, unique_labels, sum of y_i x_i per label)``."""
    X, labels, y = data
    return (X.shape[0], *shard_label_sums(X, labels, y))


def reduce_label_sums(parts, d1: int, d2: int):
    """``(n_obs, S)`` with the ``d2 x d1`` sums ``S`` added in shard order."""
    S = add_label_rows(np.zeros((d2, d1)), ((labels, rows) for _, labels, rows in parts))
    return sum(n for n, _, _ in parts), S


class LocalBatch:
    """Shards computed one after the other with one BLAS thread, as on a Dask worker
    (``threads_per_worker=1``), so both engines give bit-identical numbers."""

    def __init__(self, shards, d1: int, d2: int, A=None, B=None):
        self.shards = shards
        self.d1, self.d2 = d1, d2
        with threadpool_limits(1, user_api="blas"):
            self.active = [activate_loaded(sh.load(), A, *label_rows(sh, B)) for sh in shards]
        self.n_obs = sum(a.n_obs for a in self.active)
        self.n_active = sum(a.labels.size for a in self.active)

    def apply(self, P: np.ndarray) -> np.ndarray:
        P_top, P_bot = P[: self.d1], P[self.d1:]
        with threadpool_limits(1, user_api="blas"):
            products = [shard_apply(a, P_top, *label_rows(sh, P_bot))
                        for a, sh in zip(self.active, self.shards)]
        return reduce_shards(products, self.d1, self.d2, P.shape[1])

    def release(self) -> None:
        self.active = []


class LocalEngine:
    """Runs every shard in this process, one after the other.

    ``load`` is lazy here: a shard is drawn when its batch opens, so at most one
    batch is in memory.
    """

    n_workers = 0

    def load(self, shards):
        return list(shards)

    def open_batch(self, loaded, d1, d2, A=None, B=None) -> LocalBatch:
        return LocalBatch(loaded, d1, d2, A, B)

    def label_sums(self, loaded, d1, d2):
        with threadpool_limits(1, user_api="blas"):
            return reduce_label_sums([label_sums_loaded(sh.load()) for sh in loaded], d1, d2)
