"""Features in row chunks (onebit_dask.data.chunked_rows) and a dask array X checked and
held as them (onebit_dask.data.dask_inputs)."""

import pickle

import numpy as np
import pytest
import scipy.sparse

from onebit_dask.data import chunked_rows
from onebit_dask.data.chunked_rows import ChunkedRows, held_rows
from onebit_dask.data.dask_inputs import chunked_features, gathered_labels
from onebit_dask.data.inputs import as_source


def _rows(n=50, d1=4, cuts=(0, 7, 7, 30, 50)):
    X = np.random.default_rng(0).standard_normal((n, d1))
    loaded = []

    def load(k):
        loaded.append(k)
        return X[cuts[k]: cuts[k + 1]].copy()

    return X, ChunkedRows(cuts, range(len(cuts) - 1), d1, X.dtype, load=load), loaded


def test_rows_read_from_the_chunks_are_the_rows_of_the_whole_array():
    X, rows, _ = _rows()
    assert rows.shape == X.shape and rows.dtype == X.dtype
    picked = np.array([49, 0, 7, 7, 29, 30, 6, 3])
    for index in (picked, picked[:0], np.arange(50)):
        got = rows[index]
        np.testing.assert_array_equal(got, X[index])
        assert got.flags.c_contiguous and got.dtype == X.dtype
    for a, b in ((0, 50), (5, 8), (7, 30), (29, 31), (10, 10), (45, 99)):
        np.testing.assert_array_equal(rows[a:b], X[a:b])
        assert rows[a:b].flags.c_contiguous
    np.testing.assert_array_equal(rows.whole(), X)
    with pytest.raises(IndexError):
        rows[0:10:2]


def test_at_most_two_loaded_chunks_are_kept():
    assert chunked_rows.KEPT_CHUNKS == 2
    _, rows, loaded = _rows()
    rows[0:50]
    rows[0:50]  # read in order: each chunk loaded once a pass
    assert loaded == [0, 1, 2, 3] * 2
    rows[np.array([45, 20])]  # the last two chunks: kept
    assert loaded == [0, 1, 2, 3] * 2
    rows[np.array([0])]  # the first: loaded again
    assert loaded[-1] == 0 and len(loaded) == 9


def test_computed_chunks_travel_as_they_are():
    X = np.arange(12.0).reshape(6, 2)
    rows = pickle.loads(pickle.dumps(held_rows([0, 4, 6], 2, np.float64, X[:4], X[4:])))
    np.testing.assert_array_equal(rows[np.array([5, 0])], X[[5, 0]])


def test_a_dask_array_is_checked_chunk_by_chunk():
    da = pytest.importorskip("dask.array")
    X = np.random.default_rng(1).standard_normal((90, 6))
    rows, has_feature = chunked_features(da.from_array(X, chunks=(40, 4)))
    assert has_feature and rows.shape == X.shape and rows.dtype == np.float64
    assert list(rows.offsets) == [0, 40, 80, 90]
    np.testing.assert_array_equal(rows[np.array([89, 0, 41])], X[[89, 0, 41]])
    as32, _ = chunked_features(da.from_array(X.astype(np.float32), chunks=30))
    assert as32.dtype == np.float32  # float32 stays float32; ints become float64
    assert chunked_features(da.from_array(np.arange(12).reshape(4, 3)))[0].dtype == np.float64
    assert not chunked_features(da.zeros((10, 3), chunks=5))[1]
    bad = X.copy()
    bad[57, 2] = np.nan
    with pytest.raises(ValueError, match=r"X\[57, 2\]=nan is not allowed: X must be finite"):
        chunked_features(da.from_array(bad, chunks=(40, 6)))


@pytest.mark.parametrize("make, match", [
    (lambda da: da.ones(10, chunks=5), r"X is a dask array of shape \(10,\): X must be 2-D"),
    (lambda da: da.ones((10, 3), chunks=5)[da.ones(10, chunks=5) > 0],
     r"unknown chunk sizes.*X = X.compute_chunk_sizes\(\)"),
    (lambda da: da.ones((0, 3), chunks=5), r"shape \(0, 3\): at least one row"),
    (lambda da: da.from_array(np.array([["a"]] * 10, dtype=object), chunks=5),
     "dtype object: X must hold"),
    (lambda da: da.ones((10, 3), chunks=5).map_blocks(scipy.sparse.csr_matrix,
                                                       meta=np.empty((0, 0))),
     r"csr_matrix chunks whose meta says numpy: .*X.map_blocks\(scipy.sparse.csr_matrix\)"),
])
def test_a_dask_array_that_is_not_2d_dense_numbers_of_known_chunks_is_refused(make, match):
    da = pytest.importorskip("dask.array")
    with pytest.raises((ValueError, TypeError), match=match):
        as_source(make(da), np.ones((10, 2)), random_state=0)  # refused before any fit


def test_labels_that_do_not_match_the_rows_are_refused_before_anything_is_computed(
        monkeypatch):
    da = pytest.importorskip("dask.array")
    import dask

    X = da.ones((10, 3), chunks=5)
    monkeypatch.setattr(dask, "compute", lambda *a, **k: pytest.fail("computed"))
    with pytest.raises(ValueError, match="Y has 9 rows, but X has 10: pass one row of Y"):
        as_source(X, np.ones((9, 2)), random_state=0)
    with pytest.raises(TypeError, match="takes an in-memory X.*not a dask array"):
        as_source(X, np.zeros(10), np.ones(10), random_state=0)


def test_a_dask_label_matrix_is_gathered_as_the_array_would_be():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(2)
    X = rng.standard_normal((30, 3))
    Y = (rng.random((30, 5)) < 0.4).astype(np.int8)
    got = gathered_labels(da.from_array(Y, chunks=(7, 2)))
    assert scipy.sparse.isspmatrix_csr(got) or scipy.sparse.issparse(got)
    np.testing.assert_array_equal(got.toarray(), Y)
    dask_y = as_source(X, da.from_array(Y, chunks=7), random_state=4)
    assert dask_y.identity() == as_source(X, Y, random_state=4).identity()
    binary = as_source(X, da.from_array(np.where(Y[:, 0] > 0, "b", "a"), chunks=7),
                       random_state=4)
    assert list(binary.classes) == ["a", "b"]


@pytest.mark.parametrize("dtype, chunks", [(np.float64, (64, 3)), (np.float32, (1000, 2)),
                                           (np.int64, (100_000, 5))])
def test_a_dask_array_identifies_its_data_as_the_computed_array(dtype, chunks, monkeypatch):
    """The checkpoint identity (a SHA-256 of every value, computed a chunk at a time) is
    that of ``X.compute()``: a checkpoint of one resumes with the other."""
    da = pytest.importorskip("dask.array")
    from onebit_dask.data import arrays

    monkeypatch.setattr(arrays, "DIGEST_ROWS", 100)  # digest pieces across chunk ends
    rng = np.random.default_rng(3)
    X = (10 * rng.standard_normal((700, 5))).astype(dtype)
    Y = (rng.random((700, 4)) < 0.3).astype(np.int8)
    Xd = da.from_array(X, chunks=chunks)
    assert as_source(Xd, Y, random_state=1).identity() == as_source(X, Y,
                                                                    random_state=1).identity()
    changed = X.copy()
    changed[333, 1] += 1
    assert (as_source(da.from_array(changed, chunks=chunks), Y, random_state=1).identity()
            != as_source(Xd, Y, random_state=1).identity())
