r"""Conditional sampling of synthetic batches: only the active rows are drawn, exact in
law (pure NumPy and SciPy, no Dask; docs/ALGORITHM.md, sections 7b and 7c).

Write an observation of label ``j`` as ``v = (u, g) ~ N(0, I_{r+1})`` (``g`` the Gaussian
noise), ``c_j = (P^T A* b*_j, noise_std)`` and ``e_j = (P^T A b_j, 0)``: the bit before the
flip is ``sign(c_j . v)`` and the score's sign ``sign(e_j . v)``. Both depend on ``v`` only
through its projection on a plane ``span(p1, p2) ⊇ span(c_j, e_j)``, where ``v`` has polar
coordinates ``(R, phi)``: ``phi`` uniform on ``[0, 2 pi)``, ``R^2 ~ chi^2_2``, and the rest
``v_perp`` independent of both. A row is active iff the two signs differ (not flipped)
or agree (flipped), i.e. iff ``phi`` falls in a union of arcs ``D_j`` (or its complement):
so the number of active rows of a label is binomial, and given it the active rows are
independent, with ``phi`` uniform on the arcs, ``R`` and ``v_perp`` as before.

With thresholds the active set is a union of pieces of the plane bounded by lines that
miss the origin (:mod:`.pieces`). The draws have the law of the projected sampler's
(:mod:`.projected`, whose docstring gives the construction), number for number the
paper's model's without thresholds.
"""

from __future__ import annotations

import numpy as np

from ...ops.kernels import ActiveRows, sign
from ...ops.thresholds import LabelCounts
from .draws import complete_rows
from .pieces import PIECE_RESIDUAL, TWO_PI, plane_pieces, rows_in_pieces


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

    Same parameters and result as :func:`.projected.draw_projected_step`, and the same
    law; the cost is ``O(hi - lo)`` for the counts plus a few numbers per active row, not
    per row.
    Per label ``j`` (module docstring): ``n_j`` from the multinomial of the shard,
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
        pieces = plane_pieces(frame(c), beta, frame(e), b)
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



def draw_conditional_init(rng, n_obs: int, lo: int, hi: int, P_true: np.ndarray,
                          PtA_true: np.ndarray, B_true_rows: np.ndarray, flip: float,
                          noise_std: float, b_true_rows=None,
                          thresholded: bool = False) -> ActiveRows:
    r"""The initial batch's per-label sums ``S_j = sum_{i in j} y_i x_i`` by conditional
    sampling (same law as :func:`.projected.draw_projected_init`).

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
    :func:`.projected.projected_signed_rows` returns it.

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
