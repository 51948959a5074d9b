"""The Dask engine: each label block lives on a worker, as a future, across steps.

A block function runs where its block is; the client sends the small arguments inside
the task, the round's ``d1 x l`` arrays once (below), and gathers the small results
(``O(d1 l + l^2)`` numbers per block and round). Label-block shards are drawn on the
workers inside the block's task (synthetic problems; label matrices, from ``X`` and the
block's columns of ``Y``, sent to the cluster once per fit, :meth:`share`);
row-range shards are loaded by one task each while the previous step still runs; at
the step, a task where the shard was loaded reads it once (scores, active rows) and
hands each block its per-label sums.

When a worker dies the scheduler recomputes its blocks from their lineage, each block
from its own previous rounds and the batch's seed: the result is the same as an
undisturbed run. Small arguments travel inside the block tasks. An array argument of
:data:`SHARED_BYTES` or more (the ``d1 x l`` tops, the model's ``A``) is sent once per
round as a task of its own, which every block's task names: the lineage the scheduler
keeps holds one copy of each round's arrays, not one per block and task (docs/PERFORMANCE.md,
"The round's large arguments sent once"). A fit with a checkpoint restarts its blocks from each
checkpoint it writes (:meth:`onebit_dask.persist.Checkpoint.write`), and the rounds before
it are forgotten. The data a fit reads at every step go to the cluster once per fit
(:meth:`DaskEngine.share`).
"""

from __future__ import annotations

import operator
import threading
import time
import uuid

import numpy as np
from dask.sizeof import sizeof
from distributed import Future

from ..utils.warnings import ignored
from ..data.chunked_rows import held_rows
from ..data.shards import Pieces, ScoredPieces
from ..ops.features import FeatureMap
from ..utils.provenance import processes_blas
from ..utils.signals import sigint_deferred
from . import blocks as B
from .local import LocalEngine


SHARED_BYTES = 2**16
"""An array argument of a block function of at least this many bytes goes to the cluster
once per round, as a task of its own, not inside each block's task: every copy inside a
task stays in the scheduler as lineage (with a ``LocalCluster``, in this process). Below
it (the ``l x l`` arrays, the tops of a small ``d1``) the copies cost less than a task."""


@sizeof.register(FeatureMap)
def _sizeof_feature_map(feature_map: FeatureMap) -> int:
    """Its arrays' bytes (Dask's default counts the object alone): the client traffic
    counted by the engine and Dask's memory estimates see them."""
    return sum(a.nbytes for a in (feature_map.mean, feature_map.scale,
                                  feature_map.directions, feature_map.factors))


def task_key(name: str) -> str:
    """A task key for the dashboard and the scheduler's logs: ``onebit-NAME-<uuid>``, so
    the package's tasks are told apart from other libraries' (``getitem``, ``identity``)."""
    return f"onebit-{name.replace('_', '-')}-{uuid.uuid4().hex}"


def _large_arguments_expected():
    """Tasks carry ``d1 x l`` blocks (and, once, a block's initial rows) by design, so a
    lost task can be recomputed: do not warn about "large graphs" for them."""
    return ignored(dict(message="Sending large graph", category=UserWarning))


