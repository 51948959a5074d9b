"""The draws the three samplers share (NumPy and SciPy, no Dask): a basis of the span a
batch depends on (:func:`span_basis`), an observation's bit (:func:`noisy_bits`, also the
explicit sampler's), and rows completed outside that span (:func:`complete_rows`: the
projected and the conditional samplers' per-label sums, :mod:`.projected`)."""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ...ops.kernels import sign


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
    explicit sampler's features are float32). Computed as
    ``scale_i g_i + P (coef_i - scale_i P^T g_i)``: three passes over ``n x d1``
    (the draw, ``g P`` and the scaled copy) and one rank-``r`` update in place.
    """
    g = rng.standard_normal((coef.shape[0], P.shape[0]), dtype=np.float32)
    small = coef - scale[:, None] * (g @ P.astype(np.float32))
    rows = np.multiply(g, scale[:, None], dtype=np.float64)
    if rows.size:
        scipy.linalg.blas.dgemm(1.0, P, small, trans_b=True, beta=1.0, c=rows.T,
                                overwrite_c=True)
    return rows

