"""Kernels against a dense NumPy construction of H, W and the dilation."""

import numpy as np
import pytest
import scipy.linalg

from onebit_dask.algorithm import dilation_product, initialise, initialise_dense, step
from onebit_dask.engine import LocalBatch, LocalEngine
from onebit_dask.kernels import (LAMBDA, cholqr2, column_norms, normalised_factors, scatter_rows,
                                 step_size)
from onebit_dask.sources import ArraySource

D1, D2, L = 7, 5, 4


@pytest.fixture
def batch_data():
    rng = np.random.default_rng(1)
    m = 60
    X = rng.standard_normal((m, D1))
    labels = rng.integers(0, D2, m)
    y = np.where(rng.random(m) < 0.5, -1.0, 1.0)
    A = rng.standard_normal((D1, L))
    B = rng.standard_normal((D2, L))
    P = rng.standard_normal((D1 + D2, L))
    return X, labels, y, A, B, P


def dense_dilation(M):
    d1, d2 = M.shape
    return np.block([[np.zeros((d1, d1)), M], [M.T, np.zeros((d2, d2))]])


def dense_H(X, labels, weights, d2):
    E = np.zeros((X.shape[0], d2))
    E[np.arange(X.shape[0]), labels] = 1.0
    c = d2 / (X.shape[0] * LAMBDA)
    return c * X.T @ (weights[:, None] * E)


def local_batch(X, labels, y, A=None, B=None, n_shards=3):
    shards = ArraySource(X, labels, y, D2, X.shape[0]).batch(0, n_shards)
    return LocalBatch(shards, D1, D2, A, B)


@pytest.mark.parametrize("eta", [1.0, 0.25])
def test_step_product_matches_dense(batch_data, eta):
    X, labels, y, A, B, P = batch_data
    W = A @ B.T
    r = y - np.where(np.einsum("ij,ij->i", X @ A, B[labels]) >= 0, 1.0, -1.0)
    M = W + eta * dense_H(X, labels, r, D2)
    got = dilation_product(local_batch(X, labels, y, A, B), P, D2, eta, A, B)
    np.testing.assert_allclose(got, dense_dilation(M) @ P, rtol=1e-10, atol=1e-12)


def test_initial_product_matches_dense(batch_data):
    X, labels, y, _, _, P = batch_data
    H0 = dense_H(X, labels, y, D2)
    got = dilation_product(local_batch(X, labels, y), P, D2)
    np.testing.assert_allclose(got, dense_dilation(H0) @ P, rtol=1e-10, atol=1e-12)


def test_only_nonzero_residuals_are_kept(batch_data):
    X, labels, y, A, B, _ = batch_data
    r = y - np.where(np.einsum("ij,ij->i", X @ A, B[labels]) >= 0, 1.0, -1.0)
    batch = local_batch(X, labels, y, A, B)
    assert batch.n_active == np.count_nonzero(r)
    assert batch.n_obs == X.shape[0]


def test_shard_count_does_not_change_product(batch_data):
    X, labels, y, A, B, P = batch_data
    one = local_batch(X, labels, y, A, B, n_shards=1).apply(P)
    five = local_batch(X, labels, y, A, B, n_shards=5).apply(P)
    np.testing.assert_allclose(one, five, rtol=1e-12)


