r"""Feature maps applied through the factors (``docs/ALGORITHM.md`` section 10).

The model is learned on the mapped features

.. math:: \phi(x) = T^T D^{-1} (x - \mu), \qquad
          T = I + U (\mathrm{diag}(s) - I) U^T,

with ``mu`` the training features' mean, ``D`` their per-feature deviations and ``T``
the whitening of the ``q`` leading principal directions ``U`` of the standardised
features (``s_i = lambda_i^{-1/2}``; ``T = I`` for standardisation alone). ``phi(X)`` is
never formed: every product the fit and predict need is

.. math:: \phi(X) M = X (D^{-1} T M) - 1 (\mu^T D^{-1} T M), \qquad
          \phi(X)^T R = T^T D^{-1} (X^T R - \mu 1^T R),

at the cost of a product with ``X`` (``nnz(X) l``) plus ``O(d1 q l)``, so a sparse ``X``
stays sparse. Per-label sums ``S_j = sum_i w_i x_i`` are carried in homogeneous
coordinates ``[S_j, sum_i w_i]`` (:meth:`FeatureMap.homogeneous`): scaling and adding such
rows is linear, and :meth:`FeatureMap.lift` / :meth:`FeatureMap.lower` map them.

Pure NumPy and SciPy (no Dask import).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from .kernels import aligned, canonical_signs, one_blas_thread, rows_product

KINDS = ("auto", "none", "standardize", "ridge", "whiten")
"""``OneBitMultiLabel``'s ``features`` values; ``"auto"`` picks ``"standardize"`` or
``"ridge"`` by the training features' share of non-zeros (:func:`fit_feature_map`)."""
DEFAULT_COMPONENTS = 200
"""Directions ``whiten`` scales to unit variance when ``n_components`` is ``None``."""
EXACT_FEATURES = 4096
"""Up to this many features the directions come from the exact ``d1 x d1`` covariance
(one pass over the rows, then ``eigh``); above, from ARPACK (``scipy.sparse.linalg.svds``)
on the implicitly centred and scaled rows."""
RANK_TOLERANCE = 1e-10
"""Directions whose variance is below this fraction of the largest are left as they
are (a rank-deficient covariance has no scale to undo there)."""
DENSE_SHARE = 8
"""Features with more than ``1 / DENSE_SHARE`` of their entries non-zero are dense: CSR
rows so filled are multiplied as dense chunks in the covariance (``sum_i nnz(x_i)^2``
sparse work is then slower), and ``features="auto"`` standardises them."""
CHUNK_BYTES = 1 << 24
"""Bytes of dense rows read at a time while the map is estimated (16 MiB)."""


