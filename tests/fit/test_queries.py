"""Fits under chosen queries (``OneBitMultiLabel(queries=...)``, docs/ALGORITHM.md section
11): the positives found as the label matrix, against closed forms and a dense NumPy
reference; the same fit on Dask; the refusals where there is nothing to choose."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import shutil

import numpy as np
import pytest
import scipy.linalg
import scipy.special
from scipy import stats

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.data.label_matrix import LabelMatrixSource, check_label_matrix
from onebit_dask.data.queries import WARMUP_SHARE, unseen_share, warmup_batches
from onebit_dask.engine import topk
from onebit_dask.engine import LocalEngine
from onebit_dask.fit import loop as fitting
from onebit_dask.fit.state import FitSettings, new_state
from onebit_dask.testing import assert_same_fit
from tests.support.helpers import FILES, one_line, run_main

PROBLEM = SyntheticProblem(30, 200, 3, positive_rate=(0.005, 0.05), seed=3, n_test=10)
PARAMS = dict(batch_size=20000, n_iter=5, random_state=0, engine="local", query_warmup=1)
# one uniform batch: docs/ALGORITHM.md section 11's measurement on this truth


@pytest.fixture(scope="module")
def data():
    X, Y = PROBLEM.full_observation(3000)
    return X, (Y > 0).astype(np.int8)


@pytest.fixture(scope="module")
def fits(data):
    return {q: OneBitMultiLabel(3, queries=q, **PARAMS).fit(*data)
            for q in ("uniform", "popularity", "model")}


def test_uniform_queries_are_the_default_fit(data, fits):
    assert_same_fit(OneBitMultiLabel(3, **PARAMS).fit(*data), fits["uniform"], X=data[0])
    default = {k: v for k, v in PARAMS.items() if k != "query_warmup"}  # the share 0.6
    assert_same_fit(OneBitMultiLabel(3, **default).fit(*data), fits["uniform"], X=data[0])
    with pytest.raises(AttributeError, match="queries='uniform'"):
        fits["uniform"].queries_asked_


@pytest.mark.parametrize("queries", ["popularity", "model"])
def test_the_thresholds_are_the_shares_of_the_positives_found(data, fits, queries):
    """``b_j = Phi^{-1}((f_j + 1/2) / (n + 1))`` for ``f_j`` positive bits of label ``j``
    over every batch, and ``f`` is what the asked pairs hold."""
    est, (X, Y) = fits[queries], data
    f = est.positives_found_
    np.testing.assert_allclose(est.intercept_,
                               scipy.special.ndtri((f + 0.5) / (X.shape[0] + 1)), rtol=1e-9)
    rows, labels = est.queries_asked_
    np.testing.assert_array_equal(f, np.bincount(labels[Y[rows, labels] > 0], minlength=200))
    assert sum(h["positive_bits"] for h in est.history_) == f.sum()
    repeated = sum(h["repeated_pairs"] for h in est.history_)
    assert rows.size == 6 * 20000 - repeated and est.n_samples_seen_ == 6 * 20000
    assert [h["n_samples"] for h in est.history_] == [20000 * (t + 1) for t in range(6)]


def test_model_queries_find_more_positives_than_uniform_bits(data, fits):
    """Each chosen batch's positive bits against the share of positives in ``Y`` that
    uniform bits find (binomial test, level 1e-3, one-sided); the first batch is uniform
    and passes the same test the other way."""
    share = data[1].mean()
    history = fits["model"].history_
    first = history[0]["positive_bits"]
    assert stats.binomtest(first, 20000, share).pvalue > 1e-3
    for h in history[1:]:
        assert stats.binomtest(h["positive_bits"], 20000, share,
                               alternative="greater").pvalue < 1e-3


def test_the_initial_estimate_is_the_svd_of_the_positives_found(data):
    """With no step (``n_iter=0``), the initial estimate under chosen queries is the
    top-``k`` left singular subspace of ``H = sum_{positive pairs} x_i e_j^T`` of the
    (uniform) initial batch's distinct pairs: a dense NumPy reference."""
    X, Y = data
    params = OneBitMultiLabel(3, batch_size=20000, n_iter=1, queries="model",
                              features="none", init_svd="dense").get_params()
    # the plain solver on the initial batch alone: FitSettings.of refuses n_iter=0 with
    # chosen queries (no batch would choose), so the checked settings are cut to it
    settings = dataclasses.replace(FitSettings.of(params, planted=False), n_iter=0)
    state = new_state(X.shape[1], Y.shape[1], 4, 0)
    source = LabelMatrixSource(X, check_label_matrix(Y, X.shape[0]), 0)
    fitting.fit_source(settings, state, LocalEngine(), source)
    rows, labels = source.uniform_pairs(0, 20000, 4)
    keys = np.unique(rows * 200 + labels)  # each pair once: a repeat is not sent
    np.testing.assert_array_equal(keys, state.asked.keys)
    rows, labels = keys // 200, keys % 200
    found = Y[rows, labels] > 0
    H = np.zeros((X.shape[1], Y.shape[1]))
    np.add.at(H.T, labels[found], X[rows[found]])
    U = np.linalg.svd(H)[0][:, :3]
    basis = scipy.linalg.orth(state.top.Q)
    assert np.linalg.norm(basis @ basis.T - U @ U.T, 2) < 1e-8
    # a wrong estimate (the negatives' rows subtracted, as uniform bits' centring does) is
    # rejected by the same bound
    np.add.at(H.T, labels[~found], -0.02 * X[rows[~found]])
    V = np.linalg.svd(H)[0][:, :3]
    assert np.linalg.norm(basis @ basis.T - V @ V.T, 2) > 1e-3


