"""The feature map (onebit_dask.ops.features): its closed form, the fit through the factors
against a fit on the mapped features formed in NumPy, engines, save/load, bad input."""

import numpy as np
import pytest
import scipy.sparse
import zarr

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.ops import features as F
from onebit_dask.io.stores.zarr_format import DamagedStoreError
from onebit_dask.testing import assert_same_fit

from tests.support.helpers import FILES, lineage_pickles

RTOL = 1e-8  # the map's products against phi(X) formed in NumPy: float64 rounding, summed
#              in another order, through a few steps of sign(...) (which a tie would flip)


def correlated(n=300, d1=12, d2=6, seed=0, density=None):
    """Features with a mean, uneven scales and correlations (a few binary columns when
    ``density`` makes them sparse), and a 0/1 label matrix from a planted rule with
    rare labels."""
    rng = np.random.default_rng(seed)
    mix = rng.standard_normal((d1, d1)) * np.linspace(0.2, 4.0, d1)
    X = rng.standard_normal((n, d1)) @ mix + rng.uniform(-3, 3, d1)
    if density is not None:
        X = X * (rng.random((n, d1)) < density)
    W = rng.standard_normal((d1, d2))
    S = (X - X.mean(0)) / X.std(0) @ W
    Y = (S > np.quantile(S, 0.7, axis=0)).astype(np.int8)
    return X, Y


def _same_map(a, b, **tol):
    for name in F.FeatureMap.__dataclass_fields__:
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), err_msg=name, **tol)


# -- (f) the map itself, in closed form ---------------------------------------------------
def test_map_closed_form():
    X, _ = correlated(n=500, d1=10)
    fm = F.fit_feature_map(X, "whiten", n_components=4)
    np.testing.assert_allclose(fm.mean, X.mean(0), rtol=1e-12)
    np.testing.assert_allclose(fm.scale, X.std(0), rtol=1e-12)
    Z = fm.transform(X)
    C = Z.T @ Z / Z.shape[0]
    U = fm.directions
    np.testing.assert_allclose(U.T @ U, np.eye(4), atol=1e-12)
    np.testing.assert_allclose(U.T @ C @ U, np.eye(4), atol=1e-10)  # white on the top 4
    S = (X - X.mean(0)) / X.std(0)  # the other directions keep the standardised variance
    P = np.eye(10) - U @ U.T
    np.testing.assert_allclose(P @ C @ P, P @ (S.T @ S / S.shape[0]) @ P, atol=1e-10)
    lam = np.linalg.eigvalsh(S.T @ S / S.shape[0])[::-1]
    np.testing.assert_allclose(fm.factors, lam[:4] ** -0.5, rtol=1e-10)
    full = F.fit_feature_map(X, "whiten", n_components=50)  # all 10 directions: C^{-1/2}
    Zf = full.transform(X)
    np.testing.assert_allclose(Zf.T @ Zf / Zf.shape[0], np.eye(10), atol=1e-10)
    std = F.fit_feature_map(X, "standardize")
    assert std.n_components == 0
    np.testing.assert_allclose(std.transform(X), S, atol=1e-12)
    assert F.fit_feature_map(X, "none") is None


def test_map_rejects_a_wrong_whitening():
    """The covariance check of the closed-form test tells a map with another scale apart
    (its power: the same check on factors s^0.9)."""
    X, _ = correlated(n=500, d1=10)
    fm = F.fit_feature_map(X, "whiten", n_components=4)
    wrong = F.FeatureMap(fm.mean, fm.scale, fm.directions, fm.factors ** 0.9)
    Z = wrong.transform(X)
    U = fm.directions
    assert not np.allclose(U.T @ (Z.T @ Z / Z.shape[0]) @ U, np.eye(4), atol=1e-3)


