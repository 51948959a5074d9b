"""The Dask engine: every shard of a batch is drawn (or read) and multiplied on a worker.

For batch ``t`` the client submits one *load* task per shard, which draws the
shard's data on a worker (``SeedSequence([seed, t, s])``, or a row range of a
zarr store); it does so while step ``t - 1`` still runs, at a lower priority, so
drawing the next batch overlaps the current step. An *activate* task then
computes the scores and keeps only the rows with a non-zero residual. Those rows stay on the worker for the two products of the step: each
*apply* task returns ``d1 x l`` numbers and the rows of the shard's labels, the
client adds them in shard order and does the QR and the column norms. Only
``O(l (d1 + d2))`` numbers travel per product; the ``m x d1`` features never
leave the worker that drew them.

Task arguments are sent inside the task (not scattered), so when a worker dies
the scheduler can recompute a lost shard from its descriptor and the result is
the same as an undisturbed run.
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np

from .engine import (activate_loaded, label_rows, label_sums_loaded, load_shard,
                     reduce_label_sums)
from .kernels import reduce_shards, shard_apply


@contextlib.contextmanager
def _large_arguments_expected():
    """The factor rows a task carries are O(d2 k / n_shards) by design (so a lost task
    can be recomputed); do not warn about "large graphs" for them."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
        yield


def _apply_counted(active, P_top, P_bot_rows, offset):
    return shard_apply(active, P_top, P_bot_rows, offset), active.n_obs, active.labels.size


class DaskBatch:
    """The active rows of each shard live on a worker until :meth:`release`.

    ``n_obs`` and ``n_active`` are known after the first :meth:`apply`, which is
    submitted right behind the activations (one round trip for both).
    """

    def __init__(self, client, loaded, d1: int, d2: int, A=None, B=None):
        self.client = client
        self.shards = [sh for sh, _ in loaded]
        self.d1, self.d2 = d1, d2
        with _large_arguments_expected():
            self.active = [
                client.submit(activate_loaded, data, A, *label_rows(sh, B), pure=False,
                              priority=1)
                for sh, data in loaded
            ]

    def apply(self, P: np.ndarray) -> np.ndarray:
        P_top, P_bot = P[: self.d1], P[self.d1:]
        with _large_arguments_expected():
            futures = [
                self.client.submit(_apply_counted, fut, P_top, *label_rows(sh, P_bot),
                                   pure=False, priority=1)
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

    def load(self, shards):
        """Start drawing the shards on the workers, below the current step's priority.

        Returns ``[(shard, future)]``; the data stay on the workers.
        """
        return [(sh, self.client.submit(load_shard, sh, pure=False, priority=-1))
                for sh in shards]

    def open_batch(self, loaded, d1, d2, A=None, B=None) -> DaskBatch:
        return DaskBatch(self.client, loaded, d1, d2, A, B)

    def label_sums(self, loaded, d1, d2):
        futures = [self.client.submit(label_sums_loaded, data, pure=False, priority=1)
                   for _, data in loaded]
        return reduce_label_sums(self.client.gather(futures), d1, d2)
