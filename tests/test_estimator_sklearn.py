"""The estimators as scikit-learn expects them: its estimator checks, clone and pickle
(also of a model whose label blocks live on a cluster), the multi-label indicator,
validation, feature names, tags, Pipeline, GridSearchCV and the macro-AUC score."""

import functools
import inspect
import pickle

import numpy as np
import pytest
import scipy.sparse
from sklearn.base import clone, is_classifier
from sklearn.exceptions import NotFittedError
from sklearn.metrics import hamming_loss, roc_auc_score
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import parametrize_with_checks
from sklearn.utils.multiclass import type_of_target

from onebit_dask import OneBitMultiLabel, SyntheticProblem, estimator
from onebit_dask.baselines import (
    LEML,
    ColumnwiseOneBit,
    OneVsAll,
    OneVsRestSVM,
    TraceNormMultiLabel,
)
from onebit_dask.engine import LocalEngine, placement
from onebit_dask.engine.dask_engine import DaskEngine
from onebit_dask.estimator import check_params

LABEL_MATRIX_FIT = "bits" in inspect.signature(OneBitMultiLabel.fit).parameters

# -- scikit-learn's estimator checks ---------------------------------------------------------
# The baselines are multi-label classifiers (tags: multi_label, multi_output, not
# single_output): the checks pass them y as an (n, 1) column, a label matrix with one
# label. The checks below cannot apply to a multi-label indicator and fail for these reasons.
NOT_A_LABEL_MATRIX = {
    "check_estimators_dtypes": "its y column holds 1 and 2: not a 0/1, -1/+1 or boolean "
                               "label matrix (refused, naming the entry)",
    "check_classifier_data_not_an_array": "its y column holds 1 and 2: refused as above",
    "check_fit2d_1feature": "its y column holds 1 and 2: refused as above",
    "check_classifiers_classes": "passes a 1-D y of two string classes: a label matrix is 2-D",
    "check_classifiers_train": "expects predict to return shape (n,) for a 1-D y; a "
                               "multi-label classifier returns the (n, d2) indicator",
    "check_classifier_not_supporting_multiclass": "passes a 1-D multiclass y: refused as not a "
                                                  "2-D label matrix, with that message rather "
                                                  "than 'Only binary classification is "
                                                  "supported.'",
}
# OneBitMultiLabel also takes a 1-D y of two classes (a binary target, one label): the
# checks pass it 1-D, and all of those above pass for it.
ONEBIT_FAILS = {
    "check_classifier_multioutput": "expects predict == round(predict_proba) of a label "
                                    "matrix: predict thresholds the score x^T w_j + b_j at 0 "
                                    "(each label positive at its share), while predict_proba "
                                    "is 1/2 at alpha x^T w_j + beta b_j = 0 (docs/ALGORITHM.md "
                                    "section 12); a binary target's predict is the class of "
                                    "the larger probability",
}

ESTIMATORS = [
    ColumnwiseOneBit(),
    OneVsAll(),
    LEML(1, lam=1.0, n_iter=2),  # lam="auto" needs a held-out split of the few check rows
    OneVsRestSVM(),
    TraceNormMultiLabel(tau=0.01, n_iter=5),
]
if LABEL_MATRIX_FIT:
    ESTIMATORS.append(OneBitMultiLabel(1, batch_size=200, n_iter=2, n_shards=2, random_state=0,
                                       engine="local"))


def expected_failures(est):
    return ONEBIT_FAILS if isinstance(est, OneBitMultiLabel) else NOT_A_LABEL_MATRIX


def check_name(check) -> str:
    """The name of a check as ``parametrize_with_checks`` yields it (a partial, perhaps
    wrapped), as in the tables above."""
    while hasattr(check, "__wrapped__"):
        check = check.__wrapped__
    return check.func.__name__ if isinstance(check, functools.partial) else check.__name__


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_estimator_checks(estimator, check):
    """Every check passes but those listed above, which fail (strictly: one that passes
    must leave its table). The expected failures end in ``pytest.xfail`` here rather than
    in scikit-learn's ``xfail`` marks, under which pytest formats the check's own
    traceback, parsing scikit-learn's estimator_checks.py (5000 lines) for each of its
    frames: 13 s of the suite's CPU for 57 reports nobody reads."""
    reason = expected_failures(estimator).get(check_name(check))
    if reason is None:
        check(estimator)
        return
    try:
        check(estimator)
    except Exception:
        pass
    else:
        pytest.fail(f"{check_name(check)} passes for {estimator!r}: remove it from the "
                    f"expected failures")
    pytest.xfail(reason)  # outside the handler: no chained traceback to format


