r"""Exact top-``k`` maximum-inner-product search over a model's label rows (no Dask here).

A model's label ``j`` is the row :math:`r_j = [\beta_j, b_j] \in \mathbb{R}^{l+1}` (``B``'s
row and the threshold, ``l = 2 rank``); a query row ``i`` is :math:`q_i = [z_i, 1]` with
:math:`z_i = (X A)_i`. The package's score is the fixed-order floating-point sum

.. math:: \tilde s_{ij} = \mathrm{fl}\big((\dots(z_{i1}\beta_{j1} + z_{i2}\beta_{j2})
          + \dots + z_{il}\beta_{jl}) + b_j\big)

(:func:`tile_scores`), and a row's top ``k`` are its ``k`` highest :math:`\tilde s_{ij}`,
ties to the smaller label, i.e. ``np.argsort(-S, axis=1, kind="stable")[:, :k]`` of the
full score matrix. :func:`top_k` returns exactly those labels and scores without scoring
every label; :func:`screen_top_k` returns them by a cache-tiled BLAS brute force.

Rounding bound
--------------
With :math:`u = 2^{-53}`, :math:`\gamma_m = m u / (1 - m u)` and the exact real score
:math:`s_{ij} = q_i \cdot r_j`, any evaluation order of the ``l + 1`` products and sums
(the fixed one, or a BLAS kernel's, with or without FMA) satisfies (Higham, *Accuracy and
Stability of Numerical Algorithms*, 3.1)

.. math:: |\hat s_{ij} - s_{ij}| \le \gamma_{l+1} \sum_m |q_{im} r_{jm}|
          \le \gamma_{l+1} \|q_i\| \, \|r_j\| \le \gamma_{l+1} \|q_i\| \rho,
          \qquad \rho = \max_j \|r_j\|.

Everything a screen compares is within a per-row margin (:func:`margins`)

.. math:: M_i = 8 (l + 6) \, u \, \|q_i\| \, \rho' + 8 (l + 6) \, \mathrm{tiny}

of its exact value (``rho'``: the larger of ``rho`` and the leaf centres' norms, rounded
up; ``tiny``: the smallest normal double, for underflow): the fixed-order and BLAS scores
(``(l + 1) u`` each), and the leaf bounds below (``(3 l + 15) u`` of
:math:`\|q\|(\|c\| + R)`, with :math:`R \le 2\rho'`). Rows whose :math:`\|q_i\| \rho'`
could overflow, or with a non-finite entry, are scored by brute force
(:func:`reference_top_k`).

Index and screen
----------------
:func:`build_index` collapses bitwise-equal label rows (their fixed-order scores are
bit-equal for every query, so only a group's ``k`` smallest labels can be in a top
``k``), clusters the rest (hierarchical k-means, leaves of about ``leaf_size`` rows, none
smaller than ``min_leaf``) and stores them permuted by leaf, each leaf a contiguous
slice, with its centre :math:`c` and radius :math:`R_c \ge \max_{j \in c}\|r_j - c\|`.
By Cauchy-Schwarz

.. math:: \max_{j \in c} s_{ij} \le U_{ic} = q_i \cdot c + \|q_i\| R_c

(or the tighter of it and a bound splitting ``B`` from ``b``: :func:`bounds`).

:func:`top_k` takes a tile of rows at a time: the bounds ``U`` (one BLAS product, rows
x leaves); round 1 BLAS-scores each row's ``m1`` leaves of highest bound and takes
:math:`\hat\tau_i`, the ``k``-th highest of those BLAS scores, so the row's true ``k``-th
fixed-order score is :math:`\tilde t_i \ge \hat\tau_i - 2M_i`. A label with
:math:`\tilde s_{ij} \ge \tilde t_i` has :math:`s_{ij} \ge \hat\tau_i - 3M_i`, so its BLAS
score and its leaf's computed bound are :math:`\ge \hat\tau_i - 4M_i`: round 2 scores
every such leaf not yet scored, both rounds keep the labels above that threshold, the
kept pairs are rescored in the fixed order (:func:`pair_scores`) and each row's are
sorted by (score descending, label ascending). Every label tied with the ``k``-th score
is a candidate, so the result is the brute force's whatever the BLAS kernel (BLAS only
prunes; every returned score is the fixed-order one).

Leaves are scored leaf-major (the rows that need a leaf against its contiguous slice),
so the Python loop runs once per leaf touched in a tile, not per row.

Where the index cannot prune (isotropic rows from ``l`` about 10-20 on, e.g. rank 50,
or ``k`` close to the number of rows), a tile whose round 2 would score more than
``max_scan`` of the labels falls back to :func:`screen_top_k`: a cache-tiled BLAS brute
force against a running threshold, the kept labels rescored in the fixed order.

Memory: the bounds of a tile of rows (``tile_bytes``), a screen tile, and the kept
candidates (a few per row and ``k``); the index itself is a permuted copy of the
representatives' rows, four ``int64`` per label and ``O(d2 / leaf_size)`` leaf data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

U_ROUND = 2.0 ** -53
"""The unit roundoff of float64."""

TINY = np.finfo(np.float64).tiny
"""The smallest normal float64 (absorbs underflow in the error bounds)."""

SAFETY = 8.0
"""The margin's factor (:func:`margins`): ``8 (l + 6) u`` bounds every rounding error a
screen compares, with room."""

SLAB = 2**16
"""Scores per slab of a tile in :func:`tile_scores` (512 KiB: the products of a slab
stay in the cache)."""

HUGE = 2.0 ** 1000
"""Rows with ``||q|| rho`` above this are scored by brute force (no overflow in a score,
a bound or a margin below it)."""


# -- scores ------------------------------------------------------------------------------
def tile_scores(XA: np.ndarray, B_rows: np.ndarray, b=None) -> np.ndarray:
    r"""The scores ``S = XA B_rows^T + b`` of a tile, ``(n, w)``, every one computed as

    .. math:: s_{ij} = (\dots((a_{i1} \beta_{j1} + a_{i2} \beta_{j2}) + a_{i3} \beta_{j3})
              \dots + a_{il} \beta_{jl}) + b_j

    (element-wise products and sums, in this order, a slab of :data:`SLAB` scores at a
    time), so a score has the same bits in any tile; a BLAS product sums in an order that
    depends on the operands' shapes.

    Parameters
    ----------
    XA : ndarray of shape (n, l)
        The rows' features times the model's ``A``.
    B_rows : ndarray of shape (w, l)
        The tile's rows of ``B``.
    b : ndarray of shape (w,), optional
        The tile's thresholds.
    """
    n, components = XA.shape
    w = B_rows.shape[0]
    S = np.empty((n, w))
    step = max(1, SLAB // max(n, 1))
    tmp = np.empty((n, min(step, w)))
    for c in range(0, w, step):
        out = S[:, c: c + step]
        t = tmp[:, : out.shape[1]]
        np.multiply(XA[:, :1], B_rows[c: c + step, 0], out=out)
        for q in range(1, components):
            np.multiply(XA[:, q: q + 1], B_rows[c: c + step, q], out=t)
            out += t
        if b is not None:
            out += b[c: c + step]
    return S


def pair_scores(Z: np.ndarray, B: np.ndarray, b, rows: np.ndarray,
                labels: np.ndarray) -> np.ndarray:
    r"""The fixed-order scores :math:`\tilde s_{ij}` of the pairs ``(rows[p], labels[p])``,
    ``(p,)``: the same bits as :func:`tile_scores` (the same products and sums in the
    same order, one pair at a time)."""
    s = Z[rows, 0] * B[labels, 0]
    for m in range(1, Z.shape[1]):
        s += Z[rows, m] * B[labels, m]
    if b is not None:
        s += b[labels]
    return s


def query_norms(Z: np.ndarray) -> np.ndarray:
    r""":math:`\|q_i\| = \|[z_i, 1]\|` of each row."""
    return np.sqrt(np.einsum("ij,ij->i", Z, Z) + 1.0)


def margins(Z: np.ndarray, rho: float) -> np.ndarray:
    r"""Per row, :math:`M_i = 8 (l + 6) u \|q_i\| \rho + 8 (l + 6)\,\mathrm{tiny}` with
    :math:`q_i = [z_i, 1]` (the factor 8 is :data:`SAFETY`): a bound, with room, on
    every rounding error a screen compares (module docstring)."""
    c = SAFETY * (Z.shape[1] + 6)
    return c * U_ROUND * query_norms(Z) * rho + c * TINY


def _round_up(x: float, dim: int) -> float:
    """``x`` enlarged past its rounding error (a norm computed from ``dim + 1`` terms)."""
    return float(x) * (1.0 + 4.0 * (dim + 6) * U_ROUND) + TINY


def row_norm_max(B: np.ndarray, b) -> float:
    """An upper bound on ``max_j ||[B_j, b_j]||``."""
    sq = np.einsum("ij,ij->i", B, B)
    if b is not None:
        sq = sq + b * b
    return _round_up(np.sqrt(sq.max(initial=0.0)), B.shape[1])


# -- selection ---------------------------------------------------------------------------
def best_of_candidates(n: int, rows: np.ndarray, labels: np.ndarray, scores: np.ndarray,
                       k: int):
    """Per row ``0 <= i < n``, its ``k`` best candidates by (score descending, label
    ascending), best first; every row has at least ``k`` distinct candidates.

    Returns
    -------
    labels : ndarray of shape (n, k), int64
    scores : ndarray of shape (n, k)
    """
    order = np.lexsort((labels, -scores, rows))
    counts = np.bincount(rows, minlength=n)
    if counts.min(initial=k) < k:
        raise AssertionError("a row has fewer than k candidates")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    take = order[(starts[:, None] + np.arange(k)).ravel()]
    return labels[take].reshape(n, k).astype(np.int64), scores[take].reshape(n, k)


def kth_of_candidates(n: int, rows: np.ndarray, scores: np.ndarray, k: int,
                      weights: np.ndarray) -> np.ndarray:
    """Per row, its ``k``-th highest candidate score, a candidate of weight ``w`` counting
    as ``min(w, k)`` labels of that score (each row has candidates of weight ``>= k``)."""
    order = np.lexsort((-scores, rows))
    w = np.minimum(weights[order], k)
    tot = np.bincount(rows, weights=np.minimum(weights, k), minlength=n).astype(np.int64)
    base = np.concatenate([[0], np.cumsum(tot)[:-1]])
    return scores[order[np.searchsorted(np.cumsum(w), base + k, side="left")]]


def expand_groups(rows, pos, scores, k: int, index: LabelIndex | None):
    """Candidates on an index's representatives ``pos`` as candidates on labels: each
    representative gives its ``min(count, k)`` smallest labels, with its score (bitwise
    duplicates have bit-equal scores). Without an index, ``pos`` are the labels."""
    if index is None:
        return rows, pos, scores
    c = np.minimum(index.counts[pos], k)
    offs = np.arange(int(c.sum())) - np.repeat(np.cumsum(c) - c, c)
    return (np.repeat(rows, c), index.members[np.repeat(index.ptr[pos], c) + offs],
            np.repeat(scores, c))


def reference_top_k(Z: np.ndarray, B: np.ndarray, b, k: int, *, position=None,
                    tile_bytes: int = 16 * 2**20):
    """Brute force, the definition: all fixed-order scores of a tile of rows
    (:func:`tile_scores`, about ``tile_bytes`` of them, at least one row), then
    ``np.argsort(-S, kind="stable")[:, :k]``. ``position``: the row of ``B`` of each label
    (default: the label)."""
    n = Z.shape[0]
    d2 = B.shape[0] if position is None else position.size
    rows = max(1, min(n, tile_bytes // (8 * max(d2, 1))))
    labels, scores = np.empty((n, k), dtype=np.int64), np.empty((n, k))
    for r in range(0, n, rows):
        S = tile_scores(Z[r: r + rows], B, b)
        if position is not None:
            S = S[:, position]
        o = np.argsort(-S, axis=1, kind="stable")[:, :k]
        labels[r: r + rows] = o
        scores[r: r + rows] = np.take_along_axis(S, o, axis=1)
    return labels, scores


def few_rows_top_k(index: LabelIndex, Z: np.ndarray, k: int, *, candidates: int = 2**20):
    """Brute force over an index's few representatives: every one scored in the fixed
    order (:func:`tile_scores`) and expanded to its ``min(count, k)`` smallest labels
    (:func:`expand_groups`), each row's best ``k`` taken (:func:`best_of_candidates`):
    the labels and scores of :func:`reference_top_k` without scoring every label (a
    fitted model's many equal rows are one representative). About ``candidates`` pairs
    at a time (at least one row)."""
    n, p = Z.shape[0], index.B.shape[0]
    rows_t = max(1, candidates // max(int(np.minimum(index.counts, k).sum()), 1))
    out_l, out_s = np.empty((n, k), dtype=np.int64), np.empty((n, k))
    for r in range(0, n, rows_t):
        S = tile_scores(Z[r: r + rows_t], index.B, index.b)
        t = S.shape[0]
        rr, ll, ss = expand_groups(np.repeat(np.arange(t), p), np.tile(np.arange(p), t),
                                   S.ravel(), k, index)
        out_l[r: r + t], out_s[r: r + t] = best_of_candidates(t, rr, ll, ss, k)
    return out_l, out_s


# -- the BLAS brute force ------------------------------------------------------------------
def screen_top_k(Z: np.ndarray, B: np.ndarray, b, k: int, *, rho: float | None = None,
                 index: LabelIndex | None = None, tile_bytes: int = 2 * 2**20):
    r"""Exact top-``k`` by a cache-tiled BLAS brute force and a fixed-order rescoring.

    Rows x labels tiles of about ``tile_bytes`` of BLAS scores :math:`\hat s_{ij}`
    (``Z B^T + b``, any summation order). A row keeps the labels with
    :math:`\hat s_{ij} \ge \theta_i`: first :math:`\theta_i = \hat t_i - 4 M_i`,
    :math:`\hat t_i` the ``k``-th BLAS score of the first tile (the true ``k``-th
    fixed-order score :math:`\tilde t_i \ge \hat t_i - 2M_i`); whenever the kept pairs
    pass ``4 k`` a row they are rescored in the fixed order (:func:`pair_scores`), each
    row keeps its exact best ``k`` by (score, label) (a total order: the best ``k`` of a
    union are the best ``k`` of the parts' best), and :math:`\theta_i` rises to that
    ``k``-th exact score minus :math:`2M_i` (a later label needs :math:`\tilde s \ge` it,
    hence :math:`\hat s \ge` it :math:`- 2M_i`). Memory: a tile and ``O(rows x k)``
    candidates, even when millions of labels tie. ``4 k`` above the rows of ``B``:
    :func:`few_rows_top_k` (with ``index``) or :func:`reference_top_k`.

    Parameters
    ----------
    Z : ndarray of shape (n, l)
        Finite rows with ``||[z, 1]|| rho`` at most :data:`HUGE`.
    B : ndarray of shape (p, l)
    b : ndarray of shape (p,) or None
    k : int
        ``1 <= k <=`` the number of labels.
    rho : float, optional
        An upper bound on :math:`\max_j \|[B_j, b_j]\|` (computed if not given).
    index : LabelIndex, optional
        When ``B, b`` are an index's rows (its representatives, permuted): their labels
        and duplicates (ties go to the smaller label, not the smaller row).
    tile_bytes : int
        Bytes of BLAS scores per tile.

    Returns
    -------
    labels : ndarray of shape (n, k), int64
    scores : ndarray of shape (n, k)
    """
    n = Z.shape[0]
    d2 = B.shape[0]
    if 4 * k > d2:
        if index is None:
            return reference_top_k(Z, B, b, k)
        return few_rows_top_k(index, Z, k)
    M = margins(Z, row_norm_max(B, b) if rho is None else rho)
    rows_t = max(1, min(n, 256))
    width = max(k, tile_bytes // (8 * rows_t))
    out_l, out_s = np.empty((n, k), dtype=np.int64), np.empty((n, k))
    none = np.empty(0, dtype=np.int64)
    for r0 in range(0, n, rows_t):
        Zt, Mt = Z[r0: r0 + rows_t], M[r0: r0 + rows_t]
        t = Zt.shape[0]
        best = None  # the exact running best: (rows, labels, scores), k a row
        S = Zt @ B[:width].T
        if b is not None:
            S += b[:width]
        thr = np.partition(S, S.shape[1] - k, axis=1)[:, S.shape[1] - k] - 4.0 * Mt
        ii, jj = np.nonzero(S >= thr[:, None])
        pend_r, pend_p, n_pend = [ii], [jj], ii.size
        a = width
        while True:
            if a >= d2 or n_pend > 4 * t * k + 4096:
                # rescore the pending pairs in the fixed order, keep each row's exact best
                # k; a later label needs s~ >= that k-th, i.e. a BLAS score >= it - 2M
                rr, pp = np.concatenate(pend_r + [none]), np.concatenate(pend_p + [none])
                rr, ll, ss = expand_groups(rr, pp, pair_scores(Zt, B, b, rr, pp), k, index)
                if best is not None:
                    rr, ll, ss = (np.concatenate([x, y]) for x, y in zip(best, (rr, ll, ss)))
                bl, bs = best_of_candidates(t, rr, ll, ss, k)
                best = (np.repeat(np.arange(t), k), bl.ravel(), bs.ravel())
                thr = np.maximum(thr, bs[:, -1] - 2.0 * Mt)
                pend_r, pend_p, n_pend = [], [], 0
            if a >= d2:
                break
            S = Zt @ B[a: a + width].T
            if b is not None:
                S += b[a: a + width]
            ii, jj = np.nonzero(S >= thr[:, None])
            pend_r.append(ii), pend_p.append(jj + a)
            n_pend += ii.size
            a += width
        out_l[r0: r0 + t], out_s[r0: r0 + t] = bl, bs
    return out_l, out_s


# -- the index -------------------------------------------------------------------------------
@dataclass(frozen=True)
class LabelIndex:
    r"""Label rows, exact duplicates collapsed, clustered into contiguous leaves.

    Rows of ``[B_j, b_j]`` that are bit for bit equal have bit-equal fixed-order scores
    for every query, so only the smallest ``k`` labels of such a group can be in a top
    ``k``: the index keeps one *representative* row per group (a fitted model's label
    rows can be mostly zero with one shared threshold: labels without a positive bit).

    Attributes
    ----------
    B : ndarray of shape (p, l)
        The representatives' rows of ``B``, grouped by leaf (C-contiguous).
    b : ndarray of shape (p,) or None
        Their thresholds.
    starts : ndarray of shape (C + 1,), int64
        Leaf ``c`` holds the representatives ``starts[c]:starts[c + 1]``.
    counts : ndarray of shape (p,), int64
        Labels per representative.
    ptr : ndarray of shape (p + 1,), int64
        Representative ``r``'s labels are ``members[ptr[r]:ptr[r + 1]]``, increasing.
    members : ndarray of shape (d2,), int64
    position : ndarray of shape (d2,), int64
        The representative of each label.
    centers : ndarray of shape (C, l + 1)
        Each leaf's centre ``c`` (mean of its rows :math:`[\beta_j, b_j]`, ``b_j = 0``
        without thresholds).
    radius : ndarray of shape (C,)
        :math:`R_c \ge \max_{j \in c} \|r_j - c\|`, rounded up.
    radius_B : ndarray of shape (C,)
        :math:`R^\beta_c \ge \max_{j \in c} \|\beta_j - c_\beta\|`, rounded up.
    b_over : ndarray of shape (C,)
        :math:`\ge \max_{j \in c} (b_j - c_b)`, rounded up.
    rho : float
        :math:`\ge \max(\max_j \|r_j\|, \max_c \|c\|)`, rounded up.
    """

    B: np.ndarray
    b: np.ndarray | None
    starts: np.ndarray
    counts: np.ndarray
    ptr: np.ndarray
    members: np.ndarray
    position: np.ndarray
    centers: np.ndarray
    radius: np.ndarray
    radius_B: np.ndarray
    b_over: np.ndarray
    rho: float

    @property
    def n_labels(self) -> int:
        return self.members.size

    @property
    def n_leaves(self) -> int:
        return self.radius.size

    @property
    def nbytes(self) -> int:
        arrays = (self.B, self.b, self.starts, self.counts, self.ptr, self.members,
                  self.position, self.centers, self.radius, self.radius_B, self.b_over)
        return sum(a.nbytes for a in arrays if a is not None)


def _assign(X: np.ndarray, C: np.ndarray, chunk: int = 32768) -> np.ndarray:
    """The nearest centre of each row (``argmax x.c - |c|^2 / 2``), in row chunks."""
    half = 0.5 * np.einsum("ij,ij->i", C, C)
    out = np.empty(X.shape[0], dtype=np.int64)
    for a in range(0, X.shape[0], chunk):
        G = X[a: a + chunk] @ C.T
        G -= half
        out[a: a + chunk] = G.argmax(axis=1)
    return out


def _means(X: np.ndarray, assign: np.ndarray, n: int) -> np.ndarray:
    counts = np.bincount(assign, minlength=n).astype(float)
    sums = np.stack([np.bincount(assign, X[:, m], minlength=n) for m in range(X.shape[1])],
                    axis=1)
    return sums / np.maximum(counts, 1.0)[:, None]


def _kmeans(X: np.ndarray, n_clusters: int, rng, n_iter: int, min_size: int,
            sample: int = 48) -> np.ndarray:
    """Lloyd's k-means on a sample of ``sample x n_clusters`` rows (random distinct rows as
    the start), then one assignment of every row; clusters under ``min_size`` rows are
    dissolved and their rows reassigned. Returns each row's cluster, ``0..C-1``."""
    n = X.shape[0]
    if n > sample * n_clusters:
        X_s = X[rng.choice(n, sample * n_clusters, replace=False)]
    else:
        X_s = X
    C = X_s[rng.choice(X_s.shape[0], n_clusters, replace=False)]
    for _ in range(n_iter):
        a = _assign(X_s, C)
        C = _means(X_s, a, C.shape[0])[np.bincount(a, minlength=C.shape[0]) > 0]
    assign = _assign(X, C)
    counts = np.bincount(assign, minlength=C.shape[0])
    while C.shape[0] > 1 and counts.min() < min_size:
        C = C[counts >= min(min_size, counts.max())]
        assign = _assign(X, C)
        counts = np.bincount(assign, minlength=C.shape[0])
    return np.unique(assign, return_inverse=True)[1]


