"""CSR stores: file -> store -> arrays round trips, row ranges, bad files leaving
nothing behind, and damaged stores never read as zeros."""

import os
import pickle
import shutil

import numpy as np
import pytest
import zarr

from onebit_dask.io.csr_store import (
    FORMAT,
    convert,
    is_csr_store,
    load,
    open_csr_store,
)
from onebit_dask.io.xc import XCFormatError, read_xc
from onebit_dask.io.stores.zarr_format import DamagedStoreError
from tests.support.helpers import FILES



@pytest.mark.parametrize("name, chunk_rows, chunk_nnz", [
    ("bibtex_train.txt", 64, 1000), ("emotions_test.txt", 40, 1000),
    ("emotions_test.txt", 1000, 2**20)])
def test_round_trip_file_store_arrays(tmp_path, name, chunk_rows, chunk_nnz):
    X, Y = read_xc(FILES / name)
    path = convert(FILES / name, tmp_path / "s.zarr", chunk_rows=chunk_rows, chunk_nnz=chunk_nnz)
    store = open_csr_store(path)
    assert (store.n, store.d1, store.d2) == (X.shape[0], X.shape[1], Y.shape[1])
    assert (store.nnz_x, store.nnz_y) == (X.nnz, Y.nnz)
    X2, Y2 = load(path)
    assert X2.dtype == np.float64 and Y2.dtype == np.int8
    assert (X2 != X).nnz == 0 and (Y2 != Y).nnz == 0  # sparse equal
    np.testing.assert_array_equal(X2.toarray(), X.toarray())  # and dense equal
    np.testing.assert_array_equal(Y2.toarray(), Y.toarray())
    rng = np.random.default_rng(0)
    for lo, hi in [(0, 0), (0, 1), (store.n - 1, store.n), *np.sort(
            rng.integers(0, store.n + 1, size=(5, 2)), axis=1).tolist()]:
        x, y = store.rows(lo, hi)
        np.testing.assert_array_equal(x.toarray(), X[lo:hi].toarray())
        np.testing.assert_array_equal(y.toarray(), Y[lo:hi].toarray())
    x, y = pickle.loads(pickle.dumps(store)).rows(3, 9)  # what a worker receives
    np.testing.assert_array_equal(y.toarray(), Y[3:9].toarray())
    np.testing.assert_array_equal(store.labels(3, 9).toarray(), Y[3:9].toarray())
    assert sorted(os.listdir(tmp_path)) == ["s.zarr"]


def test_store_layout(tmp_path):
    convert(FILES / "emotions_train.txt", tmp_path / "s.zarr", chunk_rows=50)
    group = zarr.open_group(tmp_path / "s.zarr", mode="r")
    assert group.attrs["format"] == FORMAT and group.attrs["version"] == 3
    assert (group.attrs["n"], group.attrs["d1"], group.attrs["d2"]) == (300, 72, 6)
    for name in ("X/indptr", "X/indices", "X/data", "Y/indptr", "Y/indices"):
        assert group[name].metadata.dimension_names is not None
    assert group["X/indptr"].chunks == (50,) and group["X/indptr"].shape == (301,)
    assert is_csr_store(tmp_path / "s.zarr") and not is_csr_store(FILES / "emotions_train.txt")
    assert not is_csr_store(f"file://{tmp_path / 's.zarr'}")  # read from local paths only


def test_headerless_file(tmp_path):
    src = tmp_path / "plain.svm"
    src.write_text("".join((FILES / "emotions_test.txt").read_text().splitlines(True)[1:]))
    convert(src, tmp_path / "s.zarr", chunk_rows=50, n_features=72, n_labels=6)
    X, Y = load(tmp_path / "s.zarr")
    X0, Y0 = read_xc(FILES / "emotions_test.txt")
    assert (X != X0).nnz == 0 and (Y != Y0).nnz == 0
    with pytest.raises(ValueError, match="n_labels=7 is not allowed: the store"):
        load(tmp_path / "s.zarr", n_labels=7)


def _bad_file(tmp_path, line_no, text):
    lines = (FILES / "bibtex_train.txt").read_text().splitlines(keepends=True)
    lines[line_no - 1] = text
    path = tmp_path / "src" / "bad.txt"
    path.parent.mkdir(exist_ok=True)
    path.write_text("".join(lines))
    return path


