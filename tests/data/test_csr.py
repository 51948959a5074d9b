"""A label matrix read from a CSR store by row ranges: the law of its pairs and bits,
fit on the store, Dask equals in-process."""

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.stats

from onebit_dask import OneBitMultiLabel
from onebit_dask.data.csr import CsrStoreSource
from onebit_dask.data.inputs import as_source
from onebit_dask.data.label_matrix import LabelMatrixSource, check_label_matrix

csr_store = pytest.importorskip("onebit_dask.io.csr_store")

N, D2 = 24, 5


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """``X`` = the identity (a row's feature names the row), a random ``Y``."""
    rng = np.random.default_rng(0)
    Y = rng.random((N, D2)) < 0.4
    Y[0] = False
    path = tmp_path_factory.mktemp("csr") / "train.txt"
    lines = [f"{N} {N} {D2}"]
    for i in range(N):
        labels = ",".join(str(j) for j in np.flatnonzero(Y[i]))
        lines.append(f"{labels} {i}:1")
    path.write_text("\n".join(lines) + "\n")
    out = str(path.parent / "train.zarr")
    csr_store.convert(str(path), out, chunk_rows=5)
    return out, sp.identity(N, format="csr"), Y


def _cells(source, Y, t, m, n_shards):
    """The drawn ``(row, label)`` cells of batch ``t``, checking every bit against ``Y``."""
    counts = np.zeros((N, D2), dtype=np.int64)
    for shard in source.batch(t, m, n_shards):
        X, labels, y = shard.load()
        rows = X.indices  # one feature per row: its row
        np.testing.assert_array_equal(y, 2.0 * Y[rows, labels] - 1.0)
        np.add.at(counts, (rows, labels), 1)
    return counts


def test_pairs_are_uniform_on_the_grid(store):
    """Chi-square of the cell counts against the uniform law at level 1e-3 (fixed seeds);
    the same test rejects a source that only draws in the first half of the rows."""
    path, X, Y = store
    source = as_source(path, random_state=7)
    assert isinstance(source, CsrStoreSource) and (source.d1, source.d2) == (N, D2)
    counts = _cells(source, Y, 3, 24_000, 4)
    assert counts.sum() == 24_000
    assert scipy.stats.chisquare(counts.ravel()).pvalue > 1e-3
    in_memory = LabelMatrixSource(X, check_label_matrix(Y, N), seed=7)
    memory_counts = np.zeros((N, D2), dtype=np.int64)
    for shard in in_memory.batch(3, 24_000, 4):
        Xs, labels, y = shard.load()
        np.add.at(memory_counts, (Xs.indices, labels), 1)
    assert scipy.stats.chisquare(memory_counts.ravel()).pvalue > 1e-3
    wrong = counts.copy()
    wrong[: N // 2] += wrong[N // 2:]
    wrong[N // 2:] = 0
    assert scipy.stats.chisquare(wrong.ravel()).pvalue < 1e-3


def test_fit_on_the_store_dask_equals_in_process(store, client2):
    path, _, _ = store
    params = dict(batch_size=400, n_iter=2, n_shards=3, random_state=2)
    local = OneBitMultiLabel(2, **params).fit(path)
    with client2.as_current():
        on_dask = OneBitMultiLabel(2, engine="dask", **params).fit(path)
    np.testing.assert_array_equal(local.Q_, on_dask.Q_)
    assert local.n_samples_seen_ == 3 * 400
