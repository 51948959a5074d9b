r"""Trace-norm regularised multi-label learning on full label matrices (LRT, SMT).

.. math::

    \min_W \frac{1}{n} \sum_{i, j} \ell(Y_{ij}, x_i^T w_j) + \tau \|W\|_*

with the logistic loss (``lrt``) or the squared loss (``smt``), by accelerated
proximal gradient (FISTA) whose proximal step is singular value thresholding.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.linalg
import scipy.special
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions

from ..base import FactorPredictor, dense_factors
from ..utils.validation import RANDOM_STATE, check_sign_matrix
from ._select import best, held_out, sign_error


def svt(W: np.ndarray, tau: float) -> np.ndarray:
    """Singular value thresholding: the proximal operator of ``tau ||W||_*``.

    ``U diag(max(s - tau, 0)) V^T`` for ``W = U diag(s) V^T``.
    """
    return _svt(W, tau)[0]


def _svt(W: np.ndarray, tau: float):
    """``svt(W, tau)`` and its non-zero singular values."""
    U, s, Vt = scipy.linalg.svd(W, full_matrices=False)
    s = np.maximum(s - tau, 0.0)
    keep = s > 0
    return (U[:, keep] * s[keep]) @ Vt[keep], s[keep]


class _Loss:
    def __init__(self, kind, X, Y):
        self.kind, self.X, self.Y, self.n = kind, X, Y, X.shape[0]
        if kind == "squared":  # the gradient needs only X^T X and X^T Y
            self.XtX, self.XtY = X.T @ X, X.T @ Y
        norm2 = scipy.linalg.svdvals(X)[0] ** 2 / self.n
        self.lipschitz = 2 * norm2 if kind == "squared" else norm2 / 4

    def gradient(self, W):
        if self.kind == "squared":
            return 2.0 / self.n * (self.XtX @ W - self.XtY)
        margins = self.Y * (self.X @ W)
        return self.X.T @ (-self.Y * scipy.special.expit(-margins)) / self.n

    def value(self, W):
        Z = self.X @ W
        if self.kind == "squared":
            return float(np.sum((self.Y - Z) ** 2) / self.n)
        return float(np.sum(np.logaddexp(0.0, -self.Y * Z)) / self.n)


def proximal_gradient(loss: _Loss, tau: float, n_iter: int, record: bool = True):
    """FISTA for ``loss + tau ||W||_*``; returns ``W`` and the objective per iteration
    (an empty list when ``record`` is false, which saves a product with ``X`` a step);
    it starts from ``W = 0``."""
    d1, d2 = loss.X.shape[1], loss.Y.shape[1]
    W = np.zeros((d1, d2))
    Z, t = W.copy(), 1.0
    step = 1.0 / loss.lipschitz
    objective = []
    for _ in range(n_iter):
        W_new, s = _svt(Z - step * loss.gradient(Z), step * tau)
        t_new = (1 + np.sqrt(1 + 4 * t * t)) / 2
        Z = W_new + ((t - 1) / t_new) * (W_new - W)
        W, t = W_new, t_new
        if record:
            objective.append(loss.value(W) + tau * np.sum(s))
    return W, objective


class TraceNormMultiLabel(FactorPredictor, BaseEstimator):
    """LRT (``loss="logistic"``) or SMT (``loss="squared"``) on a full label matrix.

    Parameters
    ----------
    loss : {"logistic", "squared"}
    tau : float or "auto", default "auto"
        Trace-norm weight. ``"auto"``: ``tau_max * f`` for ``f`` in ``tau_fractions``,
        where ``tau_max = ||grad loss(0)||_2`` is the smallest weight giving ``W = 0``,
        chosen by the sign error on a held-out ``validation_fraction`` of the
        instances (never the test set), then refitted on all of them.
    n_iter : int, default 100
        FISTA iterations.
    """

    _sparse_fit = False
    _parameter_constraints: dict = {
        "loss": [StrOptions({"logistic", "squared"})],
        "tau": [StrOptions({"auto"}), Interval(Real, 0, None, closed="left")],
        "tau_fractions": ["array-like"],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        "validation_fraction": [Interval(Real, 0.01, 0.5, closed="both")],
        "random_state": RANDOM_STATE,
    }

    def __init__(self, loss="logistic", *, tau="auto", tau_fractions=(0.01, 0.03, 0.1, 0.3),
                 n_iter=100, validation_fraction=0.1, random_state=0):
        self.loss = loss
        self.tau = tau
        self.tau_fractions = tau_fractions
        self.n_iter = n_iter
        self.validation_fraction = validation_fraction
        self.random_state = random_state

    def fit(self, X, Y):
        """``X`` of shape ``(n, d1)``, ``Y`` of shape ``(n, d2)``: 0/1, ``-1``/``+1`` or
        booleans."""
        self._validate_params()
        X, Y = check_sign_matrix(X, Y, accept_sparse=False)
        self.n_features_in_, self.n_labels_ = X.shape[1], Y.shape[1]
        self.validation_errors_ = {}
        if self.tau == "auto":
            held = held_out(X.shape[0], self.validation_fraction, self.random_state, "tau")
            train = _Loss(self.loss, X[~held], Y[~held])
            tau_max = scipy.linalg.svdvals(train.gradient(np.zeros((X.shape[1], Y.shape[1]))))[0]
            for frac in self.tau_fractions:
                W, _ = proximal_gradient(train, tau_max * frac, self.n_iter, record=False)
                self.validation_errors_[tau_max * frac] = sign_error(X[held] @ W, Y[held])
            tau = best(self.validation_errors_)
        else:
            tau = float(self.tau)
        self.tau_ = tau
        W, self.objective_ = proximal_gradient(_Loss(self.loss, X, Y), tau, self.n_iter)
        self.W_ = W
        self.A_, self.B_ = dense_factors(W)
        return self