def test_step_matches_dense_qr(batch_data):
    X, labels, y, A, B, _ = batch_data
    Q = np.linalg.qr(np.random.default_rng(3).standard_normal((D1 + D2, L)))[0]
    r = y - np.where(np.einsum("ij,ij->i", X @ A, B[labels]) >= 0, 1.0, -1.0)
    Mdil = dense_dilation(A @ B.T + dense_H(X, labels, r, D2))
    Q_ref, R_ref = np.linalg.qr(Mdil @ Q)
    Q_ref = Q_ref * np.sign(np.diag(R_ref))
    Q_new, V_new = step(local_batch(X, labels, y, A, B), Q, A, B, D2, 1.0)
    np.testing.assert_allclose(Q_new, Q_ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(V_new, Mdil @ Q_new, rtol=1e-10, atol=1e-12)


def test_initialisation_finds_top_singular_subspace():
    rng = np.random.default_rng(0)
    d1, d2, k, m = 30, 20, 2, 4000
    X = rng.standard_normal((m, d1))
    labels = rng.integers(0, d2, m)
    W = rng.standard_normal((d1, k)) @ rng.standard_normal((k, d2))
    y = np.where(np.einsum("ij,ji->i", X, W[:, labels]) >= 0, 1.0, -1.0)
    H0 = dense_H(X, labels, y, d2)
    U, s, Vt = np.linalg.svd(H0)
    assert s[k - 1] / s[k] > 2  # a gap the subspace iteration can resolve
    shards = ArraySource(X, labels, y, d2, m).batch(0, 2)
    Q0, V0 = initialise(LocalBatch(shards, d1, d2), d1, d2, k, np.random.default_rng(5), n_power=6)
    ref = np.block([[U[:, :k], U[:, :k]], [Vt[:k].T, -Vt[:k].T]]) / np.sqrt(2)
    angles = scipy.linalg.subspace_angles(Q0, ref)
    assert angles.max() < 1e-3
    np.testing.assert_allclose(Q0.T @ Q0, np.eye(2 * k), atol=1e-12)
    np.testing.assert_allclose(V0, dense_dilation(H0) @ Q0, rtol=1e-10, atol=1e-12)


def test_dense_initialisation_matches_svd():
    rng = np.random.default_rng(0)
    d1, d2, k, m = 12, 9, 2, 500
    X = rng.standard_normal((m, d1))
    labels = rng.integers(0, d2, m)
    y = np.where(rng.random(m) < 0.5, -1.0, 1.0)
    H0 = dense_H(X, labels, y, d2)
    n_obs, S = LocalEngine().label_sums(ArraySource(X, labels, y, d2, m).batch(0, 3), d1, d2)
    assert n_obs == m
    np.testing.assert_allclose(S.T * d2 / (m * LAMBDA), H0, rtol=1e-12, atol=1e-14)
    Q0, V0 = initialise_dense(S, n_obs, d1, d2, k)
    U, _, Vt = np.linalg.svd(H0)
    ref = np.block([[U[:, :k], U[:, :k]], [Vt[:k].T, -Vt[:k].T]]) / np.sqrt(2)
    assert scipy.linalg.subspace_angles(Q0, ref).max() < 1e-10
    np.testing.assert_allclose(Q0.T @ Q0, np.eye(2 * k), atol=1e-12)
    np.testing.assert_allclose(V0, dense_dilation(H0) @ Q0, rtol=1e-10, atol=1e-12)


def test_lemma1_expectation_of_sign_times_x():
    """E[sign(x^T w) x] = sqrt(2/pi) w for x ~ N(0, I) and a unit w (Monte Carlo)."""
    rng = np.random.default_rng(11)
    d, n = 6, 400_000
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    X = rng.standard_normal((n, d))
    mean = (np.where(X @ w >= 0, 1.0, -1.0)[:, None] * X).mean(axis=0)
    # each coordinate has variance <= 1, so its standard error is <= 1/sqrt(n)
    assert np.abs(mean - LAMBDA * w).max() < 5 / np.sqrt(n)
    assert LAMBDA == pytest.approx(np.sqrt(2 / np.pi))


def test_normalised_factors_have_unit_columns():
    rng = np.random.default_rng(2)
    Q = rng.standard_normal((D1 + D2, L))
    V = rng.standard_normal((D1 + D2, L))
    A, B = normalised_factors(Q, V, D1)
    W = Q[:D1] @ V[D1:].T
    np.testing.assert_allclose(A @ B.T, W / np.linalg.norm(W, axis=0), rtol=1e-12)
    np.testing.assert_allclose(column_norms(A, V[D1:]), np.linalg.norm(W, axis=0), rtol=1e-12)


def test_cholqr2_orthonormal_and_falls_back():
    rng = np.random.default_rng(4)
    Y = rng.standard_normal((500, 6)) * np.logspace(0, 6, 6)
    Q = cholqr2(Y)
    np.testing.assert_allclose(Q.T @ Q, np.eye(6), atol=1e-12)
    np.testing.assert_allclose(Q @ (Q.T @ Y), Y, rtol=1e-9, atol=1e-6)
    rank_deficient = np.hstack([Y[:, :3], Y[:, :3]])
    Q2 = cholqr2(rank_deficient)  # Cholesky fails: Householder fallback
    assert np.all(np.isfinite(Q2))
    np.testing.assert_allclose(Q2.T @ Q2, np.eye(6), atol=1e-10)


def test_scatter_rows_matches_add_at():
    rng = np.random.default_rng(6)
    labels = rng.integers(0, 50, 400)
    rows = rng.standard_normal((400, 3))
    ref = np.zeros((50, 3))
    np.add.at(ref, labels, rows)
    uniq, sums = scatter_rows(labels, rows)
    np.testing.assert_allclose(sums, ref[uniq], rtol=1e-12)
    assert set(uniq) == set(labels)


def test_step_size_rules():
    assert [step_size("paper", t) for t in range(6)] == [1.0] * 6
    assert [step_size("averaged", t) for t in range(6)] == [1.0, 1.0, 1.0, 0.5, 1 / 3, 0.25]
