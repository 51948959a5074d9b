"""Streamed top-k prediction (onebit_dask.engine.topk): equal to a stable argsort of the
dense score matrix, with ties, for any chunking, in-process and on Dask."""

import json
import os

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import roc_auc_score

from onebit_dask import OneBitMultiLabel
from onebit_dask.io.xc import read_xc
from onebit_dask.engine import LocalEngine, placement, topk
from onebit_dask.engine import blocks as B
from onebit_dask.ops import mips

from tests.support.helpers import FILES, run_main

BOUNDS = [0, 7, 19, 20, 41]  # blocks of 7, 12, 1 and 21 labels
L = 4


def reference_scores(XA, Bm, b):
    """The dense ``(n, d2)`` scores in tile_scores' order: the l products added one by one."""
    S = XA[:, :1] * Bm[:, 0]
    for q in range(1, XA.shape[1]):
        S = S + XA[:, q: q + 1] * Bm[:, q]
    return S + b


def dense_top_k(S, k):
    """The reference: a stable argsort of the negated scores of the whole matrix."""
    labels = np.argsort(-S, axis=1, kind="stable")[:, :k]
    return labels, np.take_along_axis(S, labels, axis=1)


@pytest.fixture(scope="module")
def tied_model():
    """Rows of B and thresholds with ties within and across blocks: labels 3, 12, 19 and
    30 share one row and threshold, labels 25..28 are zero with threshold 0.5, and
    thresholds take 3 values; a zero row of XA then ties every label of a threshold."""
    rng = np.random.default_rng(11)
    d2 = BOUNDS[-1]
    Bm = rng.standard_normal((d2, L))
    b = rng.choice([-0.5, 0.0, 0.5], d2)
    Bm[[12, 19, 30]] = Bm[3]
    b[[12, 19, 30]] = b[3]
    Bm[25:29], b[25:29] = 0.0, 0.5
    XA = rng.standard_normal((23, L))
    XA[[4, 17]] = 0.0
    return XA, Bm, b


def local_engine(Bm, b):
    return LocalEngine([B.Block(lo, hi, {"B": Bm[lo:hi], "b": b[lo:hi]})
                        for lo, hi in zip(BOUNDS[:-1], BOUNDS[1:])])


def test_tile_scores_have_the_same_bits_in_any_tile():
    rng = np.random.default_rng(0)
    XA, Bm = rng.standard_normal((300, 6)), rng.standard_normal((1000, 6))
    b = rng.standard_normal(1000)
    full = topk.tile_scores(XA, Bm, b)
    np.testing.assert_array_equal(full, reference_scores(XA, Bm, b))
    np.testing.assert_allclose(full, XA @ Bm.T + b, rtol=1e-13, atol=1e-13)
    for r0, r1, c0, c1 in [(0, 1, 0, 1000), (5, 6, 17, 18), (1, 300, 3, 999), (64, 128, 0, 7)]:
        np.testing.assert_array_equal(topk.tile_scores(XA[r0:r1], Bm[c0:c1], b[c0:c1]),
                                      full[r0:r1, c0:c1])


def test_select_keeps_the_leftmost_ties():
    """Scores in {0, 1, 2}: most rows tie at their k-th score."""
    S = np.random.default_rng(1).integers(0, 3, size=(40, 25)).astype(float)
    for k in range(1, 26):
        want = np.sort(np.argsort(-S, axis=1, kind="stable")[:, :k], axis=1)
        np.testing.assert_array_equal(topk.select(S, k), want)


def test_select_rejects_a_partition_without_tie_breaking():
    """The check above fails for the plain argpartition that select replaces (the test
    can fail): it keeps some row's tied columns other than the leftmost."""
    S = np.random.default_rng(1).integers(0, 3, size=(40, 25)).astype(float)
    plain = np.sort(np.argpartition(-S, 4, axis=1)[:, :5], axis=1)
    assert not np.array_equal(plain, np.sort(np.argsort(-S, axis=1, kind="stable")[:, :5], axis=1))