def _leaves(R: np.ndarray, leaf_size: int, min_leaf: int, branch: int, n_iter: int,
            seed: int) -> list:
    """The rows of ``R`` cut into leaves by hierarchical k-means (:func:`build_index`)."""
    rng = np.random.default_rng(seed)
    leaves, stack = [], [np.arange(R.shape[0])]
    while stack:
        idx = stack.pop()
        if idx.size <= 2 * leaf_size or idx.size < 2 * min_leaf:
            leaves.append(idx)
            continue
        n_c = int(min(branch, -(-idx.size // leaf_size), idx.size // min_leaf))
        a = _kmeans(R[idx], n_c, rng, n_iter, min_leaf)
        if a.max() == 0:  # could not split (rows too close): cut in slices
            leaves.extend(np.array_split(idx, -(-idx.size // leaf_size)))
            continue
        o = np.argsort(a, kind="stable")
        cuts = np.flatnonzero(np.diff(a[o])) + 1
        stack.extend(reversed(np.split(idx[o], cuts)))
    return leaves


ROW_HASH = np.random.default_rng(0x6F6E6562).integers(1, 2**63, size=64, dtype=np.uint64) | 1
"""Odd multipliers that mix a row's 64-bit words into one key (:func:`distinct_rows`)."""


def distinct_rows(R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, rep_of)``: one row of each group of bitwise-equal rows of the float64
    matrix ``R`` (``R[first]``, ``first`` the lowest row of each group) and each row's
    group (``R[first][rep_of]`` is ``R`` bit for bit).

    Each row's 64-bit words are mixed into one key (multiplications by odd constants,
    shifts and xors, wrapping), the keys grouped by one sort, and every row compared
    bitwise with its group's first: two distinct rows with one key (a collision, which
    the check finds) make it group the rows by sorting their bytes instead. The groups
    come in the order of their keys: an order of the index's leaves, which the search's
    exactness does not depend on."""
    words = np.ascontiguousarray(R).view(np.uint64)
    key = words[:, 0] * ROW_HASH[0]
    for c in range(1, words.shape[1]):
        key ^= (words[:, c] * ROW_HASH[c % ROW_HASH.size] + (key << np.uint64(6))
                + (key >> np.uint64(2)))
    _, first, rep_of = np.unique(key, return_index=True, return_inverse=True)
    rep_of = rep_of.ravel()
    if not (words[first][rep_of] == words).all():
        return _distinct_by_bytes(R)
    return first, rep_of


def _distinct_by_bytes(R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`distinct_rows` by sorting the rows' bytes (groups in byte order)."""
    keys = np.ascontiguousarray(R).view(np.dtype((np.void, R.itemsize * R.shape[1]))).ravel()
    _, first, rep_of = np.unique(keys, return_index=True, return_inverse=True)
    return first, rep_of.ravel()


def build_index(B: np.ndarray, b=None, *, leaf_size: int = 256, min_leaf: int = 32,
                branch: int = 64, n_iter: int = 6, seed: int = 0) -> LabelIndex:
    r"""Cluster the label rows :math:`r_j = [B_j, b_j]` into leaves for :func:`top_k`.

    Bitwise-equal rows are collapsed into one representative. Hierarchical k-means: a
    node of more than ``2 leaf_size`` rows is split into
    ``min(branch, ceil(size / leaf_size))`` clusters (``n_iter`` Lloyd iterations on a
    sample of 48 rows a cluster, then one assignment of all; clusters under ``min_leaf``
    rows dissolved), until every node is a leaf. Cost: about one ``d2 x branch`` BLAS
    product per level; memory: a permuted copy of the rows plus ``O(d2)`` integers.
    Deterministic given ``seed``.

    Parameters
    ----------
    B : ndarray of shape (d2, l)
    b : ndarray of shape (d2,), optional
        The thresholds (``None``: none, i.e. zero).
    leaf_size, min_leaf, branch, n_iter : int
    seed : int

    Returns
    -------
    LabelIndex

    Raises
    ------
    ValueError
        If a label row is not finite or their norms overflow.
    """
    B = np.asarray(B, dtype=np.float64)
    d2, dim = B.shape
    R = np.column_stack([B, np.zeros(d2) if b is None else np.asarray(b, dtype=np.float64)])
    if not np.isfinite(R).all():
        raise ValueError("label rows must be finite")
    first, rep_of = distinct_rows(R)  # bitwise duplicates: one representative
    R = R[first]
    leaves = _leaves(R, leaf_size, min_leaf, branch, n_iter, seed)
    perm = np.concatenate(leaves).astype(np.int64)  # position -> representative
    starts = np.concatenate([[0], np.cumsum([x.size for x in leaves])]).astype(np.int64)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size)
    position = inv[rep_of]  # label -> position
    small = np.min_scalar_type(max(perm.size - 1, 0))  # NumPy radix-sorts 8 and 16 bits
    members = np.argsort(position.astype(small), kind="stable").astype(np.int64)
    counts = np.bincount(position, minlength=perm.size).astype(np.int64)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    R = R[perm]
    sizes = np.diff(starts)
    centers = np.add.reduceat(R, starts[:-1], axis=0) / sizes[:, None]
    D = R - np.repeat(centers, sizes, axis=0)
    sq_B = np.einsum("ij,ij->i", D[:, :dim], D[:, :dim])
    radius = np.maximum.reduceat(np.sqrt(sq_B + D[:, dim] ** 2), starts[:-1])
    radius_B = np.maximum.reduceat(np.sqrt(sq_B), starts[:-1])
    b_over = np.maximum(np.maximum.reduceat(D[:, dim], starts[:-1]), 0.0)
    rho = max(row_norm_max(R[:, :dim], R[:, dim]),
              _round_up(np.sqrt(np.einsum("ij,ij->i", centers, centers).max()), dim))
    if not np.isfinite(rho):
        raise ValueError("label rows too large to bound their rounding errors")
    pad = 4.0 * (dim + 6) * U_ROUND
    radius, radius_B, b_over = (x * (1.0 + pad) + pad * rho + TINY
                                for x in (radius, radius_B, b_over))
    return LabelIndex(B=np.ascontiguousarray(R[:, :dim]),
                      b=None if b is None else np.ascontiguousarray(R[:, dim]),
                      starts=starts, counts=counts, ptr=ptr, members=members,
                      position=position, centers=centers, radius=radius,
                      radius_B=radius_B, b_over=b_over, rho=float(rho))


# -- the query -------------------------------------------------------------------------------
def bounds(index: LabelIndex, Z: np.ndarray) -> np.ndarray:
    r"""The computed leaf bounds, ``(n, C)``: with :math:`q = [z, 1]` and a leaf's centre
    :math:`c = [c_\beta, c_b]`, :math:`q \cdot r_j = q \cdot c + z \cdot (\beta_j - c_\beta)
    + (b_j - c_b)`, so by Cauchy-Schwarz, in :math:`\mathbb{R}^{l+1}` or in the two parts,

    .. math:: \max_{j \in c} q \cdot r_j \le U_{c}(q) = q \cdot c
              + \min\big(\|q\| R_c,\; \|z\| R^\beta_c + \max_{j\in c}(b_j - c_b)\big)

    (the second is the tighter when :math:`\|z\|` is small next to the ``1``). One BLAS
    product and a few element-wise passes."""
    dim = Z.shape[1]
    U = Z @ index.centers[:, :dim].T
    U += index.centers[:, dim]
    zn2 = np.einsum("ij,ij->i", Z, Z)
    W = np.sqrt(zn2 + 1.0)[:, None] * index.radius
    V = np.sqrt(zn2)[:, None] * index.radius_B
    V += index.b_over
    np.minimum(W, V, out=W)
    U += W
    return U


def _screen_leaves(index: LabelIndex, Z, leaves, rows, thr, k_leaf: int, acc) -> int:
    """BLAS scores of the pairs (leaf, row) -- ``leaves`` sorted, ``rows`` theirs --
    leaf-major (the rows that need a leaf against its contiguous slice); appends to
    ``acc`` the (row, position, BLAS score) entries with a score ``>= thr[row]`` or, if
    ``k_leaf``, ``>=`` the row's ``k_leaf``-th best of the leaf minus ``thr[row]``.
    Returns the number of scores computed."""
    if leaves.size == 0:
        return 0
    cut = np.flatnonzero(np.diff(leaves)) + 1
    firsts = np.concatenate([[0], cut]).tolist()
    ends = np.concatenate([cut, [leaves.size]]).tolist()
    B, b, starts = index.B, index.b, index.starts.tolist()
    scored = 0
    for f, e in zip(firsts, ends):
        c = int(leaves[f])
        lo, hi = starts[c], starts[c + 1]
        rs = rows[f:e]
        S = Z[rs] @ B[lo:hi].T
        if b is not None:
            S += b[lo:hi]
        scored += S.size
        w = hi - lo
        if not k_leaf:
            ii, jj = np.nonzero(S >= thr[rs][:, None])
        elif w > k_leaf:
            at = np.partition(S, w - k_leaf, axis=1)[:, w - k_leaf]
            ii, jj = np.nonzero(S >= (at - thr[rs])[:, None])
        else:
            ii, jj = np.nonzero(np.ones(S.shape, dtype=bool))
        acc[0].append(rs[ii]), acc[1].append(jj + lo), acc[2].append(S[ii, jj])
    return scored


def top_k(index: LabelIndex, Z: np.ndarray, k: int, *, m1: int = 8, max_scan: float = 0.2,
          tile_bytes: int = 16 * 2**20, stats: dict | None = None):
    r"""Each row's ``k`` best labels and their fixed-order scores, exactly as brute force
    (ties to the smaller label), through the index.

    Per tile of rows, with :math:`M_i` the margin (:func:`margins`: every score's or
    bound's rounding error is at most :math:`M_i`), :math:`\hat s` BLAS scores,
    :math:`\tilde s` fixed-order ones, :math:`\tilde t_i` the row's true ``k``-th
    fixed-order score:

    1. the bounds :math:`\tilde U` (:func:`bounds`);
    2. round 1: each row's ``m1`` leaves of highest bound, BLAS-scored;
       :math:`\hat\tau_i` is the ``k``-th highest of those scores. The ``k`` labels
       behind it have :math:`\tilde s \ge \hat\tau_i - 2M_i`, so
       :math:`\tilde t_i \ge \hat\tau_i - 2M_i`;
    3. a label of the top ``k`` (:math:`\tilde s_{ij} \ge \tilde t_i`) then has
       :math:`s_{ij} \ge \hat\tau_i - 3M_i`, hence :math:`\hat s_{ij} \ge \hat\tau_i - 4M_i`
       and its leaf :math:`\tilde U_{ic} \ge \hat\tau_i - 4M_i`: round 2 BLAS-scores
       every such leaf not scored in round 1, and both rounds keep the labels with
       :math:`\hat s_{ij} \ge \hat\tau_i - 4M_i` (round 1 keeps, per leaf, those within
       :math:`4M_i` of the leaf's ``k``-th score, a superset: :math:`\hat\tau_i` is at
       least every leaf's ``k``-th score);
    4. the kept pairs are rescored in the fixed order (:func:`pair_scores`), duplicates
       expanded to their labels, and each row's best ``k`` taken by (score descending,
       label ascending).

    A tile whose round 2 would score more than ``max_scan`` of its ``rows x p`` scores
    (the index cannot prune), or an index with too few leaves for ``k``, goes to
    :func:`screen_top_k`; rows that are not finite or too large (:data:`HUGE`) to
    :func:`reference_top_k`.

    Parameters
    ----------
    index : LabelIndex
    Z : ndarray of shape (n, l)
        The rows' ``X A``.
    k : int
        ``1 <= k <= d2``.
    m1 : int
        Leaves of highest bound scored per row in round 1 (more if ``k`` needs them).
    max_scan : float
        The share of a tile's scores beyond which the tile goes to :func:`screen_top_k`.
    tile_bytes : int
        Bytes of bounds per row tile (``rows x leaves x 8``).
    stats : dict, optional
        Counts added to: ``scored`` (BLAS scores computed through the index),
        ``candidates`` (pairs rescored), ``fallback_rows``.

    Returns
    -------
    labels : ndarray of shape (n, k), int64
        Best first.
    scores : ndarray of shape (n, k)
        The fixed-order scores.
    """
    Z = np.ascontiguousarray(Z, dtype=np.float64)
    n = Z.shape[0]
    d2, C, p = index.n_labels, index.n_leaves, index.B.shape[0]
    if not 1 <= k <= d2:
        raise ValueError(f"k={k} is not allowed: give 1 <= k <= {d2}")
    st = {} if stats is None else stats
    for key in ("scored", "candidates", "fallback_rows"):
        st.setdefault(key, 0)
    sizes = np.diff(index.starts)
    m = max(m1, int(np.searchsorted(np.cumsum(np.sort(sizes)), k) + 1))
    out_l, out_s = np.empty((n, k), dtype=np.int64), np.empty((n, k))
    with np.errstate(over="ignore", invalid="ignore"):
        safe = np.isfinite(Z).all(axis=1) & (query_norms(Z) * index.rho <= HUGE)
    if not safe.all():
        bad = np.flatnonzero(~safe)
        out_l[bad], out_s[bad] = reference_top_k(Z[bad], index.B, index.b, k,
                                                 position=index.position)
    rows = np.flatnonzero(safe)
    if m > C // 4:  # too few leaves to prune: brute force
        if rows.size:
            out_l[rows], out_s[rows] = _fallback(index, Z[rows], k)
        st["fallback_rows"] += rows.size
        return out_l, out_s
    T = max(1, min(n, tile_bytes // (8 * C)))
    fsizes = sizes.astype(float)
    for r0 in range(0, rows.size, T):
        at = rows[r0: r0 + T]
        Zt = Z[at]
        Mt = 4.0 * margins(Zt, index.rho)
        t = at.size
        U = bounds(index, Zt)
        top = np.argpartition(U, C - m, axis=1)[:, C - m:]
        leaves = top.T.ravel()
        o = np.argsort(leaves, kind="stable")
        acc = ([], [], [])
        st["scored"] += _screen_leaves(index, Zt, leaves[o], np.tile(np.arange(t), m)[o],
                                       Mt, k, acc)
        rr, pp, ss = (np.concatenate(a) for a in acc)
        thr = kth_of_candidates(t, rr, ss, k, index.counts[pp]) - Mt
        need = U >= thr[:, None]
        need[np.arange(t)[:, None], top] = False
        if (need @ fsizes).sum() > max_scan * t * p:
            out_l[at], out_s[at] = _fallback(index, Zt, k)
            st["fallback_rows"] += t
            continue
        keep = ss >= thr[rr]
        acc = ([rr[keep]], [pp[keep]], [ss[keep]])
        leaves, need_rows = np.nonzero(need.T)
        st["scored"] += _screen_leaves(index, Zt, leaves, need_rows, thr, 0, acc)
        rr, pp = np.concatenate(acc[0]), np.concatenate(acc[1])
        st["candidates"] += rr.size
        rr, ll, ss = expand_groups(rr, pp, pair_scores(Zt, index.B, index.b, rr, pp), k,
                                   index)
        out_l[at], out_s[at] = best_of_candidates(t, rr, ll, ss, k)
    return out_l, out_s


def _fallback(index: LabelIndex, Z: np.ndarray, k: int):
    """:func:`screen_top_k` on the index's rows, ties by the original labels."""
    return screen_top_k(Z, index.B, index.b, k, rho=index.rho, index=index)