def test_the_unseen_share_is_the_mean_share_of_the_labels_not_seen():
    """Good-Turing on a planted Zipf of shares (``p_j = 0.3 (j + 1)^{-0.7}``, 400 labels,
    4000 uniform bits, about half the labels seen): over 200 draws the estimate's mean is
    within 3 standard errors and 5 % of the true mean share of the labels each draw did not
    see positive; ``N_1 / n_bits`` alone (the chance per bit, not per label) and the mean
    share of every label are rejected by the same test."""
    d2, n_bits = 400, 4000
    share = 0.3 * (np.arange(d2) + 1.0) ** -0.7
    g = np.random.default_rng(5)
    est, truth, wrong, every = [], [], [], []
    for _ in range(200):
        labels = g.integers(0, d2, n_bits)
        positive = labels[g.random(n_bits) < share[labels]]
        counts = np.bincount(positive, minlength=d2)
        est.append(unseen_share(positive, n_bits, d2))
        truth.append(share[counts == 0].mean())
        wrong.append(np.count_nonzero(counts == 1) / n_bits)
        every.append(share.mean())
    est, truth = np.array(est), np.array(truth)
    diff = est - truth
    assert abs(diff.mean()) < 3 * diff.std() / np.sqrt(diff.size) + 1e-12
    assert abs(diff.mean()) < 0.05 * truth.mean()
    for bad in (np.array(wrong), np.array(every)):
        off = bad - truth
        assert abs(off.mean()) > 3 * off.std() / np.sqrt(off.size) + 0.05 * truth.mean()
    assert unseen_share(np.array([0, 0, 1, 1]), 10, 2) == 0.0  # every label seen
    assert unseen_share(np.array([], dtype=int), 10, 5) == 0.0  # none seen once


def test_the_model_ranks_each_label_at_least_at_the_unseen_share(data, monkeypatch):
    """The model's queries rank a row's labels by ``phi(x)^T w_j + max(b_j, b_0)``, ``b_0 =
    Phi^{-1}`` of the Good-Turing share of a label the warm-up batches never saw positive
    (docs/ALGORITHM.md section 11): the floor each chosen batch passes to the top-``k``
    engine is that of the uniform batches' bits, recomputed here from ``Y``."""
    X, Y = data
    floors = []
    predict = topk.predict_top_k

    def recording(engine, XA, k, bounds, floor=None):
        floors.append(floor)
        return predict(engine, XA, k, bounds, floor)

    monkeypatch.setattr(topk, "predict_top_k", recording)
    OneBitMultiLabel(3, batch_size=1000, n_iter=3, queries="model", query_warmup=2,
                     random_state=0, engine="local").fit(X, Y)
    source = LabelMatrixSource(X, check_label_matrix(Y, X.shape[0]), 0)
    pairs = [source.uniform_pairs(t, 1000, 4) for t in range(2)]
    positive = np.concatenate([j[Y[i, j] > 0] for i, j in pairs])
    counts = np.bincount(positive, minlength=200)
    want = np.count_nonzero(counts == 1) * 200 / (2000 * np.count_nonzero(counts == 0))
    assert 0 < want < 1
    assert floors == [scipy.special.ndtri(want)] * 2


def test_same_seed_same_queries(data, fits):
    again = OneBitMultiLabel(3, queries="model", **PARAMS).fit(*data)
    assert_same_fit(fits["model"], again)
    for a, b in zip(again.queries_asked_, fits["model"].queries_asked_):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("queries", ["popularity", "model"])
