"""The source of what ``fit`` was given: :func:`as_source`."""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse

from .._checks import as_generator, check_seed
from .._validation import check_features, check_observations
from ..synthetic import FullObservationProblem, SyntheticProblem
from .arrays import ArraySource
from .label_matrix import LabelMatrixSource, check_label_matrix
from .problems import ProblemSource


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
    * ``X``, 1-D integer labels ``Y`` and their ``bits`` (-1/+1): single-label observations
      (:class:`~onebit_dask.data.arrays.ArraySource`).

    ``X`` is a dense array or a ``scipy.sparse`` matrix (kept sparse, as CSR). Every
    check runs here, before any work.
    """
    if isinstance(X, (SyntheticProblem, FullObservationProblem)):
        _none_of("fit(problem)", "the problem draws them", Y=Y, bits=bits, n_labels=n_labels)
        return ProblemSource(X)
    if isinstance(X, (str, os.PathLike)):
        _none_of("fit(path)", "the data at the path hold them", Y=Y, bits=bits,
                 n_labels=n_labels)
        path = os.fspath(X)
        if os.path.isfile(path):
            from .xc import read_xc

            features, labels = read_xc(path)
            return LabelMatrixSource(features, check_label_matrix(labels, features.shape[0]),
                                     batch_seed(random_state))
        from .csr_store import is_csr_store  # a store: zarr is imported to read it anyway

        if is_csr_store(path):
            from .csr_source import CsrStoreSource
            from .csr_store import open_csr_store

            return CsrStoreSource(open_csr_store(path), batch_seed(random_state))
        from ..io import ZarrSource

        return ZarrSource(path)
    if Y is None:
        raise TypeError("labels and y are required with an array X: pass a 0/1 label "
                        "matrix, fit(X, Y), or single-label observations and their bits, "
                        "fit(X, labels, bits)")
    if bits is not None:
        if np.ndim(Y) != 1:
            raise ValueError(f"Y has shape {np.shape(Y)} with bits given: fit(X, labels, bits) "
                             "takes 1-D labels; drop bits to fit a 2-D 0/1 label matrix Y")
        X, labels, y, d2 = check_observations(X, Y, bits, n_labels=n_labels)
        return ArraySource(X, labels, y, d2)
    if not scipy.sparse.issparse(Y) and np.ndim(Y) == 1:
        raise TypeError("Y is 1-D and bits=None: a 1-D Y is the observed label of each row; "
                        "pass their bits too, fit(X, labels, bits), or a 2-D (n, d2) 0/1 "
                        "label matrix Y")
    X = check_features(X)
    Y = check_label_matrix(Y, X.shape[0])
    if n_labels is not None and n_labels != Y.shape[1]:
        raise ValueError(f"n_labels={n_labels!r} is not allowed: Y has {Y.shape[1]} columns; "
                         "omit n_labels with a label matrix")
    return LabelMatrixSource(X, Y, batch_seed(random_state))



def _none_of(call: str, why: str, **given) -> None:
    shown = {"Y": "labels or label matrix Y"}
    named = [shown.get(name, name) for name, value in given.items() if value is not None]
    if named:
        raise TypeError(f"{call} takes no {', '.join(named)}: {why}")
