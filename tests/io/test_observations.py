"""Observations stores: round trips, the Dask path reading on workers, errors."""

import os

import numpy as np
import pytest
import zarr

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.data.observations import ZarrSource
from onebit_dask.io import write_observations

PROBLEM = SyntheticProblem(30, 20, 2, seed=4)


@pytest.fixture(scope="module")
def observations():
    return PROBLEM.draw_batches(range(4), 3000, 2)


@pytest.fixture(scope="module")
def store(tmp_path_factory, observations):
    path = tmp_path_factory.mktemp("obs") / "obs.zarr"
    return write_observations(path, *observations, n_labels=20, chunk_rows=1000)


def test_round_trip(store, observations):
    group = zarr.open_group(store, mode="r")
    for name, arr in zip(("X", "labels", "y"), observations):
        np.testing.assert_array_equal(group[name][:], arr)
    assert group["X"].chunks == (1000, 30) and group["X"].dtype == np.float32
    assert group.attrs["n_labels"] == 20
    shards = ZarrSource(store).batch(1, 3000, 3)
    X = np.concatenate([sh.load()[0] for sh in shards])
    np.testing.assert_array_equal(X, observations[0][3000:6000])
    assert all(sh.label_range[0] <= sh.load()[1].min() for sh in shards)


@pytest.mark.integration
def test_fit_on_store_equals_fit_on_arrays(store, observations, client2):
    params = dict(batch_size=3000, n_iter=3, n_shards=3, random_state=0)
    arrays = OneBitMultiLabel(2, **params).fit(*observations, n_labels=20)
    local = OneBitMultiLabel(2, **params).fit(store)
    with client2.as_current():
        on_dask = OneBitMultiLabel(2, engine="dask", **params).fit(store)
    np.testing.assert_allclose(local.coef_, arrays.coef_, rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(local.Q_, on_dask.Q_)
    assert local.n_samples_seen_ == 12_000


def test_errors(tmp_path, store, observations):
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_observations(store, *observations)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        OneBitMultiLabel(2).fit(str(tmp_path / "missing.zarr"))
    other = zarr.open_group(str(tmp_path / "other.zarr"), mode="w")
    other.attrs["format"] = "something-else"
    with pytest.raises(ValueError, match="is not an observations store"):
        ZarrSource(str(tmp_path / "other.zarr"))
    with pytest.raises(TypeError, match="takes no labels"):
        OneBitMultiLabel(2).fit(store, observations[1])
    with pytest.raises(ValueError, match=r"labels\[\d+\]=\d+ is not allowed"):
        write_observations(tmp_path / "bad.zarr", *observations, n_labels=5)


def test_non_finite_features_are_reported_by_the_shard(tmp_path, observations):
    path = tmp_path / "raw.zarr"
    write_observations(path, observations[0][:100], *[a[:100] for a in observations[1:]],
                       n_labels=20)
    zarr.open_group(str(path), mode="r+")["X"][42, 3] = np.inf  # corrupted after writing
    with pytest.raises(ValueError, match=r"X\[42, 3\]=inf is not allowed: X must be finite"):
        OneBitMultiLabel(2, batch_size=100, n_iter=0).fit(str(path))


def _copy(store, tmp_path):
    import shutil

    target = tmp_path / "copy.zarr"
    shutil.copytree(store, target)
    return str(target)


def test_every_chunk_is_written_even_all_zero(tmp_path):
    X = np.zeros((200, 3))
    X[100:] = 1.0
    path = write_observations(tmp_path / "z.zarr", X, np.zeros(200, int), np.ones(200),
                              n_labels=2, chunk_rows=100)
    for name in ("X/c/0/0", "X/c/1/0", "labels/c/0", "labels/c/1", "y/c/0"):
        assert (tmp_path / "z.zarr" / name).is_file(), name
    ZarrSource(path)  # a store whose first chunk is all zeros is whole


def test_missing_chunk_is_an_error_naming_the_rows(store, tmp_path):
    import os

    from onebit_dask.io.stores.zarr_format import DamagedStoreError

    path = _copy(store, tmp_path)
    os.remove(os.path.join(path, "X", "c", "4", "0"))
    with pytest.raises(DamagedStoreError, match=r"X/c/4/0 holding rows 4000\.\.4999 is missing"):
        ZarrSource(path)
    shards = ZarrSource(_copy(store, tmp_path / "b")).batch(1, 3000, 2)  # opened whole,
    os.remove(os.path.join(shards[0].path, "labels", "c", "3"))           # damaged afterwards
    with pytest.raises(DamagedStoreError, match=r"labels/c/3 holding rows 3000\.\.3999"):
        shards[0].load()


def test_truncated_chunk_names_path_and_rows(store, tmp_path):
    import os

    from onebit_dask.io.stores.zarr_format import DamagedStoreError

    path = _copy(store, tmp_path)
    chunk = os.path.join(path, "X", "c", "7", "0")
    data = open(chunk, "rb").read()
    with open(chunk, "wb") as fh:
        fh.write(data[: len(data) // 3])
    source = ZarrSource(path)  # the layout is fine: the shard finds the damage
    shard = next(sh for sh in source.batch(2, 3000, 2) if sh.lo <= 7000 < sh.hi)
    with pytest.raises(DamagedStoreError, match=rf"data='{path}': the chunk X/c/7/0 holding rows "
                                                r"7000\.\.7999 cannot be read"):
        shard.load()
    with pytest.raises(DamagedStoreError, match="X/c/7/0"):
        OneBitMultiLabel(2, batch_size=3000, n_iter=3).fit(path)


def test_one_dimensional_and_integer_features_are_refused(tmp_path):
    for name, X in (("flat", np.ones(50)), ("ints", np.ones((50, 3), dtype=np.int32))):
        group = zarr.open_group(str(tmp_path / name), mode="w")
        group.create_array("X", data=X)
        group.create_array("labels", data=np.zeros(50, dtype=np.int64))
        group.create_array("y", data=np.ones(50, dtype=np.int8))
        group.attrs.update({"format": "onebit-dask/observations", "version": 1, "n_labels": 1})
    with pytest.raises(ValueError, match=r"X has shape \(50,\): an observations store's X must "
                                         r"be 2-D"):
        ZarrSource(str(tmp_path / "flat"))
    with pytest.raises(TypeError, match="X has dtype int32: an observations store holds float32 "
                                        "or float64"):
        ZarrSource(str(tmp_path / "ints"))


def test_overwrite_replaces_an_observations_store_only(tmp_path, observations):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "f").write_text("x")
    with pytest.raises(ValueError, match="not an observations store.*nothing was changed"):
        write_observations(mine, *observations, overwrite=True)
    assert (mine / "f").read_text() == "x"
    path = write_observations(tmp_path / "o.zarr", *observations)
    write_observations(path, *observations, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["mine", "o.zarr"]  # no temporary left


def test_xarray_reads_an_observations_store(store, observations):
    import xarray as xr

    ds = xr.open_zarr(store, consolidated=False)
    assert ds["X"].dims == ("row", "feature") and ds["labels"].dims == ("row",)
    np.testing.assert_array_equal(ds["labels"].values, observations[1])
    assert ds.attrs["format"] == "onebit-dask/observations"