@pytest.mark.parametrize("line_no, text, match", [
    (251, "3 0:1 x\n", r"bad\.txt:251: malformed line"),  # after 3 chunks were written
    (280, "3 0:1 1836:1\n", r"bad\.txt:280: feature index 1836 is out of range"),
    (2, "200 0:1\n", r"bad\.txt:2: label 200 is out of range"),
    (301, "", "declares 300 instances but the file has 299"),
])
def test_bad_file_writes_nothing(tmp_path, line_no, text, match):
    src = _bad_file(tmp_path, line_no, text)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(XCFormatError, match=match):
        convert(src, out / "s.zarr", chunk_rows=64)
    assert os.listdir(out) == []


def test_empty_file_and_existing_target(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(XCFormatError, match="the file is empty"):
        convert(tmp_path / "empty.txt", tmp_path / "s.zarr")
    assert sorted(os.listdir(tmp_path)) == ["empty.txt"]
    mine = tmp_path / "mine.zarr"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="store_path=.*mine.zarr' exists"):
        convert(FILES / "emotions_test.txt", mine)
    assert os.listdir(mine) == ["notes.txt"] and (mine / "notes.txt").read_text() == "keep me"
    assert sorted(os.listdir(tmp_path)) == ["empty.txt", "mine.zarr"]
    with pytest.raises(ValueError, match="chunk_rows=0 is not allowed"):
        convert(FILES / "emotions_test.txt", tmp_path / "s.zarr", chunk_rows=0)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    path = tmp_path_factory.mktemp("converted") / "s.zarr"
    convert(FILES / "emotions_train.txt", path, chunk_rows=50, chunk_nnz=1000)
    return path


@pytest.fixture
def store(converted, tmp_path):
    """A copy of a converted store, for a test to damage."""
    return shutil.copytree(converted, tmp_path / "s.zarr")


def test_missing_chunk_is_named_and_only_needed_chunks_are_read(store):
    # X/indices chunk 3 holds entries 3000..3999: rows 41..55 (72 features per row)
    os.remove(store / "X" / "indices" / "c" / "3")
    s = open_csr_store(store)
    x, _ = s.rows(0, 40)  # rows before that chunk still read
    assert s.labels(0, 300).shape == (300, 6)  # and the labels of every row (no X read)
    np.testing.assert_array_equal(x.toarray(), read_xc(FILES / "emotions_train.txt")[0][:40].toarray())
    with pytest.raises(DamagedStoreError, match=r"s\.zarr'.*the chunk X/indices/c/3 "
                                                r"\(elements 3000\.\.3999\) is missing"):
        s.rows(40, 60)
    with pytest.raises(DamagedStoreError, match="X/indices/c/3"):
        load(store)
    os.remove(store / "Y" / "indptr" / "c" / "5")  # rows 250..299 (+1)
    with pytest.raises(DamagedStoreError, match="Y/indptr/c/5"):
        s.rows(260, 261)
    (store / "X" / "data" / "c" / "0").write_bytes(b"not a chunk")
    with pytest.raises(DamagedStoreError, match=r"X/data\[0:.*\] cannot be read"):
        s.rows(0, 5)


def test_inconsistent_indptr_and_indices(store):
    group = zarr.open_group(store, mode="r+")
    group["X/indptr"][10:12] = [5, 4]
    with pytest.raises(DamagedStoreError, match=r"X/indptr\[0:20\] is not a row pointer"):
        open_csr_store(store).rows(0, 19)
    group["Y/indices"][0] = 6
    with pytest.raises(DamagedStoreError, match=r"Y/indices\[0:.*outside 0\.\.5"):
        open_csr_store(store).rows(0, 3)


def test_wrong_dtype_shape_or_missing_array(store, tmp_path):
    copy = shutil.copytree(store, tmp_path / "copy.zarr")
    group = zarr.open_group(copy, mode="r+")
    group.create_array("X/data", shape=(10,), dtype="int8", overwrite=True)
    with pytest.raises(DamagedStoreError, match=r"the array X/data has \(dtype, shape\)"):
        open_csr_store(copy)
    shutil.rmtree(store / "Y" / "indices")
    with pytest.raises(DamagedStoreError, match="the array Y/indices is missing"):
        open_csr_store(store)
    other = zarr.open_group(tmp_path / "other.zarr", mode="w")
    other.attrs["format"] = "onebit-dask/observations"
    with pytest.raises(ValueError, match="is not a CSR store"):
        open_csr_store(tmp_path / "other.zarr")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        open_csr_store(tmp_path / "nope.zarr")


def test_rows_bad_range(store):
    s = open_csr_store(store)
    with pytest.raises(ValueError, match="hi=301 is not allowed"):
        s.rows(0, 301)
    with pytest.raises(ValueError, match="hi=2 is not allowed"):
        s.rows(3, 2)
