r"""Recovery and prediction metrics (docs/ALGORITHM.md section 5).

The error metrics work on factors, ``W* = A* B*^T`` and ``W = A B^T``, and never
form a dense ``d1 x d2`` matrix: ``W* - W = L R^T`` with ``L = [A*, -A]`` and
``R = [B*, B]`` has rank at most ``k + 2k``.

* ``spectral_error = ||W* - W||_2`` (the paper's Theorem 1), exactly, from the
  thin QR factors of ``L`` and ``R``.
* ``frobenius_error = ||W* - W||_F / sqrt(d2)``, the RMS column error, in ``[0, 2]``
  for unit columns.
* ``hamming_loss``: fraction of test (instance, label) pairs whose predicted sign
  differs from the noiseless label.
* ``auc``: macro average over labels of the ROC AUC of the scores ``x^T w_j``;
  labels with one class are skipped.

``hamming_loss`` and ``auc`` equal :func:`sklearn.metrics.hamming_loss` and
:func:`sklearn.metrics.roc_auc_score` (``average="macro"``), which the tests check;
the AUC is computed for all labels at once from ``scipy.stats.rankdata`` (the
Mann-Whitney statistic, average ranks for ties) because scikit-learn's per-label
loop costs about 7 ms a label, too slow for a metric recorded at every iteration.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ..ops.kernels import canonical_signs

__all__ = ["spectral_error", "frobenius_error", "hamming_loss", "auc", "auc_per_label",
           "evaluate", "evaluate_factored", "label_auc_sums"]


def _difference_factors(A_true, B_true, A, B):
    return np.hstack([A_true, -A]), np.hstack([B_true, B])


def spectral_error(A_true, B_true, A, B) -> float:
    """``||A* B*^T - A B^T||_2`` in ``O((d1 + d2) k^2)``.

    Parameters
    ----------
    A_true, B_true : ndarray of shape (d1, k) and (d2, k)
    A, B : ndarray of shape (d1, l) and (d2, l)
    """
    L, R = _difference_factors(A_true, B_true, A, B)  # fresh arrays: QR may overwrite them
    RL = scipy.linalg.qr(L, mode="r", overwrite_a=True)[0][: L.shape[1]]
    RR = scipy.linalg.qr(R, mode="r", overwrite_a=True)[0][: R.shape[1]]
    return float(scipy.linalg.svdvals(RL @ RR.T)[0])


def frobenius_error(A_true, B_true, A, B) -> float:
    """``||A* B*^T - A B^T||_F / sqrt(d2)`` in ``O((d1 + d2) k^2)``.

    Uses ``||L R^T||_F^2 = trace((L^T L)(R^T R))``.
    """
    L, R = _difference_factors(A_true, B_true, A, B)
    sq = float(np.sum((L.T @ L) * (R.T @ R)))
    return float(np.sqrt(max(sq, 0.0) / B.shape[0]))


def hamming_loss(Y_true, scores) -> float:
    """Fraction of entries where ``sign(scores)`` differs from ``Y_true`` (in ``{-1, +1}``)."""
    return float(np.mean((np.asarray(Y_true) > 0) != (np.asarray(scores) >= 0)))


def auc_per_label(Y_true, scores) -> np.ndarray:
    """ROC AUC of each column; NaN where the column has one class."""
    Y = np.ascontiguousarray(np.asarray(Y_true).T > 0)
    return auc_rows(Y, np.ascontiguousarray(np.asarray(scores, dtype=np.float64).T))


def auc_rows(Y: np.ndarray, S: np.ndarray) -> np.ndarray:
    """ROC AUC of each row of ``S`` (labels x instances) against the boolean rows of ``Y``;
    NaN where a row has one class.

    The Mann-Whitney statistic: the rank of a positive among all scores of its row is its
    position in the row sorted (``searchsorted``), so two sorts per row (all scores, and
    the positives) replace an ``argsort``. Rows with tied scores get average ranks
    (``scipy.stats.rankdata``), as scikit-learn's ``roc_auc_score`` counts ties as 1/2.
    """
    from scipy.stats import rankdata  # only for rows with ties (SciPy's stats: slow to import)

    pos = Y.sum(axis=1)
    ordered = np.sort(S, axis=1)
    tied = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
    positives = np.sort(np.where(Y, S, np.inf), axis=1)
    rank_sum = np.empty(S.shape[0])
    for i, p in enumerate(pos.tolist()):
        if tied[i]:
            rank_sum[i] = rankdata(S[i]) @ Y[i]
        else:
            rank_sum[i] = np.searchsorted(ordered[i], positives[i, :p]).sum() + p
    pos = pos.astype(np.float64)
    neg = S.shape[1] - pos
    u = rank_sum - pos * (pos + 1) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((pos > 0) & (neg > 0), u / (pos * neg), np.nan)


def auc(Y_true, scores) -> float:
    """Macro ROC AUC over the labels (columns) that have both classes.

    Returns NaN when no column has both classes.
    """
    per_label = auc_per_label(Y_true, scores)
    return float(np.nanmean(per_label)) if np.isfinite(per_label).any() else float("nan")


def _scores_metrics(test_set, A, B_eval, chunk_labels: int, b_eval=None):
    """``(hamming_loss, auc)`` of ``W = A B^T`` (and thresholds ``b_eval``) on the test set;
    ``B_eval`` and ``b_eval`` hold the rows of ``B`` and ``b`` at ``test_set.labels``.
    Scores ``chunk_labels`` labels at a time."""
    XA_T = np.ascontiguousarray((test_set.X @ A).T)
    errors, per_label = 0, []
    for lo in range(0, test_set.labels.size, chunk_labels):
        scores = B_eval[lo: lo + chunk_labels] @ XA_T  # labels x instances
        if b_eval is not None:
            scores += b_eval[lo: lo + chunk_labels, None]
        Y = np.ascontiguousarray(test_set.Y[:, lo: lo + chunk_labels].T > 0)
        errors += np.count_nonzero(Y != (scores >= 0))
        per_label.append(auc_rows(Y, scores))
    per_label = np.concatenate(per_label)
    return (errors / test_set.Y.size,
            float(np.nanmean(per_label)) if np.isfinite(per_label).any() else float("nan"))


def evaluate_factored(test_set, A_true, A, gram_R, B_eval, d2: int,
                      chunk_labels: int = 128, b_eval=None) -> dict:
    r"""The four metrics from what label blocks report, without ``B`` or ``B*``.

    Parameters
    ----------
    test_set : TestSet
    A_true, A : ndarray of shape (d1, k) and (d1, l)
    gram_R : ndarray of shape (k + l, k + l)
        ``R^T R`` for ``R = [B*, B]``, summed over the label blocks.
    B_eval : ndarray of shape (n_eval, l)
        The rows of ``B`` at ``test_set.labels``.
    d2 : int
    b_eval : ndarray of shape (n_eval,), optional
        The thresholds at ``test_set.labels`` (a thresholded model).

    Notes
    -----
    ``||L R^T||_F^2 = trace((L^T L)(R^T R))`` with ``L = [A*, -A]``. For the spectral
    norm, any ``F`` with ``F^T F = R^T R`` gives ``||L R^T||_2 = ||L F^T||_2``; ``F`` comes
    from the eigendecomposition of ``R^T R`` (negative round-off eigenvalues clipped).
    """
    L = np.hstack([A_true, -A])
    sq = float(np.sum((L.T @ L) * gram_R))
    theta, Z = scipy.linalg.eigh(gram_R)
    Z = Z * canonical_signs(Z)
    F = np.sqrt(np.maximum(theta, 0.0))[:, None] * Z.T
    RL = scipy.linalg.qr(L, mode="r")[0][: L.shape[1]]
    hamming, auc_value = _scores_metrics(test_set, A, B_eval, chunk_labels, b_eval)
    return {
        "spectral_error": float(scipy.linalg.svdvals(RL @ F.T)[0]),
        "frobenius_error": float(np.sqrt(max(sq, 0.0) / d2)),
        "hamming_loss": hamming,
        "auc": auc_value,
    }


def evaluate(test_set, truth, A, B, chunk_labels: int = 128) -> dict:
    """All four metrics of the estimate ``W = A B^T`` against a test set and the truth.

    Parameters
    ----------
    test_set : TestSet
        ``X`` of shape ``(n_test, d1)``, the evaluated ``labels`` and their noiseless
        signs ``Y`` of shape ``(n_test, n_eval)``.
    truth : tuple of ndarray
        ``(A*, B*)``.
    A, B : ndarray of shape (d1, l) and (d2, l)
    chunk_labels : int
        Labels scored at a time, which bounds the memory to ``n_test x chunk_labels``.
    """
    A_true, B_true = truth
    hamming, auc_value = _scores_metrics(test_set, A, B[test_set.labels], chunk_labels)
    return {
        "spectral_error": spectral_error(A_true, B_true, A, B),
        "frobenius_error": frobenius_error(A_true, B_true, A, B),
        "hamming_loss": hamming,
        "auc": auc_value,
    }


def label_auc_sums(labels: np.ndarray, y: np.ndarray, scores: np.ndarray) -> np.ndarray:
    r"""``[sum_j U_j, sum_j P_j N_j, sum_j U_j / (P_j N_j), #{j : P_j N_j > 0}]`` of
    the bits ``(labels, y, scores)``: the Mann-Whitney counts ``U_j`` of each label's
    (positive, negative) pairs ordered by score, ties counted one half, and ``P_j N_j``
    its pairs. The mean of ``U_j / (P_j N_j)`` over the labels with both classes is the
    bits' macro AUC (``docs/ALGORITHM.md`` sections 9b and 9e).

    Parameters
    ----------
    labels : ndarray of int of shape (n,)
    y : ndarray of shape (n,)
        ``-1`` or ``+1``.
    scores : ndarray of shape (n,)

    Returns
    -------
    ndarray of shape (4,)
    """
    if labels.size == 0:
        return np.zeros(4)
    order = np.lexsort((scores, labels))
    lab, sc, pos = labels[order], scores[order], (y[order] > 0).astype(np.float64)
    n = lab.size
    new_label = np.r_[True, lab[1:] != lab[:-1]]
    new_run = new_label | np.r_[True, sc[1:] != sc[:-1]]
    # midrank of each bit among its label's bits (ties share the mean of their ranks)
    run_id = np.cumsum(new_run) - 1
    run_start = np.flatnonzero(new_run)
    run_end = np.r_[run_start[1:], n]
    label_id = np.cumsum(new_label) - 1
    label_start = np.flatnonzero(new_label)
    midrank = (run_start + run_end - 1) / 2.0 - label_start[label_id][run_start] + 1.0
    rank = midrank[run_id]
    n_labels = label_start.size
    P = np.bincount(label_id, weights=pos, minlength=n_labels)
    N = np.bincount(label_id, minlength=n_labels) - P
    U = np.bincount(label_id, weights=pos * rank, minlength=n_labels) - P * (P + 1) / 2.0
    pairs = P * N
    both = pairs > 0
    return np.array([U[both].sum(), pairs[both].sum(), (U[both] / pairs[both]).sum(),
                     float(both.sum())])
