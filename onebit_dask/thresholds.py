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
    """The bits of one batch by label: ``labels`` sorted and unique, ``n_bits`` and
    ``n_pos`` (positive bits) of each, as float64."""

    labels: np.ndarray
    n_bits: np.ndarray
    n_pos: np.ndarray


def count_bits(labels: np.ndarray, y: np.ndarray) -> LabelCounts:
    """The :class:`LabelCounts` of observations ``(labels, y)`` (``y`` in ``{-1, +1}``)."""
    uniq, inverse = np.unique(labels, return_inverse=True)
    n_bits = np.bincount(inverse, minlength=uniq.size).astype(np.float64)
    n_pos = np.bincount(inverse, weights=np.asarray(y) > 0, minlength=uniq.size)
    return LabelCounts(uniq, n_bits, n_pos.astype(np.float64))


def merge_counts(parts) -> LabelCounts:
    """One :class:`LabelCounts` from several (summed label by label, in order)."""
    parts = list(parts)
    if len(parts) == 1:
        return parts[0]
    uniq = np.unique(np.concatenate([p.labels for p in parts]))
    n_bits, n_pos = np.zeros(uniq.size), np.zeros(uniq.size)
    for p in parts:
        at = np.searchsorted(uniq, p.labels)
        n_bits[at] += p.n_bits
        n_pos[at] += p.n_pos
    return LabelCounts(uniq, n_bits, n_pos)


def dense_counts(counts: LabelCounts, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """``(n_bits, n_pos)`` of the labels ``[lo, hi)`` as arrays of length ``hi - lo``."""
    n_bits, n_pos = np.zeros(hi - lo), np.zeros(hi - lo)
    n_bits[counts.labels - lo] = counts.n_bits
    n_pos[counts.labels - lo] = counts.n_pos
    return n_bits, n_pos


def pooled_rate(n_bits: float, n_pos: float) -> float:
    """The share of positive bits over all labels, kept inside ``(0, 1)``
    (``(n_pos + 1/2) / (n_bits + 1)``)."""
    return (n_pos + 0.5) / (n_bits + 1.0)


def estimate(n_bits: np.ndarray, n_pos: np.ndarray, rate: float) -> np.ndarray:
    r"""Thresholds ``b_j = Phi^{-1}((n_pos_j + P rate) / (n_bits_j + P))``,
    ``P = PRIOR_BITS``: the smoothed share of positive bits of each label."""
    return scipy.special.ndtri((n_pos + PRIOR_BITS * rate) / (n_bits + PRIOR_BITS))


def step_factors(b: np.ndarray, n_bits: np.ndarray, expected: float) -> np.ndarray:
    r"""``c_j / c`` for the labels with bits in the batch: the per-label scale
    ``c_j = 1 / (2 n_j phi(b_j))`` relative to the paper's ``c = 1 / (2 phi(0) m / d2)``,

    .. math:: f_j = \frac{m / d_2}{n_j} \, e^{b_j^2 / 2},

    with ``expected = m / d2``. Exactly 1 when ``n_j = m / d2`` and ``b_j = 0``.
    """
    return (expected / n_bits) * np.exp(0.5 * b * b)


def init_weights(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The residual of a positive and of a negative bit when ``W = 0``:
    ``r = y - sign(b_j)``, i.e. ``(1 - s_j, -1 - s_j)`` with ``s_j = sign(b_j)``
    (``sign(0) = +1``)."""
    s = np.where(b >= 0, 1.0, -1.0)
    return 1.0 - s, -1.0 - s


def column_weights(b: np.ndarray) -> np.ndarray:
    r"""``d_j = phi(b_j) / phi(0) = e^{-b_j^2 / 2}``: the power iteration runs on ``M D``,
    which has the column space of ``M`` but weighs each label by the information of its
    bits (a rare label's residual has ``phi(b_j)`` times the signal of a balanced one);
    ``W = colnorm(A B^T)`` does not depend on ``D``."""
    return np.exp(-0.5 * b * b)
