"""A 1-D ``y`` of two classes (a binary target): one label, ``y == classes_[1]``, with
scikit-learn's binary classifier contract (``classes_``, ``predict`` of the classes,
``decision_function`` of shape ``(n,)``, ``predict_proba`` of shape ``(n, 2)``): the same
fit as the one-column label matrix, read through the link; calibrated on a planted
probit where the link is exact."""

import json
import os

import numpy as np
import pytest
from scipy.special import ndtr
from sklearn.metrics import roc_auc_score

from onebit_dask import OneBitMultiLabel
from onebit_dask.io.stores.zarr_format import DamagedStoreError
from onebit_dask.testing import assert_same_fit

D1, XI, B_STAR = 20, 0.5, 0.3  # the planted truth: y = sign(x^T w* + b* + XI g)
PARAMS = dict(batch_size=20_000, n_iter=3, random_state=0)


def planted(n, seed):
    """``(X, y, p)``: rows ``x ~ N(0, I)``, classes ``"yes"``/``"no"`` drawn with the
    exact probability ``p = Phi((x^T w* + b*) / XI)`` of ``"yes"``."""
    w = np.random.default_rng(3).standard_normal(D1)
    w /= np.linalg.norm(w)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, D1))
    p = ndtr((X @ w + B_STAR) / XI)
    return X, np.where(rng.random(n) < p, "yes", "no"), p


@pytest.fixture(scope="module")
def fitted():
    X, y, _ = planted(20_000, 0)
    return OneBitMultiLabel(1, **PARAMS).fit(X, y), X, y


def test_the_same_fit_as_the_one_column_label_matrix(fitted):
    """The binary target is the label matrix ``[y == "yes"]``: the same factors,
    thresholds and link; the scores are the link's argument ``alpha s + (beta - alpha)
    b`` of the column's score ``s``, the probabilities ``Phi`` of it, the classes their
    sign (a dense NumPy reference)."""
    binary, X, y = fitted
    column = OneBitMultiLabel(1, **PARAMS).fit(X, (y == "yes")[:, None].astype(np.int8))
    assert_same_fit(binary, column, link=True)
    np.testing.assert_array_equal(binary.classes_, ["no", "yes"])
    np.testing.assert_array_equal(column.classes_, [0, 1])
    alpha, beta = binary.calibration_
    b = binary.intercept_[0]
    z = alpha * column.decision_function(X)[:, 0] + (beta - alpha) * b
    np.testing.assert_allclose(binary.decision_function(X), z, rtol=1e-12, atol=1e-12)
    proba = binary.predict_proba(X)
    assert proba.shape == (X.shape[0], 2)
    np.testing.assert_allclose(proba[:, 1], ndtr(z), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    predicted = binary.predict(X)
    np.testing.assert_array_equal(predicted, np.where(z > 0, "yes", "no"))
    np.testing.assert_array_equal(binary.classes_[proba.argmax(axis=1)], predicted)
    np.testing.assert_array_equal(binary.predict_proba(X, labels=[0]), column.predict_proba(X))
    assert binary.score(X, y) == roc_auc_score(y == "yes", z)


def test_probabilities_are_the_planted_ones(fitted):
    """On unseen rows of the planted probit (where the link is exact, ALGORITHM.md
    section 12), ``predict_proba`` is within 0.03 of the exact probability on average
    (the fitted link: alpha 2.04 and beta 2.35 against the exact 2 and 2.24), and its
    classes are as accurate as the Bayes rule's to 0.01; ``Phi`` of the score without
    the link is not calibrated (the bound rejects it)."""
    binary = fitted[0]
    X, y, p = planted(20_000, 1)
    proba = binary.predict_proba(X)[:, 1]
    assert np.abs(proba - p).mean() <= 0.03
    unlinked = ndtr(binary.decision_function(X, labels=[0])[:, 0])  # the score s
    assert np.abs(unlinked - p).mean() > 0.03
    bayes = np.mean((p > 0.5) == (y == "yes"))
    assert np.mean(binary.predict(X) == y) >= bayes - 0.01


def test_a_saved_model_keeps_its_classes(fitted, tmp_path):
    binary, X, _ = fitted
    path = binary.save(tmp_path / "m.zarr")
    loaded = OneBitMultiLabel.load(path)
    np.testing.assert_array_equal(loaded.classes_, ["no", "yes"])
    np.testing.assert_array_equal(loaded.predict(X), binary.predict(X))
    meta_file = os.path.join(path, "zarr.json")
    meta = json.load(open(meta_file))
    meta["attributes"]["classes"] = ["no", "yes", "maybe"]
    json.dump(meta, open(meta_file, "w"))
    with pytest.raises(DamagedStoreError, match="m.zarr"):
        OneBitMultiLabel.load(path)


@pytest.mark.parametrize("classes", [np.array(["no", "yes"], dtype=object),
                                     np.array([3, 7], dtype=np.int32),
                                     np.array([-1.0, 2.0], dtype=np.float32),
                                     np.array([False, True]),
                                     np.array(["no", "yes"])], ids=str)
def test_a_saved_model_keeps_the_data_type_of_its_classes(classes, tmp_path):
    """``classes_`` loads with the data type it was fitted with (``classes_dtype``), so
    ``predict`` of the loaded model equals the fitted one's, dtype included: without it an
    object array comes back as ``<U``, ``int32`` as ``int64``, ``float32`` as ``float64``."""
    X, y, _ = planted(600, 0)
    y = np.where(y == "yes", classes[1], classes[0]).astype(classes.dtype)
    est = OneBitMultiLabel(1, batch_size=3000, n_iter=1, engine="local",
                           random_state=0).fit(X, y)
    assert est.classes_.dtype == classes.dtype
    loaded = OneBitMultiLabel.load(est.save(tmp_path / "m.zarr"))
    assert loaded.classes_.dtype == classes.dtype
    np.testing.assert_array_equal(loaded.classes_, classes)
    assert loaded.predict(X).dtype == est.predict(X).dtype == classes.dtype
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))