@pytest.mark.parametrize("budget", [topk.SCORE_BUDGET, 8 * 5, 8])
@pytest.mark.parametrize("k", [1, 3, 8, 13, 41])  # 8, 13 > a block's labels; 41 = d2
def test_streamed_top_k_equals_the_dense_argsort(tied_model, monkeypatch, budget, k):
    XA, Bm, b = tied_model
    monkeypatch.setattr(topk, "SCORE_BUDGET", budget)  # 8 bytes: 1 row x 1 label tiles
    labels, scores = topk.predict_top_k(local_engine(Bm, b), XA, k, BOUNDS)
    want_labels, want_scores = dense_top_k(reference_scores(XA, Bm, b), k)
    np.testing.assert_array_equal(labels, want_labels)
    np.testing.assert_array_equal(scores, want_scores)
    assert labels.dtype == np.int64 and labels.shape == scores.shape == (XA.shape[0], k)


@pytest.mark.parametrize("k", [1, 8, 41])
def test_a_floor_on_the_thresholds_ranks_as_the_dense_argsort(tied_model, k):
    """``floor`` (the query rule under chosen queries): the scores ``XA B_j + max(b_j,
    floor)``, ties to the smaller label; without it (or a floor below every threshold)
    the plain scores, which differ."""
    XA, Bm, b = tied_model
    engine = local_engine(Bm, b)
    labels, scores = topk.predict_top_k(engine, XA, k, BOUNDS, floor=0.0)
    want_labels, want_scores = dense_top_k(reference_scores(XA, Bm, np.maximum(b, 0.0)), k)
    np.testing.assert_array_equal(labels, want_labels)
    np.testing.assert_array_equal(scores, want_scores)
    plain = topk.predict_top_k(engine, XA, k, BOUNDS, floor=-1.0)
    np.testing.assert_array_equal(plain[0], dense_top_k(reference_scores(XA, Bm, b), k)[0])
    assert not np.array_equal(plain[1], scores)


def test_tile_shape_keeps_a_task_within_the_budget():
    assert topk.tile_shape(1500, 75_000, 64 * 2**20) == (111, 75_573)
    assert topk.tile_shape(10, 75_000, 64 * 2**20) == (10, 838_860)
    assert topk.tile_shape(1500, 10**8, 64 * 2**20) == (1, 8_388_608)  # one row, label tiles
    for n, widest, budget in [(1500, 75_000, 2**26), (3, 4, 8), (10**6, 10, 2**20)]:
        rows, width = topk.tile_shape(n, widest, budget)
        assert 1 <= rows <= n and width >= 1 and rows * width * 8 <= budget


def test_dask_engine_equals_in_process(tied_model, client2, monkeypatch):
    """Tiles of 1 row x 6 labels on the workers (the default budget on the cluster: below)."""
    from onebit_dask.engine.dask_engine import DaskEngine

    XA, Bm, b = tied_model
    XA = XA[2:5]
    monkeypatch.setattr(topk, "SCORE_BUDGET", 8 * 6)  # read on the client: sets the tiles
    here = topk.predict_top_k(local_engine(Bm, b), XA, 5, BOUNDS)
    engine = DaskEngine(client2)
    engine.adopt(local_engine(Bm, b).blocks())
    there = topk.predict_top_k(engine, XA, 5, BOUNDS)
    for got, want in zip(there, here):
        np.testing.assert_array_equal(got, want)


