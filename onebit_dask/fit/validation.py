r"""A validation split of the bits, and the best iterate it selects.

``OneBitMultiLabel(validation_fraction=f)`` draws, once, a fixed set of one-bit
observations ``(x_i, j_i, y_i)`` from the fit's own source: the first ``ceil(f n_s)``
observations of each shard ``s`` of batch ``n_iter + 1``, the batch after the last
training batch (a planted problem's explicit draws from its seed stream for that batch;
in-memory observations and stores: the rows that follow the training rows, cycling as
batches do). No training batch changes, so a fit whose last iterate is its best returns
exactly the fit without validation.

After the initial batch and after every step, each label block scores the validation
bits of its own labels, ``s_i = x_i^T A b_{j_i} + b_{j_i 0}``, and returns four numbers
(:func:`~onebit_dask.metrics.label_auc_sums`); the client adds them up over the blocks.
The score is the **macro AUC of the validation bits**, the mean over the labels with both
classes among them of each label's Mann-Whitney AUC,

.. math::

    \mathrm{AUC}_j = U_j / (P_j N_j), \qquad
    U_j = \#\{(i, i') : j_i = j_{i'} = j,\ y_i = 1,\ y_{i'} = -1,\ s_i > s_{i'}\}
          + \tfrac12 \#\{\ldots s_i = s_{i'}\},

``P_j, N_j`` the label's positive and negative validation bits: the held-out metric it
stands for (macro AUC), invariant to a label's threshold and scale. Also recorded, the
labels' AUCs weighted by their pairs, ``sum_j U_j / sum_j P_j N_j``
(``validation_pairs_auc``): it is less noisy but follows the frequent labels, and on
real data it kept iterates whose steps had helped the frequent labels and hurt the
rare ones (docs/ALGORITHM.md section 9b). Accuracy is useless with rare labels
(predicting every bit negative scores ``1 - p``), and an AUC pooled over all labels'
bits rewards the thresholds' ordering of labels, not the model of each.

When the score improves, each block copies its per-label state (``Q``, ``V``, ``B`` and
the thresholded model's ``b``, ``p``, ``v``) into ``best_*`` slots, and the client keeps
the small top state. At the end of the fit the blocks take back the best state and drop
the copies. The copies double a block's memory during the fit.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse

from ..engine import blocks
from ..engine.blocks import Block
from ..ops.features import project
from ..ops.kernels import one_blas_thread
from ..metrics.planted import label_auc_sums
from ..data.synthetic.problem import SyntheticProblem

BEST = "best_"
"""Prefix of the slots that hold the best iterate's per-label state during a fit."""


# -- block functions (run where the blocks live, through engine.map) ------------------------
def projections(block: Block, labels, XA_rows):
    """``(u, b)`` of bits of the block's ``labels`` (global) whose rows are ``XA_rows``
    (``x_i^T A``): ``u_i = x_i^T A B_{j_i}`` and the threshold ``b_{j_i}`` (0 without
    thresholds)."""
    at = labels - block.lo
    u = np.einsum("ij,ij->i", XA_rows, block.slots["B"][at])
    return u, block.slots["b"][at] if "b" in block.slots else np.zeros_like(u)


def validation_sums(block: Block, piece) -> Block:
    """``out`` = :func:`~onebit_dask.metrics.label_auc_sums` of the block's validation
    bits: ``piece = ((labels, y), XA_rows)``, global labels in the block and their rows
    ``x_i^T A``."""
    (labels, y), XA_rows = piece
    u, b = projections(block, labels, XA_rows)
    return block.evolve(out=label_auc_sums(labels, y, u + b))


# -- the client's side ------------------------------------------------------------------
def check_fraction(value, n_iter: int, source, batch_size: int) -> None:
    """Refuse, before any work, a ``validation_fraction`` whose bits the data cannot give:
    a source holding fewer than ``n_iter + 2`` batches (the validation bits come from
    batch ``n_iter + 1``, after the training batches)."""
    held = source.n_batches(batch_size)
    if value is not None and held is not None and held < n_iter + 2:
        raise ValueError(
            f"validation_fraction={value!r} is not allowed with these data: they hold "
            f"{held} batches of batch_size={batch_size}, and the validation bits come from "
            f"batch n_iter + 1 = {n_iter + 1} (after the {n_iter + 1} training batches); "
            "pass more observations, a smaller batch_size or n_iter, or "
            "validation_fraction=None")


