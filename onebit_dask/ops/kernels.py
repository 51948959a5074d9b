r"""Pure NumPy kernels of the one-bit estimator (no Dask import here).

Notation (``docs/ALGORITHM.md``): ``W = A B^T`` is the ``d1 x d2`` estimate
with unit-norm columns, ``P = [P_top; P_bot]`` a ``(d1 + d2) x l`` block, and one
shard of a batch is ``(X, j, y)`` with ``X`` of shape ``(m_s, d1)``.

The batch part of the dilation product is split by shard:

.. math::

    H P_{bot} = c \sum_i w_i x_i P_{bot}[j_i], \qquad
    H^T P_{top} = c \sum_i w_i e_{j_i} (x_i^T P_{top}),

with weights ``w = y`` (initialisation) or ``w = r = y - sign(s)`` (a step). Both
depend on the rows only through the per-label sums ``S_j = sum_{i: j_i = j} w_i x_i``
(:func:`residuals`, then :func:`weighted_label_sums`):
``H P_bot = c sum_j S_j P_bot[j]`` and ``(H^T P_top)_j = c S_j^T P_top``. The label
blocks of :mod:`onebit_dask.engine.blocks` hold the sums of their own labels, and the
client adds the blocks' parts in block order, so the result does not depend on where
they ran.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse


def one_blas_thread():
    """A context in which BLAS runs on one thread (as on a Dask worker with
    ``threads_per_worker=1``), so both engines give the same bits. The controller is made
    once: ``threadpool_limits`` scans the loaded libraries at every call (~3 ms)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1, user_api="blas")


_CONTROLLER = None

LAMBDA = float(np.sqrt(2.0 / np.pi))
"""``E[sign(x^T w) x] = LAMBDA * w`` for ``x ~ N(0, I)`` and a unit ``w`` (Lemma 1)."""


def aligned(a: np.ndarray) -> np.ndarray:
    """``a`` itself if its data are aligned for its dtype, else an aligned copy.

    An array that Dask moved between workers can land at any byte address: the
    TCP comm reads the message header, the pickle bytes and the first out-of-band
    buffer into one host buffer (``distributed.comm.tcp``), so that buffer's array
    starts wherever the header ends (e.g. 6 bytes past an 8-byte boundary).
    NumPy's ``matmul`` hands an unaligned operand to BLAS through an aligned
    temporary copy in C order, so ``X.T @ B`` with an unaligned ``X`` becomes a
    ``dgemm`` on a row-major ``X^T`` instead of a transposed ``X``; for small
    products (``M N K`` up to about ``10^6``) OpenBLAS's SkylakeX kernels sum the
    two layouts in a different order, and the shard products differed from the
    in-process ones by 1 ulp. Copying unaligned inputs first makes every shard
    kernel see the same layout wherever its data came from; an aligned array
    (every array NumPy allocates) is returned as is, without a copy.
    """
    if scipy.sparse.issparse(a):  # a CSR matrix: its three arrays
        parts = (a.data, a.indices, a.indptr)
        return a if all(p.flags.aligned for p in parts) else a.copy()
    return a if a.flags.aligned else a.copy(order="K")


def canonical_signs(U: np.ndarray) -> np.ndarray:
    """``s`` (``+-1`` per column) such that every column of ``U * s`` has its entry of
    largest magnitude positive (the first such entry on a tie): scikit-learn's
    ``svd_flip`` convention.

    Singular and eigenvectors are defined up to sign, and which sign LAPACK returns
    depends on the BLAS kernel and on the shape of the call; a factor that enters the
    model takes this sign, so that it does not. An all-zero column keeps its sign.
    """
    U = np.asarray(U)
    if U.size == 0:
        return np.ones(U.shape[1] if U.ndim == 2 else 0)
    at = np.argmax(np.abs(U), axis=0)
    s = np.sign(U[at, np.arange(U.shape[1])])
    s[s == 0] = 1.0
    return s