@dataclass(frozen=True)
class FeatureMap:
    """The affine map ``phi(x) = T^T D^{-1} (x - mu)`` (module docstring).

    Attributes
    ----------
    mean : ndarray of shape (d1,)
        ``mu``.
    scale : ndarray of shape (d1,)
        The diagonal of ``D`` (positive; 1 for a constant feature).
    directions : ndarray of shape (d1, q)
        ``U``, orthonormal columns (``q = 0``: standardisation alone).
    factors : ndarray of shape (q,)
        ``s``: direction ``u_i`` of the standardised features is scaled by ``s_i``.
    """

    mean: np.ndarray
    scale: np.ndarray
    directions: np.ndarray
    factors: np.ndarray

    @property
    def n_features(self) -> int:
        return self.mean.shape[0]

    @property
    def n_components(self) -> int:
        return self.directions.shape[1]

    def whiten(self, M: np.ndarray) -> np.ndarray:
        """``T M = M + U ((s - 1) * (U^T M))`` (``T`` is symmetric), ``O(d1 q l)``."""
        U = aligned(self.directions)
        if U.shape[1] == 0:
            return M
        return M + U @ ((aligned(self.factors) - 1.0)[:, None] * (U.T @ M))

    def lift(self, M: np.ndarray) -> np.ndarray:
        """The ``(d1 + 1, l)`` coefficients ``[C; -mu^T C]``, ``C = D^{-1} T M``: rows in
        homogeneous coordinates ``[x, c]`` times them give ``(x - c mu)^T D^{-1} T M``."""
        C = self.whiten(np.asarray(M, dtype=np.float64)) / aligned(self.scale)[:, None]
        return np.vstack([C, -(aligned(self.mean) @ C)[None]])

    def lower(self, G) -> np.ndarray:
        """``T^T D^{-1} (G[:d1] - mu G[d1])`` of shape ``(d1, l)`` for ``G`` of shape
        ``(d1 + 1, l)`` (dense or sparse): ``Z^T R`` of homogeneous rows ``Z`` mapped."""
        G = G.toarray() if scipy.sparse.issparse(G) else np.asarray(G, dtype=np.float64)
        mean, scale = aligned(self.mean), aligned(self.scale)
        return self.whiten((G[:-1] - np.outer(mean, G[-1])) / scale[:, None])

    def product(self, X, M: np.ndarray) -> np.ndarray:
        """``phi(X) M = X (D^{-1} T M) - 1 (mu^T D^{-1} T M)``, shape ``(n, l)`` float64,
        for rows ``X`` of shape ``(n, d1)`` (dense, or CSR kept sparse)."""
        L = self.lift(M)
        return rows_product(X, L[:-1]) + L[-1]

    def transpose_product(self, X, R: np.ndarray) -> np.ndarray:
        """``phi(X)^T R = T^T D^{-1} (X^T R - mu 1^T R)``, shape ``(d1, l)``."""
        R = np.asarray(R, dtype=np.float64)
        return self.lower(np.vstack([np.asarray(X.T @ R), R.sum(axis=0)[None]]))

    def homogeneous(self, S, mass: np.ndarray):
        """``[S, mass]``: rows ``S_j = sum_i w_i x_i`` with their weights' sums
        ``mass_j = sum_i w_i`` (the mapped row is ``T^T D^{-1} (S_j - mass_j mu)``);
        CSR for a sparse ``S``."""
        mass = np.asarray(mass, dtype=np.float64)[:, None]
        if scipy.sparse.issparse(S):
            return scipy.sparse.hstack([S, scipy.sparse.csr_matrix(mass)], format="csr")
        return np.hstack([S, mass])

    def transform(self, X) -> np.ndarray:
        """``phi(X)`` as a dense ``(n, d1)`` array: a reference for small ``X`` (the fit
        never forms it)."""
        X = X.toarray() if scipy.sparse.issparse(X) else np.asarray(X, dtype=np.float64)
        return self.whiten(((X - self.mean) / self.scale).T).T


class RowChunks(NamedTuple):
    """Rows ``[lo, hi)`` of ``n`` training feature rows, read ``chunk`` at a time by
    ``read(lo, hi)`` (dense or CSR): features that are not in memory (a store, a dask
    array). ``apply(fn, args)``, when given, returns ``[fn(rows, *args)]`` for the
    chunks in order, computed where the rows are (a dask array's: by dask, on the
    current client's cluster), so that per-chunk statistics are all this process gets
    (:meth:`per_chunk`)."""

    n: int
    d1: int
    read: Callable
    chunk: int
    apply: Callable | None = None

    def __iter__(self):
        for lo in range(0, self.n, self.chunk):
            yield self.read(lo, min(lo + self.chunk, self.n))

    def per_chunk(self, fn, *args):
        """``fn(rows, *args)`` of each chunk of rows, in order (here, or by ``apply``)."""
        if self.apply is not None:
            return self.apply(fn, args)
        return (fn(rows, *args) for rows in self)


