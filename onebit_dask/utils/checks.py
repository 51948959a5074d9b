"""Checks of scalar parameters (integers, numbers, choices, seeds, the rank), the
random generator they seed, and of finite arrays: NumPy and SciPy only, so that the
modules a Dask worker imports (the planted problem, the samplers, a store's reader) do
not import scikit-learn.

Each check raises :class:`ValueError` (or :class:`TypeError`) whose message names the
parameter, shows the offending value and says what is allowed. Array conversions and
estimator parameter tables are checked in :mod:`onebit_dask._validation` (scikit-learn's
helpers).
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse

MAX_SEED = 2**32 - 1


def show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_int(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an ``int`` if it is an integer in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}={show(value)} is not allowed: {name} must be an integer")
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
        raise TypeError(f"{name}={show(value)} is not allowed: {name} must be a number")
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
            f"{name}={show(value)} is not allowed: choose one of {', '.join(map(repr, choices))}"
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


def as_generator(random_state) -> np.random.Generator:
    """A NumPy ``Generator`` from ``None``, an int seed, a ``Generator`` or a ``RandomState``."""
    if random_state is None or isinstance(random_state, np.random.Generator):
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, MAX_SEED, dtype=np.int64))
    return np.random.default_rng(check_seed("random_state", random_state))


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


def check_finite(X, *, name: str = "X", row_offset: int = 0) -> None:
    """Refuse NaN and infinite entries, naming the first one (dense or CSR ``X``)."""
    if scipy.sparse.issparse(X):
        bad = np.flatnonzero(~np.isfinite(X.data))
        if bad.size:
            row = int(np.searchsorted(X.indptr, bad[0], side="right") - 1)
            where, value = (row, int(X.indices[bad[0]])), X.data[bad[0]]
        else:
            where = None
    else:
        where = _first_non_finite(X)
        value = None if where is None else X[where]
    if where is not None:
        raise ValueError(
            f"{name}[{where[0] + row_offset}, {where[1]}]={value} is not allowed: "
            f"{name} must be finite (no NaN or inf); drop or impute those rows first"
        )
