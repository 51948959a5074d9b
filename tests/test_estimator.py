import copy
import time

import numpy as np
import pytest

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask import metrics


@pytest.fixture(scope="module")
def planted():
    problem = SyntheticProblem(60, 30, 2, seed=0, n_test=2000)
    est = OneBitMultiLabel(2, batch_size=20_000, n_iter=8, random_state=0).fit(problem)
    return problem, est


def colwise_error(problem, n):
    """Column-wise one-bit estimate (normalised mean of y x per label) on n observations.

    Ignoring the low-rank link, column j sees about n / d2 observations and has
    an RMS error near sqrt(d1 d2 / n) / lambda.
    """
    X, labels, y = problem.draw(0, n)
    W = np.zeros((problem.d1, problem.d2))
    np.add.at(W.T, labels, y[:, None] * X)
    W /= np.linalg.norm(W, axis=0)
    return metrics.frobenius_error(*problem.truth, W, np.eye(problem.d2))


def test_planted_recovery(planted):
    problem, est = planted
    errors = [h["frobenius_error"] for h in est.history_]
    assert len(errors) == 9
    assert errors[-1] < 0.5 * errors[0]
    assert np.mean(errors[-3:]) < np.mean(errors[1:4])
    # the low-rank method beats the column-wise one on as many observations by >= 3x
    assert errors[-1] < colwise_error(problem, est.n_samples_seen_) / 3
    assert est.history_[-1]["auc"] > 0.99
    assert est.history_[-1]["spectral_error"] < est.history_[0]["spectral_error"]


def test_fitted_state(planted):
    problem, est = planted
    assert est.Q_.shape == (90, 4) and est.V_.shape == (90, 4)
    np.testing.assert_allclose(est.Q_.T @ est.Q_, np.eye(4), atol=1e-10)
    assert est.A_.shape == (60, 4) and est.B_.shape == (30, 4)
    np.testing.assert_allclose(np.linalg.norm(est.coef_, axis=0), 1.0, rtol=1e-10)
    assert est.n_features_in_ == 60 and est.n_labels_ == 30
    assert est.n_steps_ == 8 and est.n_samples_seen_ == 9 * 20_000
    assert [h["n_samples"] for h in est.history_] == [20_000 * (i + 1) for i in range(9)]
    X = problem.test_set().X[:50]
    scores = X @ est.coef_ + est.intercept_  # the default model has thresholds
    np.testing.assert_allclose(est.decision_function(X), scores, rtol=1e-10, atol=1e-12)
    predicted = est.predict(X)  # scikit-learn's multi-label indicator
    assert predicted.dtype == np.int64
    np.testing.assert_array_equal(predicted, (scores >= 0).astype(int))
    np.testing.assert_allclose(est.decision_function(X, labels=[3, 7]),
                               scores[:, [3, 7]], rtol=1e-10, atol=1e-12)


def test_same_seed_same_result_other_seed_other_result():
    problem = SyntheticProblem(20, 10, 2, seed=3, n_test=100)
    fit = lambda rs: OneBitMultiLabel(2, batch_size=2000, n_iter=3, init_svd="randomized",
                                      random_state=rs).fit(problem)
    a, b, c = fit(1), fit(1), fit(2)
    np.testing.assert_array_equal(a.Q_, b.Q_)
    assert a.history_[-1]["auc"] == b.history_[-1]["auc"]
    assert not np.allclose(a.Q_, c.Q_)


def test_randomized_and_dense_initialisation_agree():
    problem = SyntheticProblem(40, 25, 2, seed=5, n_test=500)
    fits = {init: OneBitMultiLabel(2, batch_size=20_000, n_iter=0, init_svd=init,
                                   init_power_iter=6, random_state=0).fit(problem)
            for init in ("dense", "randomized")}
    dense, rand = fits["dense"], fits["randomized"]
    assert np.abs(dense.coef_ - rand.coef_).max() < 1e-4
    assert dense.history_[0]["auc"] == pytest.approx(rand.history_[0]["auc"], abs=1e-4)


