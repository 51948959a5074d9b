"""Dense NumPy references: the dilation and H, formed explicitly (small sizes only), and
the bits' per-label AUCs label by label with scikit-learn."""

import numpy as np
from sklearn.metrics import roc_auc_score

from onebit_dask.ops.kernels import LAMBDA


def dense_dilation(M):
    d1, d2 = M.shape
    return np.block([[np.zeros((d1, d1)), M], [M.T, np.zeros((d2, d2))]])


def dense_H(X, labels, weights, d2, m=None):
    """``c sum_i w_i x_i e_{j_i}^T`` with ``c = d2 / (m lambda)`` (``m`` defaults to the rows)."""
    E = np.zeros((X.shape[0], d2))
    E[np.arange(X.shape[0]), labels] = 1.0
    c = d2 / ((X.shape[0] if m is None else m) * LAMBDA)
    return c * X.T @ (weights[:, None] * E)


def label_auc_sums_reference(labels, y, scores):
    """``onebit_dask.metrics.planted.label_auc_sums`` label by label: each label's ROC AUC
    (scikit-learn) times its pairs, summed; ``[U, pairs, sum of AUCs, labels]``."""
    U = pairs = macro = n = 0.0
    for j in np.unique(labels):
        at = labels == j
        P, N = np.sum(y[at] > 0), np.sum(y[at] < 0)
        if P and N:
            auc = roc_auc_score(y[at] > 0, scores[at])
            U, pairs, macro, n = U + auc * P * N, pairs + P * N, macro + auc, n + 1
    return np.array([U, pairs, macro, n])
