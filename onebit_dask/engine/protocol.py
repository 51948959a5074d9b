"""The engine protocol: what the fit loop, the model store and the top-k engine ask of
an engine (:class:`~onebit_dask.engine.local.LocalEngine`,
:class:`~onebit_dask.engine.dask_engine.DaskEngine`).

A new engine implements these and nothing else; the client-side algorithm reduces what
:meth:`Engine.map` returns in block order, so an engine never changes the numbers.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable


@runtime_checkable
class Engine(Protocol):
    """Where the label blocks live, and the block functions run on them.

    Attributes
    ----------
    client : distributed.Client or None
        The cluster the blocks live on (``None``: this process).
    n_workers : int
        Processes that run block functions (0: this one).
    prefetches : bool
        Whether the next batch is prepared while a step runs (the fit loop asks).
    keeps_lineage : bool
        Whether a lost block can be recomputed from its earlier rounds.
    bytes_sent, bytes_received : int
        Array arguments sent to the blocks' tasks and small results gathered, so far.
    n_blocks : int
        The label blocks held (known without reaching them).
    """

    client: Any
    n_workers: int
    prefetches: bool
    keeps_lineage: bool
    bytes_sent: int
    bytes_received: int
    n_blocks: int

    def start(self, bounds) -> None:
        """One empty block per label range ``[bounds[s], bounds[s + 1])``."""

    def adopt(self, blocks) -> None:
        """Hold ``blocks`` (:class:`~onebit_dask.engine.blocks.Block`) from now on."""

    def blas(self) -> str:
        """The BLAS of the processes that run the blocks (provenance)."""

    def share(self, value):
        """``value`` as the blocks' tasks take it (sent to a cluster once)."""

    def share_rows(self, rows):
        """Features in row chunks (:class:`~onebit_dask.data.chunked_rows.ChunkedRows`
        of a dask array's chunks) as the blocks' tasks take them: on a cluster, the
        chunks computed by the workers, never in this process."""

    def unshare(self, shared) -> None:
        """Forget ``shared`` (what ``share`` or ``share_rows`` returned): data shared for
        one round, freed on a cluster once no task needs them."""

    def prepare(self, shards, bounds):
        """The per-block data of a batch's ``shards``."""

    def by_block(self, data, model, scored: bool = False):
        """``prepare``'s data as each block's share for ``model``."""

    def map(self, fn: Callable, *args, per_block=None) -> list:
        """Run ``fn(block, [per_block[s],] *args)`` on every block; the small results
        (``block.out``) in block order."""

    def settle(self, timeout: float = 600.0) -> None:
        """Wait until the tasks of the last round have ended (before removing what they
        write into)."""

    def blocks(self) -> list:
        """The blocks (or their futures), in order."""

    def local(self):
        """An engine holding the same blocks in this process."""