@pytest.mark.parametrize("step", ["paper", "moment"])
def test_fit_on_arrays_equals_fit_on_problem(step):
    # the explicit sampler draws the features that draw_batches returns
    problem = SyntheticProblem(20, 10, 2, seed=3, n_test=100, sampler="explicit")
    m, T = 3000, 3
    kw = dict(batch_size=m, n_iter=T, n_shards=3, random_state=0, step=step, features="none",
              threshold="estimated")
    est_p = OneBitMultiLabel(2, **kw).fit(problem)
    X, labels, y = problem.draw_batches(range(T + 1), m, 3)
    est_a = OneBitMultiLabel(2, **kw)
    est_a.fit(X, labels, y, n_labels=10)
    np.testing.assert_allclose(est_a.coef_, est_p.coef_, rtol=1e-8, atol=1e-10)
    assert "auc" not in est_a.history_[0]


def test_auto_step_is_the_papers_on_a_problem_and_select_on_data():
    problem = SyntheticProblem(20, 10, 2, seed=3, n_test=100, sampler="explicit")
    kw = dict(batch_size=3000, n_iter=2, n_shards=3, random_state=0)
    X, labels, y = problem.draw_batches(range(3), 3000, 3)
    for data, more, step in [((problem,), {}, "paper"), ((X, labels, y), {"n_labels": 10},
                                                         "select")]:
        auto = OneBitMultiLabel(2, **kw).fit(*data, **more)
        named = OneBitMultiLabel(2, step=step, **kw).fit(*data, **more)
        np.testing.assert_array_equal(auto.coef_, named.coef_)
        assert auto.get_params()["step"] == "auto"
    # partial_fit continues a fit of a problem with the paper's step
    X4, labels4, y4 = problem.draw_batches([3], 3000, 3)
    fitted = OneBitMultiLabel(2, **kw).fit(problem)
    auto, paper, moment = (copy.deepcopy(fitted).set_params(step=s)
                           for s in ("auto", "paper", "moment"))
    for est in (auto, paper, moment):
        est.partial_fit(X4, labels4, y4)
    np.testing.assert_array_equal(auto.coef_, paper.coef_)
    assert not np.array_equal(auto.coef_, moment.coef_)


def test_partial_fit_equals_fit():
    problem = SyntheticProblem(20, 10, 2, seed=3)
    m = 2000
    X, labels, y = problem.draw_batches(range(4), m)
    # partial_fit's "auto" on data is the moment step (fit's is "select", whose two
    # branches need the whole schedule)
    full = OneBitMultiLabel(2, batch_size=m, n_iter=3, step="moment", features="none",
                            random_state=0).fit(X, labels, y, n_labels=10)
    est = OneBitMultiLabel(2, random_state=0, features="none")
    for b in range(4):
        rows = slice(b * m, (b + 1) * m)
        assert est.partial_fit(X[rows], labels[rows], y[rows], n_labels=10) is est
    np.testing.assert_array_equal(est.Q_, full.Q_)
    assert est.n_steps_ == 3 and est.n_samples_seen_ == 4 * m


def test_reused_batches_warn():
    problem = SyntheticProblem(10, 5, 1, seed=3)
    X, labels, y = problem.draw(0, 500)
    with pytest.warns(UserWarning, match="batches are reused"):
        OneBitMultiLabel(1, batch_size=200, n_iter=3).fit(X, labels, y, n_labels=5)


def test_zero_iterations_is_the_initialisation():
    problem = SyntheticProblem(20, 10, 2, seed=3, n_test=100)
    est = OneBitMultiLabel(2, batch_size=5000, n_iter=0, random_state=0).fit(problem)
    assert est.n_steps_ == 0 and len(est.history_) == 1


def test_graph_params_roundtrip():
    est = OneBitMultiLabel(3, batch_size=10, step="averaged")
    assert est.get_params()["step"] == "averaged"
    assert est.set_params(n_iter=2).n_iter == 2


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 6))
    labels = rng.integers(0, 4, 40)
    y = np.where(rng.random(40) < 0.5, -1, 1)
    return X, labels, y


