"""Input checks shared by every public entry point.

Each check raises :class:`ValueError` (or :class:`TypeError`) whose message names
the parameter, shows the offending value and says what is allowed, before any
work starts. Arrays go through scikit-learn's ``check_array``; estimator
parameters through their ``_parameter_constraints`` table (:func:`validate_params`).
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils import check_array
from sklearn.utils._param_validation import (
    Interval,
    InvalidParameterError,
    validate_parameter_constraints,
)
from sklearn.utils.multiclass import type_of_target

from .checks import MAX_SEED, show, check_finite, check_int

RANDOM_STATE = [None, Interval(numbers.Integral, 0, MAX_SEED, closed="both"),
                np.random.RandomState, np.random.Generator]  # what as_generator takes
FLOAT_DTYPES = (np.float64, np.float32)  # float32 stays float32, anything else becomes float64


def validate_params(constraints: dict, params: dict, owner: str) -> None:
    """Check ``params`` against a scikit-learn ``_parameter_constraints`` table.

    Raises :class:`~sklearn.utils._param_validation.InvalidParameterError` (a
    ``ValueError`` and a ``TypeError``) with scikit-learn's message, prefixed by
    ``name=value is not allowed``.
    """
    for name, value in params.items():
        if name not in constraints:
            continue
        try:
            validate_parameter_constraints({name: constraints[name]}, {name: value},
                                           caller_name=owner)
        except InvalidParameterError as exc:
            raise InvalidParameterError(f"{name}={show(value)} is not allowed: {exc}") from None


def check_features(X, *, n_features: int | None = None, name: str = "X",
                   row_offset: int = 0, accept_sparse: bool = True, training: bool = False):
    """A finite 2-D float array (scikit-learn's ``check_array``: lists, object and
    integer arrays are converted, complex ones refused); float32 stays float32,
    anything else becomes float64. A SciPy sparse matrix is returned as CSR, never
    densified (refused when ``accept_sparse`` is false).

    ``row_offset`` is added to the row named in an error (for a slice of a store).
    ``training`` refuses 0 rows or 0 features (nothing to learn from).
    """
    X = check_array(X, accept_sparse="csr" if accept_sparse else False, dtype=FLOAT_DTYPES,
                    ensure_all_finite=False, ensure_min_samples=int(training),
                    ensure_min_features=int(training), input_name=name)
    check_finite(X, name=name, row_offset=row_offset)
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X.shape[1]} features, but the estimator was fitted with "
            f"{n_features}: pass an array of shape (n_samples, {n_features})"
        )
    return X


def check_bits(y, *, name: str = "y", n: int | None = None) -> np.ndarray:
    """One-bit observations (any shape) as ``float64`` in ``{-1, +1}``, from ``-1``/``+1``,
    ``0``/``1`` or booleans (``0`` and ``False`` mean ``-1``)."""
    y = np.asarray(y)
    if n is not None and (y.ndim != 1 or y.shape[0] != n):
        raise ValueError(f"{name} has shape {y.shape}, but X has {n} rows: {name} must have "
                         f"shape ({n},)")
    if y.dtype == object:  # numbers held as objects are converted, as check_array does
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"Unknown label type: {name} holds objects that are not numbers: "
                             f"{name} must hold -1 and +1, 0 and 1, or booleans") from None
    if y.dtype == bool:
        return np.where(y, 1.0, -1.0)
    if not np.issubdtype(y.dtype, np.number) or np.iscomplexobj(y):
        raise TypeError(f"{name} has dtype {y.dtype}: {name} must hold -1 and +1, 0 and 1, "
                        "or booleans")
    bad = (y != 1) & (y != -1) & (y != 0)
    if bad.any():
        i = _first(bad)
        kind = ("continuous values" if np.any(y[bad] != np.round(y[bad]))
                else "more than two classes: only binary classification is supported")
        raise ValueError(f"{name}[{_index(i)}]={y[i]} is not allowed: {name} must be -1 or +1 "
                         f"(or 0 and 1, or booleans), not {kind}")
    if (y == 0).any() and (y == -1).any():
        raise ValueError(f"{name}[{_index(_first(y == 0))}]=0 is not allowed with -1 elsewhere "
                         f"in {name}: code it as -1 and +1, or as 0 and 1, not both")
    return np.where(y > 0, 1.0, -1.0)


def _first(mask: np.ndarray) -> tuple:
    """The index of the first true entry of ``mask``, in C order."""
    return np.unravel_index(int(np.argmax(mask)), mask.shape)


def _index(i: tuple) -> str:
    return ", ".join(str(int(k)) for k in i)


def check_sign_matrix(X, Y, *, accept_sparse: bool = True):
    """Features and a full label matrix ``Y`` of shape ``(n, d2)``: a 0/1 indicator (as
    scikit-learn's multi-label classifiers take), ``-1``/``+1`` or booleans.

    Returns ``(X, Y)`` with ``Y`` as ``float64`` in ``{-1, +1}``.
    """
    if Y is None:
        raise ValueError("fit requires y to be passed, but the target y is None: pass a label "
                         "matrix Y (n_samples, n_labels), or labels and bits")
    X = check_features(X, accept_sparse=accept_sparse, training=True)
    Y = np.asarray(Y)
    if Y.ndim == 1:
        kind = f"{type_of_target(Y, input_name='Y')} target"
        if kind in ("binary target", "multiclass target"):
            kind += f" of {np.unique(Y).size} class(es)"
        raise ValueError(f"Y has shape {Y.shape}, a 1-D {kind}: a label matrix Y must be 2-D "
                         "(n_samples, n_labels); for single-label one-bit observations pass "
                         "fit(X, labels, bits)")
    if Y.ndim != 2 or Y.shape[0] != X.shape[0] or Y.shape[1] == 0:
        raise ValueError(f"Y has shape {Y.shape}: Y must be (n_samples, n_labels) with "
                         f"n_samples={X.shape[0]} and n_labels >= 1")
    return X, check_bits(Y, name="Y")


def check_fit_data(X, Y, bits, n_labels, *, accept_sparse: bool = True):
    """The two forms of ``fit``: a label matrix ``fit(X, Y)`` gives
    ``(X, None, Y, d2)`` (:func:`check_sign_matrix`); single-label observations
    ``fit(X, labels, bits)`` give ``(X, labels, y, d2)`` (:func:`check_observations`)."""
    if bits is None:
        if n_labels is not None:
            raise ValueError(f"n_labels={n_labels!r} is not allowed with a label matrix: Y's "
                             "columns are the labels; n_labels goes with fit(X, labels, bits)")
        X, Y = check_sign_matrix(X, Y, accept_sparse=accept_sparse)
        return X, None, Y, Y.shape[1]
    return check_observations(X, Y, bits, n_labels=n_labels, accept_sparse=accept_sparse)


def check_observations(X, labels, y, *, n_labels: int | None = None,
                       n_features: int | None = None, accept_sparse: bool = True):
    """Validate one set of single-label observations ``(X, labels, y)``.

    ``y`` may be ``-1``/``+1``, ``0``/``1`` or booleans. Returns
    ``(X, labels, y, n_labels)`` with ``labels`` as ``int64`` and ``y`` as ``float64``
    in ``{-1, +1}``.
    """
    X = check_features(X, n_features=n_features, accept_sparse=accept_sparse, training=True)
    labels = np.asarray(labels)
    n = X.shape[0]
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(
            f"labels has shape {labels.shape}, but X has {n} rows: labels must have shape ({n},)"
        )
    y = check_bits(y, n=n)
    if (labels.dtype.kind == "f" and np.all(np.isfinite(labels))
            and np.all(labels == np.round(labels))):
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
    return X, labels, y, n_labels
