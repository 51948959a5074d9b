"""What every estimator of the package shares: a multi-label classifier whose fitted
model is a factored ``W = A_ @ B_.T``.

Prediction, scoring, the scikit-learn tags and parameter validation live here, once.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.metrics import roc_auc_score
from sklearn.utils import check_array
from sklearn.utils.validation import (
    _check_feature_names,
    check_is_fitted,
    validate_data,
)

from .utils.checks import check_finite
from .utils.validation import FLOAT_DTYPES, check_sign_matrix, validate_params

DENSE_LIMIT = 50_000_000  # entries of W that coef_ may materialise


class FactorPredictor(ClassifierMixin):
    r"""Mixin: a multi-label classifier with ``decision_function``, ``predict``, ``score``
    and ``coef_`` from the factors ``A_`` and ``B_``.

    Subclasses declare ``_parameter_constraints`` (scikit-learn's table) and set ``A_``
    of shape ``(d1, l)``, ``B_`` of shape ``(d2, l)``, ``n_features_in_`` and
    ``n_labels_`` when fitted; ``W = A_ @ B_.T`` has unit-norm columns, so the error
    metrics compare it with ``W*`` directly.

    Labels are scikit-learn's multi-label indicator: ``predict`` returns
    ``Y_hat[i, j] = 1[x_i^T w_j >= 0]`` of shape ``(n, d2)``.
    """

    _parameter_constraints: dict = {}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # d2 binary labels, not one of d2 classes
        tags.classifier_tags.multi_label = True
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = False
        tags.input_tags.sparse = self._sparse_fit
        return tags

    def _validate_params(self):
        """Check the parameters against ``_parameter_constraints`` (before any work)."""
        validate_params(self._parameter_constraints, self.get_params(deep=False),
                        type(self).__name__)

    def _set_feature_names(self, X) -> None:
        """``feature_names_in_`` from the columns of a DataFrame ``X`` (``validate_data``'s
        rule, for any input of ``fit``: arrays, sparse matrices, problems, paths); removed
        for an input without column names."""
        _check_feature_names(self, X, reset=True)

    def _validate_X(self, X, *, reset: bool):
        """``X`` through scikit-learn's ``validate_data``: features counted and named
        (``n_features_in_``, ``feature_names_in_`` when ``X`` is a DataFrame) on ``reset``,
        checked against them otherwise; float32 kept, other dtypes as float64, CSR kept
        sparse; non-finite entries refused, naming the first."""
        X = validate_data(self, X, reset=reset, accept_sparse="csr", dtype=FLOAT_DTYPES,
                          ensure_all_finite=False)
        check_finite(X)
        return X

    _sparse_fit = True  # fit takes scipy.sparse X (the tag input_tags.sparse)

    def _check_fitted(self):
        check_is_fitted(self, "A_")

    @property
    def classes_(self) -> np.ndarray:
        """``[0, 1]``: the values of each label's indicator (as in ``predict``)."""
        self._check_fitted()
        return np.array([0, 1])

    def decision_function(self, X, labels=None):
        """Scores ``X W`` (plus the thresholds of a model that has them).

        Dense by contract: the result holds ``n x d2`` float64 numbers (or ``n x
        len(labels)``), formed in this process. For each row's best labels among many
        use ``predict_top_k`` where the estimator has it (:class:`OneBitMultiLabel`),
        whose memory is bounded by a tile of scores, not by ``n x d2``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n, d1)
        labels : array-like of int, optional
            Only these labels' columns, in the order given.

        Returns
        -------
        ndarray of shape (n, d2), or (n, len(labels)), float64
            A dask array (chunked by the rows of ``X``) for a dask array ``X``.
        """
        labels = self._checked_labels(labels)
        return self._scores(X, labels, self._b_rows(labels))

    def _checked_labels(self, labels):
        """``labels`` as an array (``None`` stays ``None``), after the fitted check."""
        self._check_fitted()
        if labels is not None:
            labels = np.asarray(labels)
            if labels.dtype.kind not in "iu" or labels.ndim != 1 or (
                    labels.size and (labels.min() < 0 or labels.max() >= self.n_labels_)):
                raise ValueError(f"labels={labels!r} is not allowed: labels must be a 1-D array "
                                 f"of integers in [0, {self.n_labels_})")
        return labels

    def _scores(self, X, labels, b):
        """``decision_function`` with the thresholds ``b`` at ``labels`` given (gathered
        once by the caller)."""
        if callable(getattr(X, "__dask_graph__", None)):  # a dask array (dask not imported)
            return self._per_chunk(X, labels, b)
        X = self._validate_X(X, reset=False)
        return self._project(X) @ self._B_rows(labels).T + b

    def _per_chunk(self, X, labels, b):
        """``decision_function`` of a dask array ``X``, lazily, chunk of rows by chunk of
        rows (the columns in one chunk). The graph carries the factor ``A_``, the feature
        map and the label rows, gathered here once, not the estimator."""
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has shape {X.shape}, but the estimator was fitted with "
                             f"{self.n_features_in_} features: pass a dask array of shape "
                             f"(n_samples, {self.n_features_in_})")
        X = X.rechunk({1: -1})
        B = self._B_rows(labels)
        return X.map_blocks(chunk_scores, self.A_, getattr(self, "feature_map_", None), B, b,
                            dtype=np.float64, chunks=(X.chunks[0], (B.shape[0],)))

    def _project(self, X) -> np.ndarray:
        """``X A_`` of shape ``(n, l)``, float64: the rows in the factor's space."""
        return np.asarray(X.astype(np.float64, copy=False) @ self.A_)

    def _B_rows(self, labels=None) -> np.ndarray:
        """Rows of ``B_`` at ``labels`` (all rows for ``None``), in the order given."""
        return self.B_ if labels is None else self.B_[labels]

    def _b_rows(self, labels=None):
        """The thresholds at ``labels``: ``0.0`` for a model without thresholds."""
        return 0.0

    def predict(self, X, labels=None):
        """The multi-label indicator ``1[X W >= 0]``, dense ``(n, d2)`` by contract as
        :meth:`decision_function`.

        Returns
        -------
        ndarray of shape (n, d2), or (n, len(labels)), int64 in {0, 1}
            A dask array for a dask array ``X``.
        """
        return (self.decision_function(X, labels) >= 0).astype(np.int64)

    def score(self, X, y, sample_weight=None) -> float:
        """Macro-averaged ROC AUC of the scores ``X W`` over the labels of the label matrix
        ``y`` that have both classes.

        Not scikit-learn's subset accuracy, which other classifiers' ``score`` returns: with
        many labels a row's whole label set is almost never predicted exactly, so subset
        accuracy is about 0 for every candidate of a search. Other criteria for
        ``scoring=``: :mod:`onebit_dask.scorers` (P@k, nDCG@k).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n, d1)
        y : array-like of shape (n, d2)
            Label matrix: 0/1 indicator, -1/+1 or booleans.
        sample_weight : array-like of shape (n,), optional

        Returns
        -------
        float
        """
        self._check_fitted()
        X = self._validate_X(X, reset=False)
        X, Y = check_sign_matrix(X, y)
        if Y.shape[1] != self.n_labels_:
            raise ValueError(f"Y has {Y.shape[1]} labels, but the estimator was fitted with "
                             f"{self.n_labels_}: pass Y of shape (n_samples, {self.n_labels_})")
        both = Y.min(axis=0) != Y.max(axis=0)
        if not both.any():
            raise ValueError("Y has no label with both classes: the AUC needs a label that is "
                             "on for some rows and off for others")
        scores = self.decision_function(X, np.flatnonzero(both))
        return float(roc_auc_score(Y[:, both] > 0, scores, average="macro",
                                   sample_weight=sample_weight))

    @property
    def coef_(self) -> np.ndarray:
        """The dense ``d1 x d2`` estimate ``W`` (refused above 5e7 entries: use ``A_``, ``B_``)."""
        self._check_fitted()
        size = self.A_.shape[0] * self.B_.shape[0]
        if size > DENSE_LIMIT:
            raise MemoryError(f"coef_ would have {size} entries (> {DENSE_LIMIT}): use the factors "
                              "A_ and B_ (W = A_ @ B_.T) or decision_function")
        return self.A_ @ self.B_.T


def chunk_scores(rows, A, feature_map, B, b):
    """``phi(rows) A B^T + b`` of one chunk of a dask array's rows (dense or CSR; none
    gives none), checked as ``decision_function`` checks ``X``."""
    rows = check_array(rows, accept_sparse="csr", dtype=FLOAT_DTYPES, ensure_all_finite=False,
                       ensure_min_samples=0)
    check_finite(rows)
    XA = (np.asarray(rows.astype(np.float64, copy=False) @ A) if feature_map is None
          else feature_map.product(rows, A))  # as ops.features.project
    return XA @ B.T + b


def dense_factors(W: np.ndarray):
    """``(A, B)`` with ``A @ B.T = colnorm(W)`` for a dense ``d1 x d2`` ``W`` (``B`` diagonal)."""
    norms = np.linalg.norm(W, axis=0)
    norms[norms == 0] = 1.0
    return W / norms, np.eye(W.shape[1])