@pytest.mark.parametrize("params, match", [
    (dict(rank=0), r"rank=0 is not allowed: .* must be an int in the range \[1, inf\)"),
    (dict(rank=5), r"rank=5 is not allowed: rank must be <= min\(d1, d2\) = 4"),
    (dict(rank=1, batch_size=0), "batch_size=0 is not allowed: .* range \\[1, inf\\)"),
    (dict(rank=1, n_iter=-1), "n_iter=-1 is not allowed: .* range \\[0, inf\\)"),
    (dict(rank=1, step="fast"),
     r"step='fast' is not allowed: .* must be a str among .*'averaged'"),
    (dict(rank=1, n_shards=0), "n_shards=0 is not allowed"),
    (dict(rank=1, init_svd="svd"), "init_svd='svd' is not allowed: .* must be a str among"),
    (dict(rank=1, engine="threads"), "engine='threads' is not allowed: .* must be a str among"),
])
def test_bad_parameters(data, params, match):
    with pytest.raises(ValueError, match=match):
        OneBitMultiLabel(**params).fit(*data, n_labels=4)


def test_bad_random_state(data):
    with pytest.raises(TypeError, match="random_state='x'"):
        OneBitMultiLabel(1, random_state="x").fit(*data)


def test_bad_observations(data):
    X, labels, y = data
    est = OneBitMultiLabel(1)
    with pytest.raises(ValueError, match=r"labels\[\d+\]=3 is not allowed: .*\[0, 3\)"):
        est.fit(X, labels, y, n_labels=3)
    with pytest.raises(ValueError, match=r"labels\[0\]=-1 is not allowed"):
        est.fit(X, np.r_[-1, labels[1:]], y)
    with pytest.raises(TypeError, match="labels has dtype float64: labels must be integers"):
        est.fit(X, labels + 0.5, y)
    with pytest.raises(ValueError, match=r"y\[0\]=2 is not allowed: y must be -1 or \+1"):
        est.fit(X, labels, np.r_[2, y[1:]])
    with pytest.raises(ValueError, match=r"y\[0\]=0 is not allowed with -1 elsewhere"):
        est.fit(X, labels, np.r_[0, y[1:]])
    X_nan = X.copy()
    X_nan[3, 2] = np.nan
    with pytest.raises(ValueError, match=r"X\[3, 2\]=nan is not allowed: X must be finite"):
        est.fit(X_nan, labels, y)
    with pytest.raises(ValueError, match=r"labels has shape \(39,\), but X has 40 rows"):
        est.fit(X, labels[1:], y)
    with pytest.raises(ValueError, match=r"y has shape \(41,\), but X has 40 rows"):
        est.fit(X, labels, np.r_[y, 1])
    with pytest.raises(ValueError, match="labels and y are required"):
        est.fit(X)


def test_feature_count_after_fitting(data):
    X, labels, y = data
    est = OneBitMultiLabel(1, random_state=0).partial_fit(X, labels, y, n_labels=4)
    for method in (est.partial_fit, est.predict, est.decision_function):
        args = (labels, y) if method == est.partial_fit else ()
        with pytest.raises(ValueError, match="X has 5 features, but OneBitMultiLabel is "
                                             "expecting 6 features"):
            method(X[:, :5], *args)
    with pytest.raises(ValueError, match=r"labels=.* is not allowed: .*\[0, 4\)"):
        est.decision_function(X, labels=[4])


def test_partial_fit_needs_n_labels_and_predict_needs_fit(data):
    with pytest.raises(TypeError, match="n_labels=None is not allowed on the first call"):
        OneBitMultiLabel(1).partial_fit(*data)
    from sklearn.exceptions import NotFittedError

    for method in ("predict", "decision_function", "predict_top_k"):
        with pytest.raises(NotFittedError, match="not fitted yet"):
            getattr(OneBitMultiLabel(1), method)(data[0])


def test_coef_refuses_huge_dense():
    from onebit_dask.baselines import ColumnwiseOneBit

    est = ColumnwiseOneBit()
    est.A_, est.B_ = np.zeros((1000, 2)), np.zeros((100_000, 2))
    with pytest.raises(MemoryError, match="use the factors"):
        est.coef_


