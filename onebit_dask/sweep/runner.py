"""Run a sweep: cells as Dask tasks (or in this process), their values written by the
runner in batches; a second run of the same command resumes.

On a cluster, a small cell is one task (:func:`.cell.compute_cell`, the in-process engine
on one worker) that returns its values; a large cell (:func:`~.placement.runs_distributed`)
is fitted from this process with the Dask engine, its shards on all the workers
(:func:`fit_across_cluster`, a few at once in a thread pool). The runner is the only
writer of the store: it holds the store's lock (:mod:`onebit_dask.io.stores.lock`) and
writes the finished cells every :data:`FLUSH_CELLS` cells or :data:`FLUSH_S` seconds. A
cell computed but not yet written when the runner dies is computed again by the next run
(same values). A spec that appends grid values to the cube's own extends the cube
(:func:`.extension.extend`, while the new cells run, as a new store is created).
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import queue
import sys
import time
import traceback
import uuid
from dataclasses import dataclass, field

import numpy as np

from . import cube as store
from .cell import compute_cell
from .extension import extend, extended_flags
from ..utils.errors import SweepRuntimeError
from ..utils.provenance import processes_blas
from ..io.stores import atomic
from ..io.stores.lock import StoreLock, StoreLockedError
from .methods import METHODS
from .distribute import placement_text, runs_distributed
from .plan import plan_output
from .spec import SweepSpec

FLUSH_CELLS = 256   # write the finished cells at least every this many cells ...
FLUSH_S = 5.0       # ... or this many seconds
LARGE_IN_FLIGHT = 2  # large cells fitted across the cluster at once


@dataclass
class SweepSummary:
    total: int
    ran: int = 0
    skipped: int = 0
    skipped_failed: int = 0
    failed: int = 0
    wall_s: float = 0.0
    cell_s: float = 0.0  # seconds inside the cells (fit and evaluation), summed
    extended: dict = field(default_factory=dict)  # grid values appended

    def __str__(self) -> str:
        earlier = (f", {self.skipped_failed} skipped (failed before; --retry-failed runs "
                   "them)" if self.skipped_failed else "")
        grown = "; ".join(f"{key} + {', '.join(map(str, values))}" if len(values) <= 4 else
                          f"{key} + {len(values)} values" for key, values in
                          self.extended.items())
        return (f"{self.total} cells: {self.ran} run, {self.skipped} skipped (already done)"
                f"{earlier}, {self.failed} failed, {self.wall_s:.1f} s"
                f"{f'; the cube extended ({grown})' if grown else ''}")


@dataclass(frozen=True)
class Cell:
    index: tuple
    params: dict
    all_steps: bool  # a method without a step rule: stored along every step


def fit_across_cluster(params: dict, fixed: dict, client):
    """Fit one cell from this process with the Dask engine (its shards on all workers)."""
    start = time.perf_counter()
    result = METHODS[params["method"]].run(params, fixed, client=client)
    return result, {"worker": client.scheduler.address, "host": store.this_host(),
                    "engine": "dask"}, \
        time.perf_counter() - start


def describe(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def _attempts(fn, retries: int):
    """``(fn(), None)``, or ``(None, error)`` after ``retries + 1`` attempts that raised."""
    for attempt in range(retries + 1):
        try:
            return fn(), None
        except Exception as exc:  # the cell failed: retry, then record it
            if attempt == retries:
                return None, describe(exc)


def pending_cells(spec: SweepSpec, done, failed=None):
    """``(cell, state)`` of every cell to store, state ``"done"``, ``"failed"`` or
    ``"todo"``. A method that ignores ``step`` runs once (at the first step)."""
    step_axis = spec.dims.index("step")
    for index, params in spec.cells():
        all_steps = not METHODS[params["method"]].uses_step
        if all_steps and index[step_axis] != 0:
            continue
        state = "done" if done[index] else "failed" if failed is not None and failed[index] \
            else "todo"
        yield Cell(index, params, all_steps), state


def _label(params: dict) -> str:
    """A cell's parameters, as a progress line shows them (a file dataset's paths not:
    its name says which)."""
    return " ".join(f"{k}={v}" for k, v in params.items()
                    if k not in ("train", "test", "train_path", "test_path"))


class CellProgress:
    """``[done/total] cell parameters`` lines on stderr (a redrawn line on a terminal)."""

    def __init__(self, total: int, enabled: bool, stream=None):
        self.total, self.count = total, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = self.stream.isatty()

    def update(self, params: dict, error: str | None, seconds: float, engine: str) -> None:
        self.count += 1
        if not self.enabled:
            return
        state = f"FAILED: {error}" if error else f"{seconds:.1f}s"
        where = " (across the cluster)" if engine == "dask" else ""
        end = "" if self.tty and not error else "\n"
        prefix = "\r\033[K" if self.tty else ""
        self.stream.write(f"{prefix}[{self.count}/{self.total}] {_label(params)}{where} "
                          f"{state}{end}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty and self.count:
            self.stream.write("\n")


def _in_process(todo, fixed, retries):
    for cell in todo:
        outcome, error = _attempts(lambda: compute_cell(cell.params, fixed), retries)
        yield cell, outcome, error


def _on_cluster(client, todo, fixed, retries, tick):
    """Yield ``(cell, outcome, error)`` as cells finish (``None`` every ``tick`` s idle).

    Small cells: tasks with Dask's ``retries``, at most a few per worker thread queued
    at a time; the values of the cells finished meanwhile are fetched with one
    ``gather``. Large cells: fitted from a thread pool with this client.
    """
    from distributed import Future

    done_q = queue.Queue()
    small = collections.deque(c for c in todo if not runs_distributed(c.params, fixed))
    large = [c for c in todo if runs_distributed(c.params, fixed)]
    window = max(8, 4 * sum(client.nthreads().values()))
    futures = set()

    def submit_small():
        cell = small.popleft()
        fut = client.submit(compute_cell, cell.params, fixed, retries=retries,
                            key=f"onebit-cell-{uuid.uuid4().hex}")
        futures.add(fut)
        fut.add_done_callback(lambda f, c=cell: done_q.put((c, f)))

    pool = concurrent.futures.ThreadPoolExecutor(LARGE_IN_FLIGHT, "onebit-sweep-large")
    try:
        for cell in large:
            job = pool.submit(_attempts, lambda c=cell: fit_across_cluster(c.params, fixed,
                                                                           client), retries)
            job.add_done_callback(lambda f, c=cell: done_q.put((c, f)))
        while small and len(futures) < window:
            submit_small()
        left = len(todo)
        while left:
            try:
                ready = [done_q.get(timeout=tick)]
            except queue.Empty:
                yield None
                continue
            while True:  # every cell finished by now: their values in one gather
                try:
                    ready.append(done_q.get_nowait())
                except queue.Empty:
                    break
            left -= len(ready)
            small_done = [f for _, f in ready if isinstance(f, Future)]
            for fut in small_done:  # keep the workers fed before fetching the values
                futures.discard(fut)
                if small:
                    submit_small()
            finished = [f for f in small_done if f.status == "finished"]
            values = dict(zip(finished, client.gather(finished))) if finished else {}
            for cell, fut in ready:
                if not isinstance(fut, Future):
                    yield cell, *fut.result()
                elif fut in values:
                    yield cell, values[fut], None
                elif fut.status == "error":
                    yield cell, None, describe(fut.exception())
                else:
                    yield cell, fut.result(), None  # a cancelled future raises here
    finally:
        for fut in futures:
            fut.cancel()
        pool.shutdown(wait=False, cancel_futures=True)


def _full_disk(out: str, exc: OSError, written: int, left: int) -> SweepRuntimeError:
    return SweepRuntimeError(
        f"could not write the results to {out!r}: {exc.strerror or exc}; "
        f"{written} cells written by this run are kept, {left} cells will run again: "
        "free space and run the same command again")


def run_sweep(spec: SweepSpec, out, client=None, *, overwrite: bool = False,
              progress: bool = True, retries: int = 0, retry_failed: bool = False,
              flush_cells: int = FLUSH_CELLS, flush_s: float = FLUSH_S) -> SweepSummary:
    """Run (or resume) ``spec`` into the zarr store ``out``.

    Parameters
    ----------
    spec : SweepSpec
    out : str or os.PathLike
        The cube's zarr store, a local path or a ``file://`` URL (another URL is a
        ``StoreError``: the runner's lock and failures file are local files). Created if
        missing; if it holds the same spec,
        the cells already done are skipped; a spec that appends grid values to the
        cube's own, everything else the same, extends it (its cells done kept, the new
        ones run: :func:`~.extension.extend`); another spec is refused unless ``overwrite``.
    client : distributed.Client, optional
        Run the cells on its workers (large cells across all of them); ``None``
        runs them here, one after the other. Only this process writes ``out``.
    overwrite : bool, default False
        Replace a store made from another spec (or a damaged one).
    progress : bool, default True
        One line per cell on stderr.
    retries : int, default 0
        Run a cell that raised up to this many more times (Dask's ``retries`` for a
        task; a task whose worker died is rescheduled by Dask in any case).
    retry_failed : bool, default False
        Run again the cells marked ``failed`` by an earlier run (skipped otherwise).
    flush_cells, flush_s : int, float
        Write the finished cells every ``flush_cells`` cells or ``flush_s`` seconds.

    Raises
    ------
    StoreError
        ``out`` cannot be used (before any work).
    SweepRuntimeError
        The store is in use by another runner, damaged, or a write failed (a full
        disk): the cells written so far are kept.
    """
    out = store.local_output(out).rstrip("/")
    start = time.perf_counter()
    with StoreLock(out) as lock:
        atomic.recover(out)  # a replace killed between its renames: the old store back
        plan = plan_output(out, spec, overwrite)
        if plan.action == "create":  # every cell to run; created while the first cells run
            done = failed = np.zeros(spec.shape, dtype=bool)
        elif plan.action == "extend":  # the cube's cells kept; extended while new ones run
            done, failed = extended_flags(out, plan.old, spec)
        else:
            done, failed = store.flags(out, spec)
        cells = list(pending_cells(spec, done, failed))
        summary = SweepSummary(total=len(cells), extended=plan.added or {})
        todo = [c for c, state in cells if state == "todo" or (state == "failed" and retry_failed)]
        summary.skipped = sum(state == "done" for _, state in cells)
        summary.skipped_failed = len(cells) - summary.skipped - len(todo)
        # the store is built while the first cells run; the lock is never released while
        # it is (the with block waits for the build, a Ctrl-C before the loop too)
        with concurrent.futures.ThreadPoolExecutor(1, "onebit-sweep-create") as creator:
            creating = (creator.submit(store.create, out, spec) if plan.action == "create"
                        else creator.submit(extend, out, plan.old, spec)
                        if plan.action == "extend" else None)

            writer = store.CubeWriter(out, spec, before_write=lock.check)
            blas = processes_blas(client)
            bar = CellProgress(len(todo), enabled=progress)
            failures = []
            results = (_in_process(todo, spec.fixed, retries) if client is None else
                       _on_cluster(client, todo, spec.fixed, retries, tick=min(1.0, flush_s)))
            last_flush = time.monotonic()

            def flush():
                nonlocal last_flush
                try:
                    if creating is not None:
                        creating.result()  # the store exists before the first write (or its error)
                    if failures:  # the error texts first: a cell is marked failed after them
                        with open(store.failures_path(out), "a") as fh:
                            fh.writelines(failures)
                        failures.clear()
                    writer.flush()
                except OSError as exc:
                    raise _full_disk(out, exc, writer.written, len(todo) - writer.written) from None
                last_flush = time.monotonic()

            try:
                for item in results:
                    if item is not None:
                        cell, outcome, error = item
                        result, where, seconds = outcome if outcome else (None, {}, 0.0)
                        writer.add(cell.index, cell.all_steps, cell.params, result, where)
                        bar.update(cell.params, error, seconds, where.get("engine", "local"))
                        summary.cell_s += seconds
                        if error is None:
                            summary.ran += 1
                        else:
                            summary.failed += 1
                            failures.append(json.dumps({
                                "cell": cell.params, "error": error,
                                "time": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
                    if (len(writer) >= flush_cells or time.monotonic() - last_flush >= flush_s
                            or (creating is not None and creating.done()
                                and creating.exception() is not None)):
                        flush()
                flush()
            except (SweepRuntimeError, StoreLockedError):
                raise
            except BaseException:
                try:  # keep what is finished (a KeyboardInterrupt, a lost scheduler)
                    flush()
                except (SweepRuntimeError, OSError):
                    pass
                raise
            finally:
                results.close()  # cancels the tasks still queued (after an error)
                bar.close()
        try:
            store.set_attrs(out, placement=placement_text(spec.fixed, client),
                            blas=blas)
            store.consolidate(out)
        except OSError as exc:
            raise _full_disk(out, exc, writer.written, 0) from None
    summary.wall_s = time.perf_counter() - start
    return summary
