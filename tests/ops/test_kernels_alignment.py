"""Shard kernels give the same bits for inputs at any address (issue 10, item 1).

A Dask worker that receives a shard's rows from another worker can hold them at an
address that is not a multiple of 8 (the TCP comm reads the first out-of-band
buffer into the same host buffer as the message header). NumPy then feeds
``X.T @ B`` to BLAS through a C-ordered copy, which OpenBLAS's SkylakeX kernels
sum in another order than the transposed original.
"""

import numpy as np
import pytest

from onebit_dask.ops.kernels import aligned, residuals, shard_label_sums, weighted_label_sums
from tests.support.arrays import at_address, random_shard

N, D1, D2, L = 67, 40, 8, 4  # the shape of the shard that failed in test_dask_engine


@pytest.fixture
def shard():
    return random_shard(3, N, D1, D2, L)


def test_aligned_copies_only_unaligned_arrays():
    a = np.arange(12.0).reshape(3, 4)
    for view in (a, a.T, a[:, 1:]):
        assert aligned(view) is view  # NumPy's own arrays are not copied
    for offset in (1, 6, 12):
        u = at_address(a, offset)
        assert not u.flags.aligned
        for view in (u, u.T, u[:, 1:]):
            b = aligned(view)
            assert b.flags.aligned and b is not view
            np.testing.assert_array_equal(b, view)
            assert b.strides == view.copy(order="K").strides


def test_blas_product_here_depends_on_alignment(shard):
    """The raw product that differed: ``X.T @ B`` with ``X`` 6 bytes off (as observed)."""
    X = shard[0]
    Bw = np.random.default_rng(4).standard_normal((N, L))  # w * P_bot[j] of a step's product
    reference = X.T @ Bw
    moved = at_address(X, 6).T @ Bw
    np.testing.assert_array_equal(np.ascontiguousarray(X.T) @ Bw, moved)  # the C-ordered copy
    if np.array_equal(moved, reference):
        pytest.skip("this BLAS sums X.T @ B in the same order for both layouts")
    np.testing.assert_allclose(moved, reference, rtol=1e-12)  # only rounding differs


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("offset", [0, 2, 6, 8, 16, 38])
def test_shard_kernels_do_not_depend_on_alignment(shard, offset, dtype):
    """The kernels of a shard and of a label block, fed as the blocks feed them (every
    array through :func:`aligned`: a copy if misaligned for its dtype, else as it is),
    give the bits of NumPy's own arrays."""
    X, labels, y, A, B, P = shard
    X = X.astype(dtype)

    def fed(a):
        return aligned(at_address(a, offset))

    r = residuals(X, labels, y, A, B)  # a step's weights
    np.testing.assert_array_equal(residuals(*map(fed, (X, labels, y, A, B))), r)
    for a, b in zip(shard_label_sums(X, labels, y), shard_label_sums(*map(fed, (X, labels, y)))):
        np.testing.assert_array_equal(a, b)
    # the initial batch and a step, on this shard's labels and on one label per row (the
    # per-label sums of a block are then as tall as the shard)
    for j in (labels, np.arange(N)):
        P_bot = np.random.default_rng(5).standard_normal((j.max() + 1, L))
        for w, rows in ((y, None), (r, np.flatnonzero(r))):
            uniq, S = weighted_label_sums(X, j, w, rows)
            got = weighted_label_sums(fed(X), fed(j), fed(w), None if rows is None else fed(rows))
            np.testing.assert_array_equal(got[0], uniq)
            np.testing.assert_array_equal(got[1], S)
            # a block's two products on the per-label sums it received
            np.testing.assert_array_equal(fed(S).T @ fed(P_bot)[uniq], S.T @ P_bot[uniq])
            np.testing.assert_array_equal(fed(S) @ fed(P[:D1]), S @ P[:D1])
