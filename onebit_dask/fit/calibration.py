r"""The link of ``predict_proba``, fitted at the end of a fit on bits it did not train on.

``OneBitMultiLabel.predict_proba`` gives ``P(y_ij = +1) = Phi(alpha x_i^T w_j + beta b_j)``
(:mod:`onebit_dask.ops.calibration`, docs/ALGORITHM.md section 12). After the last step
(and after the validation bits took back the best iterate) each label block scores a set
of held-out bits with the model's final factors, ``u_i = phi(x_i)^T A B_{j_i}`` and its
threshold ``b_{j_i}``, and the client fits ``(alpha, beta)`` to their bits by maximum
likelihood.

The bits are the validation bits where the fit has them (``validation_fraction``);
otherwise batch ``n_iter + 1``, the batch after the last training batch
(:func:`held_out_batch`), read and scored by the blocks as a training batch is (the
client gets three numbers a bit): a planted problem's explicit draws, fresh (at most
:data:`CALIBRATION_NUMBERS` feature numbers); a label matrix's uniform pairs; given rows
(arrays, observation stores) after the training rows, which cycle back to training bits
when the data hold fewer than ``n_iter + 2`` batches.
"""

from __future__ import annotations

import time

import numpy as np

from ..data.synthetic.problem import SyntheticProblem
from ..engine.blocks import Block, StepModel
from ..ops.calibration import fit_link
from ..ops.kernels import one_blas_thread

CALIBRATION_NUMBERS = 2 ** 24  # feature numbers a planted problem's explicit draw holds


def bit_projections(block: Block, data, model: StepModel) -> Block:
    """``out = (u, b, y)`` for the block's bits of a batch: ``u_i = phi(x_i)^T A B_{j_i}``
    (the scores without the thresholds, as :func:`~onebit_dask.engine.blocks.bit_auc`
    takes them: ``data.scored(model, B)``), ``b_{j_i}`` (0 without thresholds) and the
    bits."""
    labels, y, u = data.scored(model, block.slots["B"])
    b = block.slots["b"][labels - block.lo] if "b" in block.slots else np.zeros_like(u)
    return block.evolve(out=(u, b, y))


def validation_projections(block: Block, piece) -> Block:
    """:func:`bit_projections` for the validation bits: ``piece = ((labels, y), XA_rows)``
    as :func:`~onebit_dask.fit.validation.validation_sums` takes it."""
    (labels, y), XA_rows = piece
    at = labels - block.lo
    u = np.einsum("ij,ij->i", XA_rows, block.slots["B"][at])
    b = block.slots["b"][at] if "b" in block.slots else np.zeros_like(u)
    return block.evolve(out=(u, b, y))


def held_out_batch(source, settings, d1: int) -> list:
    """The shards of batch ``n_iter + 1`` of ``source`` (placed on the engine), the batch
    after the last training batch: a planted problem's explicit draws of at most
    ``batch_size`` and :data:`CALIBRATION_NUMBERS` ``/ d1`` bits (at least 1024), a data
    source's batch as a training batch would be."""
    t, size = settings.n_iter + 1, settings.batch_size
    problem = source.planted
    if isinstance(problem, SyntheticProblem):
        wanted = min(size, max(1024, CALIBRATION_NUMBERS // d1))
        return problem.batch(t, wanted, settings.n_shards, sampler="explicit")
    return source.batch(t, size, settings.n_shards)


def calibrate(state, engine, shards=None, validation=None, features=None) -> None:
    """Fit ``state.calibration = [alpha, beta]`` with the blocks' current model on the bits
    of ``shards`` (:func:`held_out_batch`), read and scored where the blocks live as a
    training batch is, or on the ``validation`` bits
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
            outs = engine.map(bit_projections, model,
                              per_block=engine.by_block(data, model, scored=True))
    u, b, y = (np.concatenate(parts) for parts in zip(*outs))
    link, _ = fit_link(u, b, y)
    state.calibration = [float(v) for v in link]
    state.fit_s += time.perf_counter() - start