class ValidationBits:
    """The validation bits of a fit and the best iterate they select.

    Parameters
    ----------
    source : Source
        The fit's source as given, not placed on the engine: the bits are read here
        (:mod:`onebit_dask.data.source`).
    t : int
        The batch the bits come from (``n_iter + 1``).
    batch_size, n_shards : int
        As the fit draws its batches.
    fraction : float in (0, 1]
        Share of each shard's observations kept.
    """

    def __init__(self, source, t: int, batch_size: int, n_shards: int, fraction: float):
        problem = source.planted
        shards = (problem.batch(t, batch_size, n_shards, sampler="explicit")
                  if isinstance(problem, SyntheticProblem)
                  else source.batch(t, batch_size, n_shards))
        parts = []
        for shard in shards:
            X, labels, y = shard.load()
            keep = math.ceil(fraction * labels.shape[0])
            parts.append((X[:keep], np.asarray(labels[:keep], dtype=np.int64),
                          np.where(np.asarray(y[:keep]) > 0, 1, -1)))
        self.X = _stack([p[0] for p in parts])
        self.labels = np.concatenate([p[1] for p in parts])
        self.y = np.concatenate([p[2] for p in parts])
        self.best = (-np.inf, -1, None, None)  # (score, iteration, top state, feature map)

    def place(self, engine, bounds) -> None:
        """Share each block's ``(labels, y)`` with ``engine`` once."""
        self._rows = [np.flatnonzero((self.labels >= lo) & (self.labels < hi))
                      for lo, hi in zip(bounds[:-1], bounds[1:])]
        self._bits = [engine.share((self.labels[r], self.y[r])) for r in self._rows]

    def pieces(self, A, feature_map=None) -> list:
        """Each block's ``((labels, y), rows of phi(X) A)``: what its tasks score the bits
        with (after :meth:`place`)."""
        with one_blas_thread():
            XA = project(self.X, A, feature_map)
        return [(bits, XA[r]) for bits, r in zip(self._bits, self._rows)]

    def update(self, engine, A, top, iteration: int, feature_map=None) -> dict:
        """Score the current iterate (factor ``A``, client state ``top``; scores on
        ``phi(X)`` with a :class:`~onebit_dask.features.FeatureMap`); keep it, with its
        map (a pooled step re-estimates the ridge map), when it beats the best so far
        (ties keep the earlier). Returns ``validation_auc`` (the
        macro AUC of the validation bits, the score) and ``validation_pairs_auc`` for the
        history."""
        outs = engine.map(validation_sums, per_block=self.pieces(A, feature_map))
        U, pairs, macro, n_labels = np.sum(outs, axis=0)
        score = macro / n_labels if n_labels else float("nan")
        if self.best[1] < 0 or score > self.best[0]:  # NaN: no pairs, keep the first
            engine.map(blocks.copy_state, BEST)
            self.best = (score, iteration, top, feature_map)
        return {"validation_auc": float(score),
                "validation_pairs_auc": float(U / pairs) if pairs > 0 else float("nan")}

    def finish(self, engine, last: int):
        """Put the best iterate back in the blocks (unless it is the last) and drop the
        copies; returns ``(best iteration, its top state and feature map, or None if it
        is the last)``."""
        _, iteration, top, feature_map = self.best
        engine.map(blocks.settle, BEST, iteration != last)
        return iteration, (None if iteration == last else (top, feature_map))


def _stack(blocks):
    """The shards' feature rows, one array (CSR stays CSR)."""
    if scipy.sparse.issparse(blocks[0]):
        return scipy.sparse.vstack(blocks, format="csr")
    return np.concatenate(blocks)
