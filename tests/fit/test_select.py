"""``step="select"``: the moment and the residual branches side by side from the fork, one
kept by progressive validation (:mod:`onebit_dask.fit.select`, docs/ALGORITHM.md
section 9e).

Real data from ``tests/files/``: emotions (391 training songs, 72 features, 6 labels:
about 330 bits a label and batch here, many against the features) and the first 300
training rows of bibtex (1836 features, 159 labels: about 13 bits a label and batch),
2000 bits a batch, standardised features. On the five full sets the residual branch is
better on the test split exactly where labels have many bits against the features
(EXPERIMENTS.md); these two stand for either side.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.data.label_matrix import LabelMatrixSource
from onebit_dask.io.xc import read_xc
from onebit_dask.fit.steps import RULES
from tests.support.dense import label_auc_sums_reference
from tests.support.helpers import FILES

PARAMS = dict(batch_size=2000, n_iter=5, features="standardize", random_state=0)


def _read(name):
    X_train, Y_train = read_xc(os.path.join(FILES, f"{name}_train.txt"))
    X_test, Y_test = read_xc(os.path.join(FILES, f"{name}_test.txt"))
    return X_train, Y_train, X_test, Y_test


@pytest.fixture(scope="module")
def fits():
    """Per set, the fits of the three rules on the same label matrix."""
    out = {}
    for name in ("emotions_full", "bibtex"):
        X_train, Y_train, X_test, Y_test = _read(name)
        out[name] = {step: OneBitMultiLabel(3, step=step, **PARAMS).fit(
            X_train, Y_train, eval_set=(X_test, Y_test)) for step in ("pooled", "refine", "select")}
    return out


def _branch_means(history):
    forked = [h for h in history if "branch" in h]
    return {rule: np.mean([h[f"progressive_auc_{rule}"] for h in forked])
            for rule in ("pooled", "refine")}


@pytest.mark.parametrize("name, kept", [("emotions_full", "refine"), ("bibtex", "pooled")])
def test_select_keeps_the_branch_that_scores_better_and_equals_its_fit(fits, name, kept):
    select, other = fits[name]["select"], fits[name]["pooled" if kept == "refine" else "refine"]
    history = select.history_
    n_iter = PARAMS["n_iter"]
    fork = RULES["select"].fork(n_iter)
    # the forked records are the kept branch's, and they carry both branches' scores
    assert [h.get("branch") for h in history] == [None] * fork + [kept] * (n_iter + 1 - fork)
    means = _branch_means(history)
    assert max(means, key=means.get) == kept
    # the kept branch is, bit for bit, the fit of its own rule, history included
    alone = fits[name][kept]
    np.testing.assert_array_equal(select.A_, alone.A_)
    np.testing.assert_array_equal(select.B_, alone.B_)
    np.testing.assert_array_equal(select.intercept_, alone.intercept_)
    assert [h["auc"] for h in history] == [h["auc"] for h in alone.history_]
    # and it is the better of the two on the held-out split
    assert history[-1]["auc"] > other.history_[-1]["auc"]


def test_the_score_is_the_macro_auc_of_the_next_batch_by_sklearn(fits):
    """At the fork both branches start from the pooled fit's iterate ``n_iter // 2``:
    their first score is the macro AUC (scikit-learn, label by label) of the fork
    batch's bits scored by that iterate. The branches then part (power: different scores)."""
    X_train, Y_train, _, _ = _read("emotions_full")
    n_iter = PARAMS["n_iter"]
    fork = RULES["select"].fork(n_iter)
    start = OneBitMultiLabel(3, **dict(PARAMS, n_iter=n_iter // 2, step="pooled")).fit(
        X_train, Y_train)
    shards = LabelMatrixSource(X_train, Y_train.tocsr(), PARAMS["random_state"]).batch(
        fork, PARAMS["batch_size"], OneBitMultiLabel().n_shards)
    sums = 0.0
    for X, labels, y in (sh.load() for sh in shards):
        scores = start.decision_function(X)[np.arange(labels.size), labels]
        sums = sums + label_auc_sums_reference(labels, y, scores)
    first = fits["emotions_full"]["select"].history_[fork]
    assert first["progressive_auc_pooled"] == pytest.approx(sums[2] / sums[3], abs=1e-12)
    assert first["progressive_auc_refine"] == first["progressive_auc_pooled"]
    last = fits["emotions_full"]["select"].history_[-1]
    assert last["progressive_auc_refine"] != last["progressive_auc_pooled"]


def test_auto_is_select_in_fit_and_moment_where_select_cannot_run():
    X_train, Y_train, _, _ = _read("emotions_full")
    auto = OneBitMultiLabel(3, **PARAMS).fit(X_train, Y_train)
    select = OneBitMultiLabel(3, step="select", **PARAMS).fit(X_train, Y_train)
    np.testing.assert_array_equal(auto.coef_, select.coef_)
    params = dict(PARAMS, n_iter=2, validation_fraction=0.5)
    auto = OneBitMultiLabel(3, **params).fit(X_train, Y_train)
    moment = OneBitMultiLabel(3, step="moment", **params).fit(X_train, Y_train)
    np.testing.assert_array_equal(auto.coef_, moment.coef_)


@pytest.mark.parametrize("where, call", [
    ("validation_fraction", lambda X, Y: OneBitMultiLabel(
        3, step="select", validation_fraction=0.5, **PARAMS).fit(X, Y)),
    ("partial_fit", lambda X, Y: OneBitMultiLabel(3, step="select").partial_fit(
        X[:50], np.zeros(50, dtype=int), np.ones(50), n_labels=6)),
    ("sampler='conditional'", lambda X, Y: OneBitMultiLabel(2, step="select").fit(
        SyntheticProblem(20, 10, 2, seed=0))),
])
def test_select_is_refused_where_it_cannot_run_before_any_work(where, call):
    X_train, Y_train, _, _ = _read("emotions_full")
    with pytest.raises(ValueError, match=rf"step='select' is not allowed .*{where}") as info:
        call(X_train, Y_train)
    assert "pass" in str(info.value)


def test_no_checkpoint_between_the_fork_and_the_end_and_a_resume_forks_again(
        fits, tmp_path, monkeypatch):
    """A checkpoint cannot hold two branches: none is written from the fork to the last
    iteration. A fit stopped after the last checkpoint before the fork resumes from it,
    forks again and ends with the uninterrupted fit's numbers."""
    from onebit_dask import persist
    from onebit_dask.testing import assert_same_fit

    X_train, Y_train, X_test, Y_test = _read("emotions_full")
    fork = RULES["select"].fork(PARAMS["n_iter"])
    write, written = persist.Checkpoint.write, []

    def write_then_stop(self, state, engine):
        write(self, state, engine)
        written.append(state.n_steps)
        if state.n_steps == fork - 1:
            raise KeyboardInterrupt  # the user stops the fit

    path = tmp_path / "ckpt.zarr"
    model = OneBitMultiLabel(3, step="select", **PARAMS)
    with monkeypatch.context() as patch:
        patch.setattr(persist.Checkpoint, "write", write_then_stop)
        with pytest.raises(KeyboardInterrupt):
            model.fit(X_train, Y_train, eval_set=(X_test, Y_test), checkpoint=path)
        assert written == list(range(fork))
        written.clear()
        patch.setattr(persist.Checkpoint, "write", lambda self, state, engine: (
            written.append(state.n_steps), write(self, state, engine)))
        model.fit(X_train, Y_train, eval_set=(X_test, Y_test), checkpoint=path)
    assert written == [PARAMS["n_iter"]]  # none in the fork, the last one after it
    assert_same_fit(model, fits["emotions_full"]["select"])
    from_checkpoint = OneBitMultiLabel.load(path)  # the last: the model, with its link
    assert_same_fit(from_checkpoint, model)
    np.testing.assert_array_equal(from_checkpoint.predict_proba(X_test[:5]),
                                  model.predict_proba(X_test[:5]))
