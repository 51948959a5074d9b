"""Observations stores: round trips, the Dask path reading on workers, errors."""

import numpy as np
import pytest
import zarr

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.io import ZarrSource, write_observations

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
    shards = ZarrSource(store, 3000).batch(1, 3)
    X = np.concatenate([sh.load()[0] for sh in shards])
    np.testing.assert_array_equal(X, observations[0][3000:6000])
    assert all(sh.label_range[0] <= sh.load()[1].min() for sh in shards)


def test_fit_on_store_equals_fit_on_arrays(store, observations, client2):
    params = dict(batch_size=3000, n_iter=3, n_shards=3, random_state=0)
    arrays = OneBitMultiLabel(2, **params).fit(*observations, n_labels=20)
    local = OneBitMultiLabel(2, **params).fit(store)
    on_dask = OneBitMultiLabel(2, client=client2, **params).fit(store)
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
        ZarrSource(str(tmp_path / "other.zarr"), 10)
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
