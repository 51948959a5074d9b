"""One-vs-rest linear SVM on a full label matrix (scikit-learn's ``LinearSVC``)."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.svm import LinearSVC

from .._base import FactorPredictor, dense_factors
from .._validation import check_float
from .trace_norm import check_label_matrix


class OneVsRestSVM(FactorPredictor, BaseEstimator):
    """A linear SVM per label (no intercept: the model ``sign(x^T w_j)`` has none).

    Parameters
    ----------
    C : float, default 1.0
    """

    def __init__(self, C=1.0):
        self.C = C

    def fit(self, X, Y):
        """``X`` of shape ``(n, d1)``, ``Y`` of shape ``(n, d2)`` in ``{-1, +1}``."""
        check_float("C", self.C, low=1e-12)
        X, Y = check_label_matrix(X, Y)
        self.n_features_in_, self.n_labels_ = X.shape[1], Y.shape[1]
        W = np.zeros((X.shape[1], Y.shape[1]))
        for j in range(Y.shape[1]):
            if np.unique(Y[:, j]).size < 2:
                W[:, j] = Y[:, j] @ X
                continue
            svm = LinearSVC(C=self.C, fit_intercept=False, dual="auto", max_iter=2000)
            W[:, j] = svm.fit(X, Y[:, j]).coef_[0]
        self.A_, self.B_ = dense_factors(W)
        return self