def scale_constant(d2: int, m: int) -> float:
    """The constant ``c = d2 / (m * lambda)`` of one batch of ``m`` observations; a batch
    of none (chosen queries before a positive is found) has ``H = 0``, and takes ``m = 1``."""
    return d2 / (max(m, 1) * LAMBDA)


def sign(x: np.ndarray) -> np.ndarray:
    """``sign`` with ``sign(0) = +1``, as float64."""
    return np.where(x >= 0, 1.0, -1.0)


def column_norms(A: np.ndarray, V_bot: np.ndarray) -> np.ndarray:
    r"""Norms ``n_j = ||A v_j||`` of the columns of ``A V_bot^T``, in ``O(d2 l^2)``.

    ``n_j^2 = v_j^T (A^T A) v_j``; a zero column gets norm 1 (it stays zero).
    """
    return row_norms(V_bot, A.T @ A)


def row_norms(V_rows: np.ndarray, gram: np.ndarray) -> np.ndarray:
    """``n_j = sqrt(v_j^T G v_j)`` for the rows ``v_j`` of ``V_rows`` and ``G = A^T A``;
    a zero row gets norm 1. Row by row, so a block of labels needs only ``G``."""
    sq = np.einsum("ij,jk,ik->i", V_rows, gram, V_rows, optimize=True)
    norms = np.sqrt(np.maximum(sq, 0.0))
    norms[norms == 0] = 1.0
    return norms


class ActiveRows(NamedTuple):
    """The observations of one shard that take part in the ``H`` products, as per-label
    sums: one row per label, labels sorted."""

    X: np.ndarray  # (n_active, d1), float32 or float64
    labels: np.ndarray  # (n_active,), int64, global label indices
    weights: np.ndarray  # (n_active,), float64
    n_obs: int  # observations in the shard before selection
    counts: object = None  # thresholded model: the batch's LabelCounts (every bit, not only
    #                        the active ones)
    X_neg: np.ndarray | None = None  # thresholded model's initial batch: X holds the sums of
    #                                  the positive bits' rows, X_neg of the negative ones
    features: object = None  # a FeatureMap: X (and X_neg) hold homogeneous rows [S_j, mass_j]
    #                          (d1 + 1 columns), read through it (onebit_dask.features)
    exact: np.ndarray | None = None  # a pool of uniform rows: the labels (global, sorted)
    #                                  whose negative sums it keeps; the others' asked rows
    #                                  are summed at their mean (docs/ALGORITHM.md 9f)


PRODUCT_BYTES = 1 << 18
"""Bytes of the tall operand per product in :func:`rows_product` (256 KiB: L2-resident)."""


