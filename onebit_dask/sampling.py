r"""Projected sampling of synthetic batches, exact in law (pure NumPy, no Dask).

For ``x ~ N(0, I_d1)`` and an orthonormal ``P`` (``d1 x r``), ``u = P^T x ~ N(0, I_r)``
and ``(I - P P^T) x`` is independent of ``u``. In a step, an observation's bit depends
on ``x`` only through ``x^T A*`` and its score only through ``x^T A``; with
``span(P) ⊇ span([A*, A])`` both are functions of ``u``:

.. math::

    x^T A^* b^*_j = u^T (P^T A^*) b^*_j, \qquad x^T A b_j = u^T (P^T A) b_j.

So a shard draws ``u`` for every row, the labels, bits and scores from ``u``, and
only the rows with a non-zero residual ``r_i = y_i - sign(s_i)`` need more. The
step uses the batch only through the per-label sums ``T_j = sum_{i in j} r_i x_i``
(``H = c sum_j T_j e_j^T``), and given the bits,

.. math::

    T_j = P \sum_{i \in j} r_i u_i + (I - P P^T) \sum_{i \in j} r_i g_i
        \overset{d}{=} P \sum_{i \in j} r_i u_i + (I - P P^T) \sqrt{\textstyle\sum_{i \in j} r_i^2}\, g_j,

with ``g_i, g_j ~ N(0, I_d1)`` independent of everything else (a sum of independent
Gaussian vectors with fixed coefficients). A shard therefore draws ``m_s r`` normals
plus ``d1`` normals per label that has an active row, instead of ``m_s d1``.

The initial batch (``W = 0``, weights ``y_i``) is the same construction with
``span(P) = span(A*)`` and weights ``y_i`` (so ``sqrt(sum y_i^2) = sqrt(n_j)``).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from .kernels import ActiveRows, scatter_rows, sign


def span_basis(*factors: np.ndarray) -> np.ndarray:
    """An orthonormal ``d1 x r`` basis whose span contains the columns of ``factors``.

    Householder QR of ``[F_1, F_2, ...]``, ``r = min(d1, total columns)``; a rank-deficient
    input still gives ``r`` orthonormal columns, whose span then contains the factors'.
    """
    M = np.hstack(factors)
    return scipy.linalg.qr(M, mode="economic")[0]


def noisy_bits(z: np.ndarray, flip: float, noise_std: float, rng) -> np.ndarray:
    """``y = sign(z + noise_std g)`` flipped with probability ``flip``, as float64.

    Draws ``n`` normals (if ``noise_std > 0``), then ``n`` uniforms (if ``flip > 0``),
    in that order.
    """
    z = z.astype(np.float64)
    if noise_std > 0:
        z = z + noise_std * rng.standard_normal(z.shape[0])
    y = sign(z)
    if flip > 0:
        y[rng.random(y.shape[0]) < flip] *= -1.0
    return y


def complete_rows(P: np.ndarray, coef: np.ndarray, scale: np.ndarray, rng) -> np.ndarray:
    """Rows ``P coef_i + scale_i (I - P P^T) g_i``, ``g_i ~ N(0, I_d1)``, as float64.

    ``coef`` is ``(n, r)``, ``scale`` ``(n,)``; draws ``n x d1`` float32 normals (as the
    explicit sampler's features are float32) and projects them in float32.
    """
    g = rng.standard_normal((coef.shape[0], P.shape[0]), dtype=np.float32)
    P32 = P.astype(np.float32)
    g -= (g @ P32) @ P32.T
    rows = coef @ P.T
    rows += scale[:, None] * g
    return rows


def projected_rows(u: np.ndarray, labels: np.ndarray, weights: np.ndarray, P: np.ndarray,
                   n_obs: int, rng) -> ActiveRows:
    """The per-label sums ``T_j = sum_{i in j} w_i x_i`` of rows ``x_i = P u_i + (I - P P^T) g_i``,
    drawn in law from ``u`` (module docstring), as :class:`ActiveRows` with unit weights.

    Rows with ``w_i = 0`` must be left out by the caller.
    """
    uniq, coef = scatter_rows(labels, u, weights)
    _, sq = scatter_rows(labels, np.ones((labels.size, 1)), weights * weights)
    rows = complete_rows(P, coef, np.sqrt(sq[:, 0]), rng)
    return ActiveRows(rows, uniq, np.ones(uniq.size), n_obs, by_label=True)


def draw_projected_step(rng, n_obs: int, lo: int, hi: int, P: np.ndarray, PtA_true: np.ndarray,
                        B_true_rows: np.ndarray, PtA: np.ndarray, B_rows: np.ndarray,
                        flip: float, noise_std: float):
    r"""One shard of a step's batch by projected sampling.

    Parameters
    ----------
    rng : numpy.random.Generator
        The shard's generator (``SeedSequence([seed, t, s])``).
    n_obs : int
        Observations in the shard; labels are uniform on ``[lo, hi)``.
    P : ndarray of shape (d1, r)
        Orthonormal, ``span(P) ⊇ span([A*, A])``.
    PtA_true, PtA : ndarray of shape (r, k) and (r, l)
        ``P^T A*`` and ``P^T A``.
    B_true_rows, B_rows : ndarray of shape (hi - lo, k) and (hi - lo, l)
        Rows ``lo..hi`` of ``B*`` and ``B``.

    Returns
    -------
    active : ActiveRows
        Per-label sums of ``r_i x_i`` over the active rows (unit weights).
    n_active : int
        Rows with ``r_i != 0``.
    """
    u = rng.standard_normal((n_obs, P.shape[1]))
    labels = lo + rng.integers(0, hi - lo, size=n_obs, dtype=np.int64)
    local = labels - lo
    z = np.einsum("ij,ij->i", u @ PtA_true, B_true_rows[local])
    y = noisy_bits(z, flip, noise_std, rng)
    s = np.einsum("ij,ij->i", u @ PtA, B_rows[local])
    r = y - sign(s)
    keep = np.flatnonzero(r)
    return projected_rows(u[keep], labels[keep], r[keep], P, n_obs, rng), int(keep.size)


def draw_projected_init(rng, n_obs: int, lo: int, hi: int, P_true: np.ndarray,
                        PtA_true: np.ndarray, B_true_rows: np.ndarray, flip: float,
                        noise_std: float) -> ActiveRows:
    """One shard of the initial batch (weights ``y_i``) by projected sampling, as
    per-label sums ``S_j = sum_{i in j} y_i x_i`` with ``span(P_true) = span(A*)``."""
    u = rng.standard_normal((n_obs, P_true.shape[1]))
    labels = lo + rng.integers(0, hi - lo, size=n_obs, dtype=np.int64)
    z = np.einsum("ij,ij->i", u @ PtA_true, B_true_rows[labels - lo])
    y = noisy_bits(z, flip, noise_std, rng)
    return projected_rows(u, labels, y, P_true, n_obs, rng)