@pytest.mark.parametrize("density", [0.05, 0.3])  # sparse and dense-ish chunk products
def test_map_sparse_and_arpack_equal_exact(density, monkeypatch):
    """A CSR X gives the dense X's map (moments from the non-zeros, X^T X / n - mu mu^T);
    above EXACT_FEATURES, ARPACK on the implicitly centred rows spans the same leading
    directions (T compared as a matrix: the directions' signs are free)."""
    X, _ = correlated(n=400, d1=15, density=density)
    exact = F.fit_feature_map(X, "whiten", n_components=5)
    sparse = F.fit_feature_map(scipy.sparse.csr_matrix(X), "whiten", n_components=5)
    np.testing.assert_allclose(sparse.mean, exact.mean, rtol=1e-12)
    np.testing.assert_allclose(sparse.scale, exact.scale, rtol=1e-10)
    eye = np.eye(15)
    np.testing.assert_allclose(sparse.whiten(eye), exact.whiten(eye), atol=1e-8)
    monkeypatch.setattr(F, "EXACT_FEATURES", 4)
    arpack = F.fit_feature_map(scipy.sparse.csr_matrix(X), "whiten", n_components=5,
                               random_state=0)
    np.testing.assert_allclose(arpack.factors, exact.factors, rtol=1e-8)
    np.testing.assert_allclose(arpack.whiten(eye), exact.whiten(eye), atol=1e-7)