def test_queries_on_dask_equal_in_process(client2, data, fits, queries):
    with client2.as_current():
        on_dask = OneBitMultiLabel(3, queries=queries, **dict(PARAMS, engine="dask")).fit(*data)
    assert_same_fit(fits[queries], on_dask, X=data[0][:50])
    for a, b in zip(on_dask.queries_asked_, fits[queries].queries_asked_):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("queries", ["popularity", "model"])
def test_a_resume_asks_the_same_queries(data, fits, tmp_path, monkeypatch, queries):
    """A fit stopped after its checkpoint of batch 2 resumes with the pairs asked and the
    positives found up to it (written with the checkpoint, checksummed), asks the same
    queries after it and ends with the uninterrupted fit's numbers and pairs; a changed
    byte of the pairs asked is refused on resume."""
    from onebit_dask import persist
    from onebit_dask.io.stores.zarr_format import DamagedStoreError

    write = persist.Checkpoint.write

    def write_then_stop(self, state, engine):
        write(self, state, engine)
        if state.n_steps == 2:
            raise KeyboardInterrupt  # the user stops the fit

    path = tmp_path / "ck.zarr"
    with monkeypatch.context() as patch:
        patch.setattr(persist.Checkpoint, "write", write_then_stop)
        with pytest.raises(KeyboardInterrupt):
            OneBitMultiLabel(3, queries=queries, **PARAMS).fit(*data, checkpoint=path)
    stopped = str(tmp_path / "stopped.zarr")
    shutil.copytree(path, stopped)
    resumed = OneBitMultiLabel(3, queries=queries, **PARAMS).fit(*data, checkpoint=path)
    assert_same_fit(fits[queries], resumed, X=data[0][:50])
    for a, b in zip(resumed.queries_asked_, fits[queries].queries_asked_):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(resumed.positives_found_, fits[queries].positives_found_)
    chunk = sorted(glob.glob(os.path.join(stopped, "asked_keys", "c", "*")))[0]
    raw = bytearray(open(chunk, "rb").read())
    raw[len(raw) // 2] ^= 0xFF
    open(chunk, "wb").write(bytes(raw))
    with pytest.raises(DamagedStoreError, match="asked_keys"):
        OneBitMultiLabel(3, queries=queries, **PARAMS).fit(*data, checkpoint=stopped)


def test_a_resume_of_a_share_is_the_uninterrupted_fit(data, tmp_path, monkeypatch):
    """The default share (4 uniform batches of 6) resumed after batch 3 (a uniform one)
    ends with the uninterrupted fit's numbers and pairs; its checkpoint refuses a fit
    whose share resolves to another count."""
    from onebit_dask import persist

    params = {**PARAMS, "query_warmup": WARMUP_SHARE}
    whole = OneBitMultiLabel(3, queries="model", **params).fit(*data)
    write = persist.Checkpoint.write

    def write_then_stop(self, state, engine):
        write(self, state, engine)
        if state.n_steps == 3:
            raise KeyboardInterrupt

    path = tmp_path / "ck.zarr"
    with monkeypatch.context() as patch:
        patch.setattr(persist.Checkpoint, "write", write_then_stop)
        with pytest.raises(KeyboardInterrupt):
            OneBitMultiLabel(3, queries="model", **params).fit(*data, checkpoint=path)
    with pytest.raises(ValueError, match="query_warmup_batches=4 there, 3 here"):
        OneBitMultiLabel(3, queries="model", **{**params, "query_warmup": 0.5}
                         ).fit(*data, checkpoint=path)
    resumed = OneBitMultiLabel(3, queries="model", **params).fit(*data, checkpoint=path)
    assert_same_fit(whole, resumed, X=data[0][:50])
    for a, b in zip(resumed.queries_asked_, whole.queries_asked_):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("sampler", ["conditional", "projected", "explicit"])
@pytest.mark.parametrize("queries", ["popularity", "model"])
def test_planted_problem_refuses_chosen_queries_whatever_its_sampler(sampler, queries):
    """Not built on a planted problem (``docs/ALGORITHM.md`` section 11, "Chosen queries on
    a planted problem's fresh rows"): every sampler refuses, before any work, with the
    existing message."""
    problem = dataclasses.replace(PROBLEM, sampler=sampler)
    with pytest.raises(ValueError, match=f"queries={queries!r} is not allowed with a planted "
                                         "problem"):
        OneBitMultiLabel(3, queries=queries, **PARAMS).fit(problem)


def test_refused_where_there_are_no_queries_to_choose(data, tmp_path):
    X, Y = data
    est = OneBitMultiLabel(3, queries="model", **PARAMS)
    labels, bits = np.arange(100) % 200, np.ones(100)
    with pytest.raises(ValueError, match="queries='model' is not allowed with given bits"):
        est.fit(X[:100], labels, bits, n_labels=200)
    with pytest.raises(ValueError, match="queries='model' is not allowed with a planted"):
        est.fit(PROBLEM)
    with pytest.raises(ValueError, match="queries='model' is not allowed in partial_fit"):
        est.partial_fit(X, Y)
    with pytest.raises(ValueError, match="queries='model' is not allowed with "
                                         "validation_fraction=0.1"):
        OneBitMultiLabel(3, queries="model", validation_fraction=0.1, **PARAMS).fit(X, Y)
    with pytest.raises(ValueError, match="query_warmup=6 is not allowed with n_iter=5"):
        OneBitMultiLabel(3, queries="model", **{**PARAMS, "query_warmup": 6}).fit(X, Y)
    with pytest.raises(ValueError, match="query_warmup=0.6 is not allowed with n_iter=0: a "
                                         "share of the fit's one batch"):
        OneBitMultiLabel(3, queries="model", **{**PARAMS, "n_iter": 0,
                                                "query_warmup": 0.6}).fit(X, Y)
    OneBitMultiLabel(3, **{**PARAMS, "query_warmup": 6}).fit(X, Y)  # uniform: not read
    OneBitMultiLabel(3, **{**PARAMS, "n_iter": 0, "query_warmup": 0.6}).fit(X, Y)


@pytest.mark.parametrize("share, n_iter, count", [
    (0.6, 9, 6), (0.6, 10, 7), (0.6, 5, 4), (0.6, 1, 1), (0.6, 2, 2), (0.6, 3, 2),
    (0.5, 4, 3), (0.5, 5, 3), (0.5, 6, 4), (0.25, 9, 3), (0.01, 50, 1), (0.01, 1, 1),
    (0.95, 9, 9), (0.99, 1, 1), (0.1, 5, 1),
])
def test_a_share_resolves_to_a_count_of_uniform_batches(share, n_iter, count):
    """``max(1, floor(s (n_iter + 1) + 1/2))``, halves up, at most ``n_iter``: at least one
    uniform batch and at least one chosen; the fit's settings hold the count."""
    assert warmup_batches(share, n_iter) == count
    params = OneBitMultiLabel(3, queries="model", query_warmup=share, n_iter=n_iter
                              ).get_params()
    settings = FitSettings.of(params, planted=False)
    assert settings.query_warmup == settings.policy.warmup == count
    assert not settings.policy.chooses(count - 1) and settings.policy.chooses(count)


def test_a_count_is_itself_and_the_default_is_the_share():
    assert OneBitMultiLabel().query_warmup == WARMUP_SHARE == 0.6
    for n_iter in (1, 5, 10, 100):
        assert warmup_batches(1, n_iter) == 1 and warmup_batches(n_iter, n_iter) == n_iter
    settings = FitSettings.of(OneBitMultiLabel(3, queries="model", query_warmup=3
                                               ).get_params(), planted=False)
    assert settings.query_warmup == 3 and type(settings.query_warmup) is int


def test_a_count_of_one_is_the_fit_of_a_share_of_one_batch(data):
    """``query_warmup=1`` (the earlier default, passed) fits as before: bit for bit the
    fit of a share that resolves to one uniform batch (0.1 of 6 batches), and not that of
    the default share (4 uniform batches of 6)."""
    one = OneBitMultiLabel(3, queries="model", **{**PARAMS, "query_warmup": 1}).fit(*data)
    share = OneBitMultiLabel(3, queries="model", **{**PARAMS, "query_warmup": 0.1}).fit(*data)
    assert_same_fit(one, share, X=data[0][:50])
    for a, b in zip(one.queries_asked_, share.queries_asked_):
        np.testing.assert_array_equal(a, b)
    default = OneBitMultiLabel(3, queries="model", **{**PARAMS, "query_warmup": WARMUP_SHARE}
                               ).fit(*data)
    assert [h["explored_bits"] for h in default.history_[:4]] == [20000] * 4
    assert default.history_[4]["explored_bits"] < 20000
    assert one.history_[1]["explored_bits"] < 20000


@pytest.mark.parametrize("bad", [0, 1.0, -0.5, 2.5, "a", -1, float("nan")])
def test_a_bad_warmup_is_refused_naming_it(data, bad):
    X, Y = data
    with pytest.raises(ValueError, match=(rf"query_warmup={bad!r} is not allowed: .*an int in "
                                          r"the range \[1, inf\) or a float in the range "
                                          r"\(0.0, 1.0\)").replace("nan", "nan")):
        OneBitMultiLabel(3, queries="model", **{**PARAMS, "query_warmup": bad}).fit(X, Y)


@pytest.mark.parametrize("warmup", [WARMUP_SHARE, 2])
def test_a_saved_model_keeps_its_warmup(data, tmp_path, warmup):
    """The model store's params are JSON: a share loads as the same float, a count (as
    every earlier store holds) as the same int."""
    est = OneBitMultiLabel(3, queries="model", **{**PARAMS, "n_iter": 2, "query_warmup": warmup}
                           ).fit(*data)
    est.save(tmp_path / "m.zarr")
    loaded = OneBitMultiLabel.load(tmp_path / "m.zarr")
    assert loaded.query_warmup == warmup and type(loaded.query_warmup) is type(warmup)
    assert loaded.get_params() == {**est.get_params(), "engine": "auto"}


def test_the_resolved_count_is_in_a_checkpoint_fingerprint():
    """A share's checkpoint holds the count it resolved to (a resume is the same fit); a
    count is its own; under uniform queries the query knobs do not decide the numbers, so
    a checkpoint of the earlier default (``query_warmup=1``) resumes."""
    from onebit_dask.persist.saving import _differences, _numbers_only, fingerprint

    params = OneBitMultiLabel(3, queries="model", n_iter=9).get_params()
    assert fingerprint(params, {})["params"]["query_warmup_batches"] == 6
    assert "query_warmup_batches" not in fingerprint({**params, "query_warmup": 6},
                                                     {})["params"]
    model = [_numbers_only(fingerprint({**params, "query_warmup": w}, {})) for w in (1, 0.6)]
    assert _differences(*model)
    uniform = [_numbers_only(fingerprint({**params, "queries": "uniform", "query_warmup": w},
                                         {})) for w in (1, 0.6)]
    assert not _differences(*uniform)


def test_a_first_batch_without_a_positive_is_a_fit(data):
    """The first batch's pairs hold no positive: the estimate starts from nothing found
    (thresholds at the half pair), and the chosen batches find positives."""
    X, Y = data
    est = OneBitMultiLabel(3, batch_size=20, n_iter=2, queries="model", random_state=0,
                           engine="local").fit(X, Y)
    assert est.history_[0]["positive_bits"] == 0
    assert est.history_[0]["n_active"] == 0
    assert np.isfinite(est.B_).all() and est.positives_found_.sum() > 0


def test_the_command_line_takes_the_policy():
    path = str(FILES / "emotions_train.txt")
    proc = run_main("fit", "--data", path, "--queries", "model", "--query-top-k", "3",
                    "--query-explore", "0.2", "--rank", "2", "--batch-size", "500",
                    "--n-iter", "2", "--workers", "0", "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    est = OneBitMultiLabel(2, batch_size=500, n_iter=2, queries="model", query_top_k=3,
                           query_explore=0.2, random_state=0, engine="local").fit(path)
    assert json.loads(proc.stdout)["n_samples"] == est.n_samples_seen_ == 1500
    for given, count in (("0.5", 2), ("1", 1)):
        proc = run_main("fit", "--data", path, "--queries", "model", "--rank", "2",
                        "--batch-size", "500", "--n-iter", "3", "--query-warmup", given,
                        "--workers", "0", "--json", "--quiet")
        assert proc.returncode == 0, proc.stderr
    for bad in ("0", "1.0", "-0.5", "2.5", "a"):
        line = one_line(run_main("fit", "--data", path, "--queries", "model",
                                 "--query-warmup", bad, "--workers", "0"), 2)
        assert f"--query-warmup: {bad!r} is not allowed: give an integer >= 1" in line, line
    line = one_line(run_main("fit", "--data", path, "--queries", "model", "--step", "paper",
                             "--workers", "0"), 2)
    assert "step='paper' is not allowed with queries='model'" in line


@pytest.mark.parametrize("params, bad", [
    (dict(step="select"), "step='select'"), (dict(step="paper"), "step='paper'"),
    (dict(threshold="none"), "threshold='none'"),
    (dict(query_explore=1.5), "query_explore"), (dict(query_top_k=0), "query_top_k"),
    (dict(queries="best"), "queries"),
])
def test_bad_query_settings_are_refused_before_any_work(data, params, bad):
    X, Y = data
    with pytest.raises(ValueError, match=bad):
        OneBitMultiLabel(3, **{**PARAMS, "queries": "model", **params}).fit(X, Y)
