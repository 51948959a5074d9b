"""Which engine a fit runs on, and where a fitted model's label blocks live.

A fit runs on the engine its ``engine`` parameter names (:func:`engine_named`): in this
process, or on the client of :func:`use_client` / the default ``distributed.Client``.
After the fit the blocks stay where they are, or come into this process when they are
small (:func:`keep`), so that a small model outlives its client. Every use of a fitted
model reaches its blocks through :func:`live`, which refuses blocks whose cluster is gone.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys

import numpy as np

from .blocks import rows_of
from .local import LocalEngine
from . import make_engine

KEEP_LOCAL_LIMIT = 3_000_000  # label-side numbers (Q, V, B; 24 MB) gathered here after a fit
GATHER_LIMIT = 50_000_000  # label-side numbers Q_, V_ or B_ may gather

_CLIENT = contextvars.ContextVar("onebit_dask_client", default=None)


@contextlib.contextmanager
def use_client(client):
    """Run the fits inside on ``client`` (``engine="auto"`` or ``"dask"``), in this thread
    or task only.

    Like ``client.as_current()``, without its change of dask's global scheduler setting,
    which threads entering and leaving it at once can leave behind (here, several threads
    each fit on the cluster).
    """
    token = _CLIENT.set(client)
    try:
        yield client
    finally:
        _CLIENT.reset(token)


def current_client():
    """The client of :func:`use_client`, else the current default ``distributed.Client``
    (``distributed.default_client()``), else ``None``. A process that has not imported
    distributed has no client: a fit there does not import it (its cost: docs/PERFORMANCE.md,
    "Import costs")."""
    if _CLIENT.get() is not None:
        return _CLIENT.get()
    if "distributed" not in sys.modules:
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:  # no client
        return None


def _in_dask_task() -> bool:
    """Whether this code runs inside a task on a Dask worker (e.g. a scikit-learn search
    under joblib's Dask backend)."""
    if "distributed" not in sys.modules:
        return False
    from distributed import get_worker

    try:
        get_worker()
    except ValueError:
        return False
    return True


def _task_client():
    """The worker's client, with this task seceded from the worker's thread pool (as
    ``distributed.worker_client`` does): the fit's block tasks then have a thread to run
    in while this task waits for them."""
    from distributed import get_client, secede
    from distributed.threadpoolexecutor import thread_state

    client = get_client()
    if getattr(thread_state, "proceed", False):  # still one of the pool's threads
        secede()
    return client


def engine_named(name: str):
    """The engine ``name`` (``"local"``, ``"dask"`` or ``"auto"``) stands for: in-process,
    or on :func:`current_client`.

    Inside a Dask task (and no :func:`use_client`), ``"auto"`` runs in-process: the
    task's own worker is busy with it, and a fit that waited there for block tasks could
    wait for ever. ``"dask"`` there fits on the worker's client, the task seceded from the
    worker's pool (:func:`_task_client`)."""
    if name == "local":
        return LocalEngine()
    if _CLIENT.get() is None and _in_dask_task():
        return LocalEngine() if name == "auto" else make_engine(_task_client())
    client = current_client()
    if client is None and name == "dask":
        raise ValueError("engine='dask' is not allowed without a Dask client: create one "
                         "(distributed.Client(...) becomes the default) or run inside "
                         "`with client.as_current():`, or pass engine='local' or 'auto'")
    return make_engine(client)


def keep(engine, n_numbers: int):
    """Where a fitted model keeps its blocks (``n_numbers`` label-side numbers, ``Q``,
    ``V``, ``B`` together): in this process when they are small (the model outlives the
    client), else on ``engine`` (save the model before closing the client)."""
    return engine.local() if n_numbers <= KEEP_LOCAL_LIMIT else engine


def live(blocks):
    """``blocks`` (an engine), refused if they lived on a Dask cluster that is gone."""
    client = blocks.client
    if client is not None and client.status != "running":
        raise RuntimeError(
            f"this model's {len(blocks.handles)} label blocks lived on a Dask cluster that "
            "is gone (its client is closed): call save(path) before closing the client, "
            "or refit")
    return blocks


def moved_to(blocks, engine):
    """The fitted ``blocks``, on ``engine`` (moved there if they live elsewhere)."""
    held = live(blocks)
    if type(held) is type(engine) and held.client is engine.client:
        return held
    engine.adopt(held.blocks())
    return engine


def label_rows(blocks, slot: str, n_labels: int, width: int, labels=None) -> np.ndarray:
    """Rows of a label-side slot (``"Q"``, ``"V"``, ``"B"``, ``"b"``), gathered block by
    block: all ``n_labels`` rows (refused above ``GATHER_LIMIT`` numbers), or those of
    ``labels`` in the order given."""
    if labels is None:
        size = n_labels * width
        if size > GATHER_LIMIT:
            raise MemoryError(
                f"{slot}_ would gather {size} numbers ({n_labels} labels x {width}) into "
                f"this process (> {GATHER_LIMIT}): use decision_function(X, labels=...), "
                "predict_top_k(X, k) or save(path), which work block by block")
        return np.concatenate(live(blocks).map(rows_of, slot))
    uniq, inverse = np.unique(labels, return_inverse=True)
    return np.concatenate(live(blocks).map(rows_of, slot, uniq))[inverse]