# -- planted data --------------------------------------------------------------------------
PROBLEM = SyntheticProblem(12, 8, 2, seed=4, n_test=400)


@pytest.fixture(scope="module")
def onebit():
    """A fit on one-bit observations and a test set with its true 0/1 label matrix."""
    X, labels, y = PROBLEM.draw(0, 6000)
    est = OneBitMultiLabel(2, batch_size=2000, n_iter=2, random_state=0).fit(
        X, labels, y, n_labels=PROBLEM.d2)
    test = PROBLEM.test_set()
    A, B = PROBLEM.truth
    Y = (test.X @ A @ B.T >= 0).astype(int)
    return est, X, labels, y, test.X, Y


def test_predict_is_the_multilabel_indicator(onebit):
    est, *_, X_test, Y = onebit
    predicted = est.predict(X_test)
    assert type_of_target(predicted) == "multilabel-indicator"
    assert predicted.shape == Y.shape and predicted.dtype == np.int64
    # hamming_loss reads it as scikit-learn's multi-label classifiers' output: the fraction
    # of (row, label) signs that differ, computed here from the scores
    differ = np.mean((est.decision_function(X_test) >= 0) != (Y == 1))
    assert hamming_loss(Y, predicted) == pytest.approx(differ, abs=1e-12)
    assert 0 < differ < 0.25  # a model, not chance (0.5), on a few thousand bits
    assert is_classifier(est) and est.classes_.tolist() == [0, 1]


@pytest.mark.parametrize("coding", ["zero_one", "bool"])
def test_bits_coded_as_zero_one_or_bool_fit_the_same(onebit, coding):
    est, X, labels, y = onebit[:4]
    other = (y > 0).astype(int) if coding == "zero_one" else y > 0
    again = OneBitMultiLabel(2, batch_size=2000, n_iter=2, random_state=0).fit(
        X, labels, other, n_labels=PROBLEM.d2)
    np.testing.assert_array_equal(again.Q_, est.Q_)
    first = OneBitMultiLabel(2, random_state=0).partial_fit(X[:2000], labels[:2000], y[:2000],
                                                            n_labels=PROBLEM.d2)
    coded = OneBitMultiLabel(2, random_state=0).partial_fit(
        X[:2000], labels[:2000], other[:2000], n_labels=PROBLEM.d2)
    np.testing.assert_array_equal(coded.Q_, first.Q_)
    colwise = ColumnwiseOneBit().fit(X, labels, y, n_labels=PROBLEM.d2)
    np.testing.assert_array_equal(ColumnwiseOneBit().fit(X, labels, other).B_, colwise.B_)


def test_score_is_macro_auc_over_labels_with_both_classes(onebit):
    est, *_, X_test, Y = onebit
    Y = Y.copy()
    Y[:, 0] = 1  # one class only: left out
    scores = est.decision_function(X_test)
    expected = np.mean([roc_auc_score(Y[:, j], scores[:, j]) for j in range(1, Y.shape[1])])
    assert est.score(X_test, Y) == pytest.approx(expected, rel=1e-12)
    assert est.score(X_test, 2 * Y - 1) == est.score(X_test, Y)  # -1/+1 coding
    # not the micro average (a wrong implementation), which differs here
    micro = roc_auc_score(Y[:, 1:], scores[:, 1:], average="micro")
    assert abs(micro - expected) > 1e-6
    with pytest.raises(ValueError, match="no label with both classes"):
        est.score(X_test, np.ones_like(Y))
    with pytest.raises(ValueError, match="Y has 3 labels, but the estimator was fitted with 8"):
        est.score(X_test, Y[:, :3])


def test_tags_of_a_multilabel_classifier():
    tags = get_tags(OneBitMultiLabel())
    assert tags.estimator_type == "classifier"
    assert tags.classifier_tags.multi_label and not tags.classifier_tags.multi_class
    assert tags.target_tags.multi_output
    assert tags.target_tags.single_output  # a 1-D binary y (tests/test_binary_target.py)
    assert not get_tags(OneVsAll()).target_tags.single_output  # label matrices only
    assert tags.input_tags.sparse
    assert not get_tags(OneVsRestSVM()).input_tags.sparse  # dense solvers


