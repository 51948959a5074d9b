"""The result cube: layout, attributes, per-cell region writes from parallel tasks."""

import os

import numpy as np
import pytest

from onebit_dask.sweep import store
from onebit_dask.sweep.spec import parse_spec

SPEC = parse_spec("""
name: tiny
grid:
  d1: [12, 16]
  d2: [8]
  rank: [2]
  noise: [none, flip=0.05, gaussian=0.3]
  step: [paper, averaged]
  batch_size: [500]
  n_iter: [2, 3]
  seed: [0, 1]
fixed: {n_test: 50, n_shards: 2}
""", "tiny.yaml")


@pytest.fixture
def cube(tmp_path):
    path = str(tmp_path / "cube.zarr")
    store.create(path, SPEC)
    return path


def test_layout(cube):
    ds = store.open_cube(cube)
    assert ds["auc"].dims == (*SPEC.dims, "iteration")
    assert ds.sizes["iteration"] == 4 and ds.sizes["noise"] == 3
    assert list(ds["noise"].values) == ["none", "flip=0.05", "gaussian=0.3"]
    assert list(ds["noise_model"].values) == ["none", "flip", "gaussian"]
    np.testing.assert_array_equal(ds["noise_level"].values, [0.0, 0.05, 0.3])
    for name in ("spectral_error", "frobenius_error", "hamming_loss", "auc", "n_samples",
                 "wall_s", "done", "failed"):
        assert "description" in ds[name].attrs and "units" in ds[name].attrs
    assert ds["auc"].encoding["chunks"] == (1,) * len(SPEC.dims) + (4,)
    assert not ds["done"].any() and np.isnan(ds["auc"]).all()
    for key in ("spec_text", "onebit_dask_version", "git_revision", "numpy_version",
                "dask_version", "xarray_version", "zarr_version", "created"):
        assert ds.attrs[key]
    assert ds.attrs["spec_fingerprint"] == SPEC.fingerprint()


def _result(value, n):
    return {**{k: np.full(n, value) for k in ("spectral_error", "frobenius_error", "hamming_loss",
                                               "auc", "n_samples")}, "wall_s": value}


def _write(args):
    path, index, value = args
    n_iter = SPEC.grid["n_iter"][index[SPEC.dims.index("n_iter")]]
    store.write_cell(path, SPEC, index, _result(value, n_iter + 1))
    return index


def test_region_writes_from_parallel_tasks(cube, client2):
    cells = [index for index, _ in SPEC.cells()]
    values = {index: float(k) for k, index in enumerate(cells)}
    done = client2.gather(client2.map(_write, [(cube, i, v) for i, v in values.items()]))
    assert sorted(done) == sorted(cells)
    ds = store.open_cube(cube).load()
    assert ds["done"].all() and not ds["failed"].any()
    auc = ds["auc"].values
    for index, value in values.items():
        n_iter = SPEC.grid["n_iter"][index[SPEC.dims.index("n_iter")]]
        np.testing.assert_array_equal(auc[index][: n_iter + 1], value)
        assert np.isnan(auc[index][n_iter + 1:]).all()
        assert ds["wall_s"].values[index] == value


def test_one_value_method_lands_on_its_last_iteration_and_all_steps(cube):
    where = {"d1": 1, "noise": 2, "n_iter": 1, "seed": 1}  # n_iter = 3
    index = tuple(where.get(dim, 0) for dim in SPEC.dims)
    store.write_cell(cube, SPEC, index, _result(7.0, 1), all_steps=True)
    ds = store.open_cube(cube).load()
    for step in range(2):
        cell = list(index)
        cell[SPEC.dims.index("step")] = step
        np.testing.assert_array_equal(ds["auc"].values[tuple(cell)], [np.nan] * 3 + [7.0])
        assert ds["done"].values[tuple(cell)]


def test_failed_cell(cube):
    store.write_cell(cube, SPEC, (0,) * len(SPEC.dims), None)
    ds = store.open_cube(cube)
    assert ds["failed"].values.sum() == 1 and not ds["done"].any()


def test_check_output(tmp_path, cube):
    assert store.check_output(str(tmp_path / "new.zarr"), SPEC, False) is True
    assert store.check_output(cube, SPEC, False) is False
    other = parse_spec(SPEC.text.replace("seed: [0, 1]", "seed: [5]"))
    with pytest.raises(store.StoreError, match="holds the results of another spec"):
        store.check_output(cube, other, False)
    assert store.check_output(cube, other, True) is True
    with pytest.raises(store.StoreError, match="does not exist"):
        store.check_output(str(tmp_path / "no" / "dir.zarr"), SPEC, False)
    foreign = tmp_path / "foreign.zarr"
    foreign.mkdir()
    (foreign / "data.txt").write_text("not ours")
    with pytest.raises(store.StoreError, match="is not an onebit-dask sweep store"):
        store.check_output(str(foreign), SPEC, True)
    assert (foreign / "data.txt").read_text() == "not ours"


def test_read_only_directory(tmp_path):
    # /sys is read-only even for root; a chmod 500 directory only for other users
    targets = ["/sys/cube.zarr"]
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        targets.append(str(ro / "cube.zarr"))
    for target in targets:
        with pytest.raises(store.StoreError, match="is not writable"):
            store.check_output(target, SPEC, False)
