"""Prediction from a fitted factor model ``W = A_ @ B_.T`` (shared by every estimator)."""

from __future__ import annotations

import numpy as np

from ._validation import check_features
from .kernels import sign

DENSE_LIMIT = 50_000_000  # entries of W that coef_ may materialise


class FactorPredictor:
    """Mixin: ``decision_function``, ``predict`` and ``coef_`` from ``A_`` and ``B_``.

    Subclasses set ``A_`` of shape ``(d1, l)``, ``B_`` of shape ``(d2, l)``,
    ``n_features_in_`` and ``n_labels_`` when fitted; ``W = A_ @ B_.T`` has unit-norm
    columns, so the error metrics compare it with ``W*`` directly.
    """

    def _check_fitted(self):
        if not hasattr(self, "A_"):
            raise AttributeError(f"This {type(self).__name__} is not fitted yet: call fit first")

    def decision_function(self, X, labels=None):
        """Scores ``X W`` of shape ``(n, d2)``, or ``(n, len(labels))`` for given labels."""
        self._check_fitted()
        X = check_features(X, n_features=self.n_features_in_)
        if labels is not None:
            labels = np.asarray(labels)
            if labels.dtype.kind not in "iu" or labels.ndim != 1 or (
                    labels.size and (labels.min() < 0 or labels.max() >= self.n_labels_)):
                raise ValueError(f"labels={labels!r} is not allowed: labels must be a 1-D array "
                                 f"of integers in [0, {self.n_labels_})")
        return (X.astype(np.float64) @ self.A_) @ self._B_rows(labels).T + self._b_rows(labels)

    def _B_rows(self, labels=None) -> np.ndarray:
        """Rows of ``B_`` at ``labels`` (all rows for ``None``), in the order given."""
        return self.B_ if labels is None else self.B_[labels]

    def _b_rows(self, labels=None):
        """The thresholds at ``labels``: ``0.0`` for a model without thresholds."""
        return 0.0

    def predict(self, X, labels=None):
        """Signs ``sign(X W)`` in ``{-1, +1}`` (int8), shape as :meth:`decision_function`."""
        return sign(self.decision_function(X, labels)).astype(np.int8)

    @property
    def coef_(self) -> np.ndarray:
        """The dense ``d1 x d2`` estimate ``W`` (refused above 5e7 entries: use ``A_``, ``B_``)."""
        self._check_fitted()
        size = self.A_.shape[0] * self.B_.shape[0]
        if size > DENSE_LIMIT:
            raise MemoryError(f"coef_ would have {size} entries (> {DENSE_LIMIT}): use the factors "
                              "A_ and B_ (W = A_ @ B_.T) or decision_function")
        return self.A_ @ self.B_.T


def dense_factors(W: np.ndarray):
    """``(A, B)`` with ``A @ B.T = colnorm(W)`` for a dense ``d1 x d2`` ``W`` (``B`` diagonal)."""
    norms = np.linalg.norm(W, axis=0)
    norms[norms == 0] = 1.0
    return W / norms, np.eye(W.shape[1])