def test_a_classes_dtype_that_does_not_hold_the_classes_is_damage(fitted, tmp_path):
    """An edited ``classes_dtype`` is refused: by the digest, and, signed again, by the
    check that the data type holds the classes (``<U1`` would cut ``"yes"``; ``<i4``
    cannot hold it at all)."""
    from onebit_dask.persist.model_store import signed_attrs

    path = fitted[0].save(tmp_path / "m.zarr")
    meta_file = os.path.join(path, "zarr.json")
    meta = json.load(open(meta_file))
    assert meta["attributes"]["classes_dtype"] == "<U3"
    for kind, signed in (("<U1", False), ("<U1", True), ("not a dtype", True),
                         ("<i4", True), (None, True)):
        attrs = {k: v for k, v in meta["attributes"].items() if k != "attrs_sha256"}
        attrs["classes_dtype"] = kind
        if kind is None:
            del attrs["classes_dtype"]
        edited = signed_attrs(attrs) if signed else {**meta["attributes"],
                                                     "classes_dtype": kind}
        json.dump({**meta, "attributes": edited}, open(meta_file, "w"))
        if kind is None:  # a version-7 store written before classes_dtype: as before
            np.testing.assert_array_equal(OneBitMultiLabel.load(path).classes_, ["no", "yes"])
            continue
        with pytest.raises(DamagedStoreError, match="classes_dtype" if signed else "SHA-256"):
            OneBitMultiLabel.load(path)


def test_other_targets_are_refused_in_scikit_learns_words():
    X = np.random.default_rng(0).standard_normal((30, 4))
    with pytest.raises(ValueError, match="Only binary classification is supported. The type "
                                         "of the target is multiclass"):
        OneBitMultiLabel(1).fit(X, np.arange(30) % 3)
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        OneBitMultiLabel(1).fit(X, np.linspace(0, 1, 30))
    with pytest.raises(ValueError, match="only one class is present"):
        OneBitMultiLabel(1).fit(X, np.ones(30))


def test_partial_fit_takes_the_classes_once():
    X, y, _ = planted(2000, 2)
    est = OneBitMultiLabel(1, batch_size=2000, random_state=0)
    est.partial_fit(X[:1000], y[:1000], classes=["yes", "no"])
    est.partial_fit(X[1000:], y[1000:])
    np.testing.assert_array_equal(est.classes_, ["no", "yes"])
    assert set(est.predict(X)) <= {"no", "yes"}
    assert not hasattr(est, "predict_proba")  # no link after partial_fit
    assert est.decision_function(X).shape == (2000,)
    with pytest.raises(ValueError, match="classes=.* is not allowed: this model was started"):
        est.partial_fit(X, y, classes=["yes", "maybe"])
    with pytest.raises(ValueError, match="y holds the class 'maybe', not one of classes"):
        est.partial_fit(X[:2], np.array(["yes", "maybe"]))
    matrix = OneBitMultiLabel(1, batch_size=2000).partial_fit(
        X, (y == "yes")[:, None].astype(np.int8))
    with pytest.raises(ValueError, match="1-D y is not allowed: this model was started on a "
                                         "label matrix"):
        matrix.partial_fit(X, y)


def test_a_dask_array_gets_classes_chunk_by_chunk(fitted):
    da = pytest.importorskip("dask.array")
    binary, X, _ = fitted
    Xd = da.from_array(X[:1000], chunks=(300, D1))
    got = binary.predict(Xd)
    assert isinstance(got, da.Array)
    np.testing.assert_array_equal(got.compute(scheduler="sync"), binary.predict(X[:1000]))
    np.testing.assert_array_equal(binary.predict_proba(Xd).compute(scheduler="sync"),
                                  binary.predict_proba(X[:1000]))


def test_eval_set_takes_the_binary_targets_classes():
    X, y, _ = planted(4000, 3)
    est = OneBitMultiLabel(1, batch_size=2000, n_iter=2, random_state=0).fit(
        X[:3000], y[:3000], eval_set=(X[3000:], y[3000:]))
    assert est.history_[-1]["auc"] == pytest.approx(est.score(X[3000:], y[3000:]), abs=1e-12)