def test_products_through_the_map():
    """phi(X) M and phi(X)^T R from X as it is (dense and CSR), and homogeneous sums."""
    X, _ = correlated(n=50, d1=8, density=0.5)
    fm = F.fit_feature_map(X, "whiten", n_components=3)
    rng = np.random.default_rng(1)
    M, R, w = rng.standard_normal((8, 4)), rng.standard_normal((50, 4)), rng.standard_normal(50)
    Z = fm.transform(X)
    for Xs in (X, scipy.sparse.csr_matrix(X)):
        np.testing.assert_allclose(fm.product(Xs, M), Z @ M, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(fm.transpose_product(Xs, R), Z.T @ R, rtol=1e-10, atol=1e-12)
        H = fm.homogeneous(scipy.sparse.csr_matrix(w @ Xs) if scipy.sparse.issparse(Xs)
                           else (w @ Xs)[None], np.array([w.sum()]))
        assert scipy.sparse.issparse(H) == scipy.sparse.issparse(Xs)
        np.testing.assert_allclose(fm.lower(H.T).T, (w @ Z)[None], rtol=1e-10, atol=1e-12)


# -- (a) the fit through the factors equals a fit on phi(X) formed in NumPy ----------------
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("data", ["label_matrix", "observations"])
@pytest.mark.parametrize("threshold", ["none", "estimated"])
def test_fit_equals_prewhitened(sparse, data, threshold, monkeypatch):
    X, Y = correlated(density=0.4 if sparse else None)
    params = dict(batch_size=2500, n_iter=3, n_shards=3, random_state=0, engine="local",
                  step="harmonic", threshold=threshold,
                  init_svd="randomized" if data == "observations" else "dense")
    if data == "observations":
        rng = np.random.default_rng(3)
        rows, labels = rng.integers(0, X.shape[0], 10_000), rng.integers(0, Y.shape[1], 10_000)
        args = lambda Z: (Z[rows], labels, 2 * Y[rows, labels] - 1)  # noqa: E731
    else:
        args = lambda Z: (Z, Y)  # noqa: E731
    seen = []  # whether the rows reaching the map's product are sparse
    product = F.FeatureMap.product
    monkeypatch.setattr(F.FeatureMap, "product", lambda self, Xs, M: seen.append(
        scipy.sparse.issparse(Xs)) or product(self, Xs, M))
    Xin = scipy.sparse.csr_matrix(X) if sparse else X
    model = OneBitMultiLabel(2, features="whiten", whiten_components=5, **params).fit(*args(Xin))
    assert seen and set(seen) == {sparse}  # CSR shards are never densified
    Z = model.feature_map_.transform(X)
    reference = OneBitMultiLabel(2, features="none", **params).fit(*args(Z))
    for name in ("A_", "B_", "intercept_"):
        np.testing.assert_allclose(getattr(model, name), getattr(reference, name), rtol=RTOL,
                                   atol=RTOL, err_msg=name)
    np.testing.assert_allclose(model.decision_function(Xin), reference.decision_function(Z),
                               rtol=RTOL, atol=RTOL)
    assert model.history_[-1]["n_active"] == reference.history_[-1]["n_active"]


def test_heldout_metrics_and_top_k_through_the_map():
    X, Y = correlated()
    Xt, Yt = correlated(seed=5)
    params = dict(batch_size=2000, n_iter=2, random_state=0, engine="local")
    model = OneBitMultiLabel(2, features="whiten", **params).fit(X, Y, eval_set=(Xt, Yt))
    fm = model.feature_map_
    reference = OneBitMultiLabel(2, **params).fit(fm.transform(X), Y,
                                                  eval_set=(fm.transform(Xt), Yt))
    for key in ("auc", "precision_at_1", "ndcg_at_3", "psp_at_3"):
        assert model.history_[-1][key] == pytest.approx(reference.history_[-1][key], rel=1e-9)
    got, want = model.predict_top_k(Xt, 3), reference.predict_top_k(fm.transform(Xt), 3)
    np.testing.assert_array_equal(got[0], want[0])
    assert model.score(Xt, Yt) == pytest.approx(reference.score(fm.transform(Xt), Yt), rel=1e-9)


def test_partial_fit_estimates_the_map_from_the_first_rows():
    X, Y = correlated()
    rng = np.random.default_rng(2)
    rows, labels = rng.integers(0, X.shape[0], 3000), rng.integers(0, Y.shape[1], 3000)
    bits = 2 * Y[rows, labels] - 1
    params = dict(batch_size=3000, n_iter=0, random_state=0, engine="local",
                  features="standardize")
    fitted = OneBitMultiLabel(2, **params).fit(X[rows], labels, bits)
    partial = OneBitMultiLabel(2, **params).partial_fit(X[rows], labels, bits,
                                                        n_labels=Y.shape[1])
    assert_same_fit(fitted, partial, X, history=False, link=False)  # partial_fit fits none


# -- (b) features="none" is the model without a map -------------------------------------------
def test_none_is_the_model_without_a_map(monkeypatch):
    """features="none" never touches a map: the code path of a package without maps (run
    against main before this change: A_, B_, b, scores and AUC equal bit for bit on
    emotions, label matrix and observations, both thresholds, both initialisations)."""
    X, Y = correlated()
    params = dict(batch_size=2000, n_iter=2, random_state=0, engine="local")
    plain = OneBitMultiLabel(2, features="none", **params).fit(X, Y)
    for name in ("product", "transpose_product", "lift", "lower", "homogeneous"):
        monkeypatch.setattr(F.FeatureMap, name, lambda *a, **k: pytest.fail("a map was used"))
    none = OneBitMultiLabel(2, features="none", **params).fit(X, Y, eval_set=(X, Y))
    assert none.feature_map_ is None
    assert_same_fit(plain, none, X, history=False)
    monkeypatch.undo()
    identity = F.FeatureMap(np.zeros(12), np.ones(12), np.zeros((12, 0)), np.zeros(0))
    np.testing.assert_allclose(identity.product(X, plain.A_), X @ plain.A_, rtol=1e-14)


# -- (c) in-process equals Dask -------------------------------------------------------------
@pytest.mark.parametrize("data", ["label_matrix", "observations"])
def test_dask_equals_in_process(client2, data):
    X, Y = correlated(density=0.4)
    X = scipy.sparse.csr_matrix(X)
    if data == "observations":
        rng = np.random.default_rng(3)
        rows, labels = rng.integers(0, X.shape[0], 6000), rng.integers(0, Y.shape[1], 6000)
        args = (X[rows], labels, 2 * Y[rows, labels] - 1)
    else:
        args = (X, Y)
    params = dict(batch_size=1500, n_iter=2, n_shards=3, random_state=1, features="whiten",
                  whiten_components=4, step="harmonic")
    local = OneBitMultiLabel(2, engine="local", **params).fit(*args)
    with client2.as_current():
        on_dask = OneBitMultiLabel(2, engine="dask", **params).fit(*args)
    _same_map(local.feature_map_, on_dask.feature_map_, rtol=0, atol=0)
    assert_same_fit(local, on_dask, X)


def test_dask_sends_the_map_to_the_cluster_once(client2):
    """The map is data a fit reads at every step: it goes to the cluster once per fit,
    not with every block's task (at d1 = 10^5 and 200 directions it is 160 MB). Measured
    as the engine's client traffic of each step (history ``client_bytes``, the map's
    arrays counted by ``dask.sizeof``), whitened against standardised (a map of two
    vectors): the difference is what the map adds to a step."""
    from dask.sizeof import sizeof

    X, Y = correlated(n=400, d1=300, d2=6, seed=2)
    params = dict(batch_size=1500, n_iter=3, n_shards=3, random_state=1, step="harmonic")
    with client2.as_current():
        whitened = OneBitMultiLabel(2, engine="dask", features="whiten", whiten_components=100,
                                    **params).fit(X, Y)
        standardised = OneBitMultiLabel(2, engine="dask", features="standardize",
                                        **params).fit(X, Y)
    size = sizeof(whitened.feature_map_)
    assert size >= whitened.feature_map_.directions.nbytes  # the accounting sees the arrays
    added = [w["client_bytes"] - s["client_bytes"]
             for w, s in zip(whitened.history_[1:], standardised.history_[1:])]
    assert max(added) < size / 4, (added, size)  # sent with each of 3 blocks: >= 3 x size


def test_partial_fit_on_dask_sends_the_map_once(client2, monkeypatch):
    """Each ``partial_fit`` call on the cluster takes the same fitted map: it is sent once
    and the blocks' lineage (which the scheduler keeps) holds one task of it, whatever
    the number of calls (a new copy per call would stay there as lineage), and the steps
    equal the in-process ones."""
    from onebit_dask.engine import placement

    monkeypatch.setattr(placement, "KEEP_LOCAL_LIMIT", 0)  # the blocks stay on the cluster
    X, Y = correlated(n=400, d1=300, d2=6, seed=2)
    rng = np.random.default_rng(3)
    params = dict(batch_size=1500, random_state=1, features="whiten", whiten_components=100)
    on_dask = OneBitMultiLabel(2, engine="dask", **params)
    local = OneBitMultiLabel(2, engine="local", **params)
    for _ in range(3):
        rows, labels = rng.integers(0, X.shape[0], 1500), rng.integers(0, Y.shape[1], 1500)
        batch = (X[rows], labels, 2 * Y[rows, labels] - 1)
        with client2.as_current():
            on_dask.partial_fit(*batch, n_labels=Y.shape[1])
        local.partial_fit(*batch, n_labels=Y.shape[1])
    keys = [h.key for h in on_dask._state.blocks.handles]
    specs = client2.run_on_scheduler(lineage_pickles, keys=keys)
    assert sum(b"FeatureMap" in spec for spec in specs) == 1
    assert_same_fit(local, on_dask, X)


# -- (d) save / load -----------------------------------------------------------------------
def test_save_load_keeps_the_map_and_refuses_a_damaged_one(tmp_path):
    X, Y = correlated(density=0.4)
    X = scipy.sparse.csr_matrix(X)
    params = dict(batch_size=1500, n_iter=1, random_state=0, engine="local",
                  features="whiten", whiten_components=4)
    model = OneBitMultiLabel(2, **params).fit(X, Y)
    path = model.save(tmp_path / "m.zarr")
    loaded = OneBitMultiLabel.load(path, engine="local")
    _same_map(model.feature_map_, loaded.feature_map_, rtol=0, atol=0)
    assert_same_fit(model, loaded, X, history=False)
    # a checkpoint resumed (here: already complete) keeps the map too
    ckpt = tmp_path / "ckpt.zarr"
    OneBitMultiLabel(2, **params).fit(X, Y, checkpoint=ckpt)
    resumed = OneBitMultiLabel(2, **params).fit(X, Y, checkpoint=ckpt)
    _same_map(model.feature_map_, resumed.feature_map_, rtol=0, atol=0)
    assert_same_fit(model, resumed, X, history=False)
    root = zarr.open_group(path, mode="r+")
    scale = root["feature_scale"][...]
    root["feature_scale"][...] = scale * 1.01  # a plausible, finite, positive edit
    with pytest.raises(DamagedStoreError, match="feature_scale"):
        OneBitMultiLabel.load(path, engine="local")
    root["feature_scale"][...] = -scale
    with pytest.raises(DamagedStoreError, match="feature_scale"):
        OneBitMultiLabel.load(path, engine="local")


# -- (e) bad input, before any work -------------------------------------------------------------
@pytest.mark.parametrize("params, words", [
    (dict(features="whitn"), ["features", "whitn", "whiten", "standardize"]),
    (dict(features="whiten", whiten_components=0), ["whiten_components", "0"]),
    (dict(features="standardize", whiten_components=3),
     ["whiten_components=3", "features='standardize'", "features='whiten'"]),
])
def test_bad_parameters(params, words, monkeypatch):
    monkeypatch.setattr(F, "fit_feature_map", lambda *a, **k: pytest.fail("work started"))
    X, Y = correlated()
    with pytest.raises(ValueError) as info:
        OneBitMultiLabel(2, engine="local", **params).fit(X, Y)
    for word in words:
        assert word in str(info.value)


def test_a_map_is_refused_for_a_planted_problem():
    problem = SyntheticProblem(20, 10, 2, seed=0, n_test=100)
    with pytest.raises(ValueError, match="features='whiten' is not allowed with fit"):
        OneBitMultiLabel(2, features="whiten", engine="local").fit(problem)
    fitted = OneBitMultiLabel(2, batch_size=500, n_iter=0, engine="local",
                              features="standardize").fit(*_observations(problem))
    with pytest.raises(ValueError, match="features='standardize' is not allowed"):
        fitted.evaluate(problem)


def _observations(problem):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, problem.d1))
    labels = rng.integers(0, problem.d2, 500)
    return X, labels, np.where(rng.random(500) < 0.5, 1, -1)


