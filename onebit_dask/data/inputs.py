"""The source of what ``fit`` was given: :func:`as_source`."""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse

from ..utils.checks import as_generator, check_seed
from ..utils.validation import check_features, check_observations
from .synthetic.problem import FullObservationProblem, SyntheticProblem
from .arrays import ArraySource
from .dask_inputs import (check_dask_shape, chunked_features, gathered_labels,
                          gathered_sparse, has_sparse_chunks, is_dask_array)
from .label_matrix import (LabelMatrixSource, binary_target, check_label_matrix,
                           check_learnable, is_one_dimensional)
from .synthetic.source import ProblemSource
from ..io import detect
from ..io.stores import paths

PATH_KINDS = ("xc", "csr", "observations")  # what as_source reads at a path (io.detect's)


def batch_seed(random_state) -> int:
    """The seed of a label matrix's batches: ``random_state`` itself when it is an int,
    else an int drawn from it (``None``: fresh entropy, batches differ between fits)."""
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return check_seed("random_state", random_state)
    return int(as_generator(random_state).integers(2**32))


def as_source(X, Y=None, bits=None, *, n_labels=None, random_state=None):
    """The :class:`~onebit_dask.data.source.Source` of ``fit(X, Y, bits)``'s arguments.

    * a :class:`~onebit_dask.synthetic.SyntheticProblem` or
      :class:`~onebit_dask.synthetic.FullObservationProblem` (no ``Y``, ``bits``,
      ``n_labels``): :class:`~onebit_dask.data.problems.ProblemSource`;
    * a path: a directory is a CSR store (:class:`~onebit_dask.data.csr_source.CsrStoreSource`,
      read by row ranges where the shards run) or an observations store
      (:class:`onebit_dask.io.ZarrSource`), a file an XC/svmlight multi-label text file
      read into a label matrix;
    * ``X`` and a 2-D 0/1 ``Y`` (dense or sparse): a label matrix
      (:class:`~onebit_dask.data.label_matrix.LabelMatrixSource`, batches seeded by
      :func:`batch_seed` of ``random_state``);
    * ``X`` and a 1-D ``Y`` of two classes (a binary target): a label matrix of one
      label, ``Y == classes[1]``, the source's ``classes`` (:func:`binary_target`);
    * ``X``, 1-D integer labels ``Y`` and their ``bits`` (-1/+1): single-label observations
      (:class:`~onebit_dask.data.arrays.ArraySource`).

    ``X`` is a dense array or a ``scipy.sparse`` matrix (kept sparse, as CSR), or, with
    a label matrix ``Y``, a dask array: of dense chunks, it is checked chunk by chunk and
    never computed whole here (:func:`~onebit_dask.data.dask_inputs.chunked_features`:
    a :class:`~onebit_dask.data.chunked_rows.ChunkedRows`, whose chunks the workers of a
    Dask engine compute); of ``scipy.sparse`` chunks, it is gathered into one CSR matrix
    a row chunk at a time (:func:`~onebit_dask.data.dask_inputs.gathered_sparse`) and
    fitted as that matrix. A dask ``Y`` is gathered into a CSR matrix here, a row chunk
    at a time (:func:`~onebit_dask.data.dask_inputs.gathered_labels`). Every check runs
    here, before any work.
    """
    if isinstance(X, (SyntheticProblem, FullObservationProblem)):
        _none_of("fit(problem)", "the problem draws them", Y=Y, bits=bits, n_labels=n_labels)
        return ProblemSource(X)
    if isinstance(X, (str, os.PathLike)):
        _none_of("fit(path)", "the data at the path hold them", Y=Y, bits=bits,
                 n_labels=n_labels)
        path = os.fspath(X)
        kind = detect(path)
        if kind == "xc":
            features, labels = read_features(path, labels=True)
            check_learnable(features, labels, f"the file {path!r}")
            return LabelMatrixSource(features, labels, batch_seed(random_state))
        if kind == "csr" and not paths.is_url(path):  # a CSR store is read from local paths
            from ..io.csr_store import open_csr_store  # a store: zarr is imported to read it
            from .csr import CsrStoreSource

            store = open_csr_store(path)
            if store.nnz_y == 0 or store.nnz_x == 0:
                what = "a label (the store holds no 1)" if store.nnz_y == 0 else "a feature"
                raise ValueError(f"the CSR store {path!r}: no instance has {what}: there is "
                                 "nothing to learn")
            return CsrStoreSource(store, batch_seed(random_state))
        from .observations import ZarrSource  # or the error that says what is not there

        return ZarrSource(path)
    if is_dask_array(X):
        return _dask_source(X, Y, bits, n_labels, random_state)
    if Y is None:
        check_features(X, training=True)  # X's own errors first, as scikit-learn's
        raise _no_target()
    if is_dask_array(Y):
        Y = Y.compute() if Y.ndim == 1 else gathered_labels(Y)  # a 1-D y: n classes
    if bits is not None:
        if np.asarray(Y).ndim != 1:
            raise ValueError(f"Y has shape {np.asarray(Y).shape} with bits given: fit(X, labels, "
                             "bits) takes 1-D labels; drop bits to fit a 2-D 0/1 label matrix Y")
        X, labels, y, d2 = check_observations(X, Y, bits, n_labels=n_labels)
        return ArraySource(X, labels, y, d2)
    X = check_features(X, training=True)  # X first, as scikit-learn's estimators
    return _label_matrix_source(X, Y, n_labels, random_state)


