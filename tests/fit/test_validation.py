"""The validation split of the bits and the best iterate it selects
(:mod:`onebit_dask.fit.validation`, ``OneBitMultiLabel(validation_fraction=...)``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from onebit_dask import OneBitMultiLabel, SyntheticProblem

from tests.support.dense import label_auc_sums_reference


def _rare_problem(seed=0):
    # the paper's model on rare labels: its steps make it worse than its start
    return SyntheticProblem(60, 40, 2, positive_rate=(0.01, 0.3), seed=seed, n_test=200,
                            sampler="explicit")


def _fit(problem, n_iter, **kw):
    return OneBitMultiLabel(2, batch_size=6000, n_iter=n_iter, step="averaged", n_shards=3,
                            random_state=0, **kw).fit(problem)


def _validation_score(model, problem, n_iter, fraction):
    """The selection score recomputed densely: the bits of batch n_iter + 1, the model's
    dense scores, the mean of sklearn's AUC of each label with both classes."""
    X, labels, y = [], [], []
    for shard in problem.batch(n_iter + 1, 6000, 3, sampler="explicit"):
        Xs, ls, ys = shard.load()
        keep = math.ceil(fraction * ls.size)
        X.append(Xs[:keep]), labels.append(ls[:keep]), y.append(ys[:keep])
    X, labels, y = np.concatenate(X), np.concatenate(labels), np.concatenate(y)
    scores = np.einsum("ij,ji->i", X.astype(np.float64), model.coef_[:, labels]) \
        + model.intercept_[labels]
    _, _, macro, n_labels = label_auc_sums_reference(labels, y, scores)
    return macro / n_labels


def test_returns_the_best_iterate_by_validation_and_equals_the_fit_stopped_there(tmp_path):
    problem = _rare_problem()
    n_iter, fraction = 4, 0.5
    model = _fit(problem, n_iter, threshold="none", validation_fraction=fraction)
    scores = model.validation_score_
    assert scores.shape == (n_iter + 1,)
    assert model.best_iteration_ == int(np.argmax(scores))
    assert model.best_iteration_ < n_iter  # the premise: the last iterate is not the best
    assert _validation_score(model, problem, n_iter, fraction) == pytest.approx(
        scores.max(), rel=1e-9)
    # the same training batches: the fit stopped at the best iteration, bit for bit
    stopped = _fit(problem, model.best_iteration_, threshold="none")
    np.testing.assert_array_equal(model.A_, stopped.A_)
    np.testing.assert_array_equal(model.B_, stopped.B_)
    np.testing.assert_array_equal(model.Q_, stopped.Q_)
    assert model.n_steps_ == n_iter
    # and on the planted truth the selection is not the worse one
    last = _fit(problem, n_iter, threshold="none")
    assert model.evaluate(problem)["frobenius_error"] <= last.evaluate(problem)[
        "frobenius_error"]
    # a saved model keeps which iterate it holds and the validation scores
    loaded = OneBitMultiLabel.load(model.save(tmp_path / "model.zarr"))
    assert loaded.best_iteration_ == model.best_iteration_
    np.testing.assert_array_equal(loaded.validation_score_, scores)


def test_equals_the_plain_fit_when_the_last_iterate_is_best(tmp_path):
    problem = SyntheticProblem(60, 40, 2, seed=1, n_test=200, sampler="explicit")
    model = _fit(problem, 4, validation_fraction=1.0)
    assert model.best_iteration_ == 4  # the premise: balanced labels improve every step
    plain = _fit(problem, 4)
    for attr in ("A_", "B_", "Q_", "V_", "intercept_"):
        np.testing.assert_array_equal(getattr(model, attr), getattr(plain, attr))
    assert not any(k.startswith("best_") for b in model._state.blocks.blocks() for k in b.slots)
    loaded = OneBitMultiLabel.load(plain.save(tmp_path / "plain.zarr"))
    assert loaded.best_iteration_ == 4
    with pytest.raises(AttributeError, match="fitted without validation_fraction"):
        loaded.validation_score_  # noqa: B018 (the attribute's absence is the point)


