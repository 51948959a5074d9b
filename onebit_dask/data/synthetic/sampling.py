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

*Conditional* sampling (:func:`draw_conditional_step`, :func:`draw_conditional_init`,
below) does not draw ``u`` for every row either: whether a row is active depends on
``u`` only through its angle in a plane, so the active counts are binomial and only the
active rows are drawn, from their conditional law (docs/ALGORITHM.md, section 7b).

With per-label thresholds (the truth's ``b*_j``, the model's ``b_j``: the bit is
``sign(x^T w*_j + b*_j + noise)``, the score ``x^T w_j + b_j``) everything above holds
with the offsets added; the conditional draw then works on pieces of the plane bounded
by lines that miss the origin (section 7c). Without thresholds the draws are those of
the paper's model, number for number. For the thresholded model (``thresholded=True``)
every draw also gives the batch's label counts and, for the initial batch, the sums of
the positive and of the negative bits' rows apart, in law as from explicit rows.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.linalg
from scipy.special import log_ndtr, ndtr, ndtri_exp, owens_t

from ...ops.kernels import ActiveRows, label_mass, scatter_rows, sign
from ...ops.thresholds import LabelCounts, count_bits


def span_basis(*factors: np.ndarray) -> np.ndarray:
    """An orthonormal ``d1 x r`` basis whose span contains the columns of ``factors``.

    Householder QR of ``[F_1, F_2, ...]``, ``r = min(d1, total columns)``; a rank-deficient
    input still gives ``r`` orthonormal columns, whose span then contains the factors'.
    """
    M = np.hstack(factors)
    return scipy.linalg.qr(M, mode="economic")[0]


def noisy_bits(z: np.ndarray, flip: float, noise_std: float, rng) -> np.ndarray:
    """``y = sign(z + noise_std g)`` flipped with probability ``flip``, as float64.

    Draws ``n`` normals (if ``noise_std > 0``), then ``n`` uniforms (if ``flip > 0``),
    in that order.
    """
    z = z.astype(np.float64)
    if noise_std > 0:
        z = z + noise_std * rng.standard_normal(z.shape[0])
    y = sign(z)
    if flip > 0:
        y[rng.random(y.shape[0]) < flip] *= -1.0
    return y


def complete_rows(P: np.ndarray, coef: np.ndarray, scale: np.ndarray, rng) -> np.ndarray:
    """Rows ``P coef_i + scale_i (I - P P^T) g_i``, ``g_i ~ N(0, I_d1)``, as float64.

    ``coef`` is ``(n, r)``, ``scale`` ``(n,)``; draws ``n x d1`` float32 normals (as the
    explicit sampler's features are float32). Computed as
    ``scale_i g_i + P (coef_i - scale_i P^T g_i)``: three passes over ``n x d1``
    (the draw, ``g P`` and the scaled copy) and one rank-``r`` update in place.
    """
    g = rng.standard_normal((coef.shape[0], P.shape[0]), dtype=np.float32)
    small = coef - scale[:, None] * (g @ P.astype(np.float32))
    rows = np.multiply(g, scale[:, None], dtype=np.float64)
    if rows.size:
        scipy.linalg.blas.dgemm(1.0, P, small, trans_b=True, beta=1.0, c=rows.T,
                                overwrite_c=True)
    return rows


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


# -- conditional sampling: only the active rows are drawn ---------------------------------
#
# Write an observation of label ``j`` as ``v = (u, g) ~ N(0, I_{r+1})`` (``g`` the Gaussian
# noise), ``c_j = (P^T A* b*_j, noise_std)`` and ``e_j = (P^T A b_j, 0)``: the bit before the
# flip is ``sign(c_j . v)`` and the score's sign ``sign(e_j . v)``. Both depend on ``v`` only
# through its projection on a plane ``span(p1, p2) ⊇ span(c_j, e_j)``, where ``v`` has polar
# coordinates ``(R, phi)``: ``phi`` uniform on ``[0, 2 pi)``, ``R^2 ~ chi^2_2``, and the rest
# ``v_perp`` independent of both. A row is active iff the two signs differ (not flipped)
# or agree (flipped), i.e. iff ``phi`` falls in a union of arcs ``D_j`` (or its complement):
# so the number of active rows of a label is binomial, and given it the active rows are
# independent, with ``phi`` uniform on the arcs, ``R`` and ``v_perp`` as before.