@pytest.fixture(scope="module")
def fitted():
    """A thresholded model of 40 labels in 3 blocks, fitted on a label matrix."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((400, 12))
    Y = (X @ rng.standard_normal((12, 40)) + rng.standard_normal(40) > 1.0).astype(int)
    est = OneBitMultiLabel(3, batch_size=3000, n_iter=3, n_shards=3, random_state=0,
                           engine="local", features="none").fit(X, Y)
    return est, rng.standard_normal((37, 12))


@pytest.mark.parametrize("as_matrix", [np.asarray, sp.csr_matrix])
@pytest.mark.parametrize("budget", [topk.SCORE_BUDGET, 8 * 7])
def test_predict_top_k_equals_the_dense_argsort(fitted, monkeypatch, as_matrix, budget):
    est, X = fitted
    X = as_matrix(X)
    monkeypatch.setattr(topk, "SCORE_BUDGET", budget)
    labels, scores = est.predict_top_k(X, 6)
    S = reference_scores(np.asarray(X @ est.A_), est.B_, est.intercept_)
    want_labels, want_scores = dense_top_k(S, 6)
    np.testing.assert_array_equal(labels, want_labels)
    np.testing.assert_array_equal(scores, want_scores)
    # decision_function's BLAS product differs from these scores in the last bits only
    np.testing.assert_allclose(scores, np.take_along_axis(est.decision_function(X), labels, 1),
                               rtol=1e-12, atol=1e-12)


def test_a_loaded_model_predicts_on_the_cluster_as_in_process(fitted, client2, tmp_path,
                                                               monkeypatch):
    est, X = fitted
    path = est.save(tmp_path / "m.zarr")
    monkeypatch.setattr(placement, "KEEP_LOCAL_LIMIT", 0)  # blocks stay on the workers
    with client2.as_current():
        there = OneBitMultiLabel.load(path, engine="dask")
        assert type(there._state.blocks).__name__ == "DaskEngine"
        got = there.predict_top_k(X, 4)
    for a, b in zip(got, est.predict_top_k(X, 4)):
        np.testing.assert_array_equal(a, b)


def test_ranking_pieces_stream_labels_to_the_same_metrics(fitted, monkeypatch):
    """Held-out pieces: the labels' AUCs (scikit-learn) and each row's best labels (the
    dense argsort), the same in tiles of one label."""
    est, X = fitted
    rng = np.random.default_rng(4)
    Y = sp.csr_matrix(rng.random((X.shape[0], 40)) < 0.3)
    XA = X @ est.A_
    S = reference_scores(XA, est.B_, est.intercept_)
    lo, hi = est._state.bounds[1], est._state.bounds[2]
    block = est._live_blocks().blocks()[1]
    runs = []
    for budget in (topk.SCORE_BUDGET, 8):
        monkeypatch.setattr(topk, "SCORE_BUDGET", budget)
        runs.append(B.ranking_pieces(block, Y[:, lo:hi], XA, 5).out)
    for got, want in zip(*runs):
        np.testing.assert_array_equal(got, want)
    aucs, labels, scores = runs[0]
    np.testing.assert_allclose(aucs, [roc_auc_score(Y[:, j].toarray().ravel(), S[:, j])
                                      for j in range(lo, hi)], rtol=1e-12)
    want_labels, want_scores = dense_top_k(S[:, lo:hi], 5)
    np.testing.assert_array_equal(labels, want_labels + lo)
    np.testing.assert_array_equal(scores, want_scores)


def test_cli_predict_prints_the_dense_argsort_whatever_the_tiles(tmp_path, monkeypatch):
    train, test = (os.path.join(FILES, f"emotions_{part}.txt") for part in ("train", "test"))
    model = OneBitMultiLabel(2, batch_size=2000, n_iter=2, n_shards=3, random_state=0,
                             engine="local", features="none").fit(train)
    path = model.save(tmp_path / "m.zarr")
    args = ("predict", path, "--data", test, "--rows", 9, "--top-k", 3, "--workers", 0)
    outs = []
    for budget in (topk.SCORE_BUDGET, 8 * 2):
        monkeypatch.setattr(topk, "SCORE_BUDGET", budget)
        outs.append((run_main(*args, "--json"), run_main(*args)))
    assert all(p.returncode == 0 for pair in outs for p in pair), outs
    assert outs[0][0].stdout == outs[1][0].stdout and outs[0][1].stdout == outs[1][1].stdout
    X = read_xc(test, n_features=model.n_features_in_)[0][:9]
    want_labels, want_scores = dense_top_k(
        reference_scores(np.asarray(X @ model.A_), model.B_, model.intercept_), 3)
    result = json.loads(outs[0][0].stdout)
    assert result["labels"] == want_labels.tolist() and result["rows"] == list(range(9))
    assert result["scores"] == want_scores.tolist()
    assert outs[0][1].stdout.splitlines()[4] == "row 4: " + "  ".join(
        f"{j}:{v:+.3f}" for j, v in zip(want_labels[4], want_scores[4]))


# -- through the label index (onebit_dask.ops.mips) -----------------------------------------
BIG_BOUNDS = [0, 700, 1900, 1901, 4100]  # blocks of 700, 1200, 1 and 2199 labels


def big_model(kind, thresholds=True, seed=0):
    """``(XA, Bm, b)`` of 4100 labels: Gaussian, with duplicated rows, small integers (exact
    ties everywhere) or fitted-like (90 % zero rows, one shared threshold)."""
    rng = np.random.default_rng([seed, ["gauss", "dup", "grid", "fitted"].index(kind)])
    d2 = BIG_BOUNDS[-1]
    Bm, b = rng.standard_normal((d2, 6)), rng.standard_normal(d2)
    XA = rng.standard_normal((61, 6))
    if kind == "dup":
        Bm[rng.integers(0, d2, 1500)] = Bm[rng.integers(0, d2, 1500)]
        b[:] = rng.choice([-0.5, 0.5], d2)
    elif kind == "grid":
        Bm = rng.integers(-2, 3, (d2, 6)).astype(float)
        b = rng.integers(-2, 3, d2).astype(float)
        XA = rng.integers(-2, 3, (61, 6)).astype(float)
    elif kind == "fitted":
        Bm[rng.random(d2) < 0.9] = 0.0
        b[:] = -0.685
        XA *= 0.05
    XA[[3, 40]] = 0.0  # every label ties at its threshold
    return XA, Bm, (b if thresholds else np.zeros(d2))


def big_engine(Bm, b):
    return LocalEngine([B.Block(lo, hi, {"B": Bm[lo:hi], "b": b[lo:hi]})
                        for lo, hi in zip(BIG_BOUNDS[:-1], BIG_BOUNDS[1:])])


@pytest.fixture
def small_leaves(monkeypatch):
    """Leaves of 16 labels and chunks of 13 rows (read on the client, so on a cluster
    too): the index prunes at a few thousand labels a block."""
    monkeypatch.setattr(topk, "LEAF_SIZE", 16)
    monkeypatch.setattr(topk, "CHUNK_ROWS", 13)


@pytest.mark.parametrize("kind", ["gauss", "dup", "grid", "fitted"])
@pytest.mark.parametrize("thresholds", [True, False])
def test_index_top_k_equals_the_dense_argsort(small_leaves, kind, thresholds):
    XA, Bm, b = big_model(kind, thresholds)
    engine = big_engine(Bm, b)
    S = reference_scores(XA, Bm, b)
    for k in (1, 5, 37, 1000, BIG_BOUNDS[-1]):
        labels, scores = topk.predict_top_k(engine, XA, k, BIG_BOUNDS)
        want_labels, want_scores = dense_top_k(S, k)
        np.testing.assert_array_equal(labels, want_labels)
        np.testing.assert_array_equal(scores, want_scores)
    # the index was built and prunes (far fewer scores than rows x labels), or collapsed
    # the fitted-like block's zero rows
    index = topk.label_index(engine.blocks()[3].slots["B"], engine.blocks()[3].slots["b"], 16)
    stats = {}
    mips.top_k(index, XA, 5, stats=stats)
    if kind == "fitted":
        assert index.B.shape[0] < 0.2 * 2199
    else:
        assert stats["fallback_rows"] == 0 and stats["scored"] < 0.5 * XA.shape[0] * 2199


def test_index_top_k_on_the_cluster_equals_in_process(small_leaves, client2):
    from onebit_dask.engine.dask_engine import DaskEngine

    XA, Bm, b = big_model("dup")
    engine = DaskEngine(client2)
    engine.adopt(big_engine(Bm, b).blocks())
    want_labels, want_scores = dense_top_k(reference_scores(XA, Bm, b), 9)
    for _ in range(2):  # built on the workers, then found there
        labels, scores = topk.predict_top_k(engine, XA, 9, BIG_BOUNDS)
        np.testing.assert_array_equal(labels, want_labels)
        np.testing.assert_array_equal(scores, want_scores)


def test_a_block_with_new_rows_gets_a_new_index(small_leaves):
    XA, Bm, b = big_model("gauss")
    engine = big_engine(Bm, b)
    topk.predict_top_k(engine, XA, 5, BIG_BOUNDS)
    Bn, bn = -Bm[::-1].copy(), b[::-1].copy()  # other rows, same shapes
    engine.handles = [blk.evolve(B=Bn[blk.lo:blk.hi], b=bn[blk.lo:blk.hi])
                      for blk in engine.handles]
    got = topk.predict_top_k(engine, XA, 5, BIG_BOUNDS)
    for a, w in zip(got, dense_top_k(reference_scores(XA, Bn, bn), 5)):
        np.testing.assert_array_equal(a, w)
    engine.handles = [blk.evolve(b=np.zeros(blk.hi - blk.lo)) for blk in engine.handles]
    got = topk.predict_top_k(engine, XA, 5, BIG_BOUNDS)  # new thresholds only
    for a, w in zip(got, dense_top_k(reference_scores(XA, Bn, 0.0), 5)):
        np.testing.assert_array_equal(a, w)


def test_non_finite_rows_follow_the_dense_argsort(small_leaves):
    XA, Bm, b = big_model("gauss")
    XA[5, 2], XA[17, 0] = np.nan, np.inf
    with np.errstate(invalid="ignore"):
        got = topk.predict_top_k(big_engine(Bm, b), XA, 7, BIG_BOUNDS)
        want = dense_top_k(reference_scores(XA, Bm, b), 7)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_a_margin_of_zero_is_caught_through_the_engine(small_leaves, monkeypatch):
    """Labels that are permutations of one row tie in real arithmetic against a constant
    row: without the rounding margin the engine's result is not the dense argsort's."""
    import itertools

    rng = np.random.default_rng(7)
    v = rng.standard_normal(7)
    Bm = np.array([v[list(p)] for p in itertools.islice(itertools.permutations(range(7)),
                                                        BIG_BOUNDS[-1])])
    b = np.zeros(BIG_BOUNDS[-1])
    XA = rng.standard_normal((40, 1)) * np.ones(7)
    want = dense_top_k(reference_scores(XA, Bm, b), 20)
    got = topk.predict_top_k(big_engine(Bm, b), XA, 20, BIG_BOUNDS)
    np.testing.assert_array_equal(got[0], want[0])
    monkeypatch.setattr(mips, "SAFETY", 0.0)
    got = topk.predict_top_k(big_engine(Bm, b), XA, 20, BIG_BOUNDS)  # new arrays, new index
    assert not np.array_equal(got[0], want[0])


@pytest.fixture(scope="module")
def fitted_big():
    """A thresholded model of 3000 labels, 2000 of them never positive; batches of 600
    pairs leave about half the labels unsampled (zero rows of B, one shared threshold:
    ties at every row's threshold, as a fitted model at a million labels; the shrunk
    thresholds of ``"estimated"``, whose unsampled labels take the prior's mean)."""
    rng = np.random.default_rng(8)
    X = rng.standard_normal((500, 12))
    Y = np.zeros((500, 3000), dtype=int)
    Y[:, :1000] = X @ rng.standard_normal((12, 1000)) + rng.standard_normal(1000) > 1.5
    est = OneBitMultiLabel(3, batch_size=600, n_iter=2, n_shards=2, random_state=0,
                           engine="local", features="none",
                           threshold="estimated").fit(X, sp.csr_matrix(Y))
    return est, rng.standard_normal((45, 12))


def test_the_estimator_top_k_equals_the_dense_argsort_before_and_after_a_load(
        fitted_big, small_leaves, client2, tmp_path, monkeypatch):
    est, X = fitted_big
    S = reference_scores(X @ est.A_, est.B_, est.intercept_)
    zero = (est.B_ == 0).all(axis=1)
    assert zero.mean() > 0.4 and np.unique(S[:, zero]).size == 1  # they all tie
    want = {k: dense_top_k(S, k) for k in (1, 5, 300)}
    for k, (want_labels, want_scores) in want.items():
        labels, scores = est.predict_top_k(X, k)
        np.testing.assert_array_equal(labels, want_labels)
        np.testing.assert_array_equal(scores, want_scores)
    path = est.save(tmp_path / "m.zarr")
    here = OneBitMultiLabel.load(path, engine="local")  # the index rebuilt at first use
    monkeypatch.setattr(placement, "KEEP_LOCAL_LIMIT", 0)  # blocks stay on the workers
    with client2.as_current():
        there = OneBitMultiLabel.load(path, engine="dask")
        assert type(there._state.blocks).__name__ == "DaskEngine"
        for k, (want_labels, want_scores) in want.items():
            for model in (here, there):
                labels, scores = model.predict_top_k(X, k)
                np.testing.assert_array_equal(labels, want_labels)
                np.testing.assert_array_equal(scores, want_scores)


def test_partial_fit_after_a_top_k_predicts_with_the_new_rows(small_leaves):
    """A step replaces the blocks' rows: the next top-k uses a new index, not the old one."""
    rng = np.random.default_rng(9)
    est = OneBitMultiLabel(3, n_shards=2, random_state=0, engine="local", features="none")
    X = rng.standard_normal((45, 12))
    for step in range(3):
        m = 2000
        Xs = rng.standard_normal((m, 12))
        labels = rng.integers(0, 3000, m)
        y = np.where(rng.random(m) < 0.3, 1, -1)
        est.partial_fit(Xs, labels, y, n_labels=3000)
        want = dense_top_k(reference_scores(X @ est.A_, est.B_, est.intercept_), 5)
        for a, w in zip(est.predict_top_k(X, 5), want):
            np.testing.assert_array_equal(a, w)