def _observations(seed=0, n=8000, d1=30, d2=25):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((d1, 3)) @ rng.standard_normal((3, d2))
    X = rng.standard_normal((n, d1))
    labels = rng.integers(0, d2, n)
    y = np.where(np.einsum("ij,ji->i", X, W[:, labels]) > 1.0, 1, -1)
    return X, labels, y


def test_in_process_equals_dask(client2):
    """Row-range shards (observations, the thresholded model) and label-block shards (a
    planted problem, the paper's model, whose best iterate is its first: restored)."""
    X, labels, y = _observations()
    kw = dict(batch_size=1000, n_iter=3, step="paper", n_shards=3, validation_fraction=0.7,
              random_state=0)
    local = OneBitMultiLabel(3, engine="local", **kw).fit(X, labels, y, n_labels=25)
    with client2.as_current():
        remote = OneBitMultiLabel(3, engine="dask", **kw).fit(X, labels, y, n_labels=25)
    assert remote.best_iteration_ == local.best_iteration_
    np.testing.assert_array_equal(remote.validation_score_, local.validation_score_)
    for attr in ("A_", "B_", "intercept_"):
        np.testing.assert_array_equal(getattr(remote, attr), getattr(local, attr))
    # the planted problem's label-block shards, on Dask too
    problem = _rare_problem(2)
    with client2.as_current():
        remote = _fit(problem, 2, threshold="none", engine="dask", validation_fraction=0.5)
    local = _fit(problem, 2, threshold="none", engine="local", validation_fraction=0.5)
    assert local.best_iteration_ == remote.best_iteration_ < 2
    np.testing.assert_array_equal(remote.validation_score_, local.validation_score_)
    np.testing.assert_array_equal(remote.B_, local.B_)


class _Untouchable:
    """Data that fail if anything reads them."""

    shape = property(lambda self: pytest.fail("the data were read"))


@pytest.mark.parametrize("value", [0, 0.0, -0.1, 1.5, "half"])
def test_bad_fraction_errors_before_work(value):
    with pytest.raises((ValueError, TypeError), match="validation_fraction"):
        OneBitMultiLabel(2, validation_fraction=value).fit(_Untouchable())


def test_fraction_refused_where_it_cannot_work(tmp_path):
    X, labels, y = _observations(n=3000)
    model = OneBitMultiLabel(2, batch_size=1000, n_iter=2, validation_fraction=0.5)
    with pytest.raises(ValueError, match=r"validation_fraction=0.5 .*3 batches"):
        model.fit(X, labels, y, n_labels=25)  # no batch left after the training batches
    with pytest.raises(ValueError, match="validation_fraction=0.5 .*checkpoint"):
        OneBitMultiLabel(2, batch_size=500, n_iter=2, validation_fraction=0.5).fit(
            X, labels, y, n_labels=25, checkpoint=tmp_path / "ck")
    assert not (tmp_path / "ck").exists()
    with pytest.raises(ValueError, match="validation_fraction=0.5 .*partial_fit"):
        model.partial_fit(X, labels, y, n_labels=25)


def test_scores_through_the_feature_map():
    """With ``features="whiten"`` the validation bits are scored on ``phi(x)``: the same
    scores as a fit on ``phi(X)`` formed in NumPy (the map's own product)."""
    X, labels, y = _observations()
    X = X * np.linspace(0.5, 3.0, X.shape[1]) + 1.0
    kw = dict(batch_size=1000, n_iter=3, step="harmonic", validation_fraction=0.5,
              random_state=0, engine="local")
    mapped = OneBitMultiLabel(3, features="whiten", **kw).fit(X, labels, y, n_labels=25)
    phi = mapped.feature_map_.product(X, np.eye(X.shape[1]))
    dense = OneBitMultiLabel(3, **kw).fit(phi, labels, y, n_labels=25)
    np.testing.assert_allclose(mapped.validation_score_, dense.validation_score_, atol=1e-9)
