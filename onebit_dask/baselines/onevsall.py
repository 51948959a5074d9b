"""One-vs-all: one logistic regression per label on that label's observations."""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.utils._param_validation import Interval

from ..base import FactorPredictor, dense_factors
from ..utils.validation import check_fit_data


class OneVsAll(FactorPredictor, BaseEstimator):
    """An independent linear classifier per label (scikit-learn's ``LogisticRegression``,
    no intercept, since the model ``y = sign(x^T w_j)`` has none), trained on the
    observations of that label only: ``W`` learned column by column without the
    low-rank link. A label with one class or no observation falls back to the
    normalised mean of ``y x`` (zero if unseen).

    Parameters
    ----------
    C : float, default 1.0
        Inverse L2 regularisation of each logistic regression.
    """

    _sparse_fit = False
    _parameter_constraints: dict = {"C": [Interval(Real, 0, None, closed="neither")]}

    def __init__(self, C=1.0):
        self.C = C

    def fit(self, X, Y, bits=None, *, n_labels=None):
        """Single-label observations ``fit(X, labels, bits)`` (bits ``-1``/``+1``, ``0``/``1``
        or booleans), or a label matrix ``fit(X, Y)`` of shape ``(n, d2)`` (every row an
        observation of every label: one-vs-rest logistic regression)."""
        self._validate_params()
        X, labels, y, d2 = check_fit_data(X, Y, bits, n_labels, accept_sparse=False)
        self.n_features_in_, self.n_labels_ = X.shape[1], d2
        W = np.zeros((X.shape[1], d2))
        if labels is not None:
            order = np.argsort(labels, kind="stable")
            bounds = np.searchsorted(labels[order], np.arange(d2 + 1))
        for j in range(d2):
            if labels is None:
                Xj, yj = X, y[:, j]
            else:
                rows = order[bounds[j]: bounds[j + 1]]
                if rows.size == 0:
                    continue
                Xj, yj = X[rows], y[rows]
            if np.unique(yj).size < 2:
                W[:, j] = yj @ Xj
                continue
            clf = LogisticRegression(C=self.C, fit_intercept=False, max_iter=200)
            W[:, j] = clf.fit(Xj, yj).coef_[0]
        self.A_, self.B_ = dense_factors(W)
        return self
