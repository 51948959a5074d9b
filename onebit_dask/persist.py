"""What a saved model and a checkpoint hold, and when a checkpoint belongs to a fit.

The storage itself (zarr, paths, the atomic swap) is :mod:`onebit_dask.model_io`; this
module turns an estimator's fitted state into attrs and back, rebuilds the problem a fit
runs on, and compares a checkpoint's fingerprint with the fit that wants to resume it.
"""

from __future__ import annotations

import json
import os

import numpy as np

from . import model_io
from ._validation import check_int

FINGERPRINT_SKIP = ("client", "progress", "eval_every")  # do not change the numbers


def _jsonable(value):
    """``value`` with NumPy scalars and arrays as plain JSON types."""
    def default(x):
        if isinstance(x, np.generic):
            return x.item()
        if isinstance(x, np.ndarray):
            return x.tolist()
        raise TypeError(f"{type(x).__name__} is not JSON serialisable")

    return json.loads(json.dumps(value, default=default))


# -- what the fit runs on ---------------------------------------------------------------------
def problem_from(data: dict | None):
    """The :class:`SyntheticProblem` a model was fitted on, or ``None``."""
    from .synthetic import FullObservationProblem, SyntheticProblem

    if not data or data.get("kind") not in ("SyntheticProblem", "FullObservationProblem"):
        return None
    if data["kind"] == "FullObservationProblem":
        return FullObservationProblem(SyntheticProblem(**data["problem"]), data["n"])
    return SyntheticProblem(**{k: v for k, v in data.items() if k != "kind"})


def _random_state(value):
    """``random_state`` as JSON: an int or None as is, a generator by its state."""
    if value is None or isinstance(value, (int, np.integer)):
        return value
    if isinstance(value, np.random.Generator):
        return {"generator_state": value.bit_generator.state}
    if isinstance(value, np.random.RandomState):
        return {"random_state_state": value.get_state(legacy=False)}
    return repr(value)


def saved_params(est) -> dict:
    """``get_params()`` without ``client``; a generator ``random_state`` is saved as None
    (its state after the fit is not the seed of the fit)."""
    params = {k: v for k, v in est.get_params(deep=False).items() if k != "client"}
    if not (params["random_state"] is None or isinstance(params["random_state"],
                                                         (int, np.integer))):
        params["random_state"] = None
    return _jsonable(params)


def fingerprint(est, data: dict) -> dict:
    """What decides a fit's numbers: the parameters (not ``client``, ``progress``,
    ``eval_every``) and the data's identity."""
    params = {k: v for k, v in est.get_params(deep=False).items() if k not in FINGERPRINT_SKIP}
    params["random_state"] = _random_state(params["random_state"])
    return _jsonable({"params": params, "data": data})


def _show(value) -> str:
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
    return [f"{prefix.rstrip('.')}={_show(stored)} there, {_show(current)} here"]


# -- the estimator's state ---------------------------------------------------------------------
def model_attrs(est) -> dict:
    """The attrs of a model store for the fitted ``est``."""
    rng = getattr(est, "_rng", None)
    return _jsonable({
        "params": saved_params(est),
        "n_features_in": est.n_features_in_, "n_labels": est.n_labels_,
        "n_steps": est.n_steps_, "n_samples_seen": est.n_samples_seen_, "fit_s": est._fit_s,
        "bounds": list(est._bounds), "history": est.history_,
        "data": getattr(est, "_data", None),
        "rng_state": None if rng is None else rng.bit_generator.state,
    })


def restore(est, path: str, attrs: dict, engine) -> None:
    """Set ``est``'s fitted state from the store at ``path``; its blocks start on
    ``engine`` and read their own rows."""
    from .algorithm import TopState

    Q_top, V_top = model_io.read_top(path)
    est.n_features_in_, est.n_labels_ = attrs["n_features_in"], attrs["n_labels"]
    est.n_steps_, est.n_samples_seen_ = attrs["n_steps"], attrs["n_samples_seen"]
    est.history_ = list(attrs["history"])
    est._fit_s = attrs["fit_s"]
    est._bounds = list(attrs["bounds"])
    est._data = attrs.get("data")
    state = attrs.get("rng_state")
    if state is not None:
        bit_generator = getattr(np.random, state["bit_generator"])()
        bit_generator.state = state
        est._rng = np.random.Generator(bit_generator)
    model_io.read_blocks(path, engine, est._bounds)
    est._top = TopState(Q_top, V_top)
    est.A_ = Q_top


def save(est, path, overwrite: bool = False) -> str:
    est._check_fitted()
    path = model_io.store_path(path)
    if os.path.exists(path):
        if not overwrite:
            raise FileExistsError(f"path={path!r} exists: pass overwrite=True to replace the "
                                  "model there, or another path")
        model_io.read_attrs(path, "path")  # replace a model store, nothing else
    model_io.write_store_atomic(path, est._top, est._live_blocks(), model_attrs(est))
    return path


def load(cls, path, client=None):
    from .engine import make_engine

    path = model_io.store_path(path)
    attrs = model_io.read_attrs(path)
    est = cls(**attrs["params"], client=client)
    engine = make_engine(client)
    restore(est, path, attrs, engine)
    est._keep(engine)
    return est


# -- checkpoints -------------------------------------------------------------------------------
class Checkpoint:
    """Where a fit writes its state every ``every`` iterations, and resumes from.

    Opening it checks what is at ``path``: nothing (a new fit), or a checkpoint of this
    very fit (same fingerprint); anything else is refused, naming what differs.
    """

    def __init__(self, path, every, fingerprint: dict):
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"checkpoint={path!r} is not allowed: checkpoint must be a path "
                            "(str or os.PathLike)")
        self.path = model_io.store_path(path)
        self.every = check_int("checkpoint_every", 1 if every is None else every, low=1)
        self.fingerprint = fingerprint
        model_io.recover(self.path)
        self.attrs = self._check() if os.path.exists(self.path) else None

    def _check(self) -> dict:
        advice = (f"pass another checkpoint path, or delete {self.path!r} to start this fit "
                  "from scratch")
        try:
            attrs = model_io.read_attrs(self.path, "checkpoint")
        except model_io.ModelStoreError as exc:
            raise ValueError(f"{exc}; {advice}") from None
        if not isinstance(attrs.get("checkpoint"), dict):
            raise ValueError(f"checkpoint={self.path!r} is a saved model, not a checkpoint: "
                             f"{advice}")
        diffs = _differences(attrs["checkpoint"].get("fingerprint"), self.fingerprint)
        if diffs:
            raise ValueError(f"checkpoint={self.path!r} is of another fit ({'; '.join(diffs)}): "
                             f"{advice}")
        return attrs

    def resume(self, est, engine) -> bool:
        """Restore ``est`` and ``engine``'s blocks from the checkpoint, if there is one."""
        if self.attrs is None:
            return False
        restore(est, self.path, self.attrs, engine)
        return True

    def due(self, t: int, last: bool) -> bool:
        return last or t % self.every == 0

    def write(self, est, engine) -> None:
        """The state after the iteration just done; each block written where it lives."""
        attrs = {**model_attrs(est),
                 "checkpoint": {"step": est.n_steps_, "fingerprint": self.fingerprint}}
        model_io.write_store_atomic(self.path, est._top, engine, attrs)
