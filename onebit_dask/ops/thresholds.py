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

THRESHOLDS = ("auto", "none", "estimated", "shares")
"""``OneBitMultiLabel``'s ``threshold`` values: ``"none"`` the paper's model; the
thresholded model with the planted problem's centring and shrinkage (``"estimated"``) or
with observed data's (``"shares"``: :func:`centring_shares`, :func:`flat`); ``"auto"``
the one that fits the source."""


class LabelCounts(NamedTuple):
    """The bits of one batch by label: ``labels`` sorted and unique, and for each, as
    float64, ``n_bits``, ``n_pos`` (positive bits), ``r_sum`` (the sum of the step's
    residuals ``r_i = y_i - sign(s_i)``) and ``n_active`` (bits with ``r_i != 0``); the
    last two are zeros for the initial batch."""

    labels: np.ndarray
    n_bits: np.ndarray
    n_pos: np.ndarray
    r_sum: np.ndarray
    n_active: np.ndarray


def count_bits(labels: np.ndarray, y: np.ndarray, r: np.ndarray | None = None) -> LabelCounts:
    """The :class:`LabelCounts` of observations ``(labels, y)`` (``y`` in ``{-1, +1}``) and
    their residuals ``r`` (``None``: the initial batch)."""
    uniq, inverse = np.unique(labels, return_inverse=True)
    count = lambda w=None: np.bincount(inverse, weights=w, minlength=uniq.size).astype(  # noqa
        np.float64)
    zeros = np.zeros(uniq.size)
    return LabelCounts(uniq, count(), count(np.asarray(y) > 0),
                       zeros if r is None else count(r),
                       zeros if r is None else count(np.asarray(r) != 0))


def merge_counts(parts) -> LabelCounts:
    """One :class:`LabelCounts` from several (summed label by label, in order)."""
    parts = list(parts)
    if len(parts) == 1:
        return parts[0]
    uniq = np.unique(np.concatenate([p.labels for p in parts]))
    sums = [np.zeros(uniq.size) for _ in LabelCounts._fields[1:]]
    for p in parts:
        at = np.searchsorted(uniq, p.labels)
        for total, part in zip(sums, p[1:]):
            total[at] += part
    return LabelCounts(uniq, *sums)


def dense_counts(counts: LabelCounts, lo: int, hi: int) -> LabelCounts:
    """The counts of the labels ``[lo, hi)`` as arrays of length ``hi - lo`` (zeros for
    labels without bits)."""
    sums = [np.zeros(hi - lo) for _ in LabelCounts._fields[1:]]
    for total, part in zip(sums, counts[1:]):
        total[counts.labels - lo] = part
    return LabelCounts(np.arange(lo, hi), *sums)


NOISE_LIMIT = 1.0
"""Labels whose threshold's noise ``s_j^2`` exceeds this (in squared standard
deviations of ``x^T w``) say nothing about the spread of the thresholds: they are left
out of the prior's moments (and shrunk nearly all the way to its mean)."""


def initial_share(counts: LabelCounts) -> tuple[np.ndarray, np.ndarray]:
    """``(p, v)``: each label's share of positive bits in the initial batch,
    ``p = (n_pos + 1/2) / (n_bits + 1)``, and its variance ``p (1 - p) / (n_bits + 1)``;
    ``v = inf`` for a label without bits (its threshold is then the prior mean)."""
    p = (counts.n_pos + 0.5) / (counts.n_bits + 1.0)
    v = np.where(counts.n_bits > 0, p * (1.0 - p) / (counts.n_bits + 1.0), np.inf)
    return p, v


def step_share(p, v, b, counts: LabelCounts, eta: float, pooled: bool = False
               ) -> tuple[np.ndarray, np.ndarray]:
    r"""The step of each label's share ``p`` of positive bits (and of its variance ``v``),
    for the labels with bits in the batch:

    .. math:: \hat p_j = \Phi(b_j) + \frac{1}{2 n_j} \sum_i r_i, \qquad
              p_j' = (1 - \eta) p_j + \eta \hat p_j, \qquad
              v_j' = (1 - \eta)^2 v_j + \eta^2 \operatorname{var}(\hat p_j).

    ``sum_i r_i / 2`` is the label's positive bits minus its predicted positives, so
    ``hat p_j`` is the share of positive bits with the batch's predicted share replaced by
    its mean ``Phi(b_j)`` (``b_j``: the thresholds the residuals used): a control variate.
    For Gaussian ``x`` and unit ``w_j`` it is unbiased, and only the bits where model and
    bit disagree add noise; on any data the fixed point predicts as many positives as
    there are. ``hat p_j`` is kept in ``[1 / (2 (n_j + 1)), 1 - 1 / (2 (n_j + 1))]``
    (far from the truth, the control variate can leave ``[0, 1]``), and ``var(hat p_j)``
    is the variance of the mean of ``r_i / 2`` in ``{-1, 0, 1}``, at least
    ``1 / (4 n_j^2)``. A label seen for the first time takes ``hat p_j``; labels without
    bits keep theirs. ``pooled``: see :func:`_averaged`.
    """
    seen = counts.n_bits > 0
    nj = counts.n_bits[seen]
    half = counts.r_sum[seen] / (2.0 * nj)
    var = np.maximum((counts.n_active[seen] / nj - half * half) / nj, 0.25 / (nj * nj))
    return _averaged(p, v, counts, scipy.special.ndtr(b[seen]) + half, var, eta, pooled)


