r"""Algorithm 1 in factored form (``docs/ALGORITHM.md``), driven from the client over
label blocks.

The state is ``Q = [Q_top; Q_1; ...; Q_S]`` (orthonormal, ``(d1 + d2) x l``,
``l = 2k``) and ``V = M_dil Q``: the client holds the ``d1 x l`` tops and the
engine's blocks hold the label rows (:mod:`onebit_dask.engine.blocks`). With
``c = d2 / (m lambda)`` and ``M = W + eta H``, a step is

.. math::

    Y = M_{dil} Q, \quad Q' = \mathrm{cholqr2}(Y), \quad V' = M_{dil} Q',

in three rounds over the blocks: (1) draw and activate the batch, ``Y_s`` and the
reductions of ``Y_top`` and ``G_1 = Y^T Y``; (2) ``Y_s R_1^{-1}`` and its Gram ``G_2``;
(3) ``Q'_s = Y_s R_1^{-1} R_2^{-1}``, ``V'_s``, ``B'_s = V'_s / n`` and the reductions
of ``V'_top``. The client only ever holds ``d1 x l`` and ``l x l`` numbers, and adds
the blocks' results in block order.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.linalg

from ..ops import thresholds
from ..engine import blocks as B
from ..ops.kernels import add_label_rows, canonical_signs, scale_constant


class TopState(NamedTuple):
    """The client's share of the state: ``Q_top`` (``= A``) and ``V_top``."""

    Q: np.ndarray
    V: np.ndarray


def chol_inverse(G: np.ndarray, scale: float = 1.0) -> tuple[np.ndarray, bool]:
    r"""``(R^{-1}, shifted)`` with ``R = chol(G)`` upper triangular.

    When ``G`` is not numerically positive definite, ``G + s I`` with the shift of
    shifted Cholesky-QR, ``s = 11 (n l + l (l + 1)) u ||G||`` (Fukaya et al. 2020;
    ``n`` rows, ``u`` the unit round-off), and ``shifted=True``: one more pass is then
    needed for orthonormal columns.
    """
    eye = np.eye(G.shape[0])
    try:
        R = scipy.linalg.cholesky(G, lower=False)
        if np.all(np.isfinite(R)):
            return scipy.linalg.solve_triangular(R, eye, lower=False), False
    except np.linalg.LinAlgError:
        pass
    shift = 11 * (scale * G.shape[0] + G.shape[0] * (G.shape[0] + 1)) * np.finfo(float).eps
    R = scipy.linalg.cholesky(G + shift * max(np.linalg.norm(G, 2), 1e-300) * eye, lower=False)
    return scipy.linalg.solve_triangular(R, eye, lower=False), True


def _each(evaluation, n_blocks: int) -> list:
    """The blocks' evaluations: ``evaluation`` (one per block) or ``None`` for each."""
    return [None] * n_blocks if evaluation is None else evaluation


def _commit_evaluated(block, evaluation, gram_A):
    return B.commit(block, gram_A, evaluation)


def _sum(parts):
    """Sum in order (the reductions' fixed order)."""
    total = None
    for p in parts:
        total = p.copy() if total is None else total + p
    return total


def _combine(outs, A, scale):
    """``Z_top = scale * sum_s tops + A sum_s lows`` from ``(top, low, ...)`` results."""
    Z = _sum(o[0] for o in outs) * scale
    if A is not None:
        Z += A @ _sum(o[1] for o in outs)
    return Z


def cholqr2(engine, top, src: str, dst: str, grams, n_rows: int):
    """Orthonormalise the tall matrix ``[top; blocks' src]`` into ``dst`` by Cholesky-QR2
    (a third pass after a shifted first one); ``grams``: the blocks' ``src^T src``."""
    passes, done = 2, 0
    while done < passes:
        Rinv, shifted = chol_inverse(top.T @ top + _sum(grams), n_rows)
        passes += shifted and done == 0
        top = top @ Rinv
        grams = engine.map(B.transform, src, dst, Rinv, True)
        src, done = dst, done + 1
    return top


