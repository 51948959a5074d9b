"""The Source protocol: every data kind behind it, the shard kinds the engines ask, and
fit on a file."""

import numpy as np
import pytest
import scipy.sparse as sp

from onebit_dask import FullObservationProblem, OneBitMultiLabel, SyntheticProblem
from onebit_dask.data import ShardKind, Source
from onebit_dask.data.inputs import as_source
from onebit_dask.io.xc import read_xc
from onebit_dask.engine import LocalEngine
from onebit_dask.engine import blocks as B
from onebit_dask.data.observations import ZarrSource
from onebit_dask.io import write_observations


@pytest.fixture(scope="module")
def observations():
    return SyntheticProblem(6, 5, 2, seed=1).draw_batches(range(2), 300, 1)


def _sources(tmp_path, observations):
    X, labels, y = observations
    problem = SyntheticProblem(6, 5, 2, seed=1)
    Y = np.zeros((X.shape[0], 5), dtype=bool)
    Y[np.arange(X.shape[0]), labels] = True
    store = write_observations(tmp_path / "obs.zarr", X, labels, y)
    return {
        "problem": (as_source(problem), ShardKind.LABEL_BLOCK),
        "full": (as_source(FullObservationProblem(problem, 50)), ShardKind.LABEL_BLOCK),
        "arrays": (as_source(X, labels, y), ShardKind.ROW_RANGE),
        "store": (as_source(store), ShardKind.ROW_RANGE),
        "label matrix": (as_source(X, Y, random_state=0), ShardKind.LABEL_BLOCK),
        "sparse matrix": (as_source(sp.csr_matrix(X), sp.csr_matrix(Y), random_state=0),
                          ShardKind.LABEL_BLOCK),
    }


def test_every_kind_is_a_source(tmp_path, observations):
    sources = _sources(tmp_path, observations)
    for name, (source, kind) in sources.items():
        assert isinstance(source, Source), name
        assert (source.d1, source.d2) == (6, 5), name
        shards = source.batch(1, 200, 2)
        assert {sh.kind for sh in shards} == {kind}, name
        assert sum(sh.n_obs for sh in shards) == 200, name
        assert source.identity()["kind"], name
        assert source.place(LocalEngine(), [0, 2, 5]).d2 == 5, name
    assert isinstance(sources["store"][0], ZarrSource)


def test_identity_tells_data_apart(observations):
    X, labels, y = observations
    Y = np.zeros((X.shape[0], 5), dtype=bool)
    Y[np.arange(X.shape[0]), labels] = True
    base = as_source(X, Y, random_state=0).identity()
    assert as_source(X, Y, random_state=0).identity() == base
    assert as_source(X, Y, random_state=1).identity() != base
    Y2 = Y.copy()
    Y2[0, 0] = not Y2[0, 0]
    assert as_source(X, Y2, random_state=0).identity() != base
    assert as_source(X, labels, y).identity()["kind"] == "arrays"


def test_engines_refuse_misaligned_label_blocks(observations):
    source = as_source(SyntheticProblem(6, 5, 2, seed=1))
    with pytest.raises(ValueError, match="are not the model's"):
        LocalEngine().prepare(source.batch(0, 100, 2), [0, 1, 5])
    rows = as_source(*observations).batch(0, 100, 2)
    assert isinstance(LocalEngine().prepare(rows, [0, 1, 5]), B.RowShards)


def test_bad_arguments(observations, tmp_path):
    X, labels, y = observations
    with pytest.raises(TypeError, match=r"fit\(problem\) takes no labels or label matrix Y"):
        as_source(SyntheticProblem(6, 5, 2), labels)
    with pytest.raises(TypeError, match=r"fit\(path\) takes no bits, n_labels"):
        as_source(str(tmp_path), bits=y, n_labels=5)
    with pytest.raises(ValueError, match="labels and y are required"):
        as_source(X)


XC = """4 5 3
0,2 0:1 3:0.5
1 1:2
 4:1
0,1,2 0:1 2:1 4:3
"""


def test_fit_on_an_xc_file_equals_fit_on_its_arrays(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(XC)
    X, Y = read_xc(str(path))
    assert X.shape == (4, 5) and sp.issparse(X)
    np.testing.assert_array_equal(Y.toarray(), [[1, 0, 1], [0, 1, 0], [0, 0, 0], [1, 1, 1]])
    np.testing.assert_array_equal(X.toarray()[0], [1, 0, 0, 0.5, 0])
    params = dict(batch_size=50, n_iter=2, n_shards=2, random_state=4)
    from_file = OneBitMultiLabel(1, **params).fit(str(path))
    from_arrays = OneBitMultiLabel(1, **params).fit(X.toarray(), Y.toarray())
    np.testing.assert_allclose(from_file.Q_, from_arrays.Q_, rtol=1e-12, atol=1e-14)
    (tmp_path / "bad.txt").write_text("2 5 3\n0 0:1\n7 1:1\n")
    with pytest.raises(ValueError, match=r"bad.txt:3: label 7 is out of range"):
        OneBitMultiLabel(1).fit(str(tmp_path / "bad.txt"))
