r"""One-vs-rest linear SVM on a full label matrix.

Every label ``j`` has its own L2-regularised squared-hinge SVM (scikit-learn's
``LinearSVC`` objective, no intercept):

.. math::

    \min_{w_j} \tfrac12 \|w_j\|^2 + C \sum_i \max(0, 1 - Y_{ij} x_i^T w_j)^2 .

The objectives are independent, so their sum over the labels is minimised in one
go by L-BFGS on the ``d1 x d2`` matrix ``W`` (``solver="lbfgs"``): each iteration
is two matrix products with ``X``, instead of ``d2`` separate liblinear fits
(``solver="liblinear"``, one ``LinearSVC`` per label, kept as the reference).
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.optimize
from sklearn.base import BaseEstimator
from sklearn.svm import LinearSVC
from sklearn.utils._param_validation import Interval, StrOptions

from ..base import FactorPredictor, dense_factors
from ..utils.validation import check_sign_matrix


def squared_hinge_objective(W, X, Y, C):
    """``sum_j (1/2 ||w_j||^2 + C sum_i max(0, 1 - Y_ij x_i^T w_j)^2)`` and its gradient."""
    slack = np.maximum(0.0, 1.0 - Y * (X @ W))
    value = 0.5 * np.sum(W * W) + C * np.sum(slack * slack)
    return value, W - 2.0 * C * (X.T @ (Y * slack))


class OneVsRestSVM(FactorPredictor, BaseEstimator):
    """A linear SVM per label (no intercept: the model ``sign(x^T w_j)`` has none).

    Parameters
    ----------
    C : float, default 1.0
        Inverse regularisation strength, as in ``LinearSVC``.
    solver : {"lbfgs", "liblinear"}, default "lbfgs"
        ``"lbfgs"``: all labels at once (the sum of the per-label objectives);
        ``"liblinear"``: one ``LinearSVC`` per label.
    max_iter : int, default 1000
        Iterations of L-BFGS, or of each liblinear fit.
    tol : float, default 1e-6
        L-BFGS stops when the objective's relative decrease falls below ``tol``.

    Attributes
    ----------
    W_ : ndarray of shape (d1, d2)
    objective_ : float
        The summed objective at ``W_``.
    """

    _sparse_fit = False
    _parameter_constraints: dict = {
        "C": [Interval(Real, 0, None, closed="neither")],
        "solver": [StrOptions({"lbfgs", "liblinear"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(self, C=1.0, *, solver="lbfgs", max_iter=1000, tol=1e-6):
        self.C = C
        self.solver = solver
        self.max_iter = max_iter
        self.tol = tol

    def fit(self, X, Y):
        """``X`` of shape ``(n, d1)``, ``Y`` of shape ``(n, d2)``: 0/1, ``-1``/``+1`` or
        booleans."""
        self._validate_params()
        C = float(self.C)
        X, Y = check_sign_matrix(X, Y, accept_sparse=False)
        d1, d2 = X.shape[1], Y.shape[1]
        self.n_features_in_, self.n_labels_ = d1, d2
        if self.solver == "lbfgs":
            def fun(w):
                value, grad = squared_hinge_objective(w.reshape(d1, d2), X, Y, C)
                return value, grad.ravel()

            result = scipy.optimize.minimize(
                fun, np.zeros(d1 * d2), jac=True, method="L-BFGS-B",
                options={"maxiter": self.max_iter, "ftol": self.tol, "gtol": 0.0})
            W = result.x.reshape(d1, d2)
            self.n_iter_ = int(result.nit)
            self.objective_ = float(result.fun)
        else:
            W = np.zeros((d1, d2))
            for j in range(d2):
                if np.unique(Y[:, j]).size < 2:  # LinearSVC needs both classes
                    W[:, j] = Y[:, j] @ X
                    continue
                svm = LinearSVC(C=C, fit_intercept=False, dual="auto", max_iter=self.max_iter)
                W[:, j] = svm.fit(X, Y[:, j]).coef_[0]
            self.n_iter_ = None
            self.objective_ = float(squared_hinge_objective(W, X, Y, C)[0])
        self.W_ = W
        self.A_, self.B_ = dense_factors(W)
        return self
