"""``step="pooled"`` (docs/ALGORITHM.md section 9f): each step is the initial estimate of
all the fit's batches so far (their per-label sums kept with the label blocks, the ridge
map's ``lambda`` re-estimated from them), warm started from the last iterate.

Data: the first 300 training rows of bibtex (``tests/files/``: 1836 sparse binary
features, 159 labels), uniform bits of its label matrix drawn here, so that the
observations' batches are known: an observations fit's batch ``t`` is rows ``[t m, (t +
1) m)`` of the bits given.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from onebit_dask import OneBitMultiLabel
from onebit_dask.fit import loop as fitting
from onebit_dask.io.xc import read_xc
from onebit_dask.testing import assert_same_fit
from tests.support.helpers import FILES

M, T = 3000, 4  # bits a batch, steps after the initial batch


@pytest.fixture(scope="module")
def bits():
    X, Y = read_xc(os.path.join(FILES, "bibtex_train.txt"))
    X, Y = X[:300].tocsr(), Y[:300].tocsr()
    rng = np.random.default_rng(7)
    rows = rng.integers(0, X.shape[0], (T + 1) * M)
    labels = rng.integers(0, Y.shape[1], (T + 1) * M)
    y = np.where(np.asarray(Y[rows, labels]).ravel() > 0, 1.0, -1.0)
    return X[rows], labels, y, Y.shape[1], X[:40], X, Y


def _fit(bits, batch_size, n_iter, **params):
    X_rows, labels, y, d2 = bits[:4]
    params = dict(dict(random_state=0, engine="local"), **params)
    return OneBitMultiLabel(6, batch_size=batch_size, n_iter=n_iter, **params).fit(
        X_rows, labels, y, n_labels=d2)


def _gap(a, b, X) -> float:
    """The largest difference of two models' scores, against the largest score."""
    sa, sb = a.decision_function(X), b.decision_function(X)
    return float(np.max(np.abs(sa - sb)) / np.max(np.abs(sb)))


@pytest.mark.parametrize("features", ["none", "auto"])  # "auto": the ridge map, sparse X
def test_pooled_fit_is_the_initial_estimate_of_all_its_bits(bits, features):
    """After ``T`` steps on batches of ``m`` bits the pooled fit is the initial estimate of
    one batch of all ``(T + 1) m`` bits: the same sums, thresholds, map and (the exact
    SVD of the dense initialisation) factors, up to the order of the additions. The
    moment step's average of the same batches is not (the check that the comparison
    can fail)."""
    X_new = bits[4]
    one = _fit(bits, (T + 1) * M, 0, features=features, init_svd="dense")
    pooled = _fit(bits, M, T, features=features, init_svd="dense", step="pooled")
    moment = _fit(bits, M, T, features=features, init_svd="dense", step="moment")
    assert pooled.n_samples_seen_ == one.n_samples_seen_ == (T + 1) * M
    np.testing.assert_allclose(pooled.intercept_, one.intercept_, rtol=1e-12)
    if features == "auto":
        np.testing.assert_allclose(pooled.feature_map_.scale, one.feature_map_.scale,
                                   rtol=1e-12)
        # the map of all the bits, not of the first batch's
        assert np.max(np.abs(moment.feature_map_.scale / one.feature_map_.scale - 1)) > 1e-3
    assert _gap(pooled, one, X_new) < 1e-9
    assert _gap(moment, one, X_new) > 1e-2


def test_warm_started_subspace_iteration_reaches_the_exact_svd(bits):
    """Matrix-free (randomised subspace iteration), each pooled step warm started from the
    last: with enough products the last step's factors are the exact SVD's."""
    X_new = bits[4]
    exact = _fit(bits, M, T, init_svd="dense", step="pooled")
    iterated = _fit(bits, M, T, init_svd="randomized", init_power_iter=200, step="pooled")
    cold = _fit(bits, M, T, init_svd="randomized", init_power_iter=0, step="pooled")
    assert _gap(iterated, exact, X_new) < 1e-6
    assert _gap(cold, exact, X_new) > 1e-3


def _interrupted_after(monkeypatch, steps):
    advance = fitting.advance

    def stop_after(settings, state, *args):
        advance(settings, state, *args)
        if state.n_steps == steps:
            raise KeyboardInterrupt
    monkeypatch.setattr(fitting, "advance", stop_after)


@pytest.mark.parametrize("engine", ["local", "dask"])
def test_a_resumed_pooled_fit_is_the_uninterrupted_one(bits, tmp_path, monkeypatch, engine,
                                                       client2):
    """The checkpoint holds the state, not the pools: a resume rebuilds them from the
    batches before it, in the fit's order, and the fit ends bit for bit as one never
    interrupted, on either engine."""
    params = dict(step="pooled", init_svd="randomized", engine=engine)
    with client2.as_current():
        whole = _fit_checkpointed(bits, tmp_path / "whole.zarr", params)
        path = tmp_path / "ckpt.zarr"
        with monkeypatch.context() as patch:
            _interrupted_after(patch, 2)
            with pytest.raises(KeyboardInterrupt):
                _fit_checkpointed(bits, path, params)
        resumed = _fit_checkpointed(bits, path, params)
    assert resumed.history_[2]["iteration"] == whole.history_[2]["iteration"]
    assert_same_fit(resumed, whole, bits[4].toarray())