# -- engine, clone and pickle ----------------------------------------------------------------
def test_every_parameter_survives_clone_and_pickle(onebit):
    est = onebit[0]
    assert clone(est).get_params() == est.get_params()
    copy = pickle.loads(pickle.dumps(est))
    assert isinstance(copy._state.blocks, LocalEngine)
    np.testing.assert_array_equal(copy.B_, est.B_)
    np.testing.assert_array_equal(copy.predict(onebit[4]), est.predict(onebit[4]))


def test_thresholded_model_pickles_and_predicts_with_its_thresholds():
    est = OneBitMultiLabel(2, batch_size=2000, n_iter=2, random_state=0,
                           threshold="estimated").fit(PROBLEM)
    X = PROBLEM.test_set().X[:50]
    scores = X.astype(np.float64) @ est.A_ @ est.B_.T + est.intercept_
    assert np.any(est.intercept_ != 0)
    np.testing.assert_array_equal(est.predict(X), (scores >= 0).astype(int))
    copy = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(copy.intercept_, est.intercept_)
    np.testing.assert_array_equal(copy.decision_function(X), est.decision_function(X))


def test_engine_dask_needs_a_client():
    with pytest.raises(ValueError, match="engine='dask' is not allowed without a Dask client"):
        OneBitMultiLabel(1, engine="dask").fit(PROBLEM)


def test_cluster_model_pickles_with_its_blocks_and_runs_on_a_worker(onebit, client2,
                                                                    monkeypatch):
    est, X, labels, y, X_test, _ = onebit
    monkeypatch.setattr(placement, "KEEP_LOCAL_LIMIT", 0)  # the blocks stay on the workers
    with client2.as_current():
        on_cluster = OneBitMultiLabel(2, batch_size=2000, n_iter=2, random_state=0).fit(
            X, labels, y, n_labels=PROBLEM.d2)  # engine="auto": the current client
    assert isinstance(on_cluster._state.blocks, DaskEngine)
    np.testing.assert_array_equal(on_cluster.Q_, est.Q_)  # the same numbers
    copy = pickle.loads(pickle.dumps(on_cluster))
    assert isinstance(copy._state.blocks, LocalEngine)
    assert isinstance(on_cluster._state.blocks, DaskEngine)  # pickling does not move them
    np.testing.assert_array_equal(copy.predict_top_k(X_test, 3)[0],
                                  est.predict_top_k(X_test, 3)[0])
    np.testing.assert_array_equal(copy.Q_, est.Q_)
    # sent to a worker (pickled there and back), it predicts as here
    remote = client2.submit(lambda model, X: model.predict(X), on_cluster, X_test).result()
    np.testing.assert_array_equal(remote, est.predict(X_test))
    monkeypatch.setattr(estimator, "PICKLE_LIMIT", 10)
    with pytest.raises(ValueError, match=r"use save\(path\) and OneBitMultiLabel.load\(path\)"):
        pickle.dumps(on_cluster)
    # engine="auto" outside the client's context: in this process (the fixture's client is
    # not the default one)
    local = OneBitMultiLabel(2, batch_size=2000, n_iter=2, random_state=0).fit(
        X, labels, y, n_labels=PROBLEM.d2)
    assert isinstance(local._state.blocks, LocalEngine)


# -- validation ------------------------------------------------------------------------------
def test_feature_names_are_checked_on_predict(onebit):
    pd = pytest.importorskip("pandas")
    _, X, labels, y, X_test, _ = onebit
    names = [f"f{i}" for i in range(X.shape[1])]
    est = OneBitMultiLabel(2, batch_size=2000, n_iter=2, random_state=0).fit(
        pd.DataFrame(X, columns=names), labels, y, n_labels=PROBLEM.d2)
    assert est.feature_names_in_.tolist() == names
    frame = pd.DataFrame(X_test, columns=names)
    np.testing.assert_array_equal(est.predict(frame), onebit[0].predict(X_test))  # same fit
    with pytest.raises(ValueError, match="feature names should match those that were passed"):
        est.predict(frame[names[::-1]])
    est.fit(X, labels, y, n_labels=PROBLEM.d2)  # no names now
    assert not hasattr(est, "feature_names_in_")


def test_object_arrays_converted_complex_refused(onebit):
    est, X, labels, y, X_test, _ = onebit
    np.testing.assert_array_equal(est.decision_function(X_test.astype(object)),
                                  est.decision_function(X_test))
    again = OneBitMultiLabel(2, batch_size=2000, n_iter=2, random_state=0).fit(
        X.astype(object), labels, y, n_labels=PROBLEM.d2)
    np.testing.assert_array_equal(again.Q_, est.Q_)
    with pytest.raises(ValueError, match="Complex data not supported"):
        est.predict(X_test + 1j)


