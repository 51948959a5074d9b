r"""Algorithm 1 in factored form (ALGORITHM.md sections 2-3), on any engine's batch.

A *batch* (see :mod:`onebit_dask.engine`) supplies ``apply(P)``, the sum over its
active observations of ``[w_i x_i P_bot[j_i]; e_{j_i} w_i x_i^T P_top]``. With
``c = d2 / (m lambda)`` the dilation of ``M = W + eta H`` applied to ``P`` is

.. math::

    M_{dil} P = c\,\eta\,\mathrm{apply}(P) + [A (B^T P_{bot});\; B (A^T P_{top})],

and nothing of size ``d1 x d2`` or ``(d1 + d2)^2`` is ever formed.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from .kernels import cholqr2, lowrank_apply, scale_constant


def dilation_product(batch, P, d2: int, eta: float = 1.0, A=None, B=None) -> np.ndarray:
    """``(W + eta H)_dil P`` for the batch's ``H``; ``W = A B^T`` (or 0 when ``A`` is None)."""
    out = batch.apply(P)
    out *= eta * scale_constant(d2, batch.n_obs)
    if A is not None:
        lowrank_apply(A, B, P, out=out)
    return out


def initialise(batch, d1: int, d2: int, rank: int, rng: np.random.Generator,
               n_power: int = 4, oversampling: int = 4):
    r"""``Q0, V0`` from the first batch (ALGORITHM.md section 3).

    ``H0 = c sum_i y_i x_i e_{j_i}^T``; its top-``k`` singular pairs ``(U_k, V_k)``
    are found matrix-free by randomised subspace iteration on the dilation
    (``n_power`` products on a block of ``2k + oversampling`` columns, then
    Rayleigh-Ritz), and ``Q0 = [[U_k, U_k], [V_k, -V_k]] / sqrt(2)``,
    ``V0 = H0_dil Q0``.

    Returns
    -------
    Q0 : ndarray of shape (d1 + d2, 2 rank), orthonormal columns
    V0 : ndarray of shape (d1 + d2, 2 rank)
    """
    width = min(2 * rank + oversampling, d1 + d2)
    P = cholqr2(rng.standard_normal((d1 + d2, width)))
    for _ in range(n_power):
        P = cholqr2(dilation_product(batch, P, d2))
    T = P.T @ dilation_product(batch, P, d2)
    theta, Z = scipy.linalg.eigh((T + T.T) / 2)
    ritz = P @ Z[:, np.argsort(theta)[::-1][:rank]]  # eigenvalue +sigma_i: [u_i; v_i] / sqrt(2)
    U, V = ritz[:d1], ritz[d1:]
    Q0 = cholqr2(np.block([[U, U], [V, -V]]))
    return Q0, dilation_product(batch, Q0, d2)


def initialise_dense(S: np.ndarray, n_obs: int, d1: int, d2: int, rank: int):
    r"""``Q0, V0`` from the dense ``H0 = c S^T`` (``S`` is ``d2 x d1``), by an exact SVD.

    ``Q0 = [[U_k, U_k], [V_k, -V_k]] / sqrt(2)`` and ``V0 = H0_dil Q0``.
    """
    H0 = scale_constant(d2, n_obs) * S.T
    U, _, Vt = scipy.linalg.svd(H0, full_matrices=False)
    U, V = U[:, :rank], Vt[:rank].T
    Q0 = np.block([[U, U], [V, -V]]) / np.sqrt(2.0)
    return Q0, np.vstack([H0 @ Q0[d1:], H0.T @ Q0[:d1]])


def step(batch, Q: np.ndarray, A: np.ndarray, B: np.ndarray, d2: int, eta: float):
    """One step: ``Q' = qr(M_dil Q)``, ``V' = M_dil Q'`` with ``M = W + eta H`` (same batch)."""
    Q_new = cholqr2(dilation_product(batch, Q, d2, eta, A, B))
    return Q_new, dilation_product(batch, Q_new, d2, eta, A, B)