def _fit_checkpointed(bits, path, params):
    X_rows, labels, y, d2 = bits[:4]
    return OneBitMultiLabel(6, batch_size=M, n_iter=T, random_state=0, **params).fit(
        X_rows, labels, y, n_labels=d2, checkpoint=path)


def test_pooled_is_refused_where_it_has_no_earlier_batches(bits):
    X_rows, labels, y, d2, _, X, Y = bits
    est = OneBitMultiLabel(6, step="pooled", batch_size=M)
    with pytest.raises(ValueError, match="step='pooled' is not allowed in partial_fit"):
        est.partial_fit(X_rows[:M], labels[:M], y[:M], n_labels=d2)
    with pytest.raises(ValueError, match=r"step='refine' is not allowed in partial_fit \(.*"
                                         r"pooled steps re-read .*\): pass step='moment'$"):
        OneBitMultiLabel(6, step="refine").partial_fit(X_rows[:M], labels[:M], y[:M],
                                                        n_labels=d2)
    with pytest.raises(ValueError, match="step='pooled' is not allowed with queries='model'"):
        OneBitMultiLabel(6, step="pooled", queries="model", n_iter=3).fit(X, Y)


def _every_pair(seed, t, s, n, n_obs, lo, hi):
    """Every pair of the block ``[lo, hi)``, each once, whatever the batch."""
    return np.repeat(np.arange(n), hi - lo), np.tile(np.arange(lo, hi), n)


@pytest.mark.parametrize("features", ["standardize", "ridge"])
def test_a_pool_of_uniform_rows_sums_the_asked_rows_at_their_mean(bits, monkeypatch,
                                                                  features):
    """A label matrix's pairs draw their rows uniformly, so each label's asked rows sum
    to ``n_j mu`` in mean, which the centred map sends to 0: the pool keeps the negative
    sums of the labels with a share of at least ``EXACT_SHARE`` only. Where every row is
    asked once about every label the asked rows' sum is ``n mu`` exactly, and the fit
    equals the one that keeps every negative sum; on uniform pairs it does not (the
    check that the comparison can fail)."""
    from onebit_dask.data import label_matrix
    from onebit_dask.engine import blocks

    X, Y = bits[5], bits[6]
    params = dict(step="pooled", n_iter=1, init_svd="dense", features=features,
                  random_state=0, engine="local")

    def fits():
        mean = OneBitMultiLabel(6, batch_size=X.shape[0] * Y.shape[1], **params).fit(X, Y)
        with monkeypatch.context() as patch:
            patch.setattr(label_matrix.LabelMatrixSource, "uniform_rows", False)
            exact = OneBitMultiLabel(6, batch_size=X.shape[0] * Y.shape[1], **params).fit(X, Y)
        return mean, exact

    mean, exact = fits()
    assert _gap(mean, exact, bits[4]) > 1e-3
    monkeypatch.setattr(label_matrix, "uniform_pairs", _every_pair)
    seen = []
    pool_batch = blocks.pool_batch

    def watched(block, data, model):
        out = pool_batch(block, data, model)
        if out.pool.exact is not None:
            seen.append((out.pool.exact.size, out.hi - out.lo))
        return out
    monkeypatch.setattr(blocks, "pool_batch", watched)
    mean, exact = fits()
    assert _gap(mean, exact, bits[4]) < 1e-9
    kept, labels = np.sum(seen, axis=0)
    assert 0 < kept < labels  # some labels' negative sums kept, some at their mean


def test_the_best_iterate_on_the_validation_bits_keeps_its_own_map(bits, monkeypatch):
    """Each pooled step re-estimates the ridge map: the iterate the validation bits select
    comes back with the map it was scored with (the calibration and the predictions use
    it), not the last step's. The maps do move (the check can fail)."""
    from onebit_dask.fit import validation

    X, Y = bits[5], bits[6]
    maps, update = {}, validation.ValidationBits.update

    def first_is_best(self, engine, A, top, iteration, feature_map=None):
        maps[iteration] = feature_map
        record = update(self, engine, A, top, iteration, feature_map)
        if iteration == 0:
            self.best = (np.inf, *self.best[1:])
        return record
    monkeypatch.setattr(validation.ValidationBits, "update", first_is_best)
    est = OneBitMultiLabel(6, batch_size=M, n_iter=T, step="pooled", features="ridge",
                           validation_fraction=0.5, random_state=0, engine="local").fit(X, Y)
    assert est.best_iteration_ == 0
    np.testing.assert_array_equal(est.feature_map_.scale, maps[0].scale)
    assert np.max(np.abs(maps[T].scale / maps[0].scale - 1)) > 1e-3