def test_sparse_features_predict_as_dense(onebit):
    est, *_, X_test, _ = onebit
    X_test = np.where(np.abs(X_test) > 1, X_test, 0.0)
    sparse = scipy.sparse.csr_matrix(X_test)
    np.testing.assert_allclose(est.decision_function(sparse), est.decision_function(X_test),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(est.predict_top_k(sparse, 2)[0], est.predict_top_k(X_test, 2)[0])
    sparse.data[3] = np.nan
    row = int(np.searchsorted(sparse.indptr, 3, side="right") - 1)
    with pytest.raises(ValueError, match=rf"X\[{row}, {sparse.indices[3]}\]=nan is not allowed"):
        est.predict(sparse)


ONE_BIT = [ColumnwiseOneBit, OneVsAll, lambda: LEML(1, lam=1.0),
           lambda: OneBitMultiLabel(1, batch_size=10)]
FULL = [ColumnwiseOneBit, OneVsAll, lambda: LEML(1, lam=1.0), OneVsRestSVM,
        lambda: TraceNormMultiLabel(tau=0.1)]


@pytest.mark.parametrize("make, form", [(m, "bits") for m in ONE_BIT] +
                         [(m, "matrix") for m in FULL])
def test_zero_rows_or_features_refused(make, form):
    X = np.ones((4, 3))
    for bad, match in [(X[:0], r"0 sample\(s\) \(shape=\(0, 3\)\)"),
                       (X[:, :0], r"0 feature\(s\) \(shape=\(4, 0\)\)")]:
        n = len(bad)
        with pytest.raises(ValueError, match=match):
            if form == "bits":
                make().fit(bad, np.zeros(n, int), np.ones(n), n_labels=2)
            else:
                make().fit(bad, np.ones((n, 2), int))


def test_leml_on_one_observation():
    X = np.array([[1.0, 2.0], [0.5, -1.0]])
    est = LEML(1, lam=1.0).fit(X[:1], [0], [1])
    assert est.predict(X[:1]).tolist() == [[1]]
    with pytest.raises(ValueError, match=r"lam='auto' is not allowed here: .* of the 1 training "
                                         r"rows, which holds out 0 and leaves 1 to train; pass "
                                         r"more rows or a fixed lam"):
        LEML(1).fit(X[:1], [0], [1])


def test_check_params_is_the_table(onebit):
    params = OneBitMultiLabel(2).get_params()
    check_params(params, 10, 5)
    with pytest.raises(ValueError, match=r"rank=6 is not allowed: rank must be <= min\(d1, d2\)"):
        check_params(dict(params, rank=6), 10, 5)
    with pytest.raises(ValueError, match=r"step='fast' is not allowed: The 'step' parameter of "
                                         r"OneBitMultiLabel must be a str among"):
        check_params(dict(params, step="fast"), 10, 5)
    with pytest.raises(TypeError, match="batch_size=1.5 is not allowed"):
        check_params(dict(params, batch_size=1.5), 10, 5)
    with pytest.raises(ValueError, match="client=None is not allowed: not a parameter"):
        check_params(dict(params, client=None), 10, 5)
    assert OneBitMultiLabel._parameter_constraints is estimator.PARAMETER_CONSTRAINTS
    assert set(estimator.PARAMETER_CONSTRAINTS) == set(params)


def test_not_fitted_raises_not_fitted_error():
    for est in (OneBitMultiLabel(1), LEML(), OneVsRestSVM()):
        with pytest.raises(NotFittedError):
            est.decision_function(np.ones((2, 3)))
        with pytest.raises(NotFittedError):
            est.score(np.ones((2, 3)), np.ones((2, 2)))


# -- pipelines and model selection -------------------------------------------------------------
@pytest.fixture(scope="module")
def label_matrix():
    """Features and their planted 0/1 label matrix, ``Y = 1[X W* >= 0]``."""
    X = PROBLEM.test_set().X.astype(np.float64) * 3.0 + 1.0  # scaled and shifted
    A, B = PROBLEM.truth
    return X, ((X - 1.0) @ A @ B.T >= 0).astype(int)


def test_pipeline_after_standard_scaler(label_matrix):
    X, Y = label_matrix
    pipe = make_pipeline(StandardScaler(), OneVsRestSVM()).fit(X[:300], Y[:300])
    assert pipe.predict(X[300:]).shape == Y[300:].shape
    assert pipe.score(X[300:], Y[300:]) > 0.9
    sparse = make_pipeline(StandardScaler(with_mean=False), ColumnwiseOneBit())
    assert sparse.fit(X[:300], Y[:300]).score(scipy.sparse.csr_matrix(X[300:]), Y[300:]) > 0.5


@pytest.mark.skipif(not LABEL_MATRIX_FIT, reason="until fit(X, Y) lands")
def test_onebit_in_pipeline_and_grid_search(label_matrix):
    X, Y = label_matrix
    pipe = make_pipeline(StandardScaler(), OneBitMultiLabel(1, batch_size=2000, n_iter=3,
                                                            random_state=0, engine="local"))
    assert pipe.fit(X[:300], Y[:300]).score(X[300:], Y[300:]) > 0.8
    search = GridSearchCV(pipe, {"onebitmultilabel__rank": [1, 2]}, cv=2).fit(X, Y)
    assert search.best_params_["onebitmultilabel__rank"] in (1, 2)
    assert 0.5 < search.best_score_ <= 1.0


def test_grid_search_clones_baselines(label_matrix):
    X, Y = label_matrix
    search = GridSearchCV(TraceNormMultiLabel(tau=0.1, n_iter=20),
                          {"tau": [1e-3, 1e-1]}, cv=2).fit(X - 1.0, Y)
    assert set(search.cv_results_["param_tau"]) == {1e-3, 1e-1}
    assert search.best_estimator_.n_labels_ == Y.shape[1]


@pytest.mark.parametrize("engine", ["auto", "dask"])
def test_grid_search_under_joblibs_dask_backend_returns(client2, engine):
    """GridSearchCV whose fits run as tasks on the workers (joblib's Dask backend, 2
    workers of one thread): ``engine="auto"`` in a task fits in-process, ``"dask"`` on the
    worker's client with the task seceded; neither waits for ever (before, ``"auto"``
    found the worker's client and blocked in ``gather``). The scores equal a sequential
    search with the in-process engine (the engines are bit-identical)."""
    import threading

    import joblib

    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 20))
    Y = (X[:, :5] + 0.5 * rng.standard_normal((400, 5)) > 0).astype(int)
    grid = {"step": ["moment", "select"]}

    def search(engine):
        return GridSearchCV(OneBitMultiLabel(2, batch_size=2000, n_iter=2, random_state=0,
                                             engine=engine), grid, cv=2)

    results = {}

    def run():
        with client2.as_current(), joblib.parallel_backend("dask"):
            results["dask"] = search(engine).fit(X, Y)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=600)
    assert not thread.is_alive(), "the search under joblib's Dask backend did not return"
    reference = search("local").fit(X, Y)
    np.testing.assert_array_equal(results["dask"].cv_results_["mean_test_score"],
                                  reference.cv_results_["mean_test_score"])


