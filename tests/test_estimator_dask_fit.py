"""fit(X, Y) with a dask array X: the fit of X.compute(), bit for bit, in this process and
on a cluster, without X ever computed whole in the client."""

import numpy as np
import pytest

from onebit_dask import OneBitMultiLabel
from onebit_dask.ops import features
from onebit_dask.testing import assert_same_fit
from tests.support.clusters import TaskSpecSizes

da = pytest.importorskip("dask.array")


def _data(n=400, d1=12, d2=9, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((n, d1)) + rng.random(d1)).astype(dtype)
    Y = (rng.random((n, d2)) < 0.3).astype(np.int8)
    return X, Y


def assert_same_model(a, b, X):
    assert_same_fit(a, b, X)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)


def guard_whole_computes(monkeypatch):
    """Make computing a dask array of more than one chunk of rows raise (``compute``,
    ``np.asarray``, ``dask.compute``): only single chunks and reductions to a few numbers
    may be computed for the client."""
    import dask
    import dask.base

    def whole(value):
        return isinstance(value, da.Array) and value.ndim == 2 and value.numblocks[0] > 1

    compute, dask_compute = da.Array.compute, dask.base.compute

    def guarded(self, **kwargs):
        assert not whole(self), f"a dask array of {self.numblocks[0]} row chunks computed"
        return compute(self, **kwargs)

    def guarded_all(*args, **kwargs):
        assert not any(whole(a) for a in args), "a dask array of several row chunks computed"
        return dask_compute(*args, **kwargs)

    monkeypatch.setattr(da.Array, "compute", guarded)
    monkeypatch.setattr(dask.base, "compute", guarded_all)
    monkeypatch.setattr(dask, "compute", guarded_all)


@pytest.mark.parametrize("params", [
    dict(),  # features="auto", thresholds
    dict(features="none", threshold="none", step="select"),
    dict(features="whiten", queries="model", query_warmup=1),
    dict(validation_fraction=0.5, n_iter=2),
])
def test_a_dask_array_fits_as_the_computed_array_in_process(params, monkeypatch):
    """The feature map's pieces of 37 rows across chunks of 90: per-piece sums computed
    by dask, added in order here."""
    monkeypatch.setattr(features, "CHUNK_BYTES", 8 * 12 * 37)
    X, Y = _data()
    fit = dict(rank=2, batch_size=1500, n_iter=3, n_shards=3, random_state=5,
               engine="local") | params
    want = OneBitMultiLabel(**fit).fit(X, Y)
    guard_whole_computes(monkeypatch)
    with pytest.raises(AssertionError, match="row chunks computed"):
        np.asarray(da.from_array(X, chunks=(100, 12)))  # the guard guards
    got = OneBitMultiLabel(**fit).fit(da.from_array(X, chunks=(90, 5)), Y)
    assert_same_model(want, got, X)


def test_float32_chunks_and_rows_fewer_than_a_blocks_pairs_in_process():
    """float32 stays float32; with fewer rows than a block's pairs the shards read every
    row (the chunks joined), as they read the whole array."""
    X, Y = _data(n=150, dtype=np.float32)
    fit = dict(rank=2, batch_size=3000, n_iter=2, n_shards=2, random_state=1, engine="local")
    assert_same_model(OneBitMultiLabel(**fit).fit(X, Y),
                      OneBitMultiLabel(**fit).fit(da.from_array(X, chunks=40), Y), X)


def test_a_checkpoint_resumes_across_the_array_and_its_dask_array(tmp_path):
    X, Y = _data()
    fit = dict(rank=2, batch_size=1500, n_iter=3, n_shards=2, random_state=2, engine="local")
    whole = OneBitMultiLabel(**fit).fit(X, Y)
    path = tmp_path / "ck.zarr"
    OneBitMultiLabel(**(fit | dict(n_iter=3))).fit(X, Y, checkpoint=path)
    resumed = OneBitMultiLabel(**fit).fit(da.from_array(X, chunks=70), Y, checkpoint=path)
    assert_same_model(whole, resumed, X)
    changed = X.copy()
    changed[5, 5] += 1
    with pytest.raises(ValueError, match="(?i)checkpoint"):
        OneBitMultiLabel(**fit).fit(da.from_array(changed, chunks=70), Y, checkpoint=path)


def _generated(n, d1, rows):
    """A dask array made on the workers from seeds (no array in the graph), and its
    values."""
    def chunk(block_info=None):
        (lo, hi), _ = block_info[None]["array-location"]
        return np.random.default_rng(lo).standard_normal((hi - lo, d1))

    X = da.map_blocks(chunk, chunks=(rows, (d1,)), dtype=np.float64)
    assert X.shape == (n, d1)
    return X


def test_a_dask_array_fits_as_the_computed_array_on_a_cluster(client2, monkeypatch):
    """On the Dask engine the workers compute the chunks; no task the client submits
    carries more than a small part of ``X`` (one chunk is 72 kB); the model is the
    in-process fit's of the computed array, also for a persisted array (on the Dask
    engine, and in process with its chunks computed by the cluster)."""
    monkeypatch.setattr(features, "CHUNK_BYTES", 8 * 30 * 250)  # pieces across chunks
    rows = (300,) * 5 + (100,)
    Xd = _generated(1600, 30, rows)
    X = Xd.compute()
    Y = (np.random.default_rng(9).random((1600, 7)) < 0.2).astype(np.int8)
    fit = dict(rank=2, batch_size=4000, n_iter=3, n_shards=3, random_state=4)
    want = OneBitMultiLabel(engine="local", **fit).fit(X, Y)
    client2.register_plugin(TaskSpecSizes(), name="task-spec-sizes")
    guard_whole_computes(monkeypatch)
    with client2.as_current():
        got = OneBitMultiLabel(engine="dask", **fit).fit(Xd, Y)
        kept = Xd.persist()
        persisted = OneBitMultiLabel(engine="dask", **fit).fit(kept, Y)
        here = OneBitMultiLabel(engine="local", **fit).fit(kept, Y)  # chunks from the cluster
    sizes = client2.run_on_scheduler(
        lambda dask_scheduler: dask_scheduler.plugins["task-spec-sizes"].sizes)
    assert max(sizes.values()) < X[:300].nbytes / 4, max(sizes.items(), key=lambda kv: kv[1])
    assert_same_model(want, got, X)
    assert_same_model(want, persisted, X)
    assert_same_model(want, here, X)


