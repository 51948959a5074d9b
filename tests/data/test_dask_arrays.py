"""Observations whose features are a dask array (onebit_dask/data/dask_arrays.py): the
same batches, shards and fit as the arrays in memory, each shard's rows computed where
its task runs; bad arrays refused before any work."""

import numpy as np
import pytest

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.testing import assert_same_fit

da = pytest.importorskip("dask.array")
PROBLEM = SyntheticProblem(30, 20, 2, flip=0.02, seed=2, n_test=300)
PARAMS = dict(batch_size=3000, n_iter=3, n_shards=3, random_state=0)


@pytest.fixture(scope="module")
def data():
    X, labels, y = PROBLEM.draw_batches(range(4), 3000, 2)
    return X, labels, y


@pytest.mark.parametrize("features", ["none", "standardize"])
def test_the_same_fit_as_the_arrays_in_memory(data, features):
    X, labels, y = data
    params = dict(PARAMS, features=features)
    in_memory = OneBitMultiLabel(2, **params).fit(X, labels, y, n_labels=PROBLEM.d2)
    lazy = OneBitMultiLabel(2, **params).fit(da.from_array(X, chunks=(1000, 30)),
                                             da.from_array(labels, chunks=1000), y,
                                             n_labels=PROBLEM.d2)
    assert_same_fit(in_memory, lazy)


def test_bad_dask_arrays_are_refused_before_any_work(data):
    X, labels, y = data
    est = OneBitMultiLabel(2, **PARAMS)
    with pytest.raises(ValueError, match="unknown shape .*compute_chunk_sizes"):
        est.fit(da.from_array(X, chunks=(1000, 30))[da.from_array(labels) >= 0], labels, y)
    with pytest.raises(ValueError, match="must be 2-D"):
        est.fit(da.from_array(X[:, 0], chunks=1000), labels, y)
    with pytest.raises(ValueError, match=r"labels has shape \(11999,\), but X has 12000 rows"):
        est.fit(da.from_array(X, chunks=(1000, 30)), labels[1:], y)
    bad = X.copy()
    bad[4100, 3] = np.nan  # found by the shard that reads it, naming the row
    with pytest.raises(ValueError, match=r"X\[4100, 3\]=nan is not allowed"):
        est.fit(da.from_array(bad, chunks=(1000, 30)), labels, y, n_labels=PROBLEM.d2)


@pytest.mark.integration
def test_the_workers_compute_the_rows_of_their_shards(client2, data):
    """On a Dask cluster the rows of batches 1, 2, 3 are computed by the tasks that load
    the shards, on the workers: not here, nor gathered here by a compute of the whole
    array (the rows of batch 0 initialise the model here, as for every source); the fit
    equals the fit in memory."""
    import dask

    X, labels, y = data

    def rows(lo, hi):
        if lo >= PARAMS["batch_size"]:
            from distributed import get_worker

            task = str(get_worker().get_current_task())  # ValueError outside a worker
            if not task.startswith("onebit-"):
                raise AssertionError(f"rows {lo}..{hi} computed by the task {task}")
        return X[lo:hi]

    Xd = da.concatenate([da.from_delayed(dask.delayed(rows)(lo, lo + 1000), (1000, 30),
                                         dtype=X.dtype) for lo in range(0, 12000, 1000)])
    in_memory = OneBitMultiLabel(2, **PARAMS).fit(X, labels, y, n_labels=PROBLEM.d2)
    with client2.as_current():
        on_cluster = OneBitMultiLabel(2, engine="dask", features="none", **PARAMS).fit(
            Xd, labels, y, n_labels=PROBLEM.d2)
    assert_same_fit(OneBitMultiLabel(2, features="none", **PARAMS).fit(
        X, labels, y, n_labels=PROBLEM.d2), on_cluster)
    assert in_memory.n_samples_seen_ == on_cluster.n_samples_seen_