def product(engine, data_scale, P_top, src, dst, A=None, with_gram=False):
    """``Z = (W + c H)_dil P`` into ``dst`` (``A`` None: ``W = 0``); returns ``(Z_top, grams)``."""
    AtP = None if A is None else A.T @ P_top
    outs = engine.map(B.product, src, dst, P_top, AtP, data_scale, with_gram)
    return _combine(outs, A, data_scale), [o[2] for o in outs]


def initialise_dense(S: np.ndarray, n_obs: int, d1: int, d2: int, rank: int):
    r"""``Q0, V0`` from the dense ``H0 = c S^T`` (``S`` is ``d2 x d1``), by an exact SVD.

    ``Q0 = [[U_k, U_k], [V_k, -V_k]] / sqrt(2)`` and ``V0 = H0_dil Q0``, the singular
    pairs with :func:`~onebit_dask.kernels.canonical_signs` taken from ``U_k``.
    """
    H0 = scale_constant(d2, n_obs) * S.T
    U, _, Vt = scipy.linalg.svd(H0, full_matrices=False)
    signs = canonical_signs(U[:, :rank])
    U, V = U[:, :rank] * signs, Vt[:rank].T * signs
    Q0 = np.block([[U, U], [V, -V]]) / np.sqrt(2.0)
    return Q0, np.vstack([H0 @ Q0[d1:], H0.T @ Q0[:d1]])


def thresholds_prior(outs, model) -> thresholds.Prior:
    """The thresholds' prior from the blocks' share moments (flat for observed data:
    :func:`~onebit_dask.ops.thresholds.flat`)."""
    prior = thresholds.prior(outs)
    return thresholds.flat(prior) if model.observed else prior


def activate_initial(engine, data, model, n_obs: int, d2: int) -> None:
    """Attach the initial batch to the blocks (``model.pooled``: their pools); with
    thresholds, set them from the whole batch's bits and weight the rows of each label's
    positive and negative bits (:func:`B.finalize_init`)."""
    expected = n_obs / d2
    if model.pooled:  # the blocks' pools (data is None)
        outs = engine.map(B.activate_pool, model, expected)
    else:
        outs = engine.map(B.activate, model, expected, per_block=engine.by_block(data, model))
    if model.thresholds:
        engine.map(B.finalize_init, thresholds_prior([o[1:] for o in outs], model), expected,
                   model.observed, bool(model.found))


def init_dense(engine, data, model, n_obs, d1, d2, rank, bounds, evaluation):
    """Initialise from the exact SVD of the dense ``H0`` (``d1 x d2`` on the client)."""
    activate_initial(engine, data, model, n_obs, d2)
    S = add_label_rows(np.zeros((d2, d1)), engine.map(B.label_sums))
    Q0, V0 = initialise_dense(S, n_obs, d1, d2, rank)
    A = Q0[:d1]
    rows = [(Q0[d1 + lo: d1 + hi], V0[d1 + lo: d1 + hi], ev)
            for lo, hi, ev in zip(bounds[:-1], bounds[1:], _each(evaluation, len(bounds) - 1))]
    outs = engine.map(B.set_state, A.T @ A, per_block=rows)
    return TopState(A, V0[:d1]), outs


