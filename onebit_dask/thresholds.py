r"""Per-label thresholds of the imbalanced model (``docs/ALGORITHM.md`` section 9).

The thresholded model scores label ``j`` of an instance as ``x^T w_j + b_j`` (unit
``w_j``). For ``x ~ N(0, I)``, ``E[sign(x^T w + b) x] = 2 phi(b) w``, so a label whose
bits are positive with probability ``p`` has ``b = Phi^{-1}(p)``, and the step's
per-label scale ``c_j = 1 / (2 n_j phi(b_j))`` (``n_j``: the label's bits in the batch)
makes the mean of ``w_j + c_j sum_i r_i x_i`` proportional to ``w*_j`` whatever ``b_j``.

Pure NumPy; every function works on the rows of one label block.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.special

PRIOR_BITS = 1.0
"""Strength of the smoothing prior, in bits: a label's share of positive bits is
``(n_pos + PRIOR_BITS * rate) / (n_bits + PRIOR_BITS)``, with ``rate`` the share of
positive bits over all labels; a label without bits gets ``Phi^{-1}(rate)``."""


class LabelCounts(NamedTuple):
    """The bits of one batch by label: ``labels`` sorted and unique, and for each, as
    float64, ``n_bits``, ``n_pos`` (positive bits) and ``r_sum`` (the sum of the step's
    residuals ``r_i = y_i - sign(s_i)``; zeros for the initial batch)."""

    labels: np.ndarray
    n_bits: np.ndarray
    n_pos: np.ndarray
    r_sum: np.ndarray


def count_bits(labels: np.ndarray, y: np.ndarray, r: np.ndarray | None = None) -> LabelCounts:
    """The :class:`LabelCounts` of observations ``(labels, y)`` (``y`` in ``{-1, +1}``) and
    their residuals ``r`` (``None``: the initial batch)."""
    uniq, inverse = np.unique(labels, return_inverse=True)
    n_bits = np.bincount(inverse, minlength=uniq.size).astype(np.float64)
    n_pos = np.bincount(inverse, weights=np.asarray(y) > 0, minlength=uniq.size)
    r_sum = np.zeros(uniq.size) if r is None else np.bincount(inverse, weights=r,
                                                               minlength=uniq.size)
    return LabelCounts(uniq, n_bits, n_pos.astype(np.float64), r_sum)


def merge_counts(parts) -> LabelCounts:
    """One :class:`LabelCounts` from several (summed label by label, in order)."""
    parts = list(parts)
    if len(parts) == 1:
        return parts[0]
    uniq = np.unique(np.concatenate([p.labels for p in parts]))
    sums = [np.zeros(uniq.size) for _ in range(3)]
    for p in parts:
        at = np.searchsorted(uniq, p.labels)
        for total, part in zip(sums, p[1:]):
            total[at] += part
    return LabelCounts(uniq, *sums)


def dense_counts(counts: LabelCounts, lo: int, hi: int) -> LabelCounts:
    """The counts of the labels ``[lo, hi)`` as arrays of length ``hi - lo`` (zeros for
    labels without bits)."""
    sums = [np.zeros(hi - lo) for _ in range(3)]
    for total, part in zip(sums, counts[1:]):
        total[counts.labels - lo] = part
    return LabelCounts(np.arange(lo, hi), *sums)


def pooled_rate(n_bits: float, n_pos: float) -> float:
    """The share of positive bits over all labels, kept inside ``(0, 1)``
    (``(n_pos + 1/2) / (n_bits + 1)``)."""
    return (n_pos + 0.5) / (n_bits + 1.0)


def estimate(n_bits: np.ndarray, n_pos: np.ndarray, rate: float) -> np.ndarray:
    r"""Thresholds ``b_j = Phi^{-1}((n_pos_j + P rate) / (n_bits_j + P))``,
    ``P = PRIOR_BITS``: the smoothed share of positive bits of each label."""
    return scipy.special.ndtri((n_pos + PRIOR_BITS * rate) / (n_bits + PRIOR_BITS))


PROB_LIMIT = float(scipy.special.ndtr(-8.0))
"""Thresholds stay in ``[-8, 8]`` (a share of positive bits in ``[Phi(-8), Phi(8)]``)."""


def update(b: np.ndarray, r_sum: np.ndarray, n_bits: np.ndarray, eta: float) -> np.ndarray:
    r"""The step of the thresholds, for the labels with bits in the batch:

    .. math:: b_j' = \Phi^{-1}\big(\Phi(b_j) + \eta \, \textstyle\sum_i r_i / (2 n_j)\big).

    ``sum_i r_i / 2`` is the label's positive bits minus its predicted positives, so
    ``Phi(b_j) + sum_i r_i / (2 n_j)`` is its share of positive bits with the batch's
    predicted share replaced by its mean ``Phi(b_j)`` (a control variate: for Gaussian
    ``x`` and unit ``w_j`` the mean is the true share, and only the rows where the model
    and the bit disagree add noise). On any data its fixed point predicts as many
    positives as there are. Labels without bits keep their threshold.
    """
    seen = n_bits > 0
    share = scipy.special.ndtr(b[seen]) + eta * r_sum[seen] / (2.0 * n_bits[seen])
    out = b.copy()
    out[seen] = scipy.special.ndtri(np.clip(share, PROB_LIMIT, 1.0 - PROB_LIMIT))
    return out


def step_factors(b: np.ndarray, n_bits: np.ndarray, expected: float) -> np.ndarray:
    r"""``c_j / c`` for the labels with bits in the batch: the per-label scale
    ``c_j = 1 / (2 n_j phi(b_j))`` relative to the paper's ``c = 1 / (2 phi(0) m / d2)``,

    .. math:: f_j = \frac{m / d_2}{n_j} \, e^{b_j^2 / 2},

    with ``expected = m / d2``. Exactly 1 when ``n_j = m / d2`` and ``b_j = 0``.
    """
    return (expected / n_bits) * np.exp(0.5 * b * b)


def init_weights(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The weights of a positive and of a negative bit in the initial batch: the bits
    centred on the label's estimated mean ``2 p_j - 1`` (``p_j = Phi(b_j)``),
    ``(2 (1 - p_j), -2 p_j)``.

    For centred ``x``, ``E[(y - 2 p_j + 1) x] = E[y x]`` (the paper's ``H0``), and of all
    weights ``(u, -v)`` with that mean this has the least variance (``u / v =
    (1 - p) / p``): a rare label's sum is mostly its positive bits' rows, where the
    paper's weights ``(1, -1)`` let its many negative bits add noise of the same size.
    """
    p = scipy.special.ndtr(b)
    return 2.0 * (1.0 - p), -2.0 * p


def column_weights(b: np.ndarray) -> np.ndarray:
    r"""``d_j = phi(b_j) / phi(0) = e^{-b_j^2 / 2}``: the power iteration runs on ``M D``,
    which has the column space of ``M`` but weighs each label by the information of its
    bits (a rare label's residual has ``phi(b_j)`` times the signal of a balanced one);
    ``W = colnorm(A B^T)`` does not depend on ``D``."""
    return np.exp(-0.5 * b * b)