def rows_product(X: np.ndarray, M: np.ndarray) -> np.ndarray:
    """``X @ M`` for a tall ``X`` and a thin ``M`` (``2k`` columns), in row blocks of about
    :data:`PRODUCT_BYTES`.

    A ``scipy.sparse`` CSR ``X`` is multiplied in one sparse product (cost in its
    non-zeros). OpenBLAS packs the whole tall operand before it multiplies; for a thin
    ``M`` that copy costs as much as the product itself. Blocks that stay in the L2
    cache read ``X`` once, about twice as fast (1.1 M x 500 float32 times 500 x 6 on one
    thread: 0.63 s in one product, 0.34 s in 128-row blocks; ``docs/PERFORMANCE.md``).
    The blocks depend only on the shape of ``X``, so the result does not depend on where
    it runs.
    """
    if scipy.sparse.issparse(X):  # CSR: one pass over the non-zeros, dense result
        return np.asarray(X @ M)
    n = X.shape[0]
    rows = max(1, PRODUCT_BYTES // max(1, X.shape[1] * X.itemsize))
    out = np.empty((n, M.shape[1]), dtype=np.result_type(X.dtype, M.dtype))
    for a in range(0, n, rows):
        np.matmul(X[a: a + rows], M, out=out[a: a + rows])
    return out


def bit_scores(X, labels, A, B_rows, offset: int = 0, b_rows=None,
               features=None, at=None) -> np.ndarray:
    """The scores ``s_i = x_i^T A B[j_i] + b[j_i]`` of the bits' rows; ``B_rows`` and
    ``b_rows`` (the thresholds, ``None`` for the paper's model) hold rows ``offset..``.

    One pass over ``X`` (:func:`rows_product`), in the dtype of ``X`` (float32 features
    give float32 scores). With a feature map (:class:`~onebit_dask.features.FeatureMap`)
    they are ``phi(x_i)^T A B[j_i] + b[j_i]``, in float64, from ``X`` as it is
    (:meth:`~onebit_dask.features.FeatureMap.product`). ``at``: bit ``i``'s row is
    ``X[at_i]`` (``None``: row ``i``); ``X A`` is then formed once for each row of ``X``.
    """
    XA = (rows_product(X, A.astype(X.dtype, copy=False)) if features is None
          else features.product(X, A))
    if at is not None:
        XA = XA[at]
    s = np.einsum("ij,ij->i", XA, B_rows[labels - offset].astype(X.dtype, copy=False))
    if b_rows is not None:
        s += b_rows[labels - offset].astype(s.dtype, copy=False)
    return s


def residuals(X, labels, y, A, B_rows, offset: int = 0, b_rows=None,
              features=None, at=None) -> np.ndarray:
    """``r = y - sign(s_i)`` in ``{-2, 0, 2}`` (float64) for the scores ``s_i`` of
    :func:`bit_scores` (same arguments)."""
    s = bit_scores(X, labels, A, B_rows, offset, b_rows, features, at)
    return np.asarray(y, dtype=np.float64) - sign(s)


SUM_BYTES = 1 << 21
"""Bytes of float64 rows :func:`weighted_label_sums` converts at a time (2 MiB)."""


def weighted_label_sums(X, labels, weights, rows=None, at=None):
    """``(uniq, S)``: ``S[u] = sum_{i in rows, j_i = uniq[u]} w_i x_i`` in float64, labels
    sorted; ``rows`` are the rows with a weight, ``None`` means every row. With ``at``,
    bit ``i``'s row is ``X[at_i]`` (:func:`row_label_sums`).

    The given rows are read once, in blocks of :data:`SUM_BYTES` converted to float64
    (no float64 array of the size of ``X``); each block is added into ``S`` by a sparse
    one-hot product (``scipy.sparse``, one column per row: the terms of a label are
    added in row order), so the sums do not depend on how ``X`` was cut into shards
    beyond float64 rounding.

    A ``scipy.sparse`` CSR ``X`` gives a CSR ``S`` (float64) in one sparse product over
    the given rows: cost and memory follow their non-zeros.
    """
    if at is not None:
        return row_label_sums(X, labels, weights, rows, at)
    rows = None if rows is None else np.asarray(rows)
    lab = labels if rows is None else labels[rows]
    uniq, inverse = np.unique(lab, return_inverse=True)
    w = np.asarray(weights, dtype=np.float64)
    w = w if rows is None else w[rows]
    if scipy.sparse.issparse(X):
        block = X if rows is None else X[rows]
        E = one_hot(inverse, w, uniq.size)
        return uniq, scipy.sparse.csr_matrix(E @ block.astype(np.float64, copy=False))
    S = np.zeros((uniq.size, X.shape[1]))
    step = max(1, SUM_BYTES // (8 * max(1, X.shape[1])))
    for a in range(0, lab.size, step):
        z = min(a + step, lab.size)
        block = X[a:z] if rows is None else X[rows[a:z]]
        u, sums = scatter_rows(inverse[a:z], block.astype(np.float64, copy=False), w[a:z])
        S[u] += sums
    return uniq, S


def row_label_sums(X, labels, weights, rows, at):
    """:func:`weighted_label_sums` of the bits whose rows are ``X[at]``, by row of ``X``.

    The weights are first added into the ``u x n`` matrix ``C[u, r] = sum_{i in rows,
    j_i = uniq[u], at_i = r} w_i`` (one entry per distinct label and row), and then
    ``S = C X``: each row of ``X`` is read once, whatever the number of bits on it. ``C``
    is dense where a quarter or more of its entries are set (a product by BLAS or by the
    CSR kernel of ``X^T``), sparse otherwise. The terms of a label are added in another
    order than by :func:`weighted_label_sums`: equal to float64 rounding.
    """
    rows = slice(None) if rows is None else np.asarray(rows)
    uniq, inverse = np.unique(labels[rows], return_inverse=True)
    C = scipy.sparse.csr_matrix((np.asarray(weights, dtype=np.float64)[rows],
                                 (inverse, np.asarray(at)[rows])),
                                shape=(uniq.size, X.shape[0]))  # duplicates summed
    dense = 4 * C.nnz >= uniq.size * X.shape[0]
    if scipy.sparse.issparse(X):
        X = X.astype(np.float64, copy=False)
        S = np.asarray((X.T @ C.T.toarray()).T) if dense else C @ X
        return uniq, scipy.sparse.csr_matrix(S)
    C = C.toarray() if dense else C.tocsc()
    S = np.zeros((uniq.size, X.shape[1]))
    step = max(1, SUM_BYTES // (8 * max(1, X.shape[1])))
    for a in range(0, X.shape[0], step):
        S += C[:, a:a + step] @ X[a:a + step].astype(np.float64, copy=False)
    return uniq, S


def label_mass(uniq: np.ndarray, labels: np.ndarray, weights) -> np.ndarray:
    """``mass[u] = sum_{i: labels_i = uniq[u]} w_i`` (``uniq`` sorted, holding every
    label): the weights' sums that go with :func:`weighted_label_sums`."""
    return np.bincount(np.searchsorted(uniq, labels), weights=np.asarray(weights, dtype=float),
                       minlength=uniq.size)


def scatter_rows(labels: np.ndarray, rows: np.ndarray, weights: np.ndarray | None = None):
    """Weighted sums of ``rows`` by label: ``(unique_labels, sums)`` with
    ``sums[u] = sum_{i: labels_i = unique_labels[u]} weights_i rows_i`` in float64.

    A ``scipy.sparse`` product ``E @ rows`` with the ``u x n`` one-hot matrix ``E``
    (:func:`one_hot`; several times faster than ``np.add.at``; it sums in row order, so
    it is deterministic).
    """
    uniq, inverse = np.unique(labels, return_inverse=True)
    n = labels.shape[0]
    data = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    return uniq, np.asarray(one_hot(inverse, data, uniq.size) @ rows, dtype=np.float64)


def one_hot(inverse: np.ndarray, weights: np.ndarray, n_groups: int):
    """The ``n_groups x n`` matrix ``E[inverse_i, i] = weights_i`` as CSC: one entry per
    column, given directly (no COO conversion)."""
    n = inverse.shape[0]
    return scipy.sparse.csc_matrix((weights, inverse, np.arange(n + 1)), shape=(n_groups, n))


def shard_label_sums(X, labels, y) -> tuple[np.ndarray, np.ndarray]:
    """``(unique_labels, S)`` with ``S[u] = sum_{i: j_i = u} y_i x_i``: one shard's rows of
    ``H0^T / c`` (the dense initialisation), in one pass over the data."""
    return scatter_rows(labels, X, y)


def label_sums(X, labels, y, d2: int, block: int = 65_536) -> np.ndarray:
    """The ``d2 x d1`` sums ``S[j] = sum_{i: j_i = j} y_i x_i`` over row blocks (bounded
    float64 temporaries for large float32 ``X``)."""
    S = np.zeros((d2, X.shape[1]))
    for a in range(0, X.shape[0], block):
        rows = slice(a, a + block)
        add_label_rows(S, [shard_label_sums(X[rows], labels[rows], y[rows])])
    return S


def add_label_rows(out: np.ndarray, parts) -> np.ndarray:
    """``out[labels] += rows`` for each ``(labels, rows)`` in order (labels unique per part;
    ``rows`` dense or ``scipy.sparse``)."""
    for labels, rows in parts:
        out[labels] += rows.toarray() if scipy.sparse.issparse(rows) else rows
    return out
