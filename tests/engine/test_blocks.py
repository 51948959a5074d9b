"""The label-block engine against a dense NumPy construction of H, W and the dilation."""

import numpy as np
import pytest
import scipy.linalg

from onebit_dask.fit import algorithm
from onebit_dask.engine import LocalEngine
from onebit_dask.engine import blocks as B
from onebit_dask.ops.kernels import LAMBDA, row_norms
from onebit_dask.data.arrays import ArraySource
from onebit_dask.data.synthetic.problem import Projection

from tests.support.dense import dense_dilation, dense_H
from tests.support.arrays import at_address, random_shard

D1, D2, L = 7, 11, 4


@pytest.fixture
def batch_data():
    return random_shard(1, 90, D1, D2, L)


def bounds_of(n_blocks, d2=D2):
    return [s * d2 // n_blocks for s in range(n_blocks + 1)]


def engine_with(X, labels, y, A=None, Bm=None, n_blocks=3, n_shards=2, **slots):
    """A local engine whose blocks hold rows of ``Bm`` and ``slots`` and the batch's
    active rows (activated against ``A``, ``Bm``)."""
    bounds = bounds_of(n_blocks)
    eng = LocalEngine()
    eng.start(bounds)
    eng.handles = [B.Block(lo, hi, {**({} if Bm is None else {"B": Bm[lo:hi]}),
                                    **{k: v[lo:hi] for k, v in slots.items()}})
                   for lo, hi in zip(bounds[:-1], bounds[1:])]
    data = eng.prepare(ArraySource(X, labels, y, D2).batch(0, X.shape[0], n_shards), bounds)
    eng.map(B.activate, B.StepModel(A), per_block=eng.by_block(data, B.StepModel(A)))
    return eng, data, bounds


def gather(eng, slot):
    return np.concatenate(eng.map(B.rows_of, slot))


def assert_step_matches_dense(eng, top, Mdil, Q, v_rtol, v_atol):
    """The blocks' new state after one step is ``qr(Mdil Q)`` (signs as ``R``'s diagonal)
    and ``V = Mdil Q'``; returns ``V``."""
    Q_ref, R_ref = np.linalg.qr(Mdil @ Q)
    Q_ref = Q_ref * np.sign(np.diag(R_ref))
    Q_new = np.vstack([top.Q, gather(eng, "Q")])
    V_new = np.vstack([top.V, gather(eng, "V")])
    np.testing.assert_allclose(Q_new, Q_ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(V_new, Mdil @ Q_new, rtol=v_rtol, atol=v_atol)
    return V_new


def residuals(X, labels, y, A, Bm):
    return y - np.where(np.einsum("ij,ij->i", X @ A, Bm[labels]) >= 0, 1.0, -1.0)


@pytest.mark.parametrize("eta", [1.0, 0.25])
@pytest.mark.parametrize("n_blocks", [1, 3, 11])
def test_block_product_matches_dense(batch_data, eta, n_blocks):
    X, labels, y, A, Bm, P = batch_data
    r = residuals(X, labels, y, A, Bm)
    M = A @ Bm.T + eta * dense_H(X, labels, r, D2)
    eng, _, _ = engine_with(X, labels, y, A, Bm, n_blocks=n_blocks, P=P[D1:])
    scale = eta * D2 / (X.shape[0] * LAMBDA)
    top, _ = algorithm.product(eng, scale, P[:D1], "P", "Z", A)
    got = np.vstack([top, gather(eng, "Z")])
    np.testing.assert_allclose(got, dense_dilation(M) @ P, rtol=1e-10, atol=1e-12)


def test_initial_product_matches_dense(batch_data):
    X, labels, y, _, _, P = batch_data
    eng, _, _ = engine_with(X, labels, y, P=P[D1:])
    top, _ = algorithm.product(eng, D2 / (X.shape[0] * LAMBDA), P[:D1], "P", "Z")
    got = np.vstack([top, gather(eng, "Z")])
    np.testing.assert_allclose(got, dense_dilation(dense_H(X, labels, y, D2)) @ P,
                               rtol=1e-10, atol=1e-12)


def test_only_nonzero_residuals_are_kept(batch_data):
    X, labels, y, A, Bm, _ = batch_data
    eng, data, bounds = engine_with(X, labels, y, A, Bm)
    counts = eng.map(B.activate, B.StepModel(A), per_block=eng.by_block(data, B.StepModel(A)))
    assert sum(counts) == np.count_nonzero(residuals(X, labels, y, A, Bm))
    for blk, lo, hi in zip(eng.handles, bounds[:-1], bounds[1:]):
        assert np.all((blk.active.labels >= lo) & (blk.active.labels < hi))


def test_step_matches_dense_qr(batch_data):
    X, labels, y, A, Bm, _ = batch_data
    rng = np.random.default_rng(3)
    Q = np.linalg.qr(rng.standard_normal((D1 + D2, L)))[0]
    A = Q[:D1]  # a state: W = Q_top B^T
    r = residuals(X, labels, y, A, Bm)
    Mdil = dense_dilation(A @ Bm.T + dense_H(X, labels, r, D2))
    eng, data, _ = engine_with(X, labels, y, A, Bm, Q=Q[D1:])
    top, n_active, _ = algorithm.step(eng, data, B.StepModel(A),
                                      algorithm.TopState(A, None), X.shape[0], D2, 1.0, None)
    assert n_active == np.count_nonzero(r)
    V_new = assert_step_matches_dense(eng, top, Mdil, Q, 1e-10, 1e-12)
    # the new B is V_bot with unit columns of W = Q_top V_bot^T
    W = top.Q @ V_new[D1:].T
    np.testing.assert_allclose(gather(eng, "B"), V_new[D1:] / np.linalg.norm(W, axis=0)[:, None],
                               rtol=1e-12)


def test_row_norms_are_column_norms_of_w():
    rng = np.random.default_rng(2)
    A, V = rng.standard_normal((D1, L)), rng.standard_normal((D2, L))
    np.testing.assert_allclose(row_norms(V, A.T @ A), np.linalg.norm(A @ V.T, axis=0),
                               rtol=1e-12)


def assert_initialised_to_top_subspace(eng, top, H0, k, max_angle):
    """The initialisation's ``Q`` (the top's rows, then the blocks') spans the top ``k``
    singular pairs of the dilation of ``H0`` (``[u, v] / sqrt 2`` and ``[u, -v] / sqrt 2``)
    within ``max_angle``, orthonormal, and ``V = dilation(H0) Q``."""
    Q0 = np.vstack([top.Q, gather(eng, "Q")])
    V0 = np.vstack([top.V, gather(eng, "V")])
    U, _, Vt = np.linalg.svd(H0)
    ref = np.block([[U[:, :k], U[:, :k]], [Vt[:k].T, -Vt[:k].T]]) / np.sqrt(2)
    assert scipy.linalg.subspace_angles(Q0, ref).max() < max_angle
    np.testing.assert_allclose(Q0.T @ Q0, np.eye(2 * k), atol=1e-12)
    np.testing.assert_allclose(V0, dense_dilation(H0) @ Q0, rtol=1e-10, atol=1e-12)


def test_randomized_initialisation_finds_top_singular_subspace():
    rng = np.random.default_rng(0)
    d1, d2, k, m = 30, 20, 2, 4000
    X = rng.standard_normal((m, d1))
    labels = rng.integers(0, d2, m)
    W = rng.standard_normal((d1, k)) @ rng.standard_normal((k, d2))
    y = np.where(np.einsum("ij,ji->i", X, W[:, labels]) >= 0, 1.0, -1.0)
    H0 = dense_H(X, labels, y, d2)
    _, s, _ = np.linalg.svd(H0)
    assert s[k - 1] / s[k] > 2  # a gap the subspace iteration can resolve
    bounds = bounds_of(3, d2)
    eng = LocalEngine()
    eng.start(bounds)
    data = eng.prepare(ArraySource(X, labels, y, d2).batch(0, m, 2), bounds)
    top, _ = algorithm.init_randomized(eng, data, B.StepModel(None), m, d1, d2, k,
                                       np.random.default_rng(5), 6, None)
    assert_initialised_to_top_subspace(eng, top, H0, k, 1e-3)


def test_dense_initialisation_matches_svd():
    rng = np.random.default_rng(0)
    d1, d2, k, m = 12, 9, 2, 500
    X = rng.standard_normal((m, d1))
    labels = rng.integers(0, d2, m)
    y = np.where(rng.random(m) < 0.5, -1.0, 1.0)
    H0 = dense_H(X, labels, y, d2)
    bounds = bounds_of(3, d2)
    eng = LocalEngine()
    eng.start(bounds)
    data = eng.prepare(ArraySource(X, labels, y, d2).batch(0, m, 3), bounds)
    top, _ = algorithm.init_dense(eng, data, B.StepModel(None), m, d1, d2, k, bounds, None)
    assert_initialised_to_top_subspace(eng, top, H0, k, 1e-10)


def test_blockwise_cholqr_falls_back_to_shifted_cholqr3():
    rng = np.random.default_rng(4)
    # condition number ~1e12: the Gram matrix (~1e24) is not numerically positive definite
    Y = np.linalg.qr(rng.standard_normal((500, 6)))[0] * np.logspace(0, 12, 6)
    Y = Y @ np.linalg.qr(rng.standard_normal((6, 6)))[0]
    assert algorithm.chol_inverse(Y.T @ Y, 500)[1], "plain Cholesky should fail here"
    bounds = bounds_of(4, 490)
    eng = LocalEngine()
    eng.handles = [B.Block(lo, hi, {"Y": Y[10 + lo: 10 + hi]}) for lo, hi in zip(bounds[:-1],
                                                                                 bounds[1:])]
    top = algorithm.cholqr2(eng, Y[:10], "Y", "Q", eng.map(B.cross, "Y", "Y"), 500)
    Q = np.vstack([top, gather(eng, "Q")])
    np.testing.assert_allclose(Q.T @ Q, np.eye(6), atol=1e-10)
    np.testing.assert_allclose(Q @ (Q.T @ Y), Y, rtol=1e-6, atol=1e-6 * np.abs(Y).max())


def misaligned(a):
    """A copy of ``a`` whose data start 2 bytes past a 64-byte boundary."""
    out = at_address(a, 2)
    assert not out.flags.aligned
    return out


def test_block_functions_see_aligned_arrays_everywhere():
    """Arrays that Dask moved can be misaligned (tests/ops/test_kernels_alignment.py); every array a
    block function receives, in the block, in lists and in named tuples, is aligned."""
    rng = np.random.default_rng(0)
    seen = []

    def probe(block, data, model, extra):
        seen.extend([block.slots["B"], block.active.X, data[0][0], model.A,
                     model.projection[0], extra])
        return block

    blk = B.Block(0, 3, {"B": misaligned(rng.standard_normal((3, 2)))},
                  active=B.ActiveRows(misaligned(rng.standard_normal((4, 2))),
                                      np.zeros(4, dtype=np.int64), np.ones(4), 4))
    projection = Projection(*(misaligned(rng.standard_normal((2, 2))) for _ in range(3)))
    B.call(probe, blk, [(misaligned(rng.standard_normal((2, 2))),)],
           B.StepModel(misaligned(rng.standard_normal((2, 2))), projection),
           misaligned(rng.standard_normal(3)))
    assert len(seen) == 6 and all(a.flags.aligned for a in seen)


@pytest.mark.parametrize("thresholded, observed", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("eta", [0.5, 0.2])
def test_moment_step_matches_dense_qr(batch_data, thresholded, observed, eta):
    """The moment step (docs/ALGORITHM.md section 9c) is one power iteration on
    ``M = (1 - eta) A V_bot^T + eta H_0`` with every bit in ``H_0``: the paper's ``y``,
    or with thresholds the bits centred on ``Phi(b_j)`` (a planted problem) or on the
    label's own share of the batch (observed data), scaled by ``m / (d2 n_j)``."""
    import scipy.special

    X, labels, y, _, _, _ = batch_data
    rng = np.random.default_rng(4)
    Q = np.linalg.qr(rng.standard_normal((D1 + D2, L)))[0]
    A, V_bot = Q[:D1], rng.standard_normal((D2, L))
    b = rng.uniform(-1.5, 0.5, D2)
    w = y.copy()
    if thresholded:
        p = scipy.special.ndtr(b[labels])
        n_j = np.bincount(labels, minlength=D2)[labels]
        if observed:
            p = np.bincount(labels, y > 0, minlength=D2)[labels] / n_j
        w = np.where(y > 0, 2 * (1 - p), -2 * p) * (X.shape[0] / D2) / n_j
    Mdil = dense_dilation((1 - eta) * A @ V_bot.T + eta * dense_H(X, labels, w, D2))
    slots = dict(Q=Q[D1:], V=V_bot)
    if thresholded:
        slots.update(b=b, p=np.full(D2, 0.3), v=np.full(D2, 0.01))
    model = B.StepModel(None, thresholds=thresholded, observed=observed)
    eng, data, _ = engine_with(X, labels, y, None, rng.standard_normal((D2, L)), **slots)
    top, n_active, _ = algorithm.step(eng, data, model, algorithm.TopState(A, None), X.shape[0],
                                      D2, eta, None, moment=True)
    assert n_active == X.shape[0]  # every bit counts
    assert_step_matches_dense(eng, top, Mdil, Q, 1e-9, 1e-11)


@pytest.mark.parametrize("gaussian_scale", [True, False])
def test_thresholded_residual_step_matches_dense_qr(batch_data, gaussian_scale):
    """A thresholded residual step is one power iteration on ``M D = W D + eta c H D``,
    ``D = diag(e^{-b_j^2 / 2})``, with the residuals ``r = y - sign(x^T w_j + b_j)`` of
    each label scaled by ``(m / d2) / n_j``, and by ``e^{b_j^2 / 2}`` with the Gaussian
    scale (``docs/ALGORITHM.md`` sections 9 and 9d)."""
    X, labels, y, _, Bm, _ = batch_data
    rng = np.random.default_rng(5)
    Q = np.linalg.qr(rng.standard_normal((D1 + D2, L)))[0]
    A, eta = Q[:D1], 0.3
    b = rng.uniform(-1.5, 0.5, D2)
    s = np.einsum("ij,ij->i", X @ A, Bm[labels]) + b[labels]
    r = y - np.where(s >= 0, 1.0, -1.0)
    n_j = np.bincount(labels, minlength=D2)[labels]
    f = (X.shape[0] / D2) / n_j * (np.exp(0.5 * b[labels] ** 2) if gaussian_scale else 1.0)
    d = np.exp(-0.5 * b * b)
    Mdil = dense_dilation(A @ (d[:, None] * Bm).T
                          + eta * dense_H(X, labels, r * f * d[labels], D2))
    model = B.StepModel(A, thresholds=True, gaussian_scale=gaussian_scale)
    eng, data, _ = engine_with(X, labels, y, A, Bm, Q=Q[D1:], b=b, p=np.full(D2, 0.3),
                               v=np.full(D2, 0.01))
    top, n_active, _ = algorithm.step(eng, data, model, algorithm.TopState(A, None),
                                      X.shape[0], D2, eta, None)
    assert n_active == np.count_nonzero(r)
    assert_step_matches_dense(eng, top, Mdil, Q, 1e-9, 1e-11)