def test_partial_fit_refuses_another_label_count(data):
    X, labels, y = data
    est = OneBitMultiLabel(1, random_state=0).partial_fit(X, labels, y, n_labels=int(labels.max()) + 1)
    with pytest.raises(ValueError, match=r"n_labels=99 is not allowed: this model was started"):
        est.partial_fit(X, labels, y, n_labels=99)
    est.partial_fit(X, labels, y)  # the same count, omitted: fine


def test_in_memory_fit_copies_no_batch():
    """fit(X, labels, y) reads each batch where it is: the scores of all rows in one pass,
    then only the active rows, into per-label sums. A copy of a batch (split by label
    block, or converted to float64) would allocate at least the batch's size; the peak
    here stays under a third of it (per-row temporaries are ~1/10 of a 1600-byte row)."""
    import tracemalloc

    problem = SyntheticProblem(400, 12, 2, flip=0.05, seed=1, sampler="explicit")
    m = 10_000
    X, labels, y = problem.draw_batches(range(3), m, 3)
    y = y.astype(np.float64)
    batch_bytes = m * X.shape[1] * X.itemsize
    est = OneBitMultiLabel(2, batch_size=m, n_iter=2, n_shards=3, random_state=0, step="paper",
                           features="none")
    tracemalloc.start()
    try:
        est.fit(X, labels, y, n_labels=12)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < batch_bytes / 3, (peak, batch_bytes)
    assert 0 < est.history_[-1]["n_active"] < m / 2  # the steps did select rows


def test_non_finite_features_found_in_one_pass():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 6)).astype(np.float32)
    labels, y = rng.integers(0, 3, 50), np.where(rng.random(50) < 0.5, -1, 1)
    big = X.copy()
    big[7] = 3e38  # finite entries whose row sum overflows: allowed
    OneBitMultiLabel(1, batch_size=50, n_iter=0).fit(big, labels, y, n_labels=3)
    for row, col, value in [(7, 4, np.inf), (48, 0, -np.inf), (12, 5, np.nan)]:
        bad = big.copy()
        bad[row, col] = value
        bad[49, 1] = np.nan  # a later one: the first is named
        with pytest.raises(ValueError, match=rf"X\[{row}, {col}\]={value} is not allowed"):
            OneBitMultiLabel(1).fit(bad, labels, y, n_labels=3)


def label_matrix_stream(seed=0, n=600, d1=8, d2=12):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d1))
    return X, (X @ rng.standard_normal((d1, d2)) > 0.5).astype(np.int8)


