r"""Projected sampling of synthetic batches, exact in law (pure NumPy, no Dask).

For ``x ~ N(0, I_d1)`` and an orthonormal ``P`` (``d1 x r``), ``u = P^T x ~ N(0, I_r)``
and ``(I - P P^T) x`` is independent of ``u``. In a step, an observation's bit depends
on ``x`` only through ``x^T A*`` and its score only through ``x^T A``; with
``span(P) ⊇ span([A*, A])`` both are functions of ``u``:

.. math::

    x^T A^* b^*_j = u^T (P^T A^*) b^*_j, \qquad x^T A b_j = u^T (P^T A) b_j.

So a shard draws ``u`` for every row, the labels, bits and scores from ``u``, and
only the rows with a non-zero residual ``r_i = y_i - sign(s_i)`` need more. The
step uses the batch only through the per-label sums ``T_j = sum_{i in j} r_i x_i``
(``H = c sum_j T_j e_j^T``), and given the bits,

.. math::

    T_j = P \sum_{i \in j} r_i u_i + (I - P P^T) \sum_{i \in j} r_i g_i
        \overset{d}{=} P \sum_{i \in j} r_i u_i
        + (I - P P^T) \sqrt{\textstyle\sum_{i \in j} r_i^2}\, g_j,

with ``g_i, g_j ~ N(0, I_d1)`` independent of everything else (a sum of independent
Gaussian vectors with fixed coefficients). A shard therefore draws ``m_s r`` normals
plus ``d1`` normals per label that has an active row, instead of ``m_s d1``.

The initial batch (``W = 0``, weights ``y_i``) is the same construction with
``span(P) = span(A*)`` and weights ``y_i`` (so ``sqrt(sum y_i^2) = sqrt(n_j)``).

*Conditional* sampling (:mod:`.conditional`) does not draw ``u`` for every row either:
whether a row is active depends on ``u`` only through its angle in a plane, so the
active counts are binomial and only the active rows are drawn, from their conditional
law (docs/ALGORITHM.md, section 7b).

With per-label thresholds (the truth's ``b*_j``, the model's ``b_j``: the bit is
``sign(x^T w*_j + b*_j + noise)``, the score ``x^T w_j + b_j``) everything above holds
with the offsets added; the conditional draw then works on pieces of the plane bounded
by lines that miss the origin (section 7c). Without thresholds the draws are those of
the paper's model, number for number. For the thresholded model (``thresholded=True``)
every draw also gives the batch's label counts and, for the initial batch, the sums of
the positive and of the negative bits' rows apart, in law as from explicit rows.
"""

from __future__ import annotations

import numpy as np

from ...ops.kernels import ActiveRows, label_mass, scatter_rows, sign
from ...ops.thresholds import count_bits
from .draws import complete_rows, noisy_bits


def projected_rows(u: np.ndarray, labels: np.ndarray, weights: np.ndarray, P: np.ndarray,
                   n_obs: int, rng) -> ActiveRows:
    """The per-label sums ``T_j = sum_{i in j} w_i x_i`` of rows ``x_i = P u_i + (I - P P^T) g_i``,
    drawn in law from ``u`` (module docstring), as :class:`ActiveRows` with unit weights.

    Rows with ``w_i = 0`` must be left out by the caller.
    """
    uniq, coef = scatter_rows(labels, u, weights)
    rows = complete_rows(P, coef, np.sqrt(label_mass(uniq, labels, weights * weights)), rng)
    return ActiveRows(rows, uniq, np.ones(uniq.size), n_obs)