def test_named_scorers_in_a_grid_search(onebit):
    """``onebit_dask.scorers`` work as scikit-learn's ``scoring=``: each equals its metric
    computed by hand on the same fit, and they survive a pickle (joblib's workers)."""
    from sklearn.metrics import check_scoring

    from onebit_dask import scorers
    from onebit_dask.metrics import ranking

    est, _, _, _, Xt, Yt = onebit
    assert check_scoring(est, scoring=scorers.macro_auc)(est, Xt, Yt) == est.score(Xt, Yt)
    top = est.predict_top_k(Xt, 3)[0]
    assert scorers.precision_at_k(3)(est, Xt, Yt) == ranking.precision_at_k(Yt, top, 3)
    assert pickle.loads(pickle.dumps(scorers.ndcg_at_k(3)))(est, Xt, Yt) == \
        ranking.ndcg_at_k(Yt, top, 3)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 12))
    Y = (X[:, :6] + 0.5 * rng.standard_normal((400, 6)) > 0).astype(int)
    search = GridSearchCV(OneBitMultiLabel(2, batch_size=2000, n_iter=2, random_state=0,
                                           engine="local"), {"rank": [1, 2]}, cv=2,
                          scoring={"auc": scorers.macro_auc, "p@1": scorers.precision_at_k(1)},
                          refit="auc").fit(X, Y)
    assert set(search.cv_results_) >= {"mean_test_auc", "mean_test_p@1"}
    assert repr(scorers.precision_at_k(1)) == "onebit_dask.scorers.precision_at_k(1)"
