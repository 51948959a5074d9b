r"""The link of ``predict_proba``, fitted at the end of a fit on bits it did not train on.

``OneBitMultiLabel.predict_proba`` gives ``P(y_ij = +1) = Phi(alpha x_i^T w_j + beta b_j)``
(:mod:`onebit_dask.ops.calibration`, docs/ALGORITHM.md section 12). After the last step
(and after the validation bits took back the best iterate) each label block scores a set
of held-out bits with the model's final factors, ``u_i = phi(x_i)^T A B_{j_i}`` and its
threshold ``b_{j_i}``, and the client fits ``(alpha, beta)`` to their bits by maximum
likelihood.

The bits are the validation bits where the fit has them (``validation_fraction``);
otherwise up to :data:`CALIBRATION_BITS` bits of batch ``n_iter + 1``, the batch after the
last training batch (:func:`held_out_pieces`): a planted problem's explicit draws, fresh;
a label matrix's uniform pairs; given rows (arrays, observation stores) after the
training rows, which cycle back to training bits when the data hold fewer than
``n_iter + 2`` batches.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..data.synthetic.problem import SyntheticProblem
from ..engine.blocks import Block
from ..ops.calibration import fit_link
from ..ops.features import project
from ..ops.kernels import one_blas_thread

CALIBRATION_BITS = 65_536  # held-out bits the link is fitted on at most
CALIBRATION_NUMBERS = 2 ** 24  # and at most this many feature numbers drawn (d1 a bit)
CHUNK_ROWS = 1024  # rows projected at a time


def bit_scores(block: Block, piece) -> Block:
    """``out = (u, b, y)`` for the block's bits: ``piece = ((labels, y), XA_rows)`` as
    :func:`~onebit_dask.fit.validation.validation_sums` takes it; ``b`` is 0 without
    thresholds."""
    (labels, y), XA_rows = piece
    at = labels - block.lo
    u = np.einsum("ij,ij->i", XA_rows, block.slots["B"][at])
    b = block.slots["b"][at] if "b" in block.slots else np.zeros_like(u)
    return block.evolve(out=(u, b, y))


def held_out_pieces(source, settings, state) -> list:
    """Each block's ``((labels, y), rows of phi(X) A)`` for the bits of batch ``n_iter + 1``
    of ``source`` (the fit's, before it was placed on the engine), read one shard at a
    time: at most :data:`CALIBRATION_BITS` bits and :data:`CALIBRATION_NUMBERS` feature
    numbers; a source of fresh batches (a planted problem, a label matrix) draws that
    many, one of given rows keeps the first share of each shard of the batch."""
    t, size = settings.n_iter + 1, settings.batch_size
    wanted = min(size, CALIBRATION_BITS, max(1024, CALIBRATION_NUMBERS // state.d1))
    problem = source.planted
    if isinstance(problem, SyntheticProblem):
        shards = problem.batch(t, wanted, settings.n_shards, sampler="explicit")
    elif source.n_batches(size) is None:
        shards = source.batch(t, wanted, settings.n_shards)
    else:
        shards = source.batch(t, size, settings.n_shards)
    share = min(1.0, wanted / sum(shard.n_obs for shard in shards))
    parts = []
    for shard in shards:
        X, labels, y = shard.load()
        keep = math.ceil(share * labels.shape[0])
        with one_blas_thread():  # in row chunks: no float64 copy of a float32 shard
            XA = np.concatenate([np.empty((0, state.width))] + [
                project(X[i:min(i + CHUNK_ROWS, keep)], state.top.Q, state.feature_map)
                for i in range(0, keep, CHUNK_ROWS)])
        parts.append((XA, np.asarray(labels[:keep], dtype=np.int64),
                      np.where(np.asarray(y[:keep]) > 0, 1, -1)))
    XA, labels, y = (np.concatenate(p) for p in zip(*parts))
    bounds = state.bounds
    rows = [np.flatnonzero((labels >= lo) & (labels < hi))
            for lo, hi in zip(bounds[:-1], bounds[1:])]
    return [((labels[r], y[r]), XA[r]) for r in rows]


def calibrate(state, engine, pieces) -> None:
    """Fit ``state.calibration = [alpha, beta]`` on the bits of ``pieces`` (each block's,
    :func:`held_out_pieces` or :meth:`ValidationBits.pieces
    <onebit_dask.fit.validation.ValidationBits.pieces>`) with the blocks' current model;
    its time counts as training time."""
    start = time.perf_counter()
    outs = engine.map(bit_scores, per_block=pieces)
    u, b, y = (np.concatenate(parts) for parts in zip(*outs))
    link, _ = fit_link(u, b, y)
    state.calibration = [float(v) for v in link]
    state.fit_s += time.perf_counter() - start
