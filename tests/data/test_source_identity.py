"""What identifies a fit's data for its checkpoint (a source's ``identity()``)."""

import numpy as np
import zarr

from onebit_dask.data.arrays import ArraySource
from onebit_dask.data.observations import ZarrSource
from onebit_dask.io import write_observations


def data_identity(X, labels=None, y=None, n_labels=None):
    source = X if labels is None else ArraySource(X, labels, y, n_labels)
    return source.identity()


def _arrays(n=10_000, d1=5, d2=7):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((n, d1)), rng.integers(0, d2, n),
            rng.choice(np.array([-1, 1], dtype=np.int8), n))


def test_every_row_of_arrays_counts():
    X, labels, y = _arrays()
    before = data_identity(X, labels, y, 7)
    assert data_identity(X.copy(order="F"), labels, y, 7) == before  # the values, not layout
    changed = X.copy()
    changed[1:3] *= -50  # rows between any sample of 1024 evenly spaced rows
    assert data_identity(changed, labels, y, 7)["sha256"] != before["sha256"]
    flipped = y.copy()
    flipped[-1] *= -1
    assert data_identity(X, labels, flipped, 7)["sha256"] != before["sha256"]


def test_a_store_rewritten_in_place_is_another_store(tmp_path):
    X, labels, y = _arrays(4000)
    path = write_observations(tmp_path / "o.zarr", X, labels, y, n_labels=7, chunk_rows=1000)
    before = data_identity(ZarrSource(path))
    assert data_identity(ZarrSource(path)) == before  # reading changes nothing
    group = zarr.open_group(path, mode="r+")
    group["X"][1:3] = -50 * X[1:3]
    after = data_identity(ZarrSource(path))
    assert after["files_sha256"] != before["files_sha256"]
    assert {k: v for k, v in after.items() if k != "files_sha256"} == {
        k: v for k, v in before.items() if k != "files_sha256"}
