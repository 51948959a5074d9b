"""The in-process engine: the label blocks are Python objects in this process.

Every block function runs with one BLAS thread, as on a Dask worker started with
``threads_per_worker=1``, so both engines give bit-identical numbers.
"""

from __future__ import annotations

from threadpoolctl import threadpool_limits

from . import blocks as B


class LocalEngine:
    """Runs every block function here, block after block."""

    n_workers = 0
    prefetches = False
    bytes_sent = bytes_received = 0  # nothing travels

    def __init__(self, handles=None):
        self.handles = list(handles or [])

    def start(self, bounds) -> None:
        self.handles = [B.new_block(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]

    def prepare(self, shards, bounds):
        """Per-block data of a batch: label-block shards as they are; row-range shards
        (``label_range`` not a block) loaded and split by label block."""
        if _aligned(shards, bounds):
            return list(shards)
        with threadpool_limits(1, user_api="blas"):
            pieces = [B.split_by_block(sh.load(), bounds) for sh in shards]
        return [[p[s] for p in pieces] for s in range(len(bounds) - 1)]

    def map(self, fn, *args, per_block=None) -> list:
        """Run ``fn(block, [per_block[s],] *args)`` on every block; the small results in
        block order."""
        with threadpool_limits(1, user_api="blas"):
            self.handles = [B.call(fn, h, *(() if per_block is None else (per_block[s],)), *args)
                            for s, h in enumerate(self.handles)]
        return [h.out for h in self.handles]

    def blocks(self) -> list:
        return self.handles

    def local(self) -> "LocalEngine":
        return self


def _aligned(shards, bounds) -> bool:
    """Whether shard ``s`` holds exactly the labels of block ``s`` (synthetic batches)."""
    return len(shards) == len(bounds) - 1 and all(
        getattr(sh, "label_range", None) == (lo, hi)
        for sh, lo, hi in zip(shards, bounds[:-1], bounds[1:]))
