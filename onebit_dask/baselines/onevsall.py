"""One-vs-all: one logistic regression per label on that label's observations."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.linear_model import LogisticRegression

from .._base import FactorPredictor, dense_factors
from .._validation import check_float, check_observations


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

    def __init__(self, C=1.0):
        self.C = C

    def fit(self, X, labels, y, *, n_labels=None):
        check_float("C", self.C, low=1e-12)
        X, labels, y, d2 = check_observations(X, labels, y, n_labels=n_labels)
        self.n_features_in_, self.n_labels_ = X.shape[1], d2
        W = np.zeros((X.shape[1], d2))
        order = np.argsort(labels, kind="stable")
        bounds = np.searchsorted(labels[order], np.arange(d2 + 1))
        for j in range(d2):
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