TWO_PI = 2.0 * np.pi


def _unit(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = np.linalg.norm(x, axis=1)
    return x / np.where(n > 0, n, 1.0)[:, None], n


def _counts(rng, n_obs: int, L: int, flip: float) -> tuple[np.ndarray, np.ndarray]:
    """Observations ``n_j`` of each of the ``L`` labels (uniform multinomial) and how many
    of them are flipped (``Bin(n_j, flip)``)."""
    n_j = rng.multinomial(n_obs, np.full(L, 1.0 / L))
    return n_j, rng.binomial(n_j, flip) if flip > 0 else np.zeros(L, dtype=np.int64)


def _bit_directions(B_true_rows, PtA_true, noise_std: float) -> np.ndarray:
    """``c_j = (P^T A* b*_j, noise_std)``: the bit before its flip is ``sign(c_j . v)``."""
    return np.hstack([B_true_rows @ PtA_true.T,
                      np.full((B_true_rows.shape[0], 1), float(noise_std))])


def _normals_orthogonal_to(rng, *frame: np.ndarray) -> np.ndarray:
    """Per row, a standard normal vector with its components along the orthonormal rows
    of each array in ``frame`` removed (``N(0, I - sum_f f f^T)``)."""
    w = rng.standard_normal(frame[0].shape)
    w -= sum(np.sum(w * f, 1)[:, None] * f for f in frame)
    return w


def _plane(c: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal ``(p1, p2)``, each ``(L, n)``, with ``span(p1, p2) ⊇ span(c_j, e_j)``
    per row ``j`` (``n >= 2``); ``p1`` along ``e_j`` (or ``c_j`` where ``e_j = 0``)."""
    e1, ne = _unit(e)
    c1, nc = _unit(c)
    p1 = np.where((ne > 0)[:, None], e1, c1)
    p1[(ne == 0) & (nc == 0), 0] = 1.0  # both zero: any frame
    w = c - np.sum(c * p1, axis=1)[:, None] * p1
    p2, nw = _unit(w)
    lone = nw <= 1e-12 * np.maximum(nc, 1e-300)  # c_j in span(p1): complete the frame
    if lone.any():
        q = p1[lone]
        pick = np.argmin(np.abs(q), axis=1)
        t = -q[np.arange(q.shape[0]), pick][:, None] * q
        t[np.arange(q.shape[0]), pick] += 1.0
        p2[lone] = _unit(t)[0]
    return p1, p2


def _arcs(c2d: np.ndarray, e2d: np.ndarray):
    """The circle cut where ``sign(c . (cos, sin))`` or ``sign(e . (cos, sin))`` changes:
    ``(starts, lengths, disagree, sign_e)``, each ``(L, 5)``; ``disagree`` marks the arcs
    where the two signs differ (``sign(0) = +1``; a zero vector has a constant sign)."""
    cuts = []
    for v in (c2d, e2d):
        angle = np.arctan2(v[:, 1], v[:, 0])
        zero = ~np.any(v != 0, axis=1)
        cuts += [np.where(zero, 0.0, angle + np.pi / 2), np.where(zero, np.pi, angle - np.pi / 2)]
    cuts = np.sort(np.mod(np.stack(cuts, axis=1), TWO_PI), axis=1)
    L = cuts.shape[0]
    edges = np.hstack([np.zeros((L, 1)), cuts, np.full((L, 1), TWO_PI)])
    starts, lengths = edges[:, :-1], np.diff(edges, axis=1)
    mid = starts + lengths / 2
    at = lambda v: sign(v[:, :1] * np.cos(mid) + v[:, 1:] * np.sin(mid))  # noqa: E731
    sign_e = at(e2d)
    return starts, lengths, at(c2d) != sign_e, sign_e


def uniform_on_arcs(rng, starts: np.ndarray, lengths: np.ndarray, mask: np.ndarray):
    """Per row, an angle uniform on the arcs ``[starts, starts + lengths)`` where ``mask``
    holds (one uniform per row): ``(phi, index of its arc)``."""
    arc = lengths * mask
    cum = np.cumsum(arc, axis=1)
    t = rng.random(arc.shape[0]) * cum[:, -1]
    pick = np.minimum(np.sum(cum <= t[:, None], axis=1), arc.shape[1] - 1)
    rows = np.arange(arc.shape[0])
    return starts[rows, pick] + (t - (cum[rows, pick] - arc[rows, pick])), pick


def _offsets(b, L: int) -> np.ndarray:
    return np.zeros(L) if b is None else np.asarray(b, dtype=np.float64)


def _has_offsets(*offsets: np.ndarray) -> bool:
    """Whether any threshold is non-zero (else the balanced, angle-only draw is exact)."""
    return any(bool(np.any(b != 0)) for b in offsets)


def draw_conditional_step(rng, n_obs: int, lo: int, hi: int, P: np.ndarray,
                          PtA_true: np.ndarray, B_true_rows: np.ndarray, PtA: np.ndarray,
                          B_rows: np.ndarray, flip: float, noise_std: float,
                          b_true_rows=None, b_rows=None, thresholded: bool = False):
    r"""One shard of a step's batch drawing only its active rows (conditional sampling).

    Same parameters and result as :func:`draw_projected_step`, and the same law; the cost
    is ``O(hi - lo)`` for the counts plus a few numbers per active row, not per row.
    Per label ``j`` (module comment above): ``n_j`` from the multinomial of the shard,
    flips ``F_j ~ Bin(n_j, flip)``, active rows ``Bin(n_j - F_j, q_j) + Bin(F_j, 1 - q_j)``
    with ``q_j`` the probability that the bit and the score's sign differ; each active
    row has ``r_i = -2 sign(s_i)`` and ``u_i`` from its conditional law. Only the row's
    coordinates in a plane are drawn: the rest of ``v_i`` is independent of them and of
    ``r_i``, so its weighted sum over a label is one Gaussian draw per label.

    Without thresholds (``b* = b = 0``) the active set is a union of arcs of angles:
    ``q_j = |D_j| / 2 pi`` (noise free, ``q_j = angle(w*_j, w_j) / pi``), and a row is an
    angle uniform on the arcs and a radius (two numbers). With thresholds it is a union
    of two pieces, each an intersection of two half-planes whose boundaries miss the
    origin: ``q_j`` is a sum of bivariate normal orthant probabilities (Owen's ``T``),
    and a row is a piece, a coordinate along one boundary's normal by inverse transform
    of its marginal, and the other coordinate from a truncated normal (three numbers;
    docs/ALGORITHM.md, section 7c).

    ``thresholded``: also the batch's :class:`~onebit_dask.thresholds.LabelCounts`
    (:func:`_conditional_counts`), drawn after the sums (the same numbers either way).
    """
    L = hi - lo
    r = P.shape[1]
    n_j, flips = _counts(rng, n_obs, L, flip)
    c = _bit_directions(B_true_rows, PtA_true, noise_std)
    e = np.hstack([B_rows @ PtA.T, np.zeros((L, 1))])
    p1, p2 = _plane(c, e)
    frame = lambda v: np.stack([np.sum(v * p1, 1), np.sum(v * p2, 1)], axis=1)  # noqa: E731
    beta, b = _offsets(b_true_rows, L), _offsets(b_rows, L)
    offsets = _has_offsets(beta, b)
    if offsets or thresholded:
        pieces = _pieces(frame(c), beta, frame(e), b)
    if offsets:
        q = np.clip(pieces.mass[:, 0] + pieces.mass[:, 1], 0.0, 1.0)
    else:
        starts, lengths, disagree, sign_e = _arcs(frame(c), frame(e))
        q = np.clip(np.sum(lengths * disagree, axis=1) / TWO_PI, 0.0, 1.0)
    k_dis = rng.binomial(n_j - flips, q)
    k_agree = rng.binomial(flips, 1.0 - q)
    k = k_dis + k_agree
    n_active = int(k.sum())
    # the active rows, grouped by label: first the disagreeing, then the flipped agreeing
    j = np.repeat(np.arange(L), k)
    first = np.cumsum(k) - k
    agree = (np.arange(n_active) - first[j]) >= k_dis[j]
    if offsets:
        z, pick = rows_in_pieces(rng, pieces, j, agree)
        r_row = PIECE_RESIDUAL[pick]
        rz = r_row[:, None] * z
    else:
        phi, pick = uniform_on_arcs(rng, starts[j], lengths[j], disagree[j] != agree[:, None])
        r_row = -2.0 * sign_e[j, pick]
        weight = r_row * np.sqrt(2.0 * rng.standard_exponential(n_active))
        rz = np.stack([weight * np.cos(phi), weight * np.sin(phi)], 1)
    has = np.flatnonzero(k)
    # sum r_i v_i = (sum r_i z_i1) p1 + (sum r_i z_i2) p2 + sum r_i v_perp,i
    in_plane = np.add.reduceat(rz, first[has], axis=0) if has.size else np.zeros((0, 2))
    # the v_perp,i are independent of the rest:
    # sum_i r_i v_perp,i ~ sqrt(4 K_j) N(0, I - p1 p1^T - p2 p2^T)
    P1, P2 = p1[has], p2[has]
    sums = (in_plane[:, :1] * P1 + in_plane[:, 1:] * P2
            + 2.0 * np.sqrt(k[has])[:, None] * _normals_orthogonal_to(rng, P1, P2))
    rows_x = complete_rows(P, sums[:, :r], 2.0 * np.sqrt(k[has]), rng)
    counts = None if not thresholded else _conditional_counts(
        rng, lo, n_j, flips, k_dis, k_agree, j, r_row, pieces.mass)
    active = ActiveRows(rows_x, lo + has, np.ones(has.size), n_obs,
                        counts=counts)
    return active, n_active


def _conditional_counts(rng, lo: int, n_j, flips, k_dis, k_agree, j, r_row,
                        mass) -> LabelCounts:
    r"""The :class:`~onebit_dask.thresholds.LabelCounts` of a conditional step's shard.

    ``n_bits = n_j``; ``r_sum_j`` the sum of the residuals ``r_row`` of the label's active
    rows (labels ``j``, local); the positive bits (``y = +1``) are the active rows with
    ``r = +2`` and the inactive rows whose score is positive: of the unflipped inactive
    ones (in ``C`` or ``D``, section 7c) ``Bin(n_j - F_j - K^dis_j, |C| / (|C| + |D|))``,
    of the flipped inactive ones (in ``A`` or ``B``, ``B``'s bit flipped to ``+1``)
    ``Bin(F_j - K^agree_j, |B| / (|A| + |B|))``: given which rows are active, every
    row's piece is independent of the others'.
    """
    L = n_j.size
    r_sum = np.bincount(j, weights=r_row, minlength=L)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_c = np.nan_to_num(mass[:, 2] / (mass[:, 2] + mass[:, 3]))
        p_b = np.nan_to_num(mass[:, 1] / (mass[:, 0] + mass[:, 1]))
    n_pos = (np.bincount(j, weights=r_row > 0, minlength=L)
             + rng.binomial(n_j - flips - k_dis, np.clip(p_c, 0.0, 1.0))
             + rng.binomial(flips - k_agree, np.clip(p_b, 0.0, 1.0)))
    seen = np.flatnonzero(n_j)
    n_active = np.bincount(j, minlength=L).astype(np.float64)
    return LabelCounts(lo + seen, n_j[seen].astype(np.float64),
                       n_pos[seen].astype(np.float64), r_sum[seen], n_active[seen])


# -- conditional sampling with thresholds (docs/ALGORITHM.md, section 7c) ---------------
#
# In the plane, z ~ N(0, I_2); the bit before its flip is sign(c.z + beta), the score's
# sign sign(e.z + b). The four pieces [A, B, C, D] = [{bit +, score -}, {bit -, score +},
# {both +}, {both -}]: A, B are where they disagree, C, D where they agree; every active
# row has r = -2 sign(score): [+2, -2, -2, +2]. Each piece is {n1.z >= t1} and
# {n2.z >= t2} with unit normals; a half-plane with a zero normal is the whole plane or
# nothing (t = -T_MAX or +T_MAX: Phi(-40) = 0 in float64).

T_MAX = 40.0
PARALLEL = 1e-9  # |n1 x n2| below this: parallel boundaries (exactly, to rounding)
PIECE_SIGNS = np.array([(1, -1), (-1, 1), (1, 1), (-1, -1)])  # (bit, score) of A, B, C, D
PIECE_RESIDUAL = np.array([2.0, -2.0, -2.0, 2.0])


class PlanePieces(NamedTuple):
    """Per label and piece (shape ``(L, 4)``, ``(L, 4, 2)`` for vectors): the piece is
    ``{s >= t1, rho s + tau w >= t2}`` in the coordinates ``z = s n1 + w perp``."""

    n1: np.ndarray
    perp: np.ndarray
    t1: np.ndarray
    t2: np.ndarray
    rho: np.ndarray
    tau: np.ndarray
    mass: np.ndarray


def _rot90(n: np.ndarray) -> np.ndarray:
    return np.stack([-n[..., 1], n[..., 0]], axis=-1)


def _half_plane(a: np.ndarray, h: np.ndarray, sigma: int):
    """``{sigma (a.z + h) >= 0}`` (``sigma = -1``: ``a.z + h < 0``) as ``{n.z >= t}``:
    ``(n, t, proper)``; where ``a = 0`` it is the plane (``t = -T_MAX``) or nothing
    (``t = T_MAX``) by the sign of ``h`` (``sign(0) = +1``), and ``n`` is to be chosen."""
    norm = np.linalg.norm(a, axis=1)
    proper = norm > 0
    safe = np.where(proper, norm, 1.0)
    n = sigma * a / safe[:, None]
    whole = (h >= 0) if sigma > 0 else (h < 0)
    t = np.where(proper, -sigma * h / safe, np.where(whole, -T_MAX, T_MAX))
    return n, np.clip(t, -T_MAX, T_MAX), proper


def _pieces(c2d: np.ndarray, beta: np.ndarray, e2d: np.ndarray, b: np.ndarray) -> PlanePieces:
    """The four pieces of every label and their probabilities (``mass``, ``(L, 4)``)."""
    fields = []
    for s_bit, s_score in PIECE_SIGNS:
        n1, t1, ok1 = _half_plane(c2d, beta, s_bit)
        n2, t2, ok2 = _half_plane(e2d, b, s_score)
        axis = np.zeros_like(n1)
        axis[:, 0] = 1.0
        n1 = np.where(ok1[:, None], n1, np.where(ok2[:, None], _rot90(n2), axis))
        n2 = np.where(ok2[:, None], n2, _rot90(n1))
        rho = np.clip(np.sum(n1 * n2, axis=1), -1.0, 1.0)
        cross = n1[:, 0] * n2[:, 1] - n1[:, 1] * n2[:, 0]
        tau = np.abs(cross)
        parallel = tau < PARALLEL
        tau = np.where(parallel, 0.0, tau)
        rho = np.where(parallel, sign(rho), rho)
        perp = sign(cross)[:, None] * _rot90(n1)
        fields.append((n1, perp, t1, t2, rho, tau))
    n1, perp, t1, t2, rho, tau = (np.stack(f, axis=1) for f in zip(*fields))
    mass = np.clip(upper_orthant(t1, t2, rho, tau), 0.0, 1.0)
    return PlanePieces(n1, perp, t1, t2, rho, tau, mass)


def upper_orthant(h, k, rho, tau):
    r"""``P(X1 >= h, X2 >= k)`` for standard normals with correlation ``rho``,
    ``tau = sqrt(1 - rho^2)`` (``tau = 0``: ``rho = +-1``, ``X2 = rho X1``).

    For ``tau > 0`` it is ``Phi_2(-h, -k; rho)`` by Owen's formula
    ``Phi_2(h, k; rho) = (Phi(h) + Phi(k)) / 2 - T(h, a_h) - T(k, a_k) - beta`` with
    ``a_h = (k - rho h) / (h tau)``, ``a_k = (h - rho k) / (k tau)`` and ``beta = 1/2``
    if ``h k < 0`` or (``h k = 0`` and ``h + k < 0``), else 0; at ``h = 0`` its limit
    from ``h > 0`` (``a_h = sign(k) inf``, or ``(1 - rho) / tau`` if also ``k = 0``).
    """
    h, k = np.broadcast_arrays(-np.asarray(h, dtype=np.float64), -np.asarray(k, dtype=np.float64))
    rho, tau = np.broadcast_to(rho, h.shape), np.broadcast_to(tau, h.shape)
    proper = tau > 0
    safe = np.where(proper, tau, 1.0)
    edge = (1.0 - rho) / safe

    def slope(x, y):
        with np.errstate(divide="ignore", invalid="ignore"):
            a = (y - rho * x) / (x * safe)
        return np.where(x != 0, a, np.where(y != 0, np.copysign(np.inf, y), edge))

    hk = np.sign(h) * np.sign(k)
    half = np.where((hk < 0) | ((hk == 0) & (h + k < 0)), 0.5, 0.0)
    owen = (0.5 * ndtr(h) + 0.5 * ndtr(k) - owens_t(h, slope(h, k)) - owens_t(k, slope(k, h))
            - half)
    if proper.all():
        return owen
    # tau = 0, back in the upper-orthant arguments: rho = 1: X1 >= max(h, k);
    # rho = -1: h <= X1 <= -k (each difference taken on the side of small tails)
    H, K = -h, -k
    same = ndtr(-np.maximum(H, K))
    opposite = np.maximum(np.where(H > 0, ndtr(-H) - ndtr(K), ndtr(-K) - ndtr(H)), 0.0)
    return np.where(proper, owen, np.where(rho > 0, same, opposite))


def _marginal_density(x, t2, rho, tau):
    """Density of ``s`` on its piece, unnormalised: ``phi(s) P(rho s + tau w >= t2)``."""
    proper = tau > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        arg = np.where(proper, (rho * x - t2) / np.where(proper, tau, 1.0),
                       np.where(rho * x - t2 >= 0, np.inf, -np.inf))
    return np.exp(-0.5 * x * x) / np.sqrt(TWO_PI) * ndtr(arg)


NEWTON_STEP = 1e-8  # a Newton step this small (relative): the next error is ~1e-16
BRACKET_TOL = 1e-13
NEWTON_MAX_ITER = 200


def inverse_marginal(u, t1, t2, rho, tau, mass):
    """Per row, ``s >= t1`` with ``G(s) = u G(t1)``, ``G(x) = P(S >= x, rho S + tau W >= t2)``
    (``G(t1) = mass > 0``, ``u`` in ``(0, 1]``): Newton's method on ``log G`` (concave:
    ``G`` is the survival function of a log-concave density), started where the first
    constraint alone would put ``s``, kept in a shrinking bracket ``[lo, hi]`` (``hi``:
    where ``P(S >= hi)`` is the target) and
    replaced by bisection where it leaves it; it stops after a Newton step below
    ``NEWTON_STEP`` (quadratic convergence) or a bracket below ``BRACKET_TOL``."""
    with np.errstate(divide="ignore"):  # a piece of mass 0 is never picked by a real draw
        log_target = np.log(u * mass)
    x = np.clip(-ndtri_exp(np.log(u) + log_ndtr(-t1)), t1, T_MAX)
    g = upper_orthant(x, t2, rho, tau)
    # G(x) <= P(S >= x): the root is left of where that equals the target
    lo, hi = t1.copy(), np.clip(-ndtri_exp(log_target), t1, T_MAX)
    todo = np.arange(x.size)
    for _ in range(NEWTON_MAX_ITER):
        if not todo.size:
            break
        xi, gi, a, z = x[todo], g[todo], lo[todo], hi[todo]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            f = np.where(gi > 0, np.log(np.where(gi > 0, gi, 1.0)) - log_target[todo], -np.inf)
            right = f >= 0  # G(x) >= target: the root is at or right of x
            a, z = np.where(right, xi, a), np.where(right, z, xi)
            step = xi + f * gi / _marginal_density(xi, t2[todo], rho[todo], tau[todo])
        newton = np.isfinite(step) & (step > a) & (step < z)
        new = np.where(newton, step, 0.5 * (a + z))
        lo[todo], hi[todo], x[todo] = a, z, new
        done = np.where(newton, np.abs(new - xi) <= NEWTON_STEP * (1.0 + np.abs(xi)),
                        z - a <= BRACKET_TOL * (1.0 + np.abs(xi)))
        todo = todo[~done]
        g[todo] = upper_orthant(x[todo], t2[todo], rho[todo], tau[todo])
    return x


def rows_in_pieces(rng, pieces: PlanePieces, j: np.ndarray, agree: np.ndarray):
    """``(z, piece)`` of active rows of labels ``j``: ``z_i`` (``(n, 2)``) in the plane from
    ``N(0, I_2)`` restricted to where the bit and the score disagree (``agree`` false) or
    agree (a flipped row), and its piece (an index into :data:`PIECE_RESIDUAL`). Three
    uniforms per row, in turn: the piece (with probability
    proportional to its mass), ``s`` by inverse transform (:func:`inverse_marginal`), and
    ``w`` given ``s`` from ``N(0, 1)`` truncated to ``rho s + tau w >= t2`` (in log space,
    exact in the tails)."""
    n = j.size
    base = np.where(agree, 2, 0)
    m0, m1 = pieces.mass[j, base], pieces.mass[j, base + 1]
    pick = base + (rng.random(n) * (m0 + m1) >= m0)
    at = lambda a: a[j, pick]  # noqa: E731
    t1, t2, rho, tau, mass = map(at, (pieces.t1, pieces.t2, pieces.rho, pieces.tau,
                                      pieces.mass))
    s = inverse_marginal(1.0 - rng.random(n), t1, t2, rho, tau, mass)
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.where(tau > 0, (t2 - rho * s) / np.where(tau > 0, tau, 1.0), -np.inf)
    w = -ndtri_exp(np.log1p(-rng.random(n)) + log_ndtr(-low))
    return s[:, None] * at(pieces.n1) + w[:, None] * at(pieces.perp), pick


def draw_conditional_init(rng, n_obs: int, lo: int, hi: int, P_true: np.ndarray,
                          PtA_true: np.ndarray, B_true_rows: np.ndarray, flip: float,
                          noise_std: float, b_true_rows=None,
                          thresholded: bool = False) -> ActiveRows:
    r"""The initial batch's per-label sums ``S_j = sum_{i in j} y_i x_i`` by conditional
    sampling (same law as :func:`draw_projected_init`).

    With ``p_j = c_j / |c_j|`` (``c_j`` as in :func:`draw_conditional_step`), write
    ``v_i = a_i p_j + v_perp,i``: the bit is ``sign(|c_j| a_i + b*_j)`` (flipped or not)
    and independent of ``v_perp,i``, so ``sum y_i v_i = (sum_i y_i a_i) p_j +
    sqrt(n_j) N(0, I - p_j p_j^T)``: one normal per row and ``r + 1`` per label
    (``b* = 0``: ``y_i a_i = |a_i|``, or ``-|a_i|`` flipped).

    ``thresholded``: the sums of the positive and of the negative bits' rows apart, with
    the counts (:func:`_conditional_signed_sums`).
    """
    L = hi - lo
    r = P_true.shape[1]
    n_j, flips = _counts(rng, n_obs, L, flip)
    p, norm = _unit(_bit_directions(B_true_rows, PtA_true, noise_std))
    zero = norm == 0  # y = +1 (or flipped) whatever x: y_i a_i is a symmetric normal
    p[zero, 0] = 1.0
    j = np.repeat(np.arange(L), n_j)
    first = np.cumsum(n_j) - n_j
    a = rng.standard_normal(n_obs)
    beta = _offsets(b_true_rows, L)
    if thresholded:
        flipped = (np.arange(n_obs) - first[j]) >= n_j[j] - flips[j]
        y = np.where(flipped, -1.0, 1.0) * sign(norm[j] * a + beta[j])
        return _conditional_signed_sums(rng, lo, n_obs, n_j, j, a, y, p, P_true)
    if _has_offsets(beta):
        a = sign(norm[j] * a + beta[j]) * a
    else:
        a = np.where(zero[j], a, np.abs(a))
    a[(np.arange(n_obs) - first[j]) >= n_j[j] - flips[j]] *= -1.0  # the flipped rows
    has = np.flatnonzero(n_j)
    along = np.add.reduceat(a, first[has]) if has.size else np.zeros(0)
    ph = p[has]
    sums = along[:, None] * ph + np.sqrt(n_j[has])[:, None] * _normals_orthogonal_to(rng, ph)
    rows = complete_rows(P_true, sums[:, :r], np.sqrt(n_j[has]).astype(np.float64), rng)
    return ActiveRows(rows, lo + has, np.ones(has.size), n_obs)


def _conditional_signed_sums(rng, lo: int, n_obs: int, n_j, j, a, y, p, P_true) -> ActiveRows:
    r"""The thresholded model's initial batch by conditional sampling: the rows' bits ``y``
    and coordinates ``a`` along ``p_j`` (labels ``j``, local), as
    :func:`projected_signed_rows` returns it.

    ``y_i`` is a function of ``a_i`` (and of the flip) and ``v_perp,i`` is independent of
    both, so per label and sign ``sum_{y_i = ±1} v_i = (sum_{y_i = ±1} a_i) p_j +
    sqrt(n^±_j) N(0, I - p_j p_j^T)``, the two complements independent (disjoint rows);
    the positive group is drawn first (docs/ALGORITHM.md, section 7c).
    """
    L = n_j.size
    r = P_true.shape[1]
    positive = y > 0
    n_pos = np.bincount(j, weights=positive, minlength=L)
    has = np.flatnonzero(n_j)
    ph = p[has]
    sums = []
    for group, n_group in ((positive, n_pos), (~positive, n_j - n_pos)):
        along = np.bincount(j, weights=np.where(group, a, 0.0), minlength=L)[has]
        scale = np.sqrt(n_group[has]).astype(np.float64)
        in_v = along[:, None] * ph + scale[:, None] * _normals_orthogonal_to(rng, ph)
        sums.append(complete_rows(P_true, in_v[:, :r], scale, rng))
    counts = LabelCounts(lo + has, n_j[has].astype(np.float64), n_pos[has], np.zeros(has.size),
                         np.zeros(has.size))
    return ActiveRows(sums[0], lo + has, np.ones(has.size), n_obs,
                      counts=counts, X_neg=sums[1])