def as_chunks(X) -> RowChunks:
    """In-memory ``X`` (dense or CSR) as :class:`RowChunks` of about :data:`CHUNK_BYTES`
    of dense rows (``X`` itself when it is smaller); :class:`RowChunks` as they are."""
    if isinstance(X, RowChunks):
        return X
    n, d1 = X.shape
    chunk = max(1, CHUNK_BYTES // (8 * max(1, d1)))
    return RowChunks(n, d1, lambda lo, hi: X if (lo, hi) == (0, n) else X[lo:hi], chunk)


def check_feature_params(features: str, whiten_components) -> None:
    """``whiten_components`` counts whitened directions: refused unless
    ``features="whiten"`` (the table ``_parameter_constraints`` checks each value alone)."""
    if whiten_components is not None and features != "whiten":
        raise ValueError(f"whiten_components={whiten_components!r} is not allowed with "
                         f"features={features!r}: it is the number of whitened directions; "
                         "pass features='whiten', or whiten_components=None")


def check_source(features: str, planted) -> None:
    """A feature map is refused for a planted problem (before any work; ``"auto"`` is the
    identity there)."""
    if features not in ("none", "auto") and planted is not None:
        raise ValueError(
            f"features={features!r} is not allowed with fit(problem): a problem's features "
            "are N(0, I) already and its recovery metrics compare W with the planted W* in "
            "that space; pass features='none' (the map is for real features)")


def fit_feature_map(X, features: str, n_components=None, random_state=None, bits=None,
                    n_labels=None):
    r"""The :class:`FeatureMap` of the training features ``X``, or ``None``.

    Parameters
    ----------
    X : ndarray or scipy.sparse CSR matrix of shape (n, d1), or RowChunks
        The training features (every row the source has), read in row chunks; a sparse
        ``X`` is never densified (at most a chunk of rows for the covariance).
    features : {"auto", "none", "standardize", "ridge", "whiten"}
        ``"none"``: no map (``None``). ``"standardize"``: ``T = I``, ``phi(x) =
        D^{-1} (x - mu)`` with the mean and the (population) deviation of each feature.
        ``"ridge"``: ``phi(x) = D^{-1} (x - mu)`` with ``D = diag(sqrt(var_f + lambda))``,
        ``lambda`` the empirical-Bayes ridge of the initial batch's ``bits``
        (:func:`ridge_from_bits`). ``"whiten"``: also the ``q`` leading principal
        directions ``u_i`` of the standardised features scaled by ``s_i =
        lambda_i^{-1/2}`` (their variances become 1; the other directions keep theirs).
        ``"auto"``: ``"standardize"`` when more than ``1 / 8`` of the entries of ``X``
        are non-zero (dense features), else ``"ridge"``.
    n_components : int or None
        ``q`` (``None``: ``min(d1, 200)``; at most ``d1``). Directions with a variance
        below ``1e-10`` of the largest are left out.
    random_state : int, Generator or None
        Seeds ARPACK's start vector (``d1 > 4096`` only).
    bits : callable or None
        For ``"ridge"`` (and ``"auto"`` on sparse features): ``bits()`` iterates over the
        initial batch's observations as ``(X_rows, labels, y)`` pieces (rows of
        features, global labels, ``y > 0`` a positive bit).
    n_labels : int or None
        ``d2``, with ``bits``.

    Notes
    -----
    ``d1 <= 4096``: the covariance ``C = Z^T Z / n`` of the standardised rows ``Z`` in
    one pass (centred dense chunks; ``X^T X / n - mu mu^T`` for CSR, cost
    ``sum_i nnz(x_i)^2``, or ``nnz d1`` for chunks more than 1/8 non-zero), then ``eigh``
    (``O(d1^3)``): exact. In one BLAS thread, as the fit. Above: the top-``q``
    singular vectors of ``Z`` by ``scipy.sparse.linalg.svds`` on a
    ``LinearOperator`` that centres and scales implicitly (each product one pass over
    ``X``: ``O(nnz(X) q)``), with ``q < min(n, d1)``.
    """
    return fitted_map_and_basis(X, features, n_components, random_state, bits, n_labels)[0]


def fitted_map_and_basis(X, features: str, n_components=None, random_state=None, bits=None,
                         n_labels=None):
    """``(map, basis)``: :func:`fit_feature_map`'s map, and for the ridge map the
    training features' ``(mu, var_f)`` a pooled step re-estimates the ridge on
    (:func:`ridge_parts`, :func:`ridge_of`; ``None`` for another map), from the same
    pass over ``X``."""
    if features == "none":
        return None, None
    with one_blas_thread():  # as the fit's products: the same bits on every machine load
        return _fit(as_chunks(X), features, n_components, random_state, bits, n_labels)


def _fit(rows: RowChunks, features: str, n_components, random_state, bits, n_labels):
    mean, var, nnz = _moments(rows)
    if features == "auto":
        features = "standardize" if nnz * DENSE_SHARE > rows.n * rows.d1 else "ridge"
    if features == "ridge":
        if bits is None or n_labels is None:
            raise TypeError("features='ridge' needs the initial batch's bits and n_labels")
        return ridge_map(mean, var, ridge_from_bits(bits(), mean, var, n_labels)), (mean, var)
    scale = np.sqrt(var)
    scale[scale == 0] = 1.0
    empty = FeatureMap(mean, scale, np.zeros((rows.d1, 0)), np.zeros(0))
    if features == "standardize":
        return empty, None
    q = min(DEFAULT_COMPONENTS if n_components is None else int(n_components), rows.d1)
    if rows.d1 <= EXACT_FEATURES:
        lam, U = np.linalg.eigh(_covariance(rows, mean, scale))
        lam, U = lam[::-1][:q], U[:, ::-1][:, :q]
    else:
        lam, U = _leading(rows, mean, scale, min(q, min(rows.n, rows.d1) - 1), random_state)
    keep = lam > RANK_TOLERANCE * max(lam[0] if lam.size else 0.0, 0.0)
    lam, U = lam[keep], U[:, keep]
    U = U * canonical_signs(U)
    return FeatureMap(mean, scale, np.ascontiguousarray(U), 1.0 / np.sqrt(lam)), None


def _moments(rows: RowChunks):
    """Mean, (population) variance and number of non-zero entries of each feature
    (variance 0 for a feature constant up to rounding), from per-chunk sums
    (:meth:`RowChunks.per_chunk`) added in chunk order."""
    total, squares, sparse, nnz = np.zeros(rows.d1), np.zeros(rows.d1), False, 0
    for part_total, part_squares, part_nnz, sparse in rows.per_chunk(chunk_moments):
        if sparse:
            squares += part_squares
        nnz += part_nnz
        total += part_total
    mean = total / rows.n
    if sparse:  # E[x^2] - mean^2: the non-zeros alone
        var = squares / rows.n - mean * mean
        var[var <= 4 * np.finfo(float).eps * mean * mean] = 0.0  # constant up to rounding
    else:  # a second, centred pass
        for part in rows.per_chunk(centred_squares, mean):
            squares += part
        var = squares / rows.n
    return mean, np.maximum(var, 0.0), nnz


def chunk_moments(chunk):
    """``(sums, squares, nnz, sparse)`` of one chunk of rows: each feature's sum (float64),
    for a CSR chunk the sums of its squares (``None`` for a dense one: see
    :func:`centred_squares`), and the non-zero entries."""
    squares, sparse = None, scipy.sparse.issparse(chunk)
    if sparse:
        chunk = chunk.astype(np.float64, copy=False)
        squares = np.asarray(chunk.multiply(chunk).sum(axis=0)).ravel()
        nnz = int(chunk.count_nonzero())
    else:
        nnz = int(np.count_nonzero(chunk))
    return np.asarray(chunk.sum(axis=0, dtype=np.float64)).ravel(), squares, nnz, sparse


def centred_squares(chunk, mean):
    """Each feature's sum of ``(x - mean)^2`` over a dense chunk of rows."""
    return ((chunk - mean) ** 2).sum(axis=0)


def ridge_basis(rows, features: str) -> tuple[np.ndarray, np.ndarray] | None:
    """``(mu, var_f)`` of the training features ``rows()`` (as :func:`fit_feature_map`
    takes them; asked for only for these two values of ``features``) where ``features``
    maps them by the ridge map (``"ridge"``, or ``"auto"`` on sparse features), else
    ``None``: what a pooled step needs to re-estimate the ridge from the pooled bits
    (:func:`ridge_parts`, :func:`ridge_of`)."""
    if features not in ("ridge", "auto"):
        return None
    rows = as_chunks(rows())
    mean, var, nnz = _moments(rows)
    if features == "auto" and nnz * DENSE_SHARE > rows.n * rows.d1:
        return None
    return mean, var


def ridge_map(mean: np.ndarray, var: np.ndarray, ridge: float) -> FeatureMap:
    """The ridge map ``phi(x) = D^{-1} (x - mu)``, ``D = diag(sqrt(var_f + lambda))``
    (the identity scale where ``lambda`` is infinite: the bits showed no signal)."""
    scale = np.ones(mean.shape[0]) if not np.isfinite(ridge) else np.sqrt(var + ridge)
    return FeatureMap(mean, scale, np.zeros((mean.shape[0], 0)), np.zeros(0))


def ridge_from_bits(bits, mean: np.ndarray, var: np.ndarray, n_labels: int) -> float:
    r"""The empirical-Bayes ridge ``lambda`` of ``features="ridge"``
    (``docs/ALGORITHM.md`` section 10b), ``inf`` when the bits show no signal.

    Parameters
    ----------
    bits : iterable of (X_rows, labels, y)
        Observations: rows of features ``(m_s, d1)`` (dense or CSR), their global labels
        ``(m_s,)`` and bits ``(m_s,)`` (``y > 0``: positive).
    mean, var : ndarray of shape (d1,)
        The training features' mean ``mu`` and variance ``var_f``.
    n_labels : int
        ``d2``.

    Notes
    -----
    With ``n_j`` bits of label ``j`` and ``p_j`` their share of positives, the
    cross-covariance ``C_jf = S_jf / n_j - p_j mu_f`` (``S_j`` the sum of the positive
    bits' rows) estimates ``beta_jf var_f`` with noise of variance
    ``a_j var_f / n_j``, ``a_j = p_j (1 - p_j)``. Under the prior ``beta_jf ~ N(0,
    kappa a_j)`` the method of moments gives

    .. math:: \kappa = rac{\sum_{jf} C_{jf}^2 - (\sum_j a_j / n_j)(\sum_f var_f)}
                            {(\sum_j a_j)(\sum_f var_f^2)},
              \qquad \lambda = \operatorname{mean}_{j: n_j > 0} rac{1}{n_j \kappa},

    the posterior slope being ``C_jf / (var_f + lambda)``. Cost: one pass over the
    bits, memory the positive bits' rows.
    """
    counts, positives, sums = np.zeros(n_labels), np.zeros(n_labels), None
    for X, labels, y in bits:
        labels = np.asarray(labels, dtype=np.int64)
        pos = np.asarray(y) > 0
        counts += np.bincount(labels, minlength=n_labels)
        positives += np.bincount(labels[pos], minlength=n_labels)
        rows = scipy.sparse.csr_matrix(X[np.flatnonzero(pos)], dtype=np.float64)
        onehot = scipy.sparse.csr_matrix(
            (np.ones(rows.shape[0]), (labels[pos], np.arange(rows.shape[0]))),
            shape=(n_labels, rows.shape[0]))
        part = (onehot @ rows).tocsr()
        sums = part if sums is None else sums + part
    if sums is None:
        return np.inf
    return ridge_of([ridge_parts(sums, counts, positives, mean)], var)


def ridge_parts(S, n_bits: np.ndarray, n_pos: np.ndarray, mean: np.ndarray) -> np.ndarray:
    r"""One group of labels' share of the sums over labels of :func:`ridge_from_bits`:
    ``[sum_j C_j^2, sum_j a_j / n_j, sum_j a_j, sum_j 1 / n_j, labels]`` over the labels
    with ``n_j > 0`` (``sum_j C_j^2`` the squared norms of ``C_j = S_j / n_j - p_j mu``).

    Parameters
    ----------
    S : ndarray or scipy.sparse CSR matrix of shape (n_labels, d1)
        Each label's sum of the rows of its positive bits.
    n_bits, n_pos : ndarray of shape (n_labels,)
        Each label's bits and positive bits.
    mean : ndarray of shape (d1,)
    """
    seen = np.flatnonzero(n_bits > 0)
    n, p = n_bits[seen], n_pos[seen] / n_bits[seen]
    S = S[seen]
    if scipy.sparse.issparse(S):
        norms = np.asarray(S.multiply(S).sum(axis=1)).ravel()
    else:
        norms = np.einsum("ij,ij->i", S, S)
    total = float(np.sum(norms / n**2 - 2 * p * np.asarray(S @ mean).ravel() / n
                         + p**2 * (mean @ mean)))
    a = p * (1 - p)
    return np.array([total, float(np.sum(a / n)), float(a.sum()), float(np.sum(1.0 / n)),
                     float(seen.size)])


def ridge_of(parts, var: np.ndarray) -> float:
    r"""``lambda`` of :func:`ridge_from_bits` from the :func:`ridge_parts` of all labels
    (added in the order given), ``inf`` when the bits show no signal."""
    total, a_n, a, inv_n, count = np.sum(parts, axis=0)
    noise = float(a_n * var.sum())
    denominator = float(a * np.sum(var**2))
    if count == 0 or denominator <= 0 or total <= noise:
        return np.inf
    kappa = (total - noise) / denominator
    return float(inv_n / count / kappa)


def _covariance(rows: RowChunks, mean, scale) -> np.ndarray:
    """``C = Z^T Z / n`` of the standardised rows ``Z = (X - mu) / sd``."""
    C = np.zeros((rows.d1, rows.d1))
    sparse = False
    for chunk in rows:
        if scipy.sparse.issparse(chunk):
            sparse = True
            chunk = chunk.astype(np.float64, copy=False)
            if chunk.nnz * DENSE_SHARE < chunk.shape[0] * rows.d1:  # sparse rows
                C += (chunk.T @ chunk).toarray()
            else:  # dense-ish rows (a chunk of them is at most CHUNK_BYTES dense)
                C += np.asarray(chunk.T @ chunk.toarray())
        else:
            Z = (chunk - mean) / scale
            C += Z.T @ Z
    C /= rows.n
    if sparse:
        C = (C - np.outer(mean, mean)) / np.outer(scale, scale)
    return (C + C.T) / 2


def _leading(rows: RowChunks, mean, scale, q: int, random_state):
    """The ``q`` leading variances and directions of ``Z = (X - 1 mu^T) D^{-1}`` by ARPACK
    on an implicit operator (every product one pass over the rows)."""
    def matmat(V):
        V = np.asarray(V, dtype=np.float64).reshape(rows.d1, -1) / scale[:, None]
        return np.vstack([np.asarray(c @ V) for c in rows]) - mean @ V

    def rmatmat(U):
        U = np.asarray(U, dtype=np.float64).reshape(rows.n, -1)
        out, lo = np.zeros((rows.d1, U.shape[1])), 0
        for c in rows:
            out += np.asarray(c.T @ U[lo: lo + c.shape[0]])
            lo += c.shape[0]
        return (out - np.outer(mean, U.sum(axis=0))) / scale[:, None]

    op = scipy.sparse.linalg.LinearOperator(
        (rows.n, rows.d1), matvec=matmat, rmatvec=rmatmat, matmat=matmat, rmatmat=rmatmat,
        dtype=np.float64)
    seed = (int(random_state.integers(2**32)) if isinstance(random_state, np.random.Generator)
            else random_state)
    _, sigma, Vt = scipy.sparse.linalg.svds(op, k=q, random_state=seed,
                                            return_singular_vectors="vh")
    order = np.argsort(sigma)[::-1]
    return sigma[order] ** 2 / rows.n, Vt[order].T


def project(X, A: np.ndarray, feature_map: FeatureMap | None) -> np.ndarray:
    """``phi(X) A`` (``X A`` without a map), ``(n, l)`` float64, for predictions."""
    if feature_map is None:
        return np.asarray(X.astype(np.float64, copy=False) @ A)
    return feature_map.product(X, A)