class DaskEngine:
    """Label blocks as futures on the workers of a ``distributed.Client``."""

    prefetches = True
    keeps_lineage = True  # each block's earlier rounds, to recompute a lost block

    def __init__(self, client, handles=None):
        self.client = client
        self.handles = list(handles or [])
        self.bytes_sent = 0  # array arguments the client sent for block tasks
        self.bytes_received = 0  # small results the client gathered
        self._recent = [{}, {}]  # id -> (array, future): the last two rounds' large arguments
        self._shared = {}  # id -> (value, future): what share() sent
        self._blas = None  # blas(), once the workers were asked
        self._submitted = []  # the last round's tasks, as they were submitted (settle())

    @property
    def n_workers(self) -> int:
        return len(self.client.scheduler_info()["workers"])

    def blas(self) -> str:
        """The BLAS of this process and of the workers
        (:func:`~onebit_dask.provenance.blas_summary`), asked once; one warning if a
        worker runs another than this process."""
        if self._blas is None:
            self._blas = processes_blas(self.client)
        return self._blas

    def start(self, bounds) -> None:
        """One empty block per label range, spread over the workers round-robin (a
        preference: a block may start elsewhere, e.g. before any worker has joined).
        The workers' BLAS is compared with this process's (:meth:`blas`)."""
        self.blas()
        workers = sorted(self.client.scheduler_info()["workers"])
        place = [dict(workers=workers[s % len(workers)], allow_other_workers=True)
                 if workers else {} for s in range(len(bounds) - 1)]
        self.handles = [self.client.submit(B.new_block, lo, hi, key=task_key("new-block"), **where)
                        for (lo, hi), where in zip(zip(bounds[:-1], bounds[1:]), place)]
        self._recent, self._shared = [{}, {}], {}

    def adopt(self, blocks) -> None:
        """Blocks held in this process (a loaded or gathered model) move to the workers."""
        with _large_arguments_expected():
            self.handles = [self.client.submit(_identity, b, key=task_key("adopt-block"))
                            for b in blocks]
        self._recent, self._shared = [{}, {}], {}

    def _by_reference(self, args):
        """``args`` with every array of :data:`SHARED_BYTES` or more in them (also inside
        tuples, lists and named tuples such as the :class:`~.blocks.StepModel`) replaced
        by the future of a task holding it; an array of the last two rounds that had such
        arguments passed again (the same object, never modified: e.g. a step's ``Q_top``
        as the next step's ``Q``, with a held-out evaluation in between) is not sent
        again. Only those rounds' futures are held here: an earlier round's task stays in
        the scheduler as the lineage of the blocks that used it, its value no longer in
        a worker's memory."""
        large = {}

        def collect(value):
            if isinstance(value, np.ndarray):
                if value.nbytes >= SHARED_BYTES:
                    large[id(value)] = value
            elif isinstance(value, (tuple, list)):
                for v in value:
                    collect(v)

        collect(args)
        if not large:
            return args
        known = {i: kept[i][1] for kept in self._recent for i, a in large.items()
                 if i in kept and kept[i][0] is a}
        new = [i for i in large if i not in known]
        if new:
            with _large_arguments_expected():
                futures = [self.client.submit(_identity, large[i], key=task_key("round-argument"),
                                              priority=1)
                           for i in new]
            known.update(zip(new, futures))
            self.bytes_sent += sum(large[i].nbytes for i in new)
        self._recent = [self._recent[1], {i: (large[i], known[i]) for i in large}]
        return B.map_leaves(
            lambda v: known.get(id(v), v) if isinstance(v, np.ndarray) else v, args)

    def share(self, value):
        """``value`` sent to the cluster once (a future the blocks' tasks take as an
        argument: data a fit reads at every step, such as an in-memory label matrix); the
        same object shared again (a feature map at every ``partial_fit``) is not sent
        again until the blocks start afresh.

        It is a task of its own, not scattered data: Dask's active memory manager keeps
        one copy of a scattered value, which is lost for good with its worker (the fit
        then failed, "already forgotten"), while a task's value is computed again
        elsewhere. So the scheduler holds a copy of the value as long as the task lives
        (with a ``LocalCluster``, in this process: a label matrix fitted from memory is
        there twice; a CSR store's rows are read by the workers instead)."""
        kept = self._shared.get(id(value))
        if kept is not None and kept[0] is value:
            return kept[1]
        with _large_arguments_expected():
            future = self.client.submit(_identity, value, key=task_key("shared"))
        self._shared[id(value)] = (value, future)
        return future

    def share_rows(self, rows):
        """Features in row chunks whose chunks are dask arrays
        (:class:`~onebit_dask.data.chunked_rows.ChunkedRows` of a dask array ``X``) as a
        future of a :class:`~onebit_dask.data.chunked_rows.ChunkedRows` of the computed
        chunks: each chunk computed by a worker (``client.compute``: the array's graph
        goes to the scheduler, its values never come here), then one task that takes
        the chunks' futures (resolved on its worker) and holds them. The label blocks'
        tasks read their rows from it, as from a :meth:`share`'d array; a worker lost
        computes it again from the chunks' lineage. Once per fit, as :meth:`share`."""
        kept = self._shared.get(id(rows))
        if kept is not None and kept[0] is rows:
            return kept[1]
        chunks = self.client.compute(list(rows.chunks))
        future = self.client.submit(held_rows, rows.offsets, rows.shape[1], rows.dtype,
                                    *chunks, key=task_key("shared-rows"))
        self._shared[id(rows)] = (rows, future)
        return future

    def unshare(self, shared) -> None:
        """Forget ``shared``, what :meth:`share` or :meth:`share_rows` returned: sharing
        the same value again sends it again, and its data leave the workers once no task
        needs them (the task stays in the scheduler as the lineage of the blocks that
        read it). For data shared for one round, as a ``partial_fit`` batch."""
        for key, (_, future) in list(self._shared.items()):
            if future is shared:
                del self._shared[key]

    def prepare(self, shards, bounds):
        """Per-block data of a batch. Row-range shards start loading now, on the workers,
        below the running step's priority (:class:`~.blocks.RowShards` of futures)."""
        if B.label_aligned(shards, bounds):
            return list(shards)
        return B.RowShards([self.client.submit(B.load_shard, sh, key=task_key("load-shard"),
                                               priority=-1)
                            for sh in shards], list(bounds))

    def by_block(self, data, model, scored: bool = False):
        """The per-block data of a batch for ``model``: each row-range shard read once, by
        a task where it was loaded (:func:`~.blocks.read_row_shard`, given the blocks'
        ``B`` rows worker to worker), its pieces handed to the blocks' tasks as
        :class:`~onebit_dask.data.shards.Pieces` of futures; with ``scored``, its bits
        scored (:func:`~.blocks.score_row_shard`,
        :class:`~onebit_dask.data.shards.ScoredPieces`)."""
        if not isinstance(data, B.RowShards):
            return data
        reader, pieces = (B.score_row_shard, ScoredPieces) if scored else (B.read_row_shard,
                                                                          Pieces)
        submit = self.client.submit
        (sent,) = self._by_reference((model,))
        B_rows = None if model.A is None else [
            submit(B.slot_of, h, "B", key=task_key("rows-B"), priority=1) for h in self.handles]
        b_rows = None if model.A is None or not model.thresholds else [
            submit(B.slot_of, h, "b", key=task_key("rows-b"), priority=1) for h in self.handles]
        with _large_arguments_expected():
            parts = [submit(B.call, reader, sh, sent, B_rows, data.bounds, b_rows,
                            key=task_key(reader.__name__), priority=1)
                     for sh in data.shards]
        self.bytes_sent += _inline_bytes(sent) * len(parts)
        return [pieces([submit(operator.getitem, p, s, key=task_key("piece"), priority=1)
                        for p in parts])
                for s in range(len(data.bounds) - 1)]

    def map(self, fn, *args, per_block=None) -> list:
        submit = self.client.submit
        args = self._by_reference(args)
        new = self._submitted = []  # the round's tasks, all submitted or none (settle())
        with _large_arguments_expected(), sigint_deferred():  # keys named after fn
            for s, h in enumerate(self.handles):
                new.append(submit(B.call, fn, h, *(() if per_block is None else
                                                   (per_block[s],)), *args,
                                  key=task_key(fn.__name__), priority=1))
        outs = [submit(B.out_of, f, key=task_key("result"), priority=1) for f in new]
        self.handles = new
        wait_ended(outs)
        results = self.client.gather(outs)
        self.bytes_sent += _inline_bytes(args) * len(new) + (0 if per_block is None else sum(
            sizeof(p) for p in per_block if not _holds_futures(p)))
        self.bytes_received += sizeof(results)
        return results

    @property
    def n_blocks(self) -> int:
        """The label blocks held (their count: nothing is gathered)."""
        return len(self.handles)

    def blocks(self) -> list:
        """The blocks, gathered into this process."""
        wait_ended(self.handles)
        return self.client.gather(self.handles)

    def settle(self, timeout: float = 600.0) -> None:
        """Wait until the tasks of the last round have ended.

        A round the client stopped waiting for (a ``KeyboardInterrupt``, an error in
        another block) goes on on the workers; a Ctrl-C while a round is submitted waits
        until the whole round is (:func:`~onebit_dask.utils.signals.sigint_deferred`).
        A caller that removes what those tasks write into (the temporary of
        :func:`onebit_dask.persist.model_store.write_store_atomic`) waits for them
        first, or a write landing later would create it again. ``timeout`` only guards
        against a hang.
        """
        wait_ended(self._submitted, timeout)

    def local(self) -> LocalEngine:
        return LocalEngine(self.blocks())


