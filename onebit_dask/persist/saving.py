"""What a saved model and a checkpoint hold, and when a checkpoint belongs to a fit.

The storage itself (zarr, paths, the atomic swap) is :mod:`onebit_dask.model_io`; this
module turns a fit's state (:class:`onebit_dask.fit.state.FitState`, handed in explicitly,
read by its attribute names) and the estimator's parameters into attrs and back, and
compares a checkpoint's fingerprint with the fit that wants to resume it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os

import numpy as np

from . import model_store as model_io
from ..data.queries import warmup_batches
from ..utils.checks import check_int
from ..utils.errors import RunError
from ..io.stores import atomic, paths
from ..io.stores.lock import StoreLock
from ..io.stores.zarr_format import DamagedStoreError, NewerFormatError

FINGERPRINT_SKIP = ("engine", "progress", "eval_every")  # do not change the numbers
QUERY_KNOBS = ("query_top_k", "query_explore", "query_warmup", "query_warmup_batches")
"""Parameters that do not change a fit's numbers under ``queries="uniform"``."""


def _jsonable(value):
    """``value`` with NumPy scalars and arrays as plain JSON types."""
    def default(x):
        if isinstance(x, np.generic):
            return x.item()
        if isinstance(x, np.ndarray):
            return x.tolist()
        raise TypeError(f"{type(x).__name__} is not JSON serialisable")

    return json.loads(json.dumps(value, default=default))


# -- what decides a fit's numbers -----------------------------------------------------------
def _random_state(value):
    """``random_state`` as JSON: an int or None as is, a generator by its state."""
    if value is None or isinstance(value, (int, np.integer)):
        return value
    if isinstance(value, np.random.Generator):
        return {"generator_state": value.bit_generator.state}
    if isinstance(value, np.random.RandomState):
        return {"random_state_state": value.get_state(legacy=False)}
    return repr(value)


def saved_params(params: dict) -> dict:
    """The estimator's ``params`` (``get_params()``) without ``engine``; a generator
    ``random_state`` is saved as None (its state after the fit is not the seed of the
    fit)."""
    params = {k: v for k, v in params.items() if k != "engine"}
    if not (params["random_state"] is None or isinstance(params["random_state"],
                                                         (int, np.integer))):
        params["random_state"] = None
    return _jsonable(params)


def fingerprint(params: dict, data: dict) -> dict:
    """What decides a fit's numbers: the estimator's ``params`` (not ``engine``,
    ``progress``, ``eval_every``) and the data's identity."""
    params = {k: v for k, v in params.items() if k not in FINGERPRINT_SKIP}
    params["random_state"] = _random_state(params["random_state"])
    warmup = params.get("query_warmup")
    if warmup is not None and not isinstance(warmup, (int, np.integer)):  # a share
        params["query_warmup_batches"] = warmup_batches(warmup, params["n_iter"])
    return _jsonable({"params": params, "data": data})


def _numbers_only(fp):
    """A fingerprint without the query knobs where ``queries="uniform"`` (they do not
    change its numbers: a checkpoint of an earlier default resumes)."""
    if not isinstance(fp, dict) or not isinstance(fp.get("params"), dict):
        return fp
    if fp["params"].get("queries", "uniform") != "uniform":
        return fp
    return {**fp, "params": {k: v for k, v in fp["params"].items() if k not in QUERY_KNOBS}}


def show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _differences(stored, current, prefix=""):
    """``["name=stored there, current here", ...]`` for the leaves that differ."""
    if isinstance(stored, dict) and isinstance(current, dict):
        out = []
        for key in sorted(set(stored) | set(current), key=str):
            name = f"{prefix}{key}" if prefix else str(key)
            out += _differences(stored.get(key), current.get(key), name + ".")
        return out
    if stored == current:
        return []
    return [f"{prefix.rstrip('.')}={show(stored)} there, {show(current)} here"]