@pytest.mark.parametrize("features_", ["none", "auto"])
def test_a_dask_eval_set_is_read_a_chunk_at_a_time(features_, monkeypatch):
    """``eval_set=(X_test, Y_test)`` as dask arrays: the held-out metrics of every
    evaluated iteration equal those of the computed arrays (the products a chunk of rows
    at a time: equal to 1e-12, continuous features, no ties), and the test features are
    never computed whole."""
    X, Y = _data()
    X_test, Y_test = _data(n=250, seed=1)
    fit = dict(rank=2, batch_size=1500, n_iter=3, random_state=5, engine="local",
               features=features_)
    want = OneBitMultiLabel(**fit).fit(X, Y, eval_set=(X_test, Y_test))
    guard_whole_computes(monkeypatch)
    got = OneBitMultiLabel(**fit).fit(X, Y, eval_set=(da.from_array(X_test, chunks=(60, 12)),
                                                      da.from_array(Y_test, chunks=(60, 9))))
    keys = [k for k in want.history_[0] if k.startswith(("auc", "precision", "ndcg", "psp"))]
    assert keys
    for a, b in zip(want.history_, got.history_):
        for key in keys:
            assert b[key] == pytest.approx(a[key], abs=1e-12), key
    with pytest.raises(ValueError, match="eval_set X_test has 7 features, but the training "
                                         "data have 12"):
        OneBitMultiLabel(**fit).fit(X, Y, eval_set=(da.from_array(X_test[:, :7]), Y_test))


def _sparse_data(n=400, d1=30, d2=9, seed=0):
    """Non-negative sparse features (about 10 % non-zero, tf-idf-like) and labels."""
    import scipy.sparse

    rng = np.random.default_rng(seed)
    X = scipy.sparse.random(n, d1, density=0.1, format="csr", random_state=rng) * 3
    Y = (rng.random((n, d2)) < 0.3).astype(np.int8)
    return X, Y


@pytest.mark.parametrize("params", [dict(), dict(features="none", threshold="none")])
def test_a_dask_array_of_sparse_chunks_fits_as_its_csr_matrix(params, monkeypatch):
    """A dask ``X`` of ``scipy.sparse`` chunks (row and column chunks) is gathered a row
    chunk at a time into the CSR matrix the in-memory sparse path holds (never densified:
    ``toarray`` of 60 rows or more fails the test) and fits as that matrix, bit for bit; an
    ``eval_set`` of sparse chunks gives the metrics of its CSR matrix."""
    import scipy.sparse

    X, Y = _sparse_data()
    X_test, Y_test = _sparse_data(n=150, seed=1)
    fit = dict(rank=2, batch_size=1500, n_iter=3, n_shards=3, random_state=5,
               engine="local") | params
    want = OneBitMultiLabel(**fit).fit(X, Y, eval_set=(X_test, Y_test))
    Xd = da.from_array(X, chunks=(90, 20), asarray=False)
    Xd_test = da.from_array(X_test, chunks=(60, 30), asarray=False)
    assert scipy.sparse.issparse(Xd._meta)
    guard_whole_computes(monkeypatch)
    toarray = scipy.sparse.csr_matrix.toarray

    def densified(self, *args, **kwargs):  # a label's sums (at most d2 = 9 rows) may be
        assert self.shape[0] < 60, f"rows of X densified: {self.shape}"
        return toarray(self, *args, **kwargs)

    monkeypatch.setattr(scipy.sparse.csr_matrix, "toarray", densified)
    got = OneBitMultiLabel(**fit).fit(Xd, Y, eval_set=(Xd_test, Y_test))
    monkeypatch.undo()
    assert_same_model(want, got, X.toarray())
    assert [h.get("auc") for h in got.history_] == [h.get("auc") for h in want.history_]


def test_sparse_chunks_a_meta_does_not_announce_are_refused_in_one_message():
    import scipy.sparse

    X, Y = _sparse_data()
    Xd = da.from_array(X.toarray(), chunks=(100, -1)).map_blocks(
        scipy.sparse.csr_matrix, meta=np.empty((0, 0)))
    with pytest.raises(TypeError, match="X is a dask array of csr_matrix chunks whose meta "
                                        "says numpy: .*asarray=False"):
        OneBitMultiLabel(2, batch_size=1000, n_iter=1, engine="local").fit(Xd, Y)


def test_a_dask_array_of_a_coo_matrix_is_refused_saying_how_to_build_it():
    """``da.from_array`` of a ``coo_matrix`` makes chunks dask cannot slice: one line that
    says to build it from a CSR matrix (before: scipy's bare "not subscriptable")."""
    X, Y = _sparse_data()
    Xd = da.from_array(X.tocoo(), chunks=(100, -1), asarray=False)
    with pytest.raises(TypeError, match=r"X's chunks cannot be computed \('coo_matrix' object "
                                        r"is not subscriptable\): build the dask array from "
                                        r"a CSR matrix"):
        OneBitMultiLabel(2, batch_size=1000, n_iter=1, engine="local").fit(Xd, Y)
