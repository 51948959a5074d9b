r"""What a fit records about its model at an evaluated iteration (``history_``): the
planted truth's metrics and the ranking metrics of held-out data, each from the pieces the
label blocks compute where they live.

* The planted problem (:func:`planted_evaluations`, :func:`planted_metrics`): each block
  returns the Gram matrix and the rows of the test labels it owns
  (:func:`onebit_dask.engine.blocks.evaluation_pieces`); the client adds them in block
  order and computes the errors (:mod:`onebit_dask.metrics.planted`).
* Held-out data ``(X_test, Y_test)`` (:class:`HeldOut`): each label block scores the test
  rows on its own labels, ``X_test A b_j + b_j0``
  (:func:`onebit_dask.engine.blocks.ranking_pieces`), and returns its labels' ROC AUCs and,
  per row, its ``K`` best labels; the client merges the candidates
  (:func:`~onebit_dask.engine.topk.best_k`) and computes, from the top ``K`` labels of each
  row, precision@k, nDCG@k and (with the training labels' propensities)
  propensity-scored precision@k (:mod:`onebit_dask.metrics.ranking`). Nothing of size
  ``n_test x d2`` is formed on the client.

The bits that choose among iterates are elsewhere: the validation bits
(:mod:`.validation`), progressive validation (:mod:`.select`) and the link's held-out
bits (:mod:`.calibration`).
"""

from __future__ import annotations

import os

import numpy as np

from ..utils.validation import check_features
from ..engine import blocks as B
from ..engine import topk
from ..metrics.names import RANKING_KS
from ..data.chunked_rows import ChunkedRows
from ..data.dask_inputs import (check_dask_shape, chunked_features, gathered_labels,
                                gathered_sparse, has_sparse_chunks, is_dask_array)
from ..data.label_matrix import check_label_matrix
from ..metrics import planted as metrics

TOP_K = max(RANKING_KS)  # precision, nDCG and PSP at each k of RANKING_KS


def planted_evaluations(problem, labels, bounds) -> list:
    """One :class:`~onebit_dask.engine.blocks.Evaluation` per label block: the evaluated
    ``labels`` it owns."""
    truth = problem.planted()
    return [B.Evaluation(truth, labels[(labels >= lo) & (labels < hi)])
            for lo, hi in zip(bounds[:-1], bounds[1:])]


def planted_metrics(problem, test_set, A, d2: int, outs) -> dict:
    """The test metrics from the blocks' evaluation pieces (``[gram, B rows, b rows]``
    each)."""
    gram = sum(o[0] for o in outs)
    B_eval = np.concatenate([o[1] for o in outs])
    b_eval = None if outs[0][2] is None else np.concatenate([o[2] for o in outs])
    return metrics.evaluate_factored(test_set, problem.truth_rows(0, 0)[0], A, gram, B_eval,
                                     d2, b_eval=b_eval)


def read_test_data(path, d1: int, d2: int, *, name: str, training: str):
    """``(X_test, Y_test)`` of the data file (XC or svmlight format) or CSR store at
    ``path``, whole, after checking that its declared sizes (a file's header, a store's
    attributes) are the training data's ``d1`` features and ``d2`` labels.

    Parameters
    ----------
    path : str or os.PathLike
    d1, d2 : int
        The training data's features and labels.
    name, training : str
        What the caller calls the test and the training data, in the messages (the
        command line: ``"--test-data"``, ``"--data 'train.txt'"``).

    Returns
    -------
    X_test : scipy.sparse.csr_matrix of shape (n, d1)
    Y_test : scipy.sparse.csr_matrix of int8 of shape (n, d2)
    """
    from ..io.csr_store import is_csr_store, load, open_csr_store
    from ..io.xc import read_header

    path = os.fspath(path)
    if os.path.isdir(path):
        if not is_csr_store(path):
            raise ValueError(f"{name} {path!r} is a directory but not a CSR store: give a "
                             "data file (XC or svmlight format) or a CSR store")
        store = open_csr_store(path)
        declared, where = (store.d1, store.d2), "the store's attributes"
    elif os.path.isfile(path):
        header = read_header(path)
        declared, where = (None if header is None else header[1:]), "its header"
    else:
        raise FileNotFoundError(f"{name} {path!r} does not exist: give a data file (XC or "
                                "svmlight format) or a CSR store")
    if declared is not None and tuple(declared) != (d1, d2):
        raise ValueError(f"{name} {path!r} has {declared[0]} features and {declared[1]} "
                         f"labels ({where}), but {training} has {d1} features and {d2} "
                         "labels: give test data with the training data's features and labels")
    return load(path, n_features=d1, n_labels=d2)