def wait_ended(futures, timeout: float | None = None) -> bool:
    """Return once each of ``futures`` has ended (finished, failed or cancelled):
    ``True``, or ``False`` after ``timeout`` seconds.

    Called before ``Client.gather``, so that the gather finds every future ended: a
    gather interrupted while it waits (a ``KeyboardInterrupt``) leaves one waiting task
    per future in the client's event loop, which prints "Task exception was never
    retrieved" with a traceback when the client closes. Interrupting this wait leaves
    only done callbacks, which end quietly.
    """
    ended = threading.Semaphore(0)
    for fut in futures:
        fut.add_done_callback(lambda _: ended.release())
    deadline = None if timeout is None else time.monotonic() + timeout
    for _ in futures:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not ended.acquire(timeout=left):
            return False
    return True


def _inline_bytes(value) -> int:
    """The bytes ``value`` puts inside a task (futures in it count for nothing: their
    data went once, counted when sent)."""
    if isinstance(value, Future):
        return 0
    if isinstance(value, (tuple, list)):
        return sum(_inline_bytes(v) for v in value)
    return sizeof(value)


def _holds_futures(value) -> bool:
    """Whether ``value`` (a block's data) refers to data on the workers."""
    if isinstance(value, Future):
        return True
    return isinstance(value, (list, tuple)) and any(_holds_futures(v) for v in value)


def _identity(block):
    return block
