"""The label index (onebit_dask.ops.mips): its top-k equals brute force, ties included.

Brute force is the definition: the fixed-order scores of ``tile_scores`` and
``np.argsort(-S, axis=1, kind="stable")[:, :k]``; labels are compared exactly and
scores bit for bit."""

import numpy as np
import pytest

from onebit_dask.ops import mips


def brute(Z, B, b, k):
    S = mips.tile_scores(Z, B, b)
    o = np.argsort(-S, axis=1, kind="stable")[:, :k]
    return o, np.take_along_axis(S, o, axis=1)


def bits_equal(x, y):
    return x.shape == y.shape and (x.view(np.int64) == y.view(np.int64)).all()


def check(out, ref):
    assert (out[0] == ref[0]).all()
    assert bits_equal(out[1], ref[1])


def model(rng, d2, dim, n, kind):
    """``(B, b, Z)`` of a kind of model with (or without) ties."""
    B = rng.standard_normal((d2, dim))
    b = rng.standard_normal(d2)
    Z = rng.standard_normal((n, dim))
    if kind == "dup":  # duplicated label rows: exact ties everywhere
        src = rng.integers(0, d2, size=d2 // 3)
        dst = rng.integers(0, d2, size=d2 // 3)
        B[dst], b[dst] = B[src], b[src]
    elif kind == "grid":  # small integers: many equal scores, exact in floating point
        B = rng.integers(-2, 3, size=(d2, dim)).astype(float)
        b = rng.integers(-2, 3, size=d2).astype(float)
        Z = rng.integers(-2, 3, size=(n, dim)).astype(float)
    elif kind == "zeros":  # zero rows and queries: every score 0.0 or -0.0
        B[: d2 // 2] = 0.0
        b[: d2 // 2] = -0.0
        Z[: n // 2] = 0.0
    elif kind == "near":  # scores that differ in the last bits: BLAS order matters
        B = rng.standard_normal(dim) + 1e-15 * rng.standard_normal((d2, dim))
        b = 1.0 + 1e-16 * rng.standard_normal(d2)
        Z = rng.standard_normal((n, dim)) * 1e3
    elif kind == "fitted":  # as a fitted model at large d2: most rows zero, one threshold
        B[rng.random(d2) < 0.9] = 0.0
        b[:] = -0.685
    elif kind == "popular":  # skewed thresholds, a few labels win everywhere
        b = 3.0 * np.log(rng.pareto(1.0, d2) + 1e-3)
        B *= 0.1
    return B, b, Z


def test_pair_scores_have_the_bits_of_tile_scores():
    rng = np.random.default_rng(0)
    for dim in (1, 2, 6, 101):
        Z, B, b = (rng.standard_normal((7, dim)), rng.standard_normal((50, dim)),
                   rng.standard_normal(50))
        rows, labels = rng.integers(0, 7, 30), rng.integers(0, 50, 30)
        assert bits_equal(mips.pair_scores(Z, B, b, rows, labels),
                          mips.tile_scores(Z, B, b)[rows, labels])
        assert bits_equal(mips.pair_scores(Z, B, None, rows, labels),
                          mips.tile_scores(Z, B)[rows, labels])


KINDS = ["gauss", "dup", "grid", "zeros", "near", "popular", "fitted"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dim", [2, 6, 20])
@pytest.mark.parametrize("thresholds", [True, False])
def test_index_top_k_equals_brute_force(kind, dim, thresholds):
    rng = np.random.default_rng([dim, KINDS.index(kind), thresholds])
    d2, n = 3000, 40
    B, b, Z = model(rng, d2, dim, n, kind)
    b = b if thresholds else None
    index = mips.build_index(B, b, leaf_size=48, min_leaf=8, branch=16, seed=dim)
    assert sorted(index.members.tolist()) == list(range(d2))
    for k in (1, 2, 5, 20, 97, 750, d2 - 1, d2):
        ref = brute(Z, B, b, k)
        check(mips.top_k(index, Z, k, max_scan=1.0), ref)  # the index
        check(mips.top_k(index, Z, k, max_scan=0.0), ref)  # its fallback, the screen
        check(mips.screen_top_k(Z, B, b, k, tile_bytes=8 * 40 * 64), ref)


def test_every_k_of_a_small_model():
    rng = np.random.default_rng(5)
    d2, dim, n = 300, 6, 12
    B, b, Z = model(rng, d2, dim, n, "dup")
    index = mips.build_index(B, b, leaf_size=16, min_leaf=4, branch=8)
    for k in range(1, d2 + 1):
        ref = brute(Z, B, b, k)
        check(mips.top_k(index, Z, k, max_scan=1.0, m1=1), ref)
        check(mips.screen_top_k(Z, B, b, k, tile_bytes=8 * 12 * 16), ref)


def test_all_label_rows_equal():
    d2, dim, n = 500, 6, 9
    B, b = np.ones((d2, dim)), np.zeros(d2)
    Z = np.random.default_rng(1).standard_normal((n, dim))
    index = mips.build_index(B, b, leaf_size=32, min_leaf=4)
    assert index.B.shape[0] == 1 and index.counts.tolist() == [d2]
    for k in (1, 7, 499, 500):
        check(mips.top_k(index, Z, k, max_scan=1.0), brute(Z, B, b, k))


@pytest.mark.parametrize("k", [1, 5, 40])
def test_an_index_of_few_representatives_is_brute_force(k):
    """Three distinct label rows over 500 labels (fewer than ``4 k`` representatives):
    each scored once and expanded to its smallest labels, ties to the smaller label."""
    rng = np.random.default_rng(k)
    group = rng.integers(0, 3, size=500)
    B = rng.integers(-2, 3, size=(3, 6)).astype(float)[group]
    b = np.array([0.0, 1.0, 0.0])[group]
    Z = rng.integers(-1, 2, size=(40, 6)).astype(float)
    index = mips.build_index(B, b, leaf_size=32, min_leaf=4)
    assert index.B.shape[0] == 3
    ref = brute(Z, B, b, k)
    check(mips.top_k(index, Z, k), ref)
    check(mips.few_rows_top_k(index, Z, k, candidates=1), ref)  # a row at a time


def test_non_finite_and_huge_query_rows_follow_brute_force():
    rng = np.random.default_rng(2)
    B, b, Z = model(rng, 400, 6, 7, "gauss")
    Z[2, 3] = np.inf
    Z[4, 0] = np.nan
    Z[6] *= 1e304  # ||q|| rho past HUGE: brute force, no overflow in a margin
    index = mips.build_index(B, b, leaf_size=32, min_leaf=4)
    with np.errstate(all="ignore"):
        out, ref = mips.top_k(index, Z, 5), brute(Z, B, b, 5)
    ok = [0, 1, 3, 5]
    check((out[0][ok], out[1][ok]), (ref[0][ok], ref[1][ok]))
    assert (out[0] == ref[0]).all()


def test_the_index_prunes_and_stays_exact():
    rng = np.random.default_rng(3)
    d2, dim, n = 30_000, 6, 150
    B, b, Z = model(rng, d2, dim, n, "popular")
    index = mips.build_index(B, b)
    for k in (1, 5, 20):
        st = {}
        out = mips.top_k(index, Z, k, stats=st)
        assert st["fallback_rows"] == 0 and st["scored"] < 0.2 * n * d2
        check(out, brute(Z, B, b, k))


def test_a_fitted_like_model_collapses_its_zero_rows():
    rng = np.random.default_rng(4)
    d2, dim, n = 100_000, 6, 200
    B, b, Z = model(rng, d2, dim, n, "fitted")
    Z *= 0.05  # few labels above the shared threshold: the k-th score is often b
    index = mips.build_index(B, b)
    assert index.B.shape[0] < 0.2 * d2
    for k in (1, 5, 20, 300):
        st = {}
        out = mips.top_k(index, Z, k, stats=st, max_scan=1.0)
        assert st["fallback_rows"] == 0
        ref = brute(Z, B, b, k)
        check(out, ref)
        check(mips.top_k(index, Z, k, max_scan=0.0), ref)


def test_a_margin_of_zero_is_caught(monkeypatch):
    """The margin is needed: label rows that are permutations of one vector have equal
    real scores against a constant row, so their order is the rounding's alone; BLAS sums
    in another order than the fixed one, and a screen without a margin loses labels."""
    import itertools

    rng = np.random.default_rng(6)
    dim, n = 7, 40
    v = rng.standard_normal(dim)
    B = np.array([v[list(p)] for p in itertools.islice(itertools.permutations(range(dim)),
                                                       3000)])
    b, Z = None, rng.standard_normal((n, 1)) * np.ones(dim)
    index = mips.build_index(B, b, leaf_size=48, min_leaf=8, branch=16)
    for k in (1, 5, 20, 97):
        ref = brute(Z, B, b, k)
        check(mips.top_k(index, Z, k, max_scan=1.0), ref)
        check(mips.screen_top_k(Z, B, b, k, tile_bytes=8 * 40 * 64), ref)
    monkeypatch.setattr(mips, "SAFETY", 0.0)
    wrong = 0
    for k in (1, 5, 20, 97):
        ref = brute(Z, B, b, k)
        for out in (mips.top_k(index, Z, k, max_scan=1.0),
                    mips.screen_top_k(Z, B, b, k, tile_bytes=8 * 40 * 64)):
            wrong += not ((out[0] == ref[0]).all() and bits_equal(out[1], ref[1]))
    assert wrong > 0


def test_build_rejects_non_finite_rows():
    B = np.zeros((10, 2))
    B[3, 1] = np.nan
    with pytest.raises(ValueError):
        mips.build_index(B)
    with pytest.raises(ValueError):
        mips.build_index(np.zeros((10, 2)), np.full(10, np.inf))


def _partition(first, rep_of):
    """The groups as sets of rows, whatever their order."""
    return sorted(tuple(np.flatnonzero(rep_of == g)) for g in range(len(first)))


def test_distinct_rows_groups_bitwise_equal_rows_and_survives_a_collision(monkeypatch):
    """The hashed grouping equals the grouping by the rows' bytes (``-0.0`` and ``0.0``
    apart, equal rows far apart together, each group's first row its lowest); with every
    key colliding (multipliers of 0) the bitwise check sends it to the bytes' grouping,
    which gives the same groups (without the check, all rows would be one group)."""
    rng = np.random.default_rng(3)
    base = rng.standard_normal((40, 7))
    R = base[rng.integers(0, 40, size=5000)]
    R[17] = 0.0
    R[4000] = 0.0
    R[4000, 3] = -0.0
    keys = R.view(np.dtype((np.void, R.itemsize * R.shape[1]))).ravel()
    want = np.unique(keys, return_index=True, return_inverse=True)[1:]  # by the bytes
    got = mips.distinct_rows(R)
    assert _partition(*got) == _partition(*want)
    np.testing.assert_array_equal(R[got[0]][got[1]].view(np.uint64), R.view(np.uint64))
    assert all(got[0][g] == np.flatnonzero(got[1] == g)[0] for g in range(len(got[0])))
    assert got[1][17] != got[1][4000]
    monkeypatch.setattr(mips, "ROW_HASH", np.zeros(4, dtype=np.uint64))
    collided = mips.distinct_rows(R)
    assert _partition(*collided) == _partition(*want) and len(collided[0]) > 1