def test_partial_fit_on_a_label_matrix_steps_on_uniform_pairs_of_its_grid():
    """partial_fit(X, Y) is partial_fit(X[i], j, 2 Y_ij - 1) on batch_size pairs drawn
    uniformly from the chunk's grid with the fit's generator (random_state): the same
    factors, to rounding (the label blocks' sums add in another order than the row
    ranges'), call after call; a draw from another generator differs."""
    X, Y = label_matrix_stream()
    params = dict(batch_size=700, random_state=3, engine="local", init_svd="dense")
    matrix, bits, other = (OneBitMultiLabel(2, **params) for _ in range(3))
    rng, wrong = np.random.default_rng(3), np.random.default_rng(4)
    for lo in (0, 200, 400):
        chunk, labels = X[lo:lo + 200], Y[lo:lo + 200]
        matrix.partial_fit(chunk, labels, classes=np.arange(12))
        for est, gen in ((bits, rng), (other, wrong)):
            i = gen.integers(0, 200, size=700)
            j = gen.integers(0, 12, size=700)
            est.partial_fit(chunk[i], j, 2 * labels[i, j] - 1, n_labels=12)
    np.testing.assert_allclose(matrix.A_, bits.A_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(matrix.B_, bits.B_, rtol=0, atol=1e-12)
    assert matrix.n_samples_seen_ == 2100
    assert not np.allclose(matrix.B_, other.B_, rtol=0, atol=1e-3)


def _pairs_rows_read(monkeypatch):
    """Record, for each label-block shard of a step, whether it read each row once
    (``rows_of_bits`` gave ``at``) or gathered its pairs' rows."""
    import onebit_dask.data.label_matrix as label_matrix

    real, seen = label_matrix.rows_of_bits, []

    def spy(X, rows):
        out = real(X, rows)
        seen.append((rows.size, X.shape[0], out[1] is not None))
        return out

    monkeypatch.setattr(label_matrix, "rows_of_bits", spy)
    return seen


@pytest.mark.parametrize("sparse", [False, True])
def test_partial_fit_on_a_label_matrix_reads_each_row_once_as_a_fit(monkeypatch, sparse):
    """partial_fit(X, Y) steps on the fit's label-block shards of its drawn pairs (issue
    40; issue 39 item 2): a block whose pairs outnumber the chunk's rows reads each row
    once, one with fewer gathers them. The pairs are those of the gathered path before
    (``partial_fit(X[i], j, 2 Y_ij - 1)`` with the same generator), the factors and scores
    equal it to rounding (the sums add by row), the macro AUC within 1e-9."""
    import scipy.sparse as sp

    X, Y = label_matrix_stream(n=600, d1=8, d2=12)
    if sparse:
        X = sp.random(600, 8, density=0.4, format="csr", random_state=5)
    seen = _pairs_rows_read(monkeypatch)
    params = dict(random_state=3, engine="local", init_svd="dense", n_shards=3)
    by_row, gathered = OneBitMultiLabel(2, **params), OneBitMultiLabel(2, **params)
    rng = np.random.default_rng(3)
    # 3 blocks of about 1000 pairs over 150 rows (by row), then about 33 over 150 (gathered)
    for lo, m in ((0, 3000), (150, 3000), (300, 100), (450, 3000)):
        chunk, labels = X[lo:lo + 150], Y[lo:lo + 150]
        by_row.set_params(batch_size=m).partial_fit(chunk, labels)
        i, j = rng.integers(0, 150, size=m), rng.integers(0, 12, size=m)
        bits = 2 * np.asarray(labels[i, j]).ravel() - 1
        gathered.set_params(batch_size=m).partial_fit(chunk[i], j, bits, n_labels=12)
    reads = [once for _, _, once in seen]
    assert len(reads) == 12 and reads == [True] * 6 + [False] * 3 + [True] * 3, seen
    assert by_row.n_samples_seen_ == gathered.n_samples_seen_ == 9100
    np.testing.assert_allclose(by_row.A_, gathered.A_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(by_row.B_, gathered.B_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(by_row.decision_function(X), gathered.decision_function(X),
                               rtol=0, atol=1e-11)
    assert abs(by_row.score(X, Y) - gathered.score(X, Y)) <= 1e-9


def test_partial_fit_on_a_label_matrix_with_a_feature_map_equals_the_gathered_path():
    """With a feature map (estimated on the first call from the drawn pairs' rows, each as
    often as drawn, as before) and the default randomized start, the by-row steps equal
    the gathered path's to rounding: ``_gathered_partial_fit`` is the code before."""
    X, Y = label_matrix_stream(n=400, d1=8, d2=12)
    for features in ("standardize", "ridge"):
        params = dict(random_state=1, engine="local", n_shards=2, batch_size=2000,
                      features=features)
        by_row, gathered = OneBitMultiLabel(2, **params), OneBitMultiLabel(2, **params)
        for lo in (0, 100, 200, 300):
            by_row.partial_fit(X[lo:lo + 100], Y[lo:lo + 100])
            _gathered_partial_fit(gathered, X[lo:lo + 100], Y[lo:lo + 100])
        np.testing.assert_allclose(by_row.decision_function(X),
                                   gathered.decision_function(X), rtol=0, atol=1e-11)


def _gathered_partial_fit(est, X, Y):
    """``est.partial_fit(X, Y)`` as it was before issue 40 (every pair's row gathered,
    the batch cut into row ranges), for a label matrix ``Y``, with ``classes`` None."""
    from onebit_dask.data.arrays import ArraySource
    from onebit_dask.data.label_matrix import check_label_matrix, uniform_batch
    from onebit_dask.engine import placement
    from onebit_dask.fit import loop as fitting
    from onebit_dask.fit.state import FitSettings, new_state
    from onebit_dask.utils.validation import check_observations

    first = not hasattr(est, "A_")
    est._validate_params()
    X = est._validate_X(X, reset=first)
    Y = check_label_matrix(Y, X.shape[0])
    settings = FitSettings.of(est.get_params(deep=False), planted=False, partial=True)
    state = (new_state(X.shape[1], Y.shape[1], est.n_shards, est.random_state)
             if first else est._state)
    X, labels, bits = uniform_batch(X, Y, est.batch_size, state.rng)
    X, labels, y, d2 = check_observations(X, labels, bits, n_labels=Y.shape[1])
    shards = ArraySource(X, labels, y, d2).batch(0, X.shape[0], est.n_shards)
    engine = placement.engine_named(est.engine)
    if first:
        est._begin(state)
        fitting.map_features(settings, est._state, lambda: X,
                             lambda: (shard.load() for shard in shards))
        engine.start(est._state.bounds)
    else:
        engine = placement.moved_to(est._state.blocks, engine)
    fitting.partial_step(settings, est._state, engine, shards)
    return est


def test_partial_fit_on_a_label_matrix_on_dask_equals_in_process(client2, monkeypatch):
    """On a cluster, partial_fit(X, Y)'s label-block shards read the chunk shared once
    (``place``): the fit equals the in-process one, and the chunks leave the workers after
    their step (``unplace``), also where the blocks stay on the cluster between calls."""
    from onebit_dask.engine import placement

    X, Y = label_matrix_stream(n=400, d1=8, d2=12)
    params = dict(random_state=0, n_shards=2, batch_size=2000, features="none")
    local = OneBitMultiLabel(2, engine="local", **params)
    monkeypatch.setattr(placement, "KEEP_LOCAL_LIMIT", 0)  # the blocks stay on the cluster
    on_dask = OneBitMultiLabel(2, engine="dask", **params)
    with client2.as_current():
        for lo in (0, 100, 200, 300):
            local.partial_fit(X[lo:lo + 100], Y[lo:lo + 100], classes=np.arange(12))
            on_dask.partial_fit(X[lo:lo + 100], Y[lo:lo + 100], classes=np.arange(12))
        assert on_dask._state.blocks.client is client2
        assert on_dask._state.blocks._shared == {}  # nothing kept from call to call
        deadline = time.monotonic() + 30  # the release reaches the workers in a moment
        while any(str(k).startswith("onebit-shared-") for keys in client2.has_what().values()
                  for k in keys) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(str(k).startswith("onebit-shared-")
                       for keys in client2.has_what().values() for k in keys)
        np.testing.assert_array_equal(on_dask.A_, local.A_)
        np.testing.assert_array_equal(on_dask.B_, local.B_)
        np.testing.assert_array_equal(on_dask.decision_function(X), local.decision_function(X))


def test_partial_fit_on_a_label_matrix_checks_its_labels():
    X, Y = label_matrix_stream()
    with pytest.raises(ValueError, match=r"Only binary classification is supported"):
        OneBitMultiLabel(1).partial_fit(X, Y[:, 0] + 2 * Y[:, 1])  # 1-D: binary targets only
    with pytest.raises(ValueError, match=r"len\(classes\)=5 and Y.shape\[1\]=12 disagree"):
        OneBitMultiLabel(1).partial_fit(X, Y, classes=np.arange(5))
    with pytest.raises(ValueError, match=r"n_labels=11 and Y.shape\[1\]=12 disagree"):
        OneBitMultiLabel(1).partial_fit(X, Y, n_labels=11)
    with pytest.raises(ValueError, match=r"classes=.* is not allowed: .*distinct"):
        OneBitMultiLabel(1).partial_fit(X, Y, classes=[0, 0])
    for bad in (0, 2.5, "3"):
        with pytest.raises((TypeError, ValueError), match=rf"n_labels={bad!r} is not allowed"):
            OneBitMultiLabel(1).partial_fit(X, np.arange(600) % 12, np.ones(600), n_labels=bad)
    est = OneBitMultiLabel(1, random_state=0).partial_fit(X, Y)
    with pytest.raises(ValueError, match=r"Y.shape\[1\]=13 is not allowed: this model was "
                                         r"started with n_labels=12"):
        est.partial_fit(X, np.hstack([Y, Y[:, :1]]))
    labels = np.arange(600) % 12
    first = OneBitMultiLabel(1, random_state=0).partial_fit(X, labels, np.ones(600),
                                                            classes=np.arange(12))
    assert first.n_labels_ == 12  # bits with classes: classes give d2


def _dask_case():
    problem = SyntheticProblem(30, 20, 2, noise_std=0.5, positive_rate=(0.1, 0.5), seed=0)
    est = OneBitMultiLabel(2, batch_size=5000, n_iter=3, engine="local", random_state=0)
    X = problem.test_set().X[:1000]
    return est.fit(problem), X


def test_a_dask_array_gives_a_dask_array_chunk_by_chunk():
    """decision_function, predict and predict_proba of a dask array ``X``: lazy, chunked by
    its rows, the numbers of the NumPy call (each row is scored alone either way), under
    dask's threaded scheduler (tasks at once: the label rows are gathered once, before);
    a wrong width is refused before anything is computed."""
    import dask.array as da

    est, X = _dask_case()
    Xd = da.from_array(X, chunks=(300, 10))
    for name in ("decision_function", "predict", "predict_proba"):
        lazy = getattr(est, name)(Xd)
        assert isinstance(lazy, da.Array) and lazy.chunks[0] == (300, 300, 300, 100)
        np.testing.assert_array_equal(lazy.compute(scheduler="threads"),
                                      getattr(est, name)(X))
    np.testing.assert_array_equal(est.decision_function(Xd, labels=[3, 1]).compute(),
                                  est.decision_function(X, labels=[3, 1]))
    with pytest.raises(ValueError, match=r"X has shape \(1000, 29\).*30 features"):
        est.predict(Xd[:, 1:])


@pytest.mark.integration
def test_a_dask_array_on_the_users_cluster(client2):
    import dask.array as da

    est, X = _dask_case()
    with client2.as_current():
        on_cluster = est.predict_proba(da.from_array(X, chunks=(250, 30))).compute()
    np.testing.assert_array_equal(on_cluster, est.predict_proba(X))


def test_a_dask_graph_carries_the_factors_not_the_estimator(monkeypatch):
    """The graph of a dask array's scores holds ``A_``, the feature map and the label
    rows: the estimator is never pickled (its label blocks may live on a cluster), and a
    chunk without rows (a filtered dask array) gives no rows."""
    import dask.array as da

    est, X = _dask_case()
    expected = est.predict_proba(X)
    monkeypatch.setattr(OneBitMultiLabel, "__getstate__",
                        lambda self: pytest.fail("the estimator was pickled"))
    keep = np.ones(X.shape[0], dtype=bool)
    keep[:100] = False  # the first chunk loses every row
    Xd = da.from_array(X, chunks=(100, 30))[da.from_array(keep, chunks=100)]
    got = est.predict_proba(Xd).compute(scheduler="threads")
    np.testing.assert_array_equal(got, expected[100:])


def test_partial_fit_on_a_label_matrix_keeps_the_models_blocks():
    """The label blocks of a model are its own: ``partial_fit(X, Y)`` after ``n_shards``
    changed (or after ``fit`` with another ``n_shards``) steps on the model's blocks, as
    it did before the by-row step (a ``KeyError`` then: the shards were cut by the new
    ``n_shards``, the shared columns by the model's bounds), and equals a model that kept
    its ``n_shards``."""
    X, Y = label_matrix_stream()
    kept = OneBitMultiLabel(2, batch_size=500, n_shards=4, engine="local", random_state=0)
    kept.partial_fit(X, Y).partial_fit(X, Y)
    changed = OneBitMultiLabel(2, batch_size=500, n_shards=4, engine="local", random_state=0)
    changed.partial_fit(X, Y).set_params(n_shards=2).partial_fit(X, Y)
    np.testing.assert_array_equal(changed.B_, kept.B_)
    refit = OneBitMultiLabel(2, batch_size=500, n_iter=1, n_shards=3, engine="local",
                             random_state=0).fit(X, Y)
    refit.set_params(n_shards=5).partial_fit(X, Y)
    assert refit.n_steps_ == 2
