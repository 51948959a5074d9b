"""The in-process engine: the label blocks are Python objects in this process.

Every block function runs with one BLAS thread, as on a Dask worker started with
``threads_per_worker=1``, so both engines give bit-identical numbers.
"""

from __future__ import annotations

from ..data.shards import Pieces, ScoredPieces
from ..ops.kernels import one_blas_thread
from ..utils.provenance import processes_blas
from . import blocks as B


class LocalEngine:
    """Runs every block function here, block after block."""

    n_workers = 0
    client = None  # no cluster
    prefetches = False
    keeps_lineage = False
    bytes_sent = bytes_received = 0  # nothing travels

    def __init__(self, handles=None):
        self.handles = list(handles or [])

    def start(self, bounds) -> None:
        self.handles = [B.new_block(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]

    def adopt(self, blocks) -> None:
        """Blocks from elsewhere (gathered from a cluster) held here from now on."""
        self.handles = list(blocks)

    def blas(self) -> str:
        """The BLAS of the processes that run the blocks (here: this one)."""
        return processes_blas()

    def share(self, value):
        """``value`` as the blocks' tasks see it (here: itself)."""
        return value

    def share_rows(self, rows):
        """Features in row chunks as the blocks read them (here: themselves, each chunk
        computed when rows of it are read, :class:`~onebit_dask.data.chunked_rows.ChunkedRows`)."""
        return rows

    def unshare(self, shared) -> None:
        """Forget ``shared``, what :meth:`share` returned (here: nothing to forget)."""

    def settle(self, timeout: float = 600.0) -> None:
        """Wait until the tasks of the last round have ended (here: they ended with it)."""

    def prepare(self, shards, bounds):
        """Per-block data of a batch: label-block shards as they are; row-range shards
        loaded, as :class:`~.blocks.RowShards`."""
        if B.label_aligned(shards, bounds):
            return list(shards)
        return B.RowShards([sh.load() for sh in shards], list(bounds))

    def by_block(self, data, model, scored: bool = False):
        """The per-block data of a batch for ``model``: :class:`~.blocks.RowShards` read
        once each (:func:`~.blocks.read_row_shard`, with the blocks' ``B`` rows) and
        their :class:`~onebit_dask.data.shards.Pieces` handed to the blocks, or with
        ``scored`` their bits scored (:func:`~.blocks.score_row_shard`,
        :class:`~onebit_dask.data.shards.ScoredPieces`); label-block shards as they are."""
        if not isinstance(data, B.RowShards):
            return data
        reader, pieces = (B.score_row_shard, ScoredPieces) if scored else (B.read_row_shard,
                                                                          Pieces)
        B_rows = None if model.A is None else [h.slots["B"] for h in self.handles]
        b_rows = None if model.A is None or not model.thresholds else [
            h.slots["b"] for h in self.handles]
        with one_blas_thread():
            parts = [B.call(reader, sh, model, B_rows, data.bounds, b_rows)
                     for sh in data.shards]
        return [pieces([p[s] for p in parts]) for s in range(len(data.bounds) - 1)]

    def map(self, fn, *args, per_block=None) -> list:
        """Run ``fn(block, [per_block[s],] *args)`` on every block; the small results in
        block order."""
        with one_blas_thread():
            self.handles = [B.call(fn, h, *(() if per_block is None else (per_block[s],)), *args)
                            for s, h in enumerate(self.handles)]
        return [h.out for h in self.handles]

    @property
    def n_blocks(self) -> int:
        """The label blocks held (their count: nothing is gathered)."""
        return len(self.handles)

    def blocks(self) -> list:
        return self.handles

    def local(self) -> "LocalEngine":
        return self

