"""The Dask engine: every shard of a batch is drawn (or read) and multiplied on a worker.

For batch ``t`` the client submits one *activate* task per shard; it draws the
shard's data on the worker (``SeedSequence([seed, t, s])``, or a row range of a
zarr store), computes the scores and keeps only the rows with a non-zero
residual. Those rows stay on the worker for the two products of the step: each
*apply* task returns ``d1 x l`` numbers and the rows of the shard's labels, the
client adds them in shard order and does the QR and the column norms. Only
``O(l (d1 + d2))`` numbers travel per product; the ``m x d1`` features never
leave the worker that drew them.

Task arguments are sent inside the task (not scattered), so when a worker dies
the scheduler can recompute a lost shard from its descriptor and the result is
the same as an undisturbed run.
"""

from __future__ import annotations

import numpy as np

from .engine import activate_shard, label_rows, label_sums_shard, reduce_label_sums
from .kernels import reduce_shards, shard_apply


def _apply_counted(active, P_top, P_bot_rows, offset):
    return shard_apply(active, P_top, P_bot_rows, offset), active.n_obs, active.labels.size


class DaskBatch:
    """The active rows of each shard live on a worker until :meth:`release`.

    ``n_obs`` and ``n_active`` are known after the first :meth:`apply`, which is
    submitted right behind the activations (one round trip for both).
    """

    def __init__(self, client, shards, d1: int, d2: int, A=None, B=None):
        self.client, self.shards = client, shards
        self.d1, self.d2 = d1, d2
        self.active = [
            client.submit(activate_shard, sh, A, *label_rows(sh, B), pure=False)
            for sh in shards
        ]

    def apply(self, P: np.ndarray) -> np.ndarray:
        P_top, P_bot = P[: self.d1], P[self.d1:]
        futures = [
            self.client.submit(_apply_counted, fut, P_top, *label_rows(sh, P_bot), pure=False)
            for fut, sh in zip(self.active, self.shards)
        ]
        results = self.client.gather(futures)
        self.n_obs = sum(n for _, n, _ in results)
        self.n_active = sum(a for _, _, a in results)
        return reduce_shards([prod for prod, _, _ in results], self.d1, self.d2, P.shape[1])

    def release(self) -> None:
        for fut in self.active:
            fut.release()
        self.active = []


class DaskEngine:
    """Computes each shard on the workers of a ``distributed.Client``."""

    def __init__(self, client):
        self.client = client

    @property
    def n_workers(self) -> int:
        return len(self.client.scheduler_info()["workers"])

    def open_batch(self, shards, d1, d2, A=None, B=None) -> DaskBatch:
        return DaskBatch(self.client, shards, d1, d2, A, B)

    def label_sums(self, shards, d1, d2):
        parts = self.client.gather(self.client.map(label_sums_shard, shards, pure=False))
        return reduce_label_sums(parts, d1, d2)
