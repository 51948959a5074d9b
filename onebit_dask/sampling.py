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
        \overset{d}{=} P \sum_{i \in j} r_i u_i + (I - P P^T) \sqrt{\textstyle\sum_{i \in j} r_i^2}\, g_j,

with ``g_i, g_j ~ N(0, I_d1)`` independent of everything else (a sum of independent
Gaussian vectors with fixed coefficients). A shard therefore draws ``m_s r`` normals
plus ``d1`` normals per label that has an active row, instead of ``m_s d1``.

The initial batch (``W = 0``, weights ``y_i``) is the same construction with
``span(P) = span(A*)`` and weights ``y_i`` (so ``sqrt(sum y_i^2) = sqrt(n_j)``).

*Conditional* sampling (:func:`draw_conditional_step`, :func:`draw_conditional_init`,
below) does not draw ``u`` for every row either: whether a row is active depends on
``u`` only through its angle in a plane, so the active counts are binomial and only the
active rows are drawn, from their conditional law (docs/ALGORITHM.md, section 7b).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from .kernels import ActiveRows, scatter_rows, sign


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
    _, sq = scatter_rows(labels, np.ones((labels.size, 1)), weights * weights)
    rows = complete_rows(P, coef, np.sqrt(sq[:, 0]), rng)
    return ActiveRows(rows, uniq, np.ones(uniq.size), n_obs, by_label=True)


def draw_projected_step(rng, n_obs: int, lo: int, hi: int, P: np.ndarray, PtA_true: np.ndarray,
                        B_true_rows: np.ndarray, PtA: np.ndarray, B_rows: np.ndarray,
                        flip: float, noise_std: float):
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
    y = noisy_bits(z, flip, noise_std, rng)
    s = np.einsum("ij,ij->i", u @ PtA, B_rows[local])
    r = y - sign(s)
    keep = np.flatnonzero(r)
    return projected_rows(u[keep], labels[keep], r[keep], P, n_obs, rng), int(keep.size)


def draw_projected_init(rng, n_obs: int, lo: int, hi: int, P_true: np.ndarray,
                        PtA_true: np.ndarray, B_true_rows: np.ndarray, flip: float,
                        noise_std: float) -> ActiveRows:
    """One shard of the initial batch (weights ``y_i``) by projected sampling, as
    per-label sums ``S_j = sum_{i in j} y_i x_i`` with ``span(P_true) = span(A*)``."""
    u = rng.standard_normal((n_obs, P_true.shape[1]))
    labels = lo + rng.integers(0, hi - lo, size=n_obs, dtype=np.int64)
    z = np.einsum("ij,ij->i", u @ PtA_true, B_true_rows[labels - lo])
    y = noisy_bits(z, flip, noise_std, rng)
    return projected_rows(u, labels, y, P_true, n_obs, rng)


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


def draw_conditional_step(rng, n_obs: int, lo: int, hi: int, P: np.ndarray,
                          PtA_true: np.ndarray, B_true_rows: np.ndarray, PtA: np.ndarray,
                          B_rows: np.ndarray, flip: float, noise_std: float):
    r"""One shard of a step's batch drawing only its active rows (conditional sampling).

    Same parameters and result as :func:`draw_projected_step`, and the same law; the cost
    is ``O(hi - lo)`` for the counts plus two numbers per active row, not per row.
    Per label ``j`` (module comment above): ``n_j`` from the multinomial of the shard,
    flips ``F_j ~ Bin(n_j, flip)``, active rows ``Bin(n_j - F_j, q_j) + Bin(F_j, 1 - q_j)``
    with ``q_j = |D_j| / 2 pi`` (noise free, ``q_j = angle(w*_j, w_j) / pi``); each active
    row has ``r_i = -2 sign(s_i)`` and ``u_i`` from its conditional law. Only the angle and
    radius in the plane are drawn per row: the rest of ``v_i`` is independent of them and
    of ``r_i``, so its weighted sum over a label is one Gaussian draw per label.
    """
    L = hi - lo
    r = P.shape[1]
    n_j, flips = _counts(rng, n_obs, L, flip)
    c = _bit_directions(B_true_rows, PtA_true, noise_std)
    e = np.hstack([B_rows @ PtA.T, np.zeros((L, 1))])
    p1, p2 = _plane(c, e)
    frame = lambda v: np.stack([np.sum(v * p1, 1), np.sum(v * p2, 1)], axis=1)  # noqa: E731
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
    phi, pick = uniform_on_arcs(rng, starts[j], lengths[j], disagree[j] != agree[:, None])
    weight = -2.0 * sign_e[j, pick] * np.sqrt(2.0 * rng.standard_exponential(n_active))
    has = np.flatnonzero(k)
    if has.size:  # sum r_i v_i = (sum r_i R_i cos) p1 + (sum r_i R_i sin) p2 + sum r_i v_perp,i
        in_plane = np.add.reduceat(np.stack([weight * np.cos(phi), weight * np.sin(phi)], 1),
                                   first[has], axis=0)
    else:
        in_plane = np.zeros((0, 2))
    # the v_perp,i are independent of the rest: sum_i r_i v_perp,i ~ sqrt(4 K_j) N(0, I - p1 p1^T - p2 p2^T)
    P1, P2 = p1[has], p2[has]
    sums = (in_plane[:, :1] * P1 + in_plane[:, 1:] * P2
            + 2.0 * np.sqrt(k[has])[:, None] * _normals_orthogonal_to(rng, P1, P2))
    rows_x = complete_rows(P, sums[:, :r], 2.0 * np.sqrt(k[has]), rng)
    active = ActiveRows(rows_x, lo + has, np.ones(has.size), n_obs, by_label=True)
    return active, n_active


def draw_conditional_init(rng, n_obs: int, lo: int, hi: int, P_true: np.ndarray,
                          PtA_true: np.ndarray, B_true_rows: np.ndarray, flip: float,
                          noise_std: float) -> ActiveRows:
    r"""The initial batch's per-label sums ``S_j = sum_{i in j} y_i x_i`` by conditional
    sampling (same law as :func:`draw_projected_init`).

    With ``p_j = c_j / |c_j|`` (``c_j`` as in :func:`draw_conditional_step`), write
    ``v_i = a_i p_j + v_perp,i``: the bit is ``sign(a_i)`` (flipped or not) and independent
    of ``v_perp,i``, so ``sum y_i v_i = (sum_unflipped |a_i| - sum_flipped |a_i|) p_j +
    sqrt(n_j) N(0, I - p_j p_j^T)``: one normal per row and ``r + 1`` per label.
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
    a = np.where(zero[j], a, np.abs(a))
    a[(np.arange(n_obs) - first[j]) >= n_j[j] - flips[j]] *= -1.0  # the flipped rows
    has = np.flatnonzero(n_j)
    along = np.add.reduceat(a, first[has]) if has.size else np.zeros(0)
    ph = p[has]
    sums = along[:, None] * ph + np.sqrt(n_j[has])[:, None] * _normals_orthogonal_to(rng, ph)
    rows = complete_rows(P_true, sums[:, :r], np.sqrt(n_j[has]).astype(np.float64), rng)
    return ActiveRows(rows, lo + has, np.ones(has.size), n_obs, by_label=True)
