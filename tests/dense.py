"""Dense NumPy references: the dilation and H, formed explicitly (small sizes only)."""

import numpy as np

from onebit_dask.kernels import LAMBDA


def dense_dilation(M):
    d1, d2 = M.shape
    return np.block([[np.zeros((d1, d1)), M], [M.T, np.zeros((d2, d2))]])


def dense_H(X, labels, weights, d2, m=None):
    """``c sum_i w_i x_i e_{j_i}^T`` with ``c = d2 / (m lambda)`` (``m`` defaults to the rows)."""
    E = np.zeros((X.shape[0], d2))
    E[np.arange(X.shape[0]), labels] = 1.0
    c = d2 / ((X.shape[0] if m is None else m) * LAMBDA)
    return c * X.T @ (weights[:, None] * E)