def _no_target() -> ValueError:
    return ValueError("OneBitMultiLabel requires y to be passed, but the target y is None: "
                      "labels and y are required with an array X: pass a 0/1 label "
                      "matrix, fit(X, Y), or single-label observations and their bits, "
                      "fit(X, labels, bits)")


def _dask_source(X, Y, bits, n_labels, random_state):
    """The label matrix of a dask array ``X`` (of dense chunks: checked chunk by chunk,
    never computed whole here; of sparse chunks: gathered into CSR a chunk at a time) and
    labels ``Y``; its shape and the rows of ``Y`` are checked before anything is
    computed."""
    check_dask_shape(X)
    if Y is None:
        raise _no_target()
    if bits is not None:
        raise TypeError("fit(X, labels, bits) takes an in-memory X (a numpy array or a "
                        "scipy.sparse matrix), not a dask array: pass X.compute(), or a "
                        "0/1 label matrix Y with the dask array, fit(X, Y)")
    rows = np.shape(Y)[0] if np.ndim(Y) else None
    if rows != X.shape[0]:
        raise ValueError(f"Y has {rows} rows, but X has {X.shape[0]}: pass one row of Y per "
                         "row of X")
    if has_sparse_chunks(X):  # the sparse path's CSR matrix, never densified
        X, has_feature = check_features(gathered_sparse(X), training=True), None
    else:
        X, has_feature = chunked_features(X)
    if is_dask_array(Y):
        Y = Y.compute() if Y.ndim == 1 else gathered_labels(Y)  # a 1-D y: n classes
    return _label_matrix_source(X, Y, n_labels, random_state, has_feature)


def _label_matrix_source(X, Y, n_labels, random_state, has_feature=None):
    """The :class:`LabelMatrixSource` of checked features ``X`` and the labels ``Y`` (a
    label matrix or a binary target), checked here (``has_feature``: whether ``X`` has a
    non-zero entry, when already known)."""
    classes = None
    if is_one_dimensional(Y):
        classes, Y = binary_target(Y, X.shape[0])
    Y = check_label_matrix(Y, X.shape[0])
    check_learnable(X, Y, has_feature=has_feature)
    if n_labels is not None and n_labels != Y.shape[1]:
        raise ValueError(f"n_labels={n_labels!r} is not allowed: Y has {Y.shape[1]} columns; "
                         "omit n_labels with a label matrix")
    source = LabelMatrixSource(X, Y, batch_seed(random_state))
    source.classes = classes
    return source



def _none_of(call: str, why: str, **given) -> None:
    shown = {"Y": "labels or label matrix Y"}
    named = [shown.get(name, name) for name, value in given.items() if value is not None]
    if named:
        raise TypeError(f"{call} takes no {', '.join(named)}: {why}")


def _wrong_width(path: str, has: str, n_features: int) -> ValueError:
    return ValueError(f"--data {path!r} has {has}, but the model was fitted with "
                      f"n_features_in_={n_features}: give data of {n_features} features "
                      f"(0-based indices 0..{n_features - 1})")


def read_features(path, *, n_features: int | None = None, rows: int | None = None,
                  labels: bool = False):
    """The features of the first ``rows`` rows (all without it) of the data at ``path``
    (:func:`onebit_dask.io.detect`): an XC/svmlight file or an observations store; with
    ``labels``, an XC file's ``(X, Y)``, ``Y`` checked as :func:`check_label_matrix`.
    ``n_features``: the features the caller's model expects (its ``n_features_in_``): a
    store, or a file's header, must declare as many; a file without a header may use
    fewer (the columns it does not reach are zeros), never a feature index beyond. A
    width that differs raises ``ValueError`` naming both widths."""
    path = os.fspath(path)
    if detect(path) == "xc":
        from ..io.xc import read_header, read_xc

        header = None if n_features is None else read_header(path)
        if header is not None and header[1] != n_features:
            raise _wrong_width(path, f"{header[1]} features (its header declares them)",
                               n_features)
        X, Y = read_xc(path)
        if n_features is not None and X.shape[1] > n_features:
            raise _wrong_width(path, f"{X.shape[1]} features (feature indices up to "
                                     f"{X.shape[1] - 1})", n_features)
        if n_features is not None and X.shape[1] < n_features:
            X = scipy.sparse.csr_matrix((X.data, X.indices, X.indptr),
                                        shape=(X.shape[0], n_features))
        if labels:
            return X, check_label_matrix(Y, X.shape[0])
        return X if rows is None else X[:min(rows, X.shape[0])]
    from ..io.observations import read_observed_features
    from .observations import ZarrSource

    source = ZarrSource(path)
    if n_features is not None and source.d1 != n_features:
        raise _wrong_width(path, f"{source.d1} features", n_features)
    return read_observed_features(source.path, 0, source.n if rows is None else
                                  min(rows, source.n))