# -- a fit's state ----------------------------------------------------------------------------
def model_attrs(params: dict, state) -> dict:
    """The attrs of a model store for the estimator's ``params`` (:func:`saved_params`)
    and the fitted ``state`` (a :class:`~onebit_dask.fit.state.FitState`)."""
    rng = state.rng
    return _jsonable({
        "params": params,
        "n_features_in": state.d1, "n_labels": state.d2,
        "n_steps": state.n_steps, "n_samples_seen": state.n_samples_seen,
        "fit_s": state.fit_s, "bounds": list(state.bounds), "history": state.history,
        "data": state.data,
        "rng_state": None if rng is None else model_io.encode_rng_state(rng.bit_generator.state),
        "feature_components": (None if state.feature_map is None
                               else state.feature_map.n_components),
        "best_iteration": state.best_iteration, "validation_score": state.validation_score,
        "calibration": state.calibration, "blas": state.blas,
        "classes": None if state.classes is None else state.classes.tolist(),
        "classes_dtype": None if state.classes is None else state.classes.dtype.str,
    })


def read_state(path: str, attrs: dict, engine) -> dict:
    """The state saved in the store at ``path`` (its checked ``attrs``), by the names of
    :class:`~onebit_dask.fit.state.FitState` (``top`` as ``(Q_top, V_top)``; ``rng``
    ``None`` when none was saved); its blocks start on ``engine`` and read their own
    rows."""
    top = model_io.read_top(path, attrs)
    rng = model_io.rng_state(attrs, f"model store {path!r}")
    feature_map = model_io.read_feature_map(path, attrs)
    model_io.read_blocks(path, engine, attrs)
    return {"d1": attrs["n_features_in"], "d2": attrs["n_labels"],
            "n_steps": attrs["n_steps"], "n_samples_seen": attrs["n_samples_seen"],
            "history": list(attrs["history"]), "fit_s": attrs["fit_s"],
            "bounds": list(attrs["bounds"]), "data": attrs.get("data"), "rng": rng,
            "feature_map": feature_map, "top": top,
            "best_iteration": attrs.get("best_iteration"),  # None in an older store
            "blas": attrs.get("blas"), "calibration": attrs.get("calibration"),
            "classes": (None if attrs.get("classes") is None  # an older store: no dtype
                        else np.asarray(attrs["classes"], dtype=attrs.get("classes_dtype"))),
            "asked": model_io.read_asked(path, attrs),
            "validation_score": (None if attrs.get("validation_score") is None
                                 else np.asarray(attrs["validation_score"], dtype=float))}


def _lock(path: str, writer: str):
    """``path``'s :class:`StoreLock` (none at a URL: object stores have no exclusive
    create; one writer at a time is then the user's duty)."""
    return contextlib.nullcontext() if paths.is_url(path) else StoreLock(path, writer=writer)


class SaveError(RunError):
    """Saving failed at run time (a full disk, say): nothing was left half written at the
    path, and the fitted model is still in the estimator; ``reason`` says what failed."""

    def __init__(self, path: str, reason: str):
        self.path, self.reason = path, reason
        super().__init__(f"{reason}; nothing was written at {path!r} (the partial copy was "
                         "removed) and the fitted model is still in memory: call save again")


def save(path, overwrite: bool, params: dict, state, blocks) -> str:
    """Write the fitted ``state`` (its label blocks on the engine ``blocks``) and the
    estimator's ``params`` as a model store at ``path``; the absolute path."""
    path = model_io.check_store_target(path, overwrite=overwrite, kind="model")
    attrs = model_attrs(saved_params(params), state)
    with _lock(path, "save"):
        if not paths.is_url(path):
            atomic.recover(path, temporaries=True)
        if paths.exists(path) and not overwrite:  # put back, or written meanwhile
            raise FileExistsError(f"path={path!r} exists: give a new path, or pass "
                                  "overwrite=True to replace the model there")
        if paths.exists(path):
            model_io.read_attrs(path, "path")  # a model store may be replaced, nothing else
        try:
            model_io.write_store_atomic(path, state.top, blocks, attrs, state.feature_map)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                raise
            raise SaveError(path, f"no space left on the device of {path!r} (errno "
                                  f"{exc.errno}, {exc.strerror})") from None
    return path


def open_model(path) -> tuple[str, dict]:
    """``(path, attrs)`` of the model store at ``path`` (checked)."""
    path = model_io.store_path(path)
    return path, model_io.read_attrs(path)


