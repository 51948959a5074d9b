r"""LEML (Yu, Jain, Kar, Dhillon, ICML 2014) with the squared loss.

.. math::

    \min_{U, V} \sum_{(i, j)\ \mathrm{observed}} (y_{ij} - x_i^T U v_j)^2
        + \frac{\lambda}{2} (\|U\|_F^2 + \|V\|_F^2)

by alternating minimisation: each row ``v_j`` of ``V`` is a ``k x k`` ridge solve
(exact), and ``U`` is updated by conjugate gradient on its normal equations, started
from the current ``U`` (CG decreases the quadratic from its start, so the objective
never increases).
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions

from ..base import FactorPredictor
from ..utils.checks import check_float, check_rank
from ..utils.validation import RANDOM_STATE, check_fit_data
from ..ops.kernels import canonical_signs, column_norms, label_sums, scatter_rows
from ._select import best, held_out, sign_error

CHUNK = 65_536  # rows per block of the data passes


class _Observations:
    """Single-label observations with the products LEML needs, by row blocks.

    The large products run in the features' dtype (float32 features: float32 BLAS,
    about twice as fast and no converted copy); block results are added in float64.
    """

    def __init__(self, X, labels, y, d2):
        self.X, self.labels, self.y, self.d2 = X, labels, y, d2
        self.dtype = X.dtype

    def _blocks(self):
        return [slice(a, min(a + CHUNK, self.X.shape[0])) for a in range(0, self.X.shape[0], CHUNK)]

    def projected(self, U) -> np.ndarray:
        """``Z = X U`` of shape ``(n, k)``, float64."""
        U = U.astype(self.dtype)
        return np.vstack([(self.X[r] @ U).astype(np.float64) for r in self._blocks()])

    def scores(self, U, V) -> np.ndarray:
        """``s_i = x_i^T U v_{j_i}``."""
        return np.einsum("ij,ij->i", self.projected(U), V[self.labels])

    def adjoint(self, w, V) -> np.ndarray:
        """``sum_i w_i x_i v_{j_i}^T`` of shape ``(d1, k)``."""
        out = np.zeros((self.X.shape[1], V.shape[1]))
        for r in self._blocks():
            rows = (w[r, None] * V[self.labels[r]]).astype(self.dtype)
            out += self.X[r].T @ rows
        return out


class LEML(FactorPredictor, BaseEstimator):
    """Low-rank empirical risk minimisation for multi-label learning, squared loss.

    Parameters
    ----------
    rank : int, default 3
    lam : float or "auto", default "auto"
        The ridge weight ``lambda``. ``"auto"``: the value of ``lam_grid`` with the
        lowest sign error on a held-out ``validation_fraction`` of the training
        observations (never the test set), then a refit on all of them.
    lam_grid : tuple of float
    n_iter : int, default 10
        Alternations (a ``V`` solve then a ``U`` update).
    cg_iter : int, default 10
        Conjugate-gradient iterations per ``U`` update.
    validation_fraction : float, default 0.1
    validation_iter : int, default 3
        Alternations of each validation fit (the refit on all observations uses
        ``n_iter``): the held-out errors of the grid values differ early.
    random_state : int or None
        Seeds the validation split.

    Attributes
    ----------
    U_, V_ : ndarray of shape (d1, rank), (d2, rank)
    A_, B_ : the factors of ``colnorm(U_ V_^T)``.
    lam_ : float, the ``lambda`` used.
    objective_ : list of float, the objective after every half-step.
    validation_errors_ : dict, the held-out sign error of each ``lambda`` ("auto" only).
    """

    _sparse_fit = False
    _parameter_constraints: dict = {
        "rank": [Interval(Integral, 1, None, closed="left")],
        "lam": [StrOptions({"auto"}), Interval(Real, 0, None, closed="left")],
        "lam_grid": ["array-like"],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        "cg_iter": [Interval(Integral, 1, None, closed="left")],
        "validation_fraction": [Interval(Real, 0.01, 0.5, closed="both")],
        "validation_iter": [Interval(Integral, 1, None, closed="left")],
        "random_state": RANDOM_STATE,
    }

    def __init__(self, rank=3, *, lam="auto", lam_grid=(1e-2, 1.0, 1e2), n_iter=10,
                 cg_iter=10, validation_fraction=0.1, validation_iter=3, random_state=0):
        self.rank = rank
        self.lam = lam
        self.lam_grid = lam_grid
        self.n_iter = n_iter
        self.cg_iter = cg_iter
        self.validation_fraction = validation_fraction
        self.validation_iter = validation_iter
        self.random_state = random_state

    def fit(self, X, Y, bits=None, *, n_labels=None):
        """Single-label observations ``fit(X, labels, bits)`` (bits ``-1``/``+1``, ``0``/``1``
        or booleans), or a full label matrix ``fit(X, Y)`` with ``Y`` of shape
        ``(n, d2)`` (0/1, ``-1``/``+1`` or booleans)."""
        self._validate_params()
        X, labels, y, d2 = check_fit_data(X, Y, bits, n_labels, accept_sparse=False)
        grid = self._grid(X.shape[1], d2)
        self.n_features_in_, self.n_labels_ = X.shape[1], d2
        if labels is None:
            return self._fit_dense(X, y, grid)

        def subset(rows):
            if rows is None:
                return _Observations(X, labels, y, d2)
            return _Observations(X[rows], labels[rows], y[rows], d2)

        return self._select_and_refit(
            X.shape[0], grid, subset, self._solve,
            lambda valid, U, V: sign_error(valid.scores(U, V), valid.y))

    def _select_and_refit(self, n, grid, subset, solve, error):
        """``lam_`` from ``grid`` (with several values, the lowest sign error on a held-out
        split of the ``n`` training rows), then the fit on all of them.

        ``subset(rows)`` is the data of a boolean row mask (``None``: every row),
        ``solve(data, lam, n_iter)`` returns ``(U, V, objective)`` and
        ``error(data, U, V)`` is the sign error on held-out data.
        """
        self.validation_errors_ = {}
        if len(grid) > 1:
            held = held_out(n, self.validation_fraction, self.random_state, "lam")
            train, valid = subset(~held), subset(held)
            for lam in grid:
                U, V, _ = solve(train, lam, self.validation_iter)
                self.validation_errors_[lam] = error(valid, U, V)
            lam = best(self.validation_errors_)
        else:
            lam = grid[0]
        self.lam_ = lam
        self.U_, self.V_, self.objective_ = solve(subset(None), lam, self.n_iter)
        self.A_ = self.U_
        self.B_ = self.V_ / column_norms(self.U_, self.V_)[:, None]
        return self

    def _grid(self, d1, d2):
        """The ``lambda`` values to try (checked), once ``rank <= min(d1, d2)`` is."""
        check_rank(self.rank, d1, d2)
        if self.lam == "auto":
            return [check_float("lam_grid", v, low=0.0) for v in self.lam_grid]
        return [float(self.lam)]

    def _fit_dense(self, X, Y, grid):
        return self._select_and_refit(
            X.shape[0], grid, lambda rows: (X, Y) if rows is None else (X[rows], Y[rows]),
            lambda data, lam, n_iter: self._solve_dense(*data, lam, n_iter),
            lambda valid, U, V: sign_error((valid[0] @ U) @ V.T, valid[1]))

    def _solve_dense(self, X, Y, lam, n_iter):
        """Both half-steps exact: ``V = Y^T Z (Z^T Z + lam/2 I)^-1`` with ``Z = X U``, and
        ``U`` from ``X^T X U V^T V + lam/2 U = X^T Y V`` in the eigenbases of
        ``X^T X`` and ``V^T V``."""
        k = self.rank
        evals, P = np.linalg.eigh(X.T @ X)
        XtY = X.T @ Y
        U = np.linalg.svd(XtY, full_matrices=False)[0][:, :k]
        U = U * canonical_signs(U)
        objective = []

        def value(U, V):
            R = Y - (X @ U) @ V.T
            return float(np.sum(R * R) + lam / 2 * (np.sum(U * U) + np.sum(V * V)))

        for _ in range(n_iter):
            Z = X @ U
            V = np.linalg.solve(Z.T @ Z + lam / 2 * np.eye(k), (Y.T @ Z).T).T
            objective.append(value(U, V))
            mu, Qv = np.linalg.eigh(V.T @ V)
            E = P.T @ (XtY @ V) @ Qv
            U = P @ (E / (evals[:, None] * mu[None, :] + lam / 2)) @ Qv.T
            objective.append(value(U, V))
        return U, V, objective

    def _objective(self, data, U, V, lam):
        r = data.y - data.scores(U, V)
        return float(r @ r + lam / 2 * (np.sum(U * U) + np.sum(V * V)))

    def _solve(self, data, lam, n_iter):
        k, d2 = self.rank, data.d2
        # start: the top-k left singular vectors of sum_i y_i x_i e_{j_i}^T
        S = label_sums(data.X, data.labels, data.y, d2)
        U = np.linalg.svd(S.T, full_matrices=False)[0][:, :k]
        U = U * canonical_signs(U)
        V = np.zeros((d2, k))
        objective = []
        eye = np.eye(k)
        for _ in range(n_iter):
            # V step: per label, (Z_j^T Z_j + lam/2 I) v_j = Z_j^T y_j
            Z = data.projected(U)
            outer = (Z[:, :, None] * Z[:, None, :]).reshape(len(Z), k * k)
            idx, G = scatter_rows(data.labels, outer)
            _, b = scatter_rows(data.labels, Z, data.y)
            G = G.reshape(-1, k, k) + lam / 2 * eye
            V = np.zeros((d2, k))
            V[idx] = np.linalg.solve(G, b[:, :, None])[:, :, 0]
            objective.append(self._objective(data, U, V, lam))
            # U step: CG on  X^T((X U v_j) v_j^T) + lam/2 U = X^T (y v_j^T), from the current U
            U = self._cg(data, U, V, lam)
            objective.append(self._objective(data, U, V, lam))
        return U, V, objective

    def _cg(self, data, U, V, lam):
        def operator(P):
            return data.adjoint(data.scores(P, V), V) + lam / 2 * P

        rhs = data.adjoint(data.y, V)
        R = rhs - operator(U)
        P = R.copy()
        rr = np.sum(R * R)
        for _ in range(self.cg_iter):
            if rr <= 1e-20 * max(np.sum(rhs * rhs), 1e-300):
                break
            AP = operator(P)
            alpha = rr / np.sum(P * AP)
            U = U + alpha * P
            R = R - alpha * AP
            rr_new = np.sum(R * R)
            P = R + (rr_new / rr) * P
            rr = rr_new
        return U
