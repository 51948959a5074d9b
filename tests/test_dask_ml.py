"""dask-ml's ``Incremental`` around :class:`OneBitMultiLabel` (issue 40): a binary target
end to end, and the 2-D label matrix it cannot pass refused in one message."""

import numpy as np
import pytest

from onebit_dask import OneBitMultiLabel
from onebit_dask.testing import assert_same_fit

PARAMS = dict(batch_size=2000, engine="local", random_state=0)


def _binary(n=4000, d1=10, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d1))
    w = rng.standard_normal(d1)
    return X, np.where(X @ w > 0.3, "yes", "no")


def test_incremental_fits_a_binary_target_as_partial_fit_over_its_blocks():
    """``Incremental(est).fit(Xd, yd, classes=...)`` is ``partial_fit`` on each block in
    order, bit for bit; its ``predict`` is a dask array equal to the model's, its
    ``score`` the model's (macro AUC)."""
    pytest.importorskip("dask_ml")
    import dask
    import dask.array as da
    from dask_ml.wrappers import Incremental

    X, y = _binary()
    Xd, yd = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
    with dask.config.set(scheduler="synchronous"):
        inc = Incremental(OneBitMultiLabel(1, **PARAMS), shuffle_blocks=False)
        inc.fit(Xd, yd, classes=["no", "yes"])
    reference = OneBitMultiLabel(1, **PARAMS)
    for k in range(4):
        reference.partial_fit(X[k * 1000:(k + 1) * 1000], y[k * 1000:(k + 1) * 1000],
                              classes=["no", "yes"])
    assert_same_fit(inc.estimator_, reference, X, link=False)
    assert inc.estimator_.n_steps_ == 3 and inc.estimator_.n_samples_seen_ == 4 * 2000
    predicted = inc.predict(Xd)
    assert isinstance(predicted, da.Array)
    np.testing.assert_array_equal(predicted.compute(), reference.predict(X))
    assert inc.score(Xd, yd) == reference.score(X, y)
    assert np.mean(predicted.compute() == y) > 0.9  # it learns


KEY_REFUSAL = "is a dask task key, not a block of labels: dask_ml.wrappers.Incremental"


def test_a_task_key_for_labels_is_refused_in_one_message():
    """dask-ml addresses ``y``'s blocks by row only, so for a 2-D label matrix
    ``partial_fit`` is handed the task key ``(name, i)``: refused, saying what to do."""
    X, _ = _binary(200)
    with pytest.raises(TypeError, match=KEY_REFUSAL):
        OneBitMultiLabel(1, **PARAMS).partial_fit(X, ("array-0123abcd", 0))


def test_incremental_with_a_label_matrix_is_refused_in_one_message():
    """The same through dask-ml itself."""
    X, _ = _binary(200)
    pytest.importorskip("dask_ml")
    import dask
    import dask.array as da
    from dask_ml.wrappers import Incremental

    Y = (X[:, :3] > 0).astype(np.int8)
    with dask.config.set(scheduler="synchronous"), pytest.raises(TypeError, match=KEY_REFUSAL):
        Incremental(OneBitMultiLabel(1, **PARAMS)).fit(
            da.from_array(X, chunks=100), da.from_array(Y, chunks=100))