# -- checkpoints -------------------------------------------------------------------------------
class Checkpoint:
    """Where a fit writes its state every ``every`` iterations, and resumes from.

    Opening it checks what is at ``path`` (nothing is changed): nothing (a new fit), or
    a checkpoint of this very fit (same fingerprint); anything else is refused, naming
    what differs. The fit holds it in a ``with`` block: one writer at a time
    (``PATH.lock``, :class:`~onebit_dask.io.stores.lock.StoreLock`); a write interrupted
    by a kill is recovered on entry. A checkpoint is resumed only if it is whole: its
    attributes, written last, hold the SHA-256 of every array, checked on resume.
    """

    def __init__(self, path, every, params: dict, data: dict):
        self.path = model_io.check_store_target(path, overwrite=False, kind="checkpoint",
                                          name="checkpoint")
        self.every = check_int("checkpoint_every", 1 if every is None else every, low=1)
        self.fingerprint = fingerprint(params, data)
        self.params = saved_params(params)
        self.lock = None
        found = self.path if paths.exists(self.path) else None
        if found is None and not paths.is_url(self.path):
            found = next(iter(atomic.leftovers(self.path, "old")), None)  # put back on entry
        self.attrs = None if found is None else self._check(found)

    def _advice(self) -> str:
        return (f"pass another checkpoint path, or delete {self.path!r} to start this fit "
                "from scratch")

    def _check(self, where: str) -> dict:
        try:
            attrs = model_io.read_attrs(where, "checkpoint")
        except model_io.ModelStoreError as exc:
            raise ValueError(f"{exc}; {self._advice()}") from None
        except NewerFormatError:
            raise  # one line, the same for every store: upgrade, do not delete
        except DamagedStoreError as exc:
            raise DamagedStoreError(f"checkpoint {self.path!r}: {exc}; {self._advice()}"
                                    ) from None
        if not isinstance(attrs.get("checkpoint"), dict):
            raise ValueError(f"checkpoint={self.path!r} is a saved model, not a checkpoint: "
                             f"{self._advice()}")
        diffs = _differences(_numbers_only(attrs["checkpoint"].get("fingerprint")),
                             _numbers_only(self.fingerprint))
        if diffs:
            raise ValueError(f"checkpoint={self.path!r} is of another fit ({'; '.join(diffs)}): "
                             f"{self._advice()}")
        return attrs

    def __enter__(self):
        if paths.is_url(self.path):
            return self  # no lock at a URL (:func:`_lock`); nothing to recover
        self.lock = StoreLock(self.path, writer="fit")
        self.lock.acquire()
        try:
            atomic.recover(self.path, temporaries=True)
            self.attrs = self._check(self.path) if os.path.exists(self.path) else None
        except BaseException:
            self.lock.release()
            raise
        return self

    def __exit__(self, *exc):
        if self.lock is not None:
            self.lock.release()

    def resume(self, engine) -> dict | None:
        """The checkpoint's state (:func:`read_state`, its blocks started on ``engine``),
        or ``None`` when there is no checkpoint yet; a checkpoint that is not whole raises
        :class:`DamagedStoreError`."""
        if self.attrs is None:
            return None
        try:
            return read_state(self.path, self.attrs, engine)
        except DamagedStoreError as exc:
            raise DamagedStoreError(f"checkpoint {self.path!r} cannot be resumed: {exc}; "
                                    f"{self._advice()}") from None

    def due(self, t: int, last: bool) -> bool:
        return last or t % self.every == 0

    def write(self, state, engine) -> None:
        """The ``state`` after the iteration just done; each block written where it lives
        (on ``engine``).

        An engine that keeps its blocks' lineage (Dask: every earlier round's tasks, with
        their arguments, so that a lost block can be recomputed) then restarts its blocks
        from the checkpoint, each block reading back its own rows: a lost block is
        recomputed from the checkpoint, and the scheduler forgets the rounds before it
        (their arguments grew by one copy of each round's ``d1 x l`` arrays a step,
        :data:`onebit_dask.engine.dask_engine.SHARED_BYTES`).
        The state read back is the state written, so the fit goes on with the same
        numbers."""
        attrs = {**model_attrs(self.params, state),
                 "checkpoint": {"step": state.n_steps, "fingerprint": self.fingerprint}}
        if self.lock is not None:
            self.lock.check()
        model_io.write_store_atomic(self.path, state.top, engine, attrs, state.feature_map,
                                    state.asked)
        if engine.keeps_lineage:
            model_io.read_blocks(self.path, engine, model_io.read_attrs(self.path))
