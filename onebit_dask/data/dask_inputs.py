"""Dask arrays given to ``fit``: features ``X`` of dense chunks checked chunk by chunk,
as :class:`ChunkedRows` (:func:`chunked_features`); features of ``scipy.sparse`` chunks
and a label matrix ``Y`` gathered into this process's CSR matrix a row chunk at a time
(:func:`gathered_sparse`, :func:`gathered_labels`), as the in-memory sparse path holds
them.

Nothing here computes a dense ``X`` whole: its checks are dask reductions of two flags a
chunk (on the cluster of the current client, else in this process's threads), its chunks
are computed one at a time where rows are read in this process, and on a Dask engine on
the workers (:meth:`onebit_dask.engine.dask_engine.DaskEngine.share_rows`). A sparse
``X`` is computed a row chunk at a time into one CSR matrix (its ``nnz`` numbers).
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from ..utils.checks import check_finite
from .chunked_rows import ChunkedRows


def is_dask_array(X) -> bool:
    """Whether ``X`` is a dask array (a dask collection with a shape; dask not imported)."""
    return callable(getattr(X, "__dask_graph__", None)) and hasattr(X, "chunks")


def _computed(block) -> np.ndarray:
    """A chunk computed (by the current client's cluster, or in threads here; a sparse
    chunk the array's meta did not announce is refused as it is computed,
    :func:`_dense_chunk`)."""
    return block.compute()


@contextlib.contextmanager
def _uncomputable(name: str):
    """A dask array whose chunks dask cannot make (``da.from_array`` of a ``coo_matrix``,
    which has no indexing) refused in one line, saying how to build it."""
    try:
        yield
    except TypeError as exc:
        if "not subscriptable" not in str(exc):
            raise
        raise TypeError(f"{name}'s chunks cannot be computed ({exc}): build the dask array "
                        "from a CSR matrix, e.g. da.from_array(X.tocsr(), chunks=(rows, -1), "
                        "asarray=False)") from None


def _dense_chunk(block) -> np.ndarray:
    """A chunk as a C-contiguous array; a sparse chunk, which the array's meta did not
    announce, refused."""
    if not isinstance(block, np.ndarray):
        raise TypeError(_sparse_refusal(type(block).__name__))
    return np.ascontiguousarray(block)


def _flags(block: np.ndarray) -> tuple[bool, bool]:
    """``(every entry finite, an entry non-zero)`` of a chunk."""
    return bool(np.isfinite(block).all()), bool((block != 0).any())


def _sparse_refusal(kind: str) -> str:
    return (f"X is a dask array of {kind} chunks whose meta says numpy: a dask array of "
            "sparse chunks must say so in its meta, e.g. da.from_array(X_csr, chunks=(rows, "
            "-1), asarray=False) or X.map_blocks(scipy.sparse.csr_matrix), so that its "
            "chunks are gathered into one CSR matrix (never densified)")


def has_sparse_chunks(X) -> bool:
    """Whether the dask array ``X`` says (by its meta) that its chunks are
    ``scipy.sparse`` matrices."""
    import scipy.sparse

    return scipy.sparse.issparse(getattr(X, "_meta", None))


def gathered_sparse(X, name: str = "X"):
    """The dask array ``X`` of ``scipy.sparse`` chunks (:func:`has_sparse_chunks`) as one
    CSR matrix in this process, computed a row chunk at a time (the chunks of a row
    joined side by side): what the in-memory sparse path holds, never densified. A chunk
    that computes to a dense array is taken as its CSR matrix."""
    import dask
    import scipy.sparse

    parts = []
    for k in range(X.numblocks[0]):
        with _uncomputable(name):
            row = dask.compute(*[X.blocks[k, j] for j in range(X.numblocks[1])])
        parts.append(scipy.sparse.hstack([scipy.sparse.csr_matrix(b) for b in row],
                                         format="csr"))
    return scipy.sparse.vstack(parts, format="csr")


def check_not_a_task_key(Y, name: str = "Y") -> None:
    """Refuse a dask task key (a tuple ``(name, i, ...)``) passed where a block of labels
    belongs: what ``dask_ml.wrappers.Incremental`` hands ``partial_fit`` for a 2-D
    ``y``, whose blocks it addresses by their row index only (its ``_partial.fit`` builds
    the key ``(y.name, i)``, which names no block of a 2-D array)."""
    if (isinstance(Y, tuple) and len(Y) >= 2 and isinstance(Y[0], str)
            and all(isinstance(i, int) for i in Y[1:])):
        raise TypeError(f"{name}={Y!r} is a dask task key, not a block of labels: "
                        "dask_ml.wrappers.Incremental passes a 2-D label matrix's blocks so "
                        "(it indexes y's blocks by row only), and takes a 1-D binary target "
                        "only; fit a dask label matrix with OneBitMultiLabel.fit(X, Y), which "
                        "reads dask arrays a chunk at a time, or call partial_fit on its "
                        "blocks yourself (for k in range(Y.numblocks[0]): est.partial_fit("
                        "X.blocks[k].compute(), Y.blocks[k].compute()))")


def check_dask_shape(X, name: str = "X") -> None:
    """Refuse, computing nothing, a dask array ``X`` of features that is not 2-D, whose
    chunk sizes are unknown, that has no row or no column, or that holds no numbers
    (:func:`chunked_features`)."""
    if X.ndim != 2:
        raise ValueError(f"{name} is a dask array of shape {X.shape}: {name} must be 2-D, "
                         f"(n_samples, n_features); reshape it, e.g. {name}.reshape(-1, 1) "
                         "for one feature")
    if any(math.isnan(c) for dim in X.chunks for c in dim):
        raise ValueError(f"{name} is a dask array of unknown chunk sizes (shape {X.shape}): "
                         "the rows of each chunk must be known; call "
                         f"{name} = {name}.compute_chunk_sizes() first")
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"{name} is a dask array of shape {X.shape}: at least one row and "
                         "one feature are required")
    if X.dtype.kind not in "biuf":
        raise TypeError(f"{name} is a dask array of dtype {X.dtype}: {name} must hold real "
                        "numbers (float, int or bool)")


def chunked_features(X, name: str = "X") -> tuple[ChunkedRows, bool]:
    """``(rows, has_feature)``: the dask array ``X`` as :class:`ChunkedRows` of its row
    chunks (every column in one chunk; float32 stays float32, other numbers become
    float64, as :func:`~onebit_dask.utils.validation.check_features` converts an array),
    and whether any entry is non-zero.

    Refused before any work, naming ``name``: what :func:`check_dask_shape` refuses,
    sparse chunks (:func:`gathered_sparse` reads those), and (from one pass: two flags a
    chunk, on the current client's cluster if there is one) NaN or infinite entries, the
    first one named as ``check_features`` names it.
    """
    import dask

    check_dask_shape(X, name)
    meta = getattr(X, "_meta", None)
    if meta is not None and not isinstance(meta, np.ndarray):
        raise TypeError(f"{name} is a dask array of {type(meta).__name__} chunks: a dask "
                        f"{name} must have numpy or scipy.sparse chunks; convert them, e.g. "
                        f"{name}.map_blocks(lambda b: b.tocsr()) for a sparse format")
    dtype = np.dtype(np.float32 if X.dtype == np.float32 else np.float64)
    X = X.rechunk({1: -1}).astype(dtype).map_blocks(_dense_chunk, dtype=dtype)
    blocks = [X.blocks[k, 0] for k in range(X.numblocks[0])]
    offsets = np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)
    with _uncomputable(name):
        flags = dask.compute(*[dask.delayed(_flags)(b) for b in blocks])
    for k, (finite, _) in enumerate(flags):
        if not finite:  # the chunk's first bad entry, named as check_features names it
            check_finite(_computed(blocks[k]), name=name, row_offset=int(offsets[k]))
    has_feature = any(bool(nonzero) for _, nonzero in flags)
    return ChunkedRows(offsets, blocks, X.shape[1], dtype, load=_computed), has_feature


def per_piece(rows: ChunkedRows, step: int):
    """``apply(fn, args)`` for :class:`~onebit_dask.ops.features.RowChunks` of the dask
    chunks of ``rows``: ``[fn(X[lo:lo + step], *args)]`` for ``lo = 0, step, ...``, each
    piece's rows joined and ``fn`` run by dask (on the current client's cluster, else in
    threads here), only the results gathered. The pieces are the rows the feature map
    reads of an array, so the statistics are the array's, bit for bit."""
    import dask
    import dask.array as da

    n = rows.shape[0]

    def piece(lo: int, hi: int):
        parts = [rows.chunks[k][max(lo - a, 0): min(hi, b) - a]
                 for k, (a, b) in enumerate(zip(rows.offsets[:-1], rows.offsets[1:]))
                 if a < hi and b > lo]
        return parts[0] if len(parts) == 1 else da.concatenate(parts)

    def apply(fn, args):
        return dask.compute(*[dask.delayed(fn)(piece(lo, min(lo + step, n)), *args)
                              for lo in range(0, n, step)])

    return apply


def gathered_labels(Y, name: str = "Y"):
    """The dask array ``Y`` (a 0/1 label matrix, dense or sparse chunks) as one CSR
    matrix in this process, computed a row chunk at a time (a dense chunk is never more
    than its rows): the label matrix is read here (the pairs' bits, the propensities), as
    an in-memory ``Y`` is. Unknown chunk sizes are refused, naming ``name``."""
    import scipy.sparse

    if any(math.isnan(c) for dim in Y.chunks for c in dim):
        raise ValueError(f"{name} is a dask array of unknown chunk sizes (shape {Y.shape}): "
                         f"call {name}.compute_chunk_sizes() first")
    if Y.ndim != 2:
        raise ValueError(f"{name} is a dask array of shape {Y.shape}: a dask {name} must be "
                         "a 2-D (n_samples, n_labels) 0/1 label matrix")
    Y = Y.rechunk({1: -1})
    parts = [Y.blocks[k, 0].compute() for k in range(Y.numblocks[0])]
    return scipy.sparse.vstack([scipy.sparse.csr_matrix(p) for p in parts], format="csr")