# -- the map of data in stores: every row, read in chunks ----------------------------------------
def _xc_file(path, X, Y):
    lines = [f"{X.shape[0]} {X.shape[1]} {Y.shape[1]}"]
    for x, yrow in zip(X, Y):
        feats = " ".join(f"{f}:{float(x[f])!r}" for f in np.flatnonzero(x))
        lines.append(f"{','.join(str(j) for j in np.flatnonzero(yrow))} {feats}")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_map_of_a_csr_store_and_an_observations_store(tmp_path, monkeypatch):
    """A CSR store's map is the map of all its rows, read in chunks of rows; an
    observations store's is the map of its X (chunks of 7 rows: sums in another order)."""
    from onebit_dask.data.csr import CsrStoreSource
    from onebit_dask.io.csr_store import convert, open_csr_store
    from onebit_dask.data.observations import ZarrSource
    from onebit_dask.io import write_observations

    X, Y = correlated(n=60, d1=9, density=0.5)
    out = str(tmp_path / "train.zarr")
    convert(_xc_file(tmp_path / "train.txt", X, Y), out, chunk_rows=11)
    rows = CsrStoreSource(open_csr_store(out), 0).features(chunk_rows=7)
    assert rows.n == 60 and scipy.sparse.issparse(next(iter(rows)))
    _same_map(F.fit_feature_map(rows, "whiten", 4), F.fit_feature_map(X, "whiten", 4),
              rtol=1e-9, atol=1e-12)
    labels = np.arange(60) % Y.shape[1]
    path = write_observations(str(tmp_path / "obs.zarr"), X, labels,
                              2 * Y[np.arange(60), labels] - 1, n_labels=Y.shape[1])
    stored = ZarrSource(path).features(chunk_rows=7)
    _same_map(F.fit_feature_map(stored, "whiten", 4), F.fit_feature_map(X, "whiten", 4),
              rtol=1e-9, atol=1e-12)


