"""Input checks shared by every public entry point.

Each check raises :class:`ValueError` (or :class:`TypeError`) whose message names
the parameter, shows the offending value and says what is allowed, before any
work starts.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse

MAX_SEED = 2**32 - 1


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_int(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an ``int`` if it is an integer in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}={_show(value)} is not allowed: {name} must be an integer")
    value = int(value)
    if low is not None and value < low:
        raise ValueError(f"{name}={value} is not allowed: {name} must be >= {low}")
    if high is not None and value > high:
        raise ValueError(f"{name}={value} is not allowed: {name} must be <= {high}")
    return value


def check_float(name: str, value, *, low: float, high: float | None = None,
                high_open: bool = False) -> float:
    """Return ``value`` as a finite ``float`` in ``[low, high]`` (or ``[low, high)``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}={_show(value)} is not allowed: {name} must be a number")
    value = float(value)
    bracket = ")" if high_open else "]"
    allowed = f"[{low}, {high}{bracket}" if high is not None else f">= {low}"
    if not np.isfinite(value) or value < low or (
        high is not None and (value >= high if high_open else value > high)
    ):
        raise ValueError(f"{name}={value} is not allowed: {name} must be in {allowed}")
    return value


def check_choice(name: str, value, choices) -> str:
    if value not in choices:
        raise ValueError(
            f"{name}={_show(value)} is not allowed: choose one of {', '.join(map(repr, choices))}"
        )
    return value


def check_seed(name: str, value) -> int:
    return check_int(name, value, low=0, high=MAX_SEED)


def check_rank(rank, d1: int, d2: int) -> int:
    rank = check_int("rank", rank, low=1)
    if rank > min(d1, d2):
        raise ValueError(
            f"rank={rank} is not allowed: rank must be <= min(d1, d2) = {min(d1, d2)} "
            f"(d1={d1}, d2={d2})"
        )
    return rank


def _first_non_finite(X: np.ndarray):
    """``(row, column)`` of the first NaN or infinite entry of a float array, or ``None``.

    One read of ``X`` and no temporary of its size: NaN and inf carry through the row
    sums ``X @ 1``; only rows whose sum is not finite (a bad entry, or an overflow of
    finite ones) are looked at entry by entry.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        sums = X @ np.ones(X.shape[1], dtype=X.dtype)
    rows = np.flatnonzero(~np.isfinite(sums))
    if rows.size:
        bad = ~np.isfinite(X[rows])
        hit = np.flatnonzero(bad.any(axis=1))
        if hit.size:
            return int(rows[hit[0]]), int(np.argmax(bad[hit[0]]))
    return None


def check_features(X, *, n_features: int | None = None, name: str = "X",
                   row_offset: int = 0) -> np.ndarray:
    """A finite 2-D float array; float32 stays float32, anything else becomes float64.

    A ``scipy.sparse`` matrix stays sparse, as CSR (never densified).
    ``row_offset`` is added to the row named in an error (for a slice of a store).
    """
    if scipy.sparse.issparse(X):
        return _check_sparse_features(X, n_features, name, row_offset)
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"{name} has shape {X.shape}: {name} must be 2-D (n_samples, n_features)")
    if not np.issubdtype(X.dtype, np.number) or np.iscomplexobj(X):
        raise TypeError(f"{name} has dtype {X.dtype}: {name} must hold real numbers")
    if X.dtype != np.float32:
        X = X.astype(np.float64, copy=False)
    bad = _first_non_finite(X)
    if bad is not None:
        raise ValueError(
            f"{name}[{bad[0] + row_offset}, {bad[1]}]={X[bad[0], bad[1]]} is not allowed: "
            f"{name} must be finite (no NaN or inf); drop or impute those rows first"
        )
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X.shape[1]} features, but the estimator was fitted with "
            f"{n_features}: pass an array of shape (n_samples, {n_features})"
        )
    return X


def _check_sparse_features(X, n_features, name, row_offset):
    """:func:`check_features` for a ``scipy.sparse`` ``X``: checks its stored values."""
    if not np.issubdtype(X.dtype, np.number) or np.iscomplexobj(X.data):
        raise TypeError(f"{name} has dtype {X.dtype}: {name} must hold real numbers")
    X = X.tocsr()
    if X.dtype != np.float32:
        X = X.astype(np.float64, copy=False)
    bad = np.flatnonzero(~np.isfinite(X.data))
    if bad.size:
        row = int(np.searchsorted(X.indptr, bad[0], side="right")) - 1
        raise ValueError(
            f"{name}[{row + row_offset}, {X.indices[bad[0]]}]={X.data[bad[0]]} is not allowed: "
            f"{name} must be finite (no NaN or inf); drop or impute those rows first")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X.shape[1]} features, but the estimator was fitted with "
            f"{n_features}: pass an array of shape (n_samples, {n_features})"
        )
    return X


def check_observations(X, labels, y, *, n_labels: int | None = None,
                       n_features: int | None = None):
    """Validate one set of single-label observations ``(X, labels, y)``.

    Returns ``(X, labels, y, n_labels)`` with ``labels`` as ``int64`` and ``y`` as
    ``float64`` in ``{-1, +1}``.
    """
    X = check_features(X, n_features=n_features)
    labels = np.asarray(labels)
    y = np.asarray(y)
    n = X.shape[0]
    if n == 0:
        raise ValueError("X has 0 rows: at least one observation is needed")
    for name, arr in (("labels", labels), ("y", y)):
        if arr.ndim != 1 or arr.shape[0] != n:
            raise ValueError(
                f"{name} has shape {arr.shape}, but X has {n} rows: {name} must have shape ({n},)"
            )
    if labels.dtype.kind == "f" and np.all(np.isfinite(labels)) and np.all(labels == np.round(labels)):
        labels = labels.astype(np.int64)
    if labels.dtype.kind not in "iu":
        raise TypeError(f"labels has dtype {labels.dtype}: labels must be integers in [0, d2)")
    labels = labels.astype(np.int64, copy=False)
    if n_labels is None:
        n_labels = int(labels.max()) + 1
    n_labels = check_int("n_labels", n_labels, low=1)
    out = (labels < 0) | (labels >= n_labels)
    if out.any():
        i = int(np.argmax(out))
        raise ValueError(
            f"labels[{i}]={labels[i]} is not allowed: labels must be integers in "
            f"[0, {n_labels}) (n_labels={n_labels})"
        )
    if not np.issubdtype(y.dtype, np.number):
        raise TypeError(f"y has dtype {y.dtype}: y must hold -1 and +1")
    bad = (y != 1) & (y != -1)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"y[{i}]={y[i]} is not allowed: y must be -1 or +1")
    return X, labels, y.astype(np.float64), n_labels


def as_generator(random_state) -> np.random.Generator:
    """A NumPy ``Generator`` from ``None``, an int seed, a ``Generator`` or a ``RandomState``."""
    if random_state is None or isinstance(random_state, np.random.Generator):
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, MAX_SEED, dtype=np.int64))
    return np.random.default_rng(check_seed("random_state", random_state))