def draw_projected_step(rng, n_obs: int, lo: int, hi: int, P: np.ndarray, PtA_true: np.ndarray,
                        B_true_rows: np.ndarray, PtA: np.ndarray, B_rows: np.ndarray,
                        flip: float, noise_std: float, b_true_rows=None, b_rows=None,
                        thresholded: bool = False):
    r"""One shard of a step's batch by projected sampling.

    Parameters
    ----------
    rng : numpy.random.Generator
        The shard's generator (``SeedSequence([seed, t, s])``).
    n_obs : int
        Observations in the shard; labels are uniform on ``[lo, hi)``.
    P : ndarray of shape (d1, r)
        Orthonormal, ``span(P) ⊇ span([A*, A])``.
    PtA_true, PtA : ndarray of shape (r, k) and (r, l)
        ``P^T A*`` and ``P^T A``.
    B_true_rows, B_rows : ndarray of shape (hi - lo, k) and (hi - lo, l)
        Rows ``lo..hi`` of ``B*`` and ``B``.
    b_true_rows, b_rows : ndarray of shape (hi - lo,) or None
        The thresholds ``b*_j`` of the truth and ``b_j`` of the model (``None``: zeros):
        the bit is ``sign(x^T w*_j + b*_j + noise)`` (then flipped), the score
        ``s = x^T w_j + b_j``.
    thresholded : bool, default False
        For the thresholded model: also the batch's
        :class:`~onebit_dask.thresholds.LabelCounts` (every bit of the shard), in
        ``active.counts``, drawn after the sums (which are the same numbers either way).

    Returns
    -------
    active : ActiveRows
        Per-label sums of ``r_i x_i`` over the active rows (unit weights).
    n_active : int
        Rows with ``r_i != 0``.
    """
    u = rng.standard_normal((n_obs, P.shape[1]))
    labels = lo + rng.integers(0, hi - lo, size=n_obs, dtype=np.int64)
    local = labels - lo
    z = np.einsum("ij,ij->i", u @ PtA_true, B_true_rows[local])
    if b_true_rows is not None:
        z = z + b_true_rows[local]
    y = noisy_bits(z, flip, noise_std, rng)
    s = np.einsum("ij,ij->i", u @ PtA, B_rows[local])
    if b_rows is not None:
        s = s + b_rows[local]
    r = y - sign(s)
    keep = np.flatnonzero(r)
    active = projected_rows(u[keep], labels[keep], r[keep], P, n_obs, rng)
    if thresholded:
        active = active._replace(counts=count_bits(labels, y, r))
    return active, int(keep.size)


def draw_projected_init(rng, n_obs: int, lo: int, hi: int, P_true: np.ndarray,
                        PtA_true: np.ndarray, B_true_rows: np.ndarray, flip: float,
                        noise_std: float, b_true_rows=None,
                        thresholded: bool = False) -> ActiveRows:
    """One shard of the initial batch (weights ``y_i``) by projected sampling, as
    per-label sums ``S_j = sum_{i in j} y_i x_i`` with ``span(P_true) = span(A*)``
    (the bit depends on ``x`` only through ``x^T A*``, whatever the thresholds ``b*``);
    ``thresholded``: the sums of the positive and of the negative bits' rows apart
    (:func:`projected_signed_rows`)."""
    u = rng.standard_normal((n_obs, P_true.shape[1]))
    labels = lo + rng.integers(0, hi - lo, size=n_obs, dtype=np.int64)
    z = np.einsum("ij,ij->i", u @ PtA_true, B_true_rows[labels - lo])
    if b_true_rows is not None:
        z = z + b_true_rows[labels - lo]
    y = noisy_bits(z, flip, noise_std, rng)
    if thresholded:
        return projected_signed_rows(u, labels, y, P_true, n_obs, rng)
    return projected_rows(u, labels, y, P_true, n_obs, rng)


def projected_signed_rows(u: np.ndarray, labels: np.ndarray, y: np.ndarray, P: np.ndarray,
                          n_obs: int, rng) -> ActiveRows:
    r"""The thresholded model's initial batch: per label (every label with bits), the sums
    of the rows of its positive bits ``S^+_j = sum_{i in j, y_i > 0} x_i`` (``X``) and of
    its negative bits ``S^-_j`` (``X_neg``), and the bits' counts (``r_sum`` zeros).

    The two groups of rows are disjoint, so their complements are independent:
    ``S^±_j = P sum u_i + (I - P P^T) sqrt(n^±_j) g^±_j`` with independent ``g^+_j``,
    ``g^-_j`` (module docstring); the positive complements are drawn first.
    """
    positive = (np.asarray(y) > 0).astype(np.float64)
    uniq, along_pos = scatter_rows(labels, u, positive)
    _, along_neg = scatter_rows(labels, u, 1.0 - positive)
    counts = count_bits(labels, y)
    S_pos = complete_rows(P, along_pos, np.sqrt(counts.n_pos), rng)
    S_neg = complete_rows(P, along_neg, np.sqrt(counts.n_bits - counts.n_pos), rng)
    return ActiveRows(S_pos, uniq, np.ones(uniq.size), n_obs, counts=counts,
                      X_neg=S_neg)
