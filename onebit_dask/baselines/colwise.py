"""Column-wise one-bit compressed sensing."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from ..base import FactorPredictor, dense_factors
from ..utils.validation import check_fit_data
from ..ops.kernels import label_sums


class ColumnwiseOneBit(FactorPredictor, BaseEstimator):
    r"""Each column ``w_j`` is the normalised mean of ``y_i x_i`` over the observations of
    label ``j`` (Plan and Vershynin): ``E[y x] = sqrt(2/pi) w_j`` for unit ``w_j``.

    No low-rank link between the labels; a label never observed gets a zero column.
    Memory ``O(d1 d2)``; one pass over the data.
    """

    _sparse_fit = False
    _parameter_constraints: dict = {}

    def fit(self, X, Y, bits=None, *, n_labels=None):
        """Single-label observations ``fit(X, labels, bits)`` (bits ``-1``/``+1``, ``0``/``1``
        or booleans), or a label matrix ``fit(X, Y)``, ``Y`` of shape ``(n, d2)`` (0/1,
        ``-1``/``+1`` or booleans; every entry an observation: ``W = colnorm(X^T Y)``
        with ``Y`` in ``{-1, +1}``)."""
        self._validate_params()
        X, labels, y, d2 = check_fit_data(X, Y, bits, n_labels, accept_sparse=False)
        self.n_features_in_, self.n_labels_ = X.shape[1], d2
        sums = label_sums(X, labels, y, d2).T if labels is not None else X.T @ y
        self.A_, self.B_ = dense_factors(np.asarray(sums, dtype=np.float64))
        return self