def moment_share(p, v, counts: LabelCounts, eta: float, pooled: bool = False
                 ) -> tuple[np.ndarray, np.ndarray]:
    r"""The moment step's share of positive bits (``docs/ALGORITHM.md`` section 9c): the
    batch's share ``hat p_j = n_pos / n_j`` of each label with bits, of variance
    ``hat p_j (1 - hat p_j) / n_j`` (at least ``1 / (4 n_j^2)``), averaged with the step
    size as in :func:`step_share` (so with ``eta_t = 1 / (t + 2)``, about the share of
    all the batches' bits). The moment step scores no rows, so it has no residuals for
    the control variate. ``pooled``: see :func:`_averaged`."""
    seen = counts.n_bits > 0
    nj = counts.n_bits[seen]
    share = counts.n_pos[seen] / nj
    var = np.maximum(share * (1.0 - share) / nj, 0.25 / (nj * nj))
    return _averaged(p, v, counts, share, var, eta, pooled)


def found_share(counts: LabelCounts, n: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Under chosen queries, each label's share of the ``n`` rows among the positives
    found (``docs/ALGORITHM.md`` section 11): ``p_j = (f_j + 1/2) / (n + 1)`` for the
    ``f_j = n_pos`` positive pairs of label ``j`` in the batch (every one found so far),
    kept below ``1 - 1 / (2 (n + 1))``; ``v = p (1 - p) / (n + 1)``, finite for every
    label (each has a share, if only the half pair)."""
    p = np.minimum((counts.n_pos + 0.5) / (n + 1.0), 1.0 - 0.5 / (n + 1.0))
    return p, p * (1.0 - p) / (n + 1.0)


def _averaged(p, v, counts: LabelCounts, share, var, eta: float, pooled: bool = False
              ) -> tuple[np.ndarray, np.ndarray]:
    """``p' = (1 - eta) p + eta share`` and ``v' = (1 - eta)^2 v + eta^2 var`` at the
    labels with bits in the batch, whose ``share`` is first kept at least
    ``1 / (2 (n_j + 1))`` (the least share ``n_j`` bits express, as in
    :func:`initial_share`) from 0 and 1; a label seen for the first time (``v = inf``)
    takes the batch's share, labels without bits keep theirs.

    ``pooled`` (observed data, ``threshold="shares"``): only a label's first share is
    kept from 0 and 1 so; later ones are only kept in ``[0, 1]``, and the average (of
    numbers in ``(0, 1)`` with weights ``1 - eta`` and ``eta``) stays in ``(0, 1)``. With
    the step sizes ``1 / 2, 1 / 3, ...`` of the batches after the initial one (the
    harmonic rule's ``1 / (t + 2)`` with ``t`` from 0) and batches of equal size the
    share is then that of all the batches' bits, the first batch's half a bit included
    (``docs/ALGORITHM.md`` section 9): kept per batch, the floor of ``1 / (2 (n_j + 1))``
    at the few bits a rare label has in each batch sets every rare label's share to about
    the same number, and the thresholds lose the labels' popularity. A step of size 1
    keeps the floor."""
    pooled = pooled and eta < 1.0
    seen = counts.n_bits > 0
    floor = 0.5 / (counts.n_bits[seen] + 1.0)
    p, v = p.copy(), v.copy()
    new = ~np.isfinite(v[seen])
    floored = new | (not pooled)  # a first share, or every share unless pooled
    share = np.clip(share, np.where(floored, floor, 0.0), np.where(floored, 1.0 - floor, 1.0))
    keep = np.where(new, 0.0, 1.0 - eta)
    p[seen] = keep * np.where(new, 0.0, p[seen]) + (1.0 - keep) * share
    v[seen] = keep * keep * np.where(new, 0.0, v[seen]) + (1.0 - keep) ** 2 * var
    return p, v


class Prior(NamedTuple):
    """The thresholds' common prior ``N(mean, var)`` over labels."""

    mean: float
    var: float


def moments(p, v) -> tuple[float, float, float, float]:
    """``(count, sum z, sum z^2, sum s^2)`` over the labels with bits so far and
    ``s_j^2 <= NOISE_LIMIT``, ``z_j = Phi^{-1}(p_j)`` and ``s_j^2 = v_j / phi(z_j)^2``
    (delta method): what :func:`prior` needs of one label block."""
    seen = np.isfinite(v)
    z = scipy.special.ndtri(p[seen])
    s2 = v[seen] / _phi(z) ** 2
    keep = s2 <= NOISE_LIMIT
    z, s2 = z[keep], s2[keep]
    return float(keep.sum()), float(z.sum()), float((z * z).sum()), float(s2.sum())


def prior(parts) -> Prior:
    r"""The empirical-Bayes prior of the thresholds from the blocks' :func:`moments`, by
    the method of moments: ``mean = mean(z)``, ``var = max(0, var(z) - mean(s^2))``
    (the spread of the labels' thresholds beyond their estimates' noise)."""
    count, total, squares, noise = (sum(part[i] for part in parts) for i in range(4))
    if count == 0:
        return Prior(0.0, 0.0)
    mean = total / count
    return Prior(mean, max(0.0, squares / count - mean * mean - noise / count))


def flat(pri: Prior) -> Prior:
    r"""``pri`` with an infinite spread: no shrinkage. Observed data's labels are not
    exchangeable draws around one threshold: their frequencies are the popularity a
    ranking needs, and the normal prior's noise model ``s_j^2`` (the delta method) does
    not hold at the few positive bits a rare label has (``docs/ALGORITHM.md`` section
    9, "The thresholds")."""
    return Prior(pri.mean, np.inf)


def shrink(p, v, pri: Prior) -> np.ndarray:
    r"""The thresholds ``b_j = m + tau^2 / (tau^2 + s_j^2) (z_j - m)``: each label's
    estimate ``z_j = Phi^{-1}(p_j)`` shrunk towards the prior mean ``m`` by its noise
    ``s_j^2`` against the prior's spread ``tau^2`` (James-Stein). Balanced labels
    (``tau^2 = 0``) share one threshold; a label without bits has ``b_j = m``. A flat
    prior (:func:`flat`, ``tau^2 = inf``) leaves each ``z_j`` as it is."""
    seen = np.isfinite(v)
    b = np.full(p.shape, pri.mean)
    if pri.var == np.inf:  # a flat prior: the labels' own thresholds
        b[seen] = scipy.special.ndtri(p[seen])
    elif pri.var > 0:
        z = scipy.special.ndtri(p[seen])
        s2 = v[seen] / _phi(z) ** 2
        b[seen] = pri.mean + pri.var / (pri.var + s2) * (z - pri.mean)
    return b


def _phi(z):
    return np.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi)


def step_factors(b: np.ndarray, n_bits: np.ndarray, expected: float,
                 gaussian: bool = True) -> np.ndarray:
    r"""``c_j / c`` for the labels with bits in the batch: the per-label scale
    ``c_j = 1 / (2 n_j phi(b_j))`` relative to the paper's ``c = 1 / (2 phi(0) m / d2)``,

    .. math:: f_j = \frac{m / d_2}{n_j} \, e^{b_j^2 / 2},

    with ``expected = m / d2``. Exactly 1 when ``n_j = m / d2`` and ``b_j = 0``. With
    ``gaussian=False``, the balanced scale ``f_j = (m / d2) / n_j`` (the label's own count
    only): the residual steps of ``step="refine"`` (``docs/ALGORITHM.md`` section 9d).
    """
    f = expected / n_bits
    return f * np.exp(0.5 * b * b) if gaussian else f


def init_weights(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The weights of a positive and of a negative bit in the initial batch and in a
    moment step: the bits centred on the label's mean ``2 p_j - 1``,
    ``(2 (1 - p_j), -2 p_j)``, with ``p_j`` from :func:`centring_shares`.

    For centred ``x``, ``E[(y - 2 p_j + 1) x] = E[y x]`` (the paper's ``H0``), and of all
    weights ``(u, -v)`` with that mean this has the least variance (``u / v =
    (1 - p) / p``): a rare label's sum is mostly its positive bits' rows, where the
    paper's weights ``(1, -1)`` let its many negative bits add noise of the same size.
    """
    return 2.0 * (1.0 - p), -2.0 * p


def centring_shares(b: np.ndarray, n_pos: np.ndarray, n_bits: np.ndarray,
                    observed: bool) -> np.ndarray:
    r"""The share ``p_j`` the bits of label ``j`` are centred on (:func:`init_weights`).

    A planted problem (``observed=False``): the model's ``Phi(b_j)``; its ``x`` is centred
    in law, so the centring only sets the variance. Observed data: the label's own share
    of the batch, ``n_pos / n_bits``; the weights then sum to zero over the label's bits,
    and its sum ``sum_pos x_i - p_j sum_i x_i`` does not change when a constant is added
    to every ``x`` (with ``Phi(b_j)`` it would gain ``(n_pos - n_j Phi(b_j)) c``: a label
    without a positive bit would be ``-n_j Phi(b_j)`` times the mean of ``x``;
    ``docs/ALGORITHM.md`` section 9).
    """
    return n_pos / n_bits if observed else scipy.special.ndtr(b)


def column_weights(b: np.ndarray) -> np.ndarray:
    r"""``d_j = phi(b_j) / phi(0) = e^{-b_j^2 / 2}``: the power iteration runs on ``M D``,
    which has the column space of ``M`` but weighs each label by the information of its
    bits (a rare label's residual has ``phi(b_j)`` times the signal of a balanced one);
    ``W = colnorm(A B^T)`` does not depend on ``D``."""
    return np.exp(-0.5 * b * b)