# -- the command line -------------------------------------------------------------------------
def test_cli_fit_features_and_predict(tmp_path):
    """fit --features whiten on an XC file saves the map; predict scores through it; a
    bad value exits 2 with one line naming it."""
    import json
    import os

    from tests.support.helpers import one_line, run_main
    from onebit_dask.io.xc import read_xc

    train, test = (os.path.join(FILES, f"emotions_{part}.txt") for part in ("train", "test"))
    model = str(tmp_path / "m.zarr")
    fitted = run_main("fit", "--data", train, "--rank", 2, "--batch-size", 2000, "--n-iter", 1,
                      "--workers", 0, "--quiet", "--save", model, "--features", "whiten",
                      "--whiten-components", 5)
    assert fitted.returncode == 0, fitted.stderr
    loaded = OneBitMultiLabel.load(model, engine="local")
    assert loaded.feature_map_.n_components == 5
    X = read_xc(train)[0]
    _same_map(loaded.feature_map_, F.fit_feature_map(X, "whiten", 5), rtol=0, atol=0)
    out = run_main("predict", model, "--data", test, "--rows", 5, "--top-k", 3, "--json",
                   "--workers", 0)
    assert out.returncode == 0, out.stderr
    scores = loaded.decision_function(read_xc(test)[0][:5])
    assert json.loads(out.stdout)["labels"] == np.argsort(
        -scores, axis=1, kind="stable")[:, :3].tolist()
    bad = run_main("fit", "--data", train, "--workers", 0, "--quiet", "--features", "pca")
    line = one_line(bad, 2)
    assert "--features" in line and "'pca'" in line and "whiten" in line
    from onebit_dask.cli.main import build_parser
    from onebit_dask.ops.features import KINDS
    action = next(a for a in build_parser()._subparsers._group_actions[0].choices["fit"]._actions
                  if "--features" in a.option_strings)
    assert tuple(action.choices) == KINDS  # the flag offers what the estimator takes