def init_randomized(engine, data, model, n_obs, d1, d2, rank, rng, n_power, evaluation,
                    oversampling: int = 4, start: TopState | None = None):
    r"""Initialise matrix-free: randomised subspace iteration on the dilation of ``H0``
    (``n_power`` products on ``2k + oversampling`` columns, then Rayleigh-Ritz), then
    ``Q0 = cholqr2([[U_k, U_k], [V_k, -V_k]])`` and ``V0 = H0_dil Q0``, the Ritz
    vectors with :func:`~onebit_dask.kernels.canonical_signs` taken from ``U_k``.

    ``start``: the iteration starts from the state's ``Q`` (its ``2k`` columns, the
    blocks' slot ``"Q"``) and ``oversampling`` random columns instead of ``2k +
    oversampling`` random ones (a warm start: ``step="pooled"``, docs/ALGORITHM.md
    section 9f)."""
    c = scale_constant(d2, n_obs)
    n = d1 + d2
    width = min(2 * rank + oversampling, n)
    activate_initial(engine, data, model, n_obs, d2)
    if start is None:
        top = rng.standard_normal((d1, width))
        engine.map(B.random_slot, "P", int(rng.integers(2**63)), width)
    else:
        extra = width - start.Q.shape[1]
        top = np.hstack([start.Q, rng.standard_normal((d1, extra))])
        engine.map(B.warm_slot, "P", int(rng.integers(2**63)), extra)
    grams = engine.map(B.cross, "P", "P")
    top = cholqr2(engine, top, "P", "P", grams, n)
    for _ in range(n_power):
        Z, grams = product(engine, c, top, "P", "Z", with_gram=True)
        top = cholqr2(engine, Z, "Z", "P", grams, n)
    Z, _ = product(engine, c, top, "P", "Z")
    T = top.T @ Z + _sum(engine.map(B.cross, "P", "Z"))
    theta, Zr = scipy.linalg.eigh((T + T.T) / 2)
    pick = Zr[:, np.argsort(theta)[::-1][:rank]]  # eigenvalue +sigma_i: [u_i; v_i] / sqrt(2)
    signs = canonical_signs(top @ pick)
    pick = pick * signs
    U = top @ pick
    both = np.hstack([np.eye(rank), -np.eye(rank)])
    grams = engine.map(B.transform, "P", "Y", pick @ both, True)
    Q_top = cholqr2(engine, np.hstack([U, U]), "Y", "Q", grams, n)
    V_top, _ = product(engine, c, Q_top, "Q", "V")
    outs = engine.map(_commit_evaluated, Q_top.T @ Q_top,
                      per_block=_each(evaluation, engine.n_blocks))
    return TopState(Q_top, V_top), outs


def step(engine, data, model, state: TopState, n_obs: int, d2: int, eta: float, evaluation,
         moment: bool = False):
    r"""One step ``Q' = cholqr2(M_dil Q)``, ``V' = M_dil Q'`` on one batch, in three rounds
    over the blocks. Returns the new tops, the observations' active count and the blocks'
    evaluation pieces.

    The residual step (``docs/ALGORITHM.md`` section 2) has ``M = W + eta H`` with the
    residuals' ``H``; a ``moment`` step (section 9c) ``M = (1 - eta) W + eta H_0``, the
    batch's initial estimate ``H_0`` (``model.A`` is ``None``: every row counts), whose
    low-rank part enters the products through ``(1 - eta) A``.
    """
    if moment and model.A is not None:
        raise ValueError("a moment step activates every row: pass a StepModel with A=None")
    A = (1.0 - eta) * state.Q if moment else state.Q  # W = A B^T with A = Q_top
    scale = eta * scale_constant(d2, n_obs)
    n_rows = A.shape[0] + d2
    outs = engine.map(B.step_open, model, state.Q, A.T @ state.Q, scale, n_obs / d2, eta,
                      moment, per_block=engine.by_block(data, model))
    prior = thresholds_prior([o[4:] for o in outs], model) if model.thresholds else None
    n_active = sum(o[0] for o in outs)
    Y_top = _combine([o[1:] for o in outs], A, scale)
    Rinv, shifted = chol_inverse(Y_top.T @ Y_top + _sum(o[3] for o in outs), n_rows)
    top = Y_top @ Rinv
    grams = engine.map(B.transform, "Y", "Y", Rinv, True)
    if shifted:  # shifted Cholesky-QR3: one pass more
        Rinv, _ = chol_inverse(top.T @ top + _sum(grams), n_rows)
        top = top @ Rinv
        grams = engine.map(B.transform, "Y", "Y", Rinv, True)
    Rinv, _ = chol_inverse(top.T @ top + _sum(grams), n_rows)
    Q_top = top @ Rinv
    outs = engine.map(B.step_close, Rinv, Q_top, A.T @ Q_top, scale, Q_top.T @ Q_top,
                      prior, moment,
                      per_block=_each(evaluation, engine.n_blocks))
    V_top = _combine(outs, A, scale)
    return TopState(Q_top, V_top), n_active, [o[2] for o in outs]
