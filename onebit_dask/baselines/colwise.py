"""Column-wise one-bit compressed sensing."""

from __future__ import annotations

from sklearn.base import BaseEstimator

from .._base import FactorPredictor, dense_factors
from .._validation import check_observations
from ..kernels import label_sums


class ColumnwiseOneBit(FactorPredictor, BaseEstimator):
    r"""Each column ``w_j`` is the normalised mean of ``y_i x_i`` over the observations of
    label ``j`` (Plan and Vershynin): ``E[y x] = sqrt(2/pi) w_j`` for unit ``w_j``.

    No low-rank link between the labels; a label never observed gets a zero column.
    Memory ``O(d1 d2)``; one pass over the data.
    """

    def fit(self, X, labels, y, *, n_labels=None):
        X, labels, y, d2 = check_observations(X, labels, y, n_labels=n_labels)
        self.n_features_in_, self.n_labels_ = X.shape[1], d2
        self.A_, self.B_ = dense_factors(label_sums(X, labels, y, d2).T)
        return self
