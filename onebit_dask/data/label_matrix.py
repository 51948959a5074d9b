r"""A label matrix in memory: ``n`` fully labelled instances as a source.

Batch ``t`` draws ``batch_size`` pairs ``(i, j)`` uniformly from the ``n x d2`` grid and
observes ``y = 2 Y_ij - 1`` (the paper's Sec. 5.2 on the user's data), exactly as
:class:`~onebit_dask.synthetic.FullObservationProblem` does for a planted truth: the same
label blocks with multinomial counts from ``SeedSequence([seed, t, 2**32-1])`` and, in
block ``s``, the pairs from ``SeedSequence([seed, t, s])``
(:func:`~onebit_dask.synthetic.uniform_pairs`). So ``fit(X, Y)`` with
``random_state=seed`` on a problem's ``full_observation(n)`` draws the very batches of
``fit(FullObservationProblem(problem, n))`` with that problem's seed.

Each batch is one label-block shard per label block, activated in the block's task; the
shard reads ``X`` and its block's columns of ``Y`` from the engine's copy, shared once
per fit (:meth:`LabelMatrixSource.place`; on Dask a task of its own, which the
scheduler holds and computes again where a worker that held it died).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse

from ..utils.checks import check_int
from .seeding import label_blocks
from .synthetic.problem import uniform_pairs
from .arrays import content_digest
from .chunked_rows import ChunkedRows
from .shards import ShardKind, block_activation, block_scores, rows_of_bits
from .source import BaseSource


def check_label_matrix(Y, n: int, name: str = "Y"):
    """``Y`` as a CSR 0/1 matrix (int8) of ``n`` rows.

    ``Y`` is a dense array or a ``scipy.sparse`` matrix of bools or numbers that are all
    0 or 1; anything else raises an error that names ``name`` and the first bad value.
    """
    sparse = scipy.sparse.issparse(Y)
    if not sparse:
        Y = np.asarray(Y)
    if Y.ndim != 2:
        raise ValueError(f"{name} has shape {Y.shape}: {name} must be a 2-D (n_samples, "
                         "n_labels) 0/1 indicator matrix")
    if Y.shape[0] != n:
        raise ValueError(f"{name} has {Y.shape[0]} rows, but X has {n}: pass one row of "
                         f"{name} per row of X")
    if Y.shape[1] < 1:
        raise ValueError(f"{name} has shape {Y.shape}: at least one label is needed")
    if Y.dtype.kind not in "biuf":
        raise TypeError(f"{name} has dtype {Y.dtype}: {name} must hold 0 and 1 (bool, int or "
                        "float)")
    Y = scipy.sparse.csr_matrix(Y) if sparse else Y
    values = Y.data if sparse else Y
    bad = (values != 0) & (values != 1)
    if bad.any():
        if sparse:
            k = int(np.argmax(bad))
            i = int(np.searchsorted(Y.indptr, k, side="right") - 1)
            where, value = (i, int(Y.indices[k])), Y.data[k]
        else:
            where = np.unravel_index(int(np.argmax(bad)), Y.shape)
            value = Y[where]
        raise ValueError(f"{name}[{where[0]}, {where[1]}]={value} is not allowed: {name} must "
                         "be a 0/1 indicator matrix (1: the instance has the label)")
    out = scipy.sparse.csr_matrix(Y != 0, dtype=np.int8)
    out.sum_duplicates()
    out.eliminate_zeros()
    return out


def is_one_dimensional(y) -> bool:
    """Whether labels ``y`` are 1-D (a binary target's classes without bits), not a
    (dense or sparse) label matrix."""
    return not scipy.sparse.issparse(y) and np.asarray(y).ndim == 1


def binary_target(y, n: int, classes=None):
    """``(classes, Y)`` of a 1-D binary target ``y`` of ``n`` entries: its two classes
    (sorted, scikit-learn's ``classes_``) and the one-label matrix ``Y = 1[y == classes[1]]``
    (CSR, int8, ``(n, 1)``).

    ``classes``: the two classes the target may hold (``partial_fit``'s argument, or a
    model's ``classes_``); by default those ``y`` holds, which must be two. A target of
    another kind is refused in scikit-learn's words: ``"Unknown label type: ..."``,
    ``"Only binary classification is supported. ..."``.
    """
    from sklearn.utils.multiclass import type_of_target

    y = np.asarray(y)
    if y.shape[0] != n:
        raise ValueError(f"y has {y.shape[0]} entries, but X has {n} rows: pass one class a "
                         "row")
    kind = type_of_target(y, input_name="y")
    forms = ("a 1-D y without bits is a binary target (two classes, one label); pass a 2-D "
             "(n, d2) 0/1 label matrix Y, one column per label, or single-label observations "
             "and their bits, fit(X, labels, bits)")
    if kind == "multiclass":
        raise ValueError("Only binary classification is supported. The type of the target "
                         f"is multiclass ({np.unique(y).size} classes): {forms}")
    if kind != "binary":
        raise ValueError(f"Unknown label type: {kind}: {forms}")
    if classes is None:
        classes = np.unique(y)
        if classes.size != 2:
            raise ValueError(f"y holds only the class {classes.tolist()[0]!r}: a classifier "
                             "can't train when only one class is present; pass rows of both "
                             "classes")
    else:
        classes = np.unique(np.asarray(classes))
        if classes.size != 2:
            raise ValueError(f"classes={classes!r} is not allowed with a 1-D y: give its two "
                             "classes")
        unknown = np.setdiff1d(np.unique(y), classes)
        if unknown.size:
            raise ValueError(f"y holds the class {unknown.tolist()[0]!r}, not one of classes="
                             f"{classes.tolist()!r}")
    if not (classes.dtype.kind in "biuU" or (classes.dtype.kind == "f"
                                             and np.isfinite(classes).all())
            or all(isinstance(c, str) for c in classes)):
        raise ValueError(f"y holds the classes {classes!r}: give classes that are integers, "
                         "finite numbers, booleans or strings")
    return classes, scipy.sparse.csr_matrix((y == classes[1]).reshape(-1, 1), dtype=np.int8)


def check_label_count(n_labels, classes, d2: int | None, where: str | None):
    """``(d2, name)`` from what a call gives: ``n_labels`` (an integer >= 1),
    scikit-learn's ``classes`` (one entry per label) and a label matrix's ``d2`` columns
    (``where`` names them), which must agree; ``name`` says which gave it (``"n_labels=5"``,
    ``"Y.shape[1]=5"``, ...). ``(None, None)`` when none of them is given."""
    if n_labels is not None:
        n_labels = check_int("n_labels", n_labels, low=1)
    given = [(f"n_labels={n_labels!r}", n_labels)] if n_labels is not None else []
    if classes is not None:
        classes = np.asarray(classes)
        if classes.ndim != 1 or classes.size == 0 or np.unique(classes).size != classes.size:
            raise ValueError(f"classes={classes!r} is not allowed: classes must be a 1-D array "
                             "of distinct entries, one per label (a label matrix's columns)")
        given.append((f"len(classes)={classes.size}", classes.size))
    if d2 is not None:
        given.append((f"{where}={d2}", d2))
    if not given:
        return None, None
    for name, value in given[1:]:
        if value != given[0][1]:
            raise ValueError(f"{given[0][0]} and {name} disagree: pass one number of labels "
                             "(d2)")
    return int(given[0][1]), given[0][0]


def signed_bits(Y, rows, columns) -> np.ndarray:
    """``y = 2 Y[rows, columns] - 1`` (float64) of a CSR 0/1 matrix, ``(0,)`` for no pairs
    (scipy indexes an empty pair list as a matrix)."""
    if len(rows) == 0:
        return np.zeros(0)
    return 2.0 * np.asarray(Y[rows, columns]).ravel().astype(np.float64) - 1.0


def drawn_pairs(n: int, d2: int, m: int, rng: np.random.Generator):
    """``(rows, labels)``: ``m`` pairs ``(i, j)`` drawn uniformly from the ``n x d2`` grid
    with ``rng`` (the rows first, then the labels: ``partial_fit``'s draws)."""
    rows = rng.integers(0, n, size=m, dtype=np.int64)
    labels = rng.integers(0, d2, size=m, dtype=np.int64)
    return rows, labels


def uniform_batch(X, Y, m: int, rng: np.random.Generator):
    """``(X[rows], labels, y)``: ``m`` pairs ``(i, j)`` drawn uniformly from the ``n x d2``
    grid of the label matrix ``Y`` (CSR, :func:`check_label_matrix`) with ``rng``
    (:func:`drawn_pairs`), their rows gathered, and ``y = 2 Y_ij - 1`` (float64)."""
    rows, labels = drawn_pairs(Y.shape[0], Y.shape[1], m, rng)
    return X[rows], labels, signed_bits(Y, rows, labels)


def check_learnable(X, Y, where: str = "X, Y", has_feature: bool | None = None) -> None:
    """Refuse a training set with nothing to learn: no instance with a label (``Y`` has no
    1), or no instance with a feature (``X`` all zeros; ``has_feature``: whether it has
    one, when the caller knows). Single empty rows are allowed."""
    if Y.nnz == 0:
        raise ValueError(f"{where}: no instance has a label (the label matrix holds no 1): "
                         "there is nothing to learn; check the file or the labels' coding")
    if has_feature is None:
        has_feature = X.nnz > 0 if scipy.sparse.issparse(X) else bool(np.any(X))
    if not has_feature:
        raise ValueError(f"{where}: no instance has a feature (every feature is 0): there is "
                         "nothing to learn from")


class LabelMatrixShard(NamedTuple):
    """Block ``s`` of batch ``t``: ``n_obs`` pairs of the labels ``[lo, hi)``; ``X`` and
    ``Y`` (the block's ``n x (hi - lo)`` columns, CSR) are arrays or, on Dask, futures of
    the workers' copies (a task receives them as arrays). The pairs are drawn uniformly
    from the seeds, or are ``chosen``: ``(rows, labels)`` a query policy picked
    (:mod:`onebit_dask.data.queries`)."""

    seed: int
    t: int
    s: int
    n_obs: int
    lo: int
    hi: int
    X: object
    Y: object
    chosen: tuple | None = None

    kind = ShardKind.LABEL_BLOCK

    def pairs(self):
        """``(rows, labels, y)`` of the block's pairs: rows of ``X``, labels in ``[lo, hi)``,
        ``y = 2 Y_ij - 1`` (float64)."""
        if self.chosen is None:
            rows, labels = uniform_pairs(self.seed, self.t, self.s, self.X.shape[0],
                                         self.n_obs, self.lo, self.hi)
        else:
            rows, labels = self.chosen
        return rows, labels, signed_bits(self.Y, rows, labels - self.lo)

    def load(self):
        """``(X, labels, y)`` of the block's pairs (:meth:`pairs`, their rows gathered)."""
        rows, labels, y = self.pairs()
        return self.X[rows], labels, y

    def bits(self):
        """``(X, labels, y, at)`` of the block's pairs, each row of ``X`` read once where
        the pairs outnumber the rows (:func:`~onebit_dask.data.shards.rows_of_bits`)."""
        rows, labels, y = self.pairs()
        X, at = rows_of_bits(self.X, rows)
        return X, labels, y, at

    def activate(self, model, B_rows, b_rows=None):
        """``(ActiveRows, n_active)`` of the block's pairs (:meth:`bits`)."""
        return block_activation(self.bits(), model, B_rows, self.lo, self.hi, b_rows)

    def scored(self, model, B_rows):
        """``(labels, y, s)``: the block's pairs scored by the model without thresholds
        (:func:`~onebit_dask.data.shards.block_scores`)."""
        return block_scores(self.bits(), model, B_rows, self.lo, self.hi)


class LabelMatrixSource(BaseSource):
    """A label matrix ``Y`` of ``n`` instances ``X`` (module docstring).

    Parameters
    ----------
    X : ndarray of shape (n, d1), scipy.sparse CSR matrix or ChunkedRows
        Checked features (float32 or float64); a dask array's row chunks
        (:class:`~onebit_dask.data.chunked_rows.ChunkedRows`) are read where the shards
        run, never joined here.
    Y : scipy.sparse CSR matrix of shape (n, d2)
        0/1 labels (:func:`check_label_matrix`).
    seed : int
        Seed of the batches, in ``[0, 2**32 - 1]``.
    """

    queryable = True  # a query policy may choose its pairs (chosen_batch)
    uniform_rows = True  # uniform pairs: rows drawn uniformly (docs/ALGORITHM.md 9f)

    def __init__(self, X, Y, seed: int, shared=None):
        self.X, self.Y, self.seed = X, Y, int(seed)
        self.n, self.d1 = X.shape
        self.d2 = Y.shape[1]
        self._shared = shared  # (X, {(lo, hi): Y columns}) as the engine holds them

    @property
    def row_numbers(self) -> float:
        """Stored entries a row of ``X``: ``nnz / n`` for sparse ``X``, else ``d1``."""
        return self.X.nnz / max(self.n, 1) if scipy.sparse.issparse(self.X) else float(self.d1)

    def place(self, engine, bounds) -> "LabelMatrixSource":
        """This source with ``X`` and each label block's columns of ``Y`` shared once
        with ``engine`` (features in row chunks, a dask array's, by
        ``engine.share_rows``: on Dask the workers compute the chunks)."""
        blocks = {(lo, hi): engine.share(self.Y[:, lo:hi]) for lo, hi in zip(bounds[:-1],
                                                                          bounds[1:])}
        X = (engine.share_rows(self.X) if isinstance(self.X, ChunkedRows)
             else engine.share(self.X))
        return LabelMatrixSource(self.X, self.Y, self.seed, (X, blocks))

    def unplace(self, engine) -> None:
        """Forget what :meth:`place` shared with ``engine`` (``engine.unshare``: a
        ``partial_fit`` batch, shared for one step, leaves the cluster once its tasks
        ended)."""
        if self._shared is not None:
            for value in (self._shared[0], *self._shared[1].values()):
                engine.unshare(value)

    def _data(self):
        """``(X, columns(lo, hi))`` as the shards read them (the engine's copies once
        placed)."""
        if self._shared is None:
            return self.X, lambda lo, hi: self.Y[:, lo:hi]
        return self._shared[0], lambda lo, hi: self._shared[1][(lo, hi)]

    def batch(self, t: int, batch_size: int, n_shards: int) -> list[LabelMatrixShard]:
        X, columns = self._data()
        return [LabelMatrixShard(self.seed, t, s, n_obs, lo, hi, X, columns(lo, hi))
                for t, s, n_obs, lo, hi in label_blocks(self, t, batch_size, n_shards)]

    def chosen_batch(self, t: int, rows, labels, bounds) -> list[LabelMatrixShard]:
        """Batch ``t`` of the given pairs ``(rows, labels)``, one shard per label block
        ``[bounds[s], bounds[s + 1])`` of the model (each block's pairs in the given
        order)."""
        X, columns = self._data()
        shards = []
        for s, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
            at = np.flatnonzero((labels >= lo) & (labels < hi))
            shards.append(LabelMatrixShard(self.seed, t, s, at.size, lo, hi, X, columns(lo, hi),
                                           (rows[at], labels[at])))
        return shards

    def bits_at(self, rows, labels) -> np.ndarray:
        """``y = 2 Y_ij - 1`` (float64) of the pairs ``(rows, labels)``, read here."""
        return signed_bits(self.Y, rows, labels)

    def uniform_pairs(self, t: int, batch_size: int, n_shards: int):
        """``(rows, labels)`` of batch ``t``'s uniform pairs (:meth:`batch`'s), drawn here."""
        drawn = [uniform_pairs(self.seed, t, s, self.n, n_obs, lo, hi)
                 for t, s, n_obs, lo, hi in label_blocks(self, t, batch_size, n_shards)]
        return (np.concatenate([r for r, _ in drawn]), np.concatenate([j for _, j in drawn]))

    def identity(self) -> dict:
        """Shape, dtype, ``d2``, the seed and a SHA-256 of all of ``X`` and ``Y``."""
        return {"kind": "label_matrix", "shape": [self.n, self.d1], "dtype": str(self.X.dtype),
                "n_labels": int(self.d2), "seed": self.seed,
                "sha256": content_digest(self.X, (self.Y.indptr, self.Y.indices))}

    def features(self):
        """Every instance's row. Features in row chunks (a dask array's) as
        :class:`~onebit_dask.ops.features.RowChunks` of the rows the feature map reads
        of an array (:data:`~onebit_dask.ops.features.CHUNK_BYTES` of float64 a piece):
        its per-feature sums computed by dask where the chunks are
        (:func:`~onebit_dask.data.dask_inputs.per_piece`), the pieces read here one at a
        time only to whiten."""
        if not isinstance(self.X, ChunkedRows):
            return self.X
        from ..ops.features import CHUNK_BYTES, RowChunks
        from .dask_inputs import per_piece

        X, step = self.X, max(1, CHUNK_BYTES // (8 * max(1, self.d1)))
        return RowChunks(self.n, self.d1, lambda lo, hi: X[lo:hi], step, per_piece(X, step))

    def propensities(self) -> np.ndarray:
        """Propensities of the training labels (Jain et al. 2016, ``A = 0.55, B = 1.5``)."""
        from ..metrics import ranking

        return ranking.propensities(self.Y)