class HeldOut:
    """A held-out set: features ``X_test`` (dense or CSR, ``d1`` columns) and its 0/1
    label matrix ``Y_test`` (``d2`` columns).

    A dask array ``X_test`` (dense chunks) is checked and read a row chunk at a time
    (:func:`~onebit_dask.data.dask_inputs.chunked_features`): each evaluation computes
    its chunks in turn for the ``n_test x l`` products, never the array whole; a dask
    ``Y_test``, and a dask ``X_test`` of sparse chunks, are gathered into a CSR matrix a
    row chunk at a time (:func:`~onebit_dask.data.dask_inputs.gathered_sparse`).

    Parameters
    ----------
    eval_set : tuple ``(X_test, Y_test)``
    d1, d2 : int
        The training data's features and labels.
    """

    def __init__(self, eval_set, d1: int, d2: int):
        if not isinstance(eval_set, (tuple, list)) or len(eval_set) != 2:
            raise TypeError(f"eval_set={type(eval_set).__name__} is not allowed: pass a pair "
                            "(X_test, Y_test) of features and a 0/1 label matrix")
        X, Y = eval_set
        if is_dask_array(X) and has_sparse_chunks(X):  # the sparse path's CSR matrix
            check_dask_shape(X, name="eval_set X_test")
            self.X = check_features(gathered_sparse(X, name="eval_set X_test"), n_features=d1,
                                    name="eval_set X_test")
        elif is_dask_array(X):
            self.X, _ = chunked_features(X, name="eval_set X_test")
            if self.X.shape[1] != d1:
                raise ValueError(f"eval_set X_test has {self.X.shape[1]} features, but the "
                                 f"training data have {d1}: pass test features of {d1} "
                                 "columns")
        else:
            self.X = check_features(X, n_features=d1, name="eval_set X_test")
        if is_dask_array(Y):
            Y = gathered_labels(Y, name="eval_set Y_test")
        self.Y = check_label_matrix(Y, self.X.shape[0], name="eval_set Y_test")
        if self.Y.shape[1] != d2:
            raise ValueError(f"eval_set Y_test has {self.Y.shape[1]} labels, but the training "
                             f"data have {d2}: pass a test label matrix of {d2} columns")
        self._blocks = None

    def place(self, engine, bounds) -> None:
        """Share each label block's columns of ``Y_test`` with ``engine`` once."""
        self._blocks = [engine.share(self.Y[:, lo:hi]) for lo, hi in zip(bounds[:-1],
                                                                        bounds[1:])]

    def metrics(self, engine, A, propensities=None, feature_map=None) -> dict:
        """``auc`` (macro over the labels with both classes in the test set),
        ``precision_at_k``, ``ndcg_at_k`` and, with ``propensities``, ``psp_at_k`` for
        ``k = 1, 3, 5``, of the blocks on ``engine`` with the features' factor ``A``
        (on ``phi(X_test)`` with a :class:`~onebit_dask.features.FeatureMap`)."""
        from ..metrics import ranking

        def product(X):
            return np.asarray(X @ A) if feature_map is None else feature_map.product(X, A)

        if isinstance(self.X, ChunkedRows):  # a dask X_test: a chunk at a time
            XA = np.vstack([product(self.X.chunk(k)) for k in range(len(self.X.chunks))])
        else:
            XA = product(self.X)
        k = min(TOP_K, self.Y.shape[1])
        outs = engine.map(B.ranking_pieces, XA, k, per_block=self._blocks)
        aucs = np.concatenate([o[0] for o in outs])
        top, _ = topk.best_k(np.hstack([o[1] for o in outs]), np.hstack([o[2] for o in outs]), k)
        scores = {"auc": float(np.nanmean(aucs)) if np.isfinite(aucs).any() else float("nan")}
        ks = tuple(j for j in RANKING_KS if j <= k)  # d2 < 5: the k that exist
        scores.update(ranking.top_k_metrics(self.Y, top, propensities, ks=ks))
        return scores
