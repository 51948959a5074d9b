r"""The link of ``predict_proba``, fitted at the end of a fit on the bits drawn after its
training batches.

``OneBitMultiLabel.predict_proba`` gives ``P(y_ij = +1) = Phi(alpha x_i^T w_j + beta b_j)``
(:mod:`onebit_dask.ops.calibration`, docs/ALGORITHM.md section 12). After the last step
(and after the validation bits took back the best iterate) each label block scores a set
of such bits with the model's final factors, ``u_i = phi(x_i)^T A B_{j_i}`` and its
threshold ``b_{j_i}``, and the client fits ``(alpha, beta)`` to their bits by maximum
likelihood.

The bits are the validation bits where the fit has them (``validation_fraction``);
otherwise batch ``n_iter + 1``, the batch after the last training batch
(:func:`held_out_batch`), read and scored by the blocks as a training batch is (the
client gets three numbers a bit, for at most :data:`CALIBRATION_BITS` bits): a planted
problem's explicit draws, fresh (at most :data:`CALIBRATION_NUMBERS` feature numbers); a
label matrix's uniform pairs, fresh draws of the same ``n x d2`` grid (on a small grid
many of them are pairs a training batch drew too); given rows (arrays, observation
stores) after the training rows, which cycle back to training bits when the data hold
fewer than ``n_iter + 2`` batches.
"""

from __future__ import annotations

import time

import numpy as np

from ..data.synthetic.problem import SyntheticProblem
from ..engine.blocks import Block, StepModel
from ..ops.calibration import fit_link
from ..ops.kernels import one_blas_thread
from .validation import projections

CALIBRATION_NUMBERS = 2 ** 24  # feature numbers a planted problem's explicit draw holds
CALIBRATION_BITS = 2 ** 18  # bits the client gathers (three numbers each) at most


def _spread(n: int, limit: int) -> np.ndarray:
    """At most ``limit`` of ``n`` positions, evenly spread (all of them for ``n <= limit``)."""
    return np.arange(0, n, -(-n // limit)) if n > limit else np.arange(n)


def bit_projections(block: Block, data, model: StepModel, limit: int) -> Block:
    """``out = (u, b, y)`` for at most ``limit`` of the block's bits of a batch, evenly
    spread: ``u_i = phi(x_i)^T A B_{j_i}`` (the scores without the thresholds, as
    :func:`~onebit_dask.engine.blocks.bit_auc` takes them: ``data.scored(model, B)``),
    ``b_{j_i}`` (0 without thresholds) and the bits."""
    labels, y, u = data.scored(model, block.slots["B"])
    kept = _spread(labels.size, limit)
    labels, y, u = labels[kept], y[kept], u[kept]
    b = block.slots["b"][labels - block.lo] if "b" in block.slots else np.zeros_like(u)
    return block.evolve(out=(u, b, y))


def validation_projections(block: Block, piece) -> Block:
    """:func:`bit_projections` for the validation bits: ``piece = ((labels, y), XA_rows)``
    as :func:`~onebit_dask.fit.validation.validation_sums` takes it."""
    (labels, y), XA_rows = piece
    return block.evolve(out=(*projections(block, labels, XA_rows), y))


def forget(block: Block) -> Block:
    """The block without its last result (the bits' numbers are not kept with the model)."""
    return block.evolve()


def held_out_batch(source, settings, d1: int) -> list:
    """The shards of batch ``n_iter + 1`` of ``source`` (placed on the engine), the batch
    after the last training batch: a planted problem's explicit draws of at most
    ``batch_size`` and ``CALIBRATION_NUMBERS / d1`` bits (its features are drawn), a
    data source's batch as a training batch would be."""
    t, size = settings.n_iter + 1, settings.batch_size
    problem = source.planted
    if isinstance(problem, SyntheticProblem):
        wanted = min(size, max(1, CALIBRATION_NUMBERS // d1))
        return problem.batch(t, wanted, settings.n_shards, sampler="explicit")
    return source.batch(t, size, settings.n_shards)


def calibrate(state, engine, shards=None, validation=None, features=None) -> None:
    """Fit ``state.calibration = [alpha, beta]`` with the blocks' current model on the bits
    of ``shards`` (:func:`held_out_batch`), read and scored where the blocks live as a
    training batch is, at most :data:`CALIBRATION_BITS` of them gathered (spread evenly
    over each block's), or on the ``validation`` bits
    (:class:`~onebit_dask.fit.validation.ValidationBits`); ``features``: the shared
    feature map. Its time counts as training time."""
    start = time.perf_counter()
    with one_blas_thread():
        if validation is not None:
            outs = engine.map(validation_projections,
                              per_block=validation.pieces(state.top.Q, state.feature_map))
        else:
            model = StepModel(state.top.Q, None, False, features)
            data = engine.prepare(shards, state.bounds)
            limit = -(-CALIBRATION_BITS // (len(state.bounds) - 1))
            outs = engine.map(bit_projections, model, limit,
                              per_block=engine.by_block(data, model, scored=True))
        engine.map(forget)
    u, b, y = (np.concatenate(parts) for parts in zip(*outs))
    link, _ = fit_link(u, b, y)
    state.calibration = [float(v) for v in link]
    state.fit_s += time.perf_counter() - start
