"""fit(X, Y) on a 0/1 label matrix: its batches, its errors, its held-out ranking metrics."""

import sys
import types

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import roc_auc_score

import onebit_dask
from onebit_dask import FullObservationProblem, OneBitMultiLabel, SyntheticProblem
from onebit_dask.data.label_matrix import LabelMatrixSource, check_label_matrix

PARAMS = dict(batch_size=600, n_iter=3, n_shards=3, random_state=5, features="none")


@pytest.fixture(scope="module")
def planted():
    problem = SyntheticProblem(10, 12, 2, seed=5)
    X, Y = problem.full_observation(300)
    return FullObservationProblem(problem, 300), X, Y > 0


def test_batches_are_the_full_observation_problems(planted):
    """Same seed, same shards: every pair and bit equals FullObservationProblem's."""
    full, X, Y = planted
    source = LabelMatrixSource(X, check_label_matrix(Y, X.shape[0]), seed=5)
    for t in (0, 4):
        mine, theirs = source.batch(t, 700, 3), full.batch(t, 700, 3)
        assert [(s.lo, s.hi, s.n_obs) for s in mine] == [(s.lo, s.hi, s.n_obs) for s in theirs]
        for a, b in zip(mine, theirs):
            for u, v in zip(a.load(), b.load()):
                np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("step", ["paper", "moment"])
@pytest.mark.parametrize("as_matrix", [np.asarray, sp.csr_matrix, lambda Y: Y.astype(float)])
def test_fit_equals_the_full_observation_fit(planted, as_matrix, step):
    full, X, Y = planted
    # the same bits from a planted source and from a label matrix: the same fit, given
    # the same thresholded model ("auto" picks the planted problem's and the data's)
    reference = OneBitMultiLabel(2, step=step, threshold="estimated", **PARAMS).fit(full)
    got = OneBitMultiLabel(2, step=step, threshold="estimated", **PARAMS).fit(X, as_matrix(Y))
    np.testing.assert_array_equal(got.Q_, reference.Q_)
    assert got.n_samples_seen_ == reference.n_samples_seen_ == 4 * 600


def test_the_seed_comes_from_random_state(planted):
    _, X, Y = planted
    a = OneBitMultiLabel(2, **PARAMS).fit(X, Y)
    b = OneBitMultiLabel(2, **{**PARAMS, "random_state": 6}).fit(X, Y)
    assert not np.array_equal(a.Q_, b.Q_)
    g = OneBitMultiLabel(2, **{**PARAMS, "random_state": np.random.default_rng(5)}).fit(X, Y)
    h = OneBitMultiLabel(2, **{**PARAMS, "random_state": np.random.default_rng(5)}).fit(X, Y)
    np.testing.assert_array_equal(g.Q_, h.Q_)


def test_bad_label_matrices(planted):
    _, X, Y = planted
    est = OneBitMultiLabel(2, **PARAMS)
    bad = Y.astype(np.int64)
    bad[4, 7] = 2
    with pytest.raises(ValueError, match=r"Y\[4, 7\]=2 is not allowed: Y must be a 0/1"):
        est.fit(X, bad)
    half = sp.csr_matrix(Y, dtype=float)
    half[9, 3] = 0.5
    with pytest.raises(ValueError, match=r"Y\[9, 3\]=0.5 is not allowed"):
        est.fit(X, half)
    with pytest.raises(ValueError, match="Y has 299 rows, but X has 300"):
        est.fit(X, Y[1:])
    with pytest.raises(ValueError, match="Only binary classification is supported.*a 1-D y "
                                         "without bits is a binary target.*fit\\(X, labels, "
                                         "bits\\)"):
        est.fit(X, np.arange(300) % 12)  # observed labels without their bits
    with pytest.raises(ValueError, match="only one class is present"):
        est.fit(X, np.zeros(300, dtype=int))
    with pytest.raises(ValueError, match="with bits given"):
        est.fit(X, Y, np.ones(300))
    with pytest.raises(ValueError, match="n_labels=5 is not allowed: Y has 12 columns"):
        est.fit(X, Y, n_labels=5)
    with pytest.raises(TypeError, match="Y has dtype <U1"):
        est.fit(X, np.full((300, 12), "a"))
    with pytest.raises(ValueError, match="eval_set Y_test has 11 labels, but the training data "
                                         "have 12"):
        est.fit(X, Y, eval_set=(X[:10], Y[:10, 1:]))
    with pytest.raises(TypeError, match="fit\\(problem\\) takes no eval_set"):
        est.fit(planted[0], eval_set=(X[:10], Y[:10]))


def _stand_in_ranking():
    """A minimal :mod:`onebit_dask.metrics.ranking` until the real one lands (same interface)."""
    mod = types.ModuleType("onebit_dask.metrics.ranking")

    def propensities(Y, A=0.55, B=1.5):
        n = Y.shape[0]
        C = (np.log(n) - 1) * (B + 1) ** A
        return 1.0 / (1 + C * np.exp(-A * np.log(np.asarray(Y.sum(axis=0)).ravel() + B)))

    def top_k_metrics(Y, top, prop=None, ks=(1, 3, 5)):
        Y = sp.csr_matrix(Y)
        hits = np.asarray(Y[np.arange(top.shape[0])[:, None], top].todense()) > 0
        out = {}
        disc = 1 / np.log2(np.arange(2, top.shape[1] + 2))
        n_pos = np.diff(Y.indptr)
        for k in ks:
            out[f"precision_at_{k}"] = float(hits[:, :k].sum(1).mean() / k)
            ideal = np.array([disc[:min(k, p)].sum() for p in n_pos])
            with np.errstate(invalid="ignore", divide="ignore"):
                out[f"ndcg_at_{k}"] = float(np.nan_to_num((hits[:, :k] * disc[:k]).sum(1) / ideal).mean())
            if prop is not None:
                out[f"psp_at_{k}"] = float((hits[:, :k] / prop[top[:, :k]]).sum(1).mean() / k)
        return out

    mod.propensities, mod.top_k_metrics = propensities, top_k_metrics
    return mod


@pytest.fixture
def ranking(monkeypatch):
    try:
        from onebit_dask.metrics import ranking as real
        return real
    except ImportError:
        mod = _stand_in_ranking()
        monkeypatch.setitem(sys.modules, "onebit_dask.metrics.ranking", mod)
        monkeypatch.setattr(onebit_dask, "ranking", mod, raising=False)
        return mod


def _dense_reference(est, X_test, Y_test, Y_train, ranking):
    """The held-out metrics from the dense score matrix, in NumPy and scikit-learn."""
    scores = np.asarray(X_test @ est.A_) @ est.B_.T + est.intercept_
    both = (Y_test.sum(0) > 0) & (Y_test.sum(0) < Y_test.shape[0])
    auc = np.mean([roc_auc_score(Y_test[:, j], scores[:, j]) for j in np.flatnonzero(both)])
    top = np.argsort(-scores, axis=1, kind="stable")[:, :5]
    out = {"auc": auc}
    out.update(ranking.top_k_metrics(sp.csr_matrix(Y_test), top,
                                     ranking.propensities(sp.csr_matrix(Y_train))))
    return out


KEYS = ["auc", *(f"{m}_at_{k}" for m in ("precision", "ndcg", "psp") for k in (1, 3, 5))]


@pytest.fixture(scope="module")
def real_like():
    """A small multi-label set with sparse binary features and a label matrix."""
    rng = np.random.default_rng(3)
    n, d1, d2 = 260, 40, 17
    X = sp.random(n, d1, density=0.15, format="csr", random_state=4, data_rvs=np.ones)
    W = rng.standard_normal((d1, d2))
    Y = (X @ W + rng.standard_normal((n, d2)) > 1.2).astype(np.int8)
    return X[:200], Y[:200], X[200:], Y[200:]


def test_eval_set_metrics_equal_a_dense_reference(real_like, ranking):
    X, Y, X_test, Y_test = real_like
    est = OneBitMultiLabel(3, batch_size=800, n_iter=2, n_shards=4, random_state=0,
                           eval_every=1, features="none").fit(X, Y, eval_set=(X_test, Y_test))
    assert [h["iteration"] for h in est.history_] == [0, 1, 2]
    expected = _dense_reference(est, X_test, Y_test, Y, ranking)
    got = est.history_[-1]
    assert set(KEYS) <= set(got)
    for key in KEYS:
        assert got[key] == pytest.approx(expected[key], rel=1e-12), key
    assert got["auc"] > 0.6  # the model ranks better than chance


def test_eval_set_without_a_label_matrix_has_no_psp(real_like, ranking):
    X, Y, X_test, Y_test = real_like
    rows, labels = Y.nonzero()
    est = OneBitMultiLabel(2, batch_size=100, n_iter=1, random_state=0).fit(
        X[rows], labels, np.ones(rows.size), n_labels=Y.shape[1], eval_set=(X_test, Y_test))
    assert "precision_at_5" in est.history_[-1] and "psp_at_1" not in est.history_[-1]


def test_dask_equals_in_process(client2, real_like, ranking):
    X, Y, X_test, Y_test = real_like
    params = dict(batch_size=500, n_iter=2, n_shards=3, random_state=1)
    local = OneBitMultiLabel(3, **params).fit(X, Y, eval_set=(X_test, Y_test))
    with client2.as_current():
        on_dask = OneBitMultiLabel(3, engine="dask", **params).fit(X, Y, eval_set=(X_test, Y_test))
    np.testing.assert_array_equal(local.Q_, on_dask.Q_)
    for a, b in zip(local.history_, on_dask.history_):
        for key in KEYS:
            assert a[key] == b[key], key


def test_training_sets_with_nothing_to_learn_are_refused(tmp_path):
    """A Y without a 1, an X without a non-zero, 0 rows, and an XC file none of whose rows
    has a label: one ValueError each, before any work (single empty rows stay allowed);
    the command line exits 2 with one line."""
    from tests.support.helpers import run_main

    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((50, 5)), (rng.random((50, 4)) < 0.3).astype(int)
    est = OneBitMultiLabel(2, batch_size=100, n_iter=1, engine="local")
    for args, match in (((X, 0 * Y), "no instance has a label"),
                        ((0 * X, Y), "no instance has a feature"),
                        ((X[:0], Y[:0]), "0 sample")):
        with pytest.raises(ValueError, match=match):
            est.fit(*args)
    Y[0] = 0
    est.fit(X, Y)  # one empty row is fine
    path = tmp_path / "empty.txt"  # no labels: each line starts with its features
    path.write_text("3 5 4\n" + "".join(f" 0:{i + 1}.5 3:0.25\n" for i in range(3)))
    proc = run_main("fit", "--data", path, "--workers", 0, "--rank", 2)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc
    assert "no instance has a label" in proc.stderr


def test_a_sparse_batch_is_counted_by_its_stored_entries(tmp_path):
    """The size limit counts what a batch of a sparse file holds (its rows' stored entries
    and scores), not ``batch_size x d1``: 2·10^5 rows of 20 000 features with ~3 entries
    a row pass, where the dense count (4·10^9) was refused; a dense file of that width
    is still refused."""
    from onebit_dask.utils.limits import largest_array

    rng = np.random.default_rng(0)
    cols = np.sort(rng.choice(20_000, size=(300, 3), replace=True), axis=1)
    X = sp.csr_matrix((rng.random(900) + 0.1, cols.ravel(), np.arange(0, 901, 3)),
                      shape=(300, 20_000))
    Y = sp.csr_matrix((rng.random((300, 5)) < 0.3).astype(np.int8))
    source = LabelMatrixSource(X, Y, 0)
    assert source.row_numbers == X.nnz / 300
    sizes = {"d1": 20_000, "d2": 5, "rank": 50, "batch_size": 200_000}
    assert largest_array(sizes, "store", source.row_numbers)[1] < 2**30
    assert largest_array(sizes, "store")[1] > 2**30  # as dense rows
    path = tmp_path / "wide.txt"
    lines = [",".join(map(str, np.flatnonzero(Y[i].toarray()))) + " " + " ".join(
        f"{j}:{v:.3f}" for j, v in zip(X[i].indices, X[i].data)) for i in range(300)]
    path.write_text("300 20000 5\n" + "\n".join(lines) + "\n")
    from tests.support.helpers import run_main

    proc = run_main("fit", "--data", path, "--rank", 2, "--batch-size", 200_000, "--n-iter", 1,
                    "--workers", 0, "--quiet", "--json")
    assert proc.returncode == 0, proc.stderr


def test_a_block_with_more_pairs_than_rows_reads_each_row_once(planted, monkeypatch):
    """Where a block's pairs outnumber the instances (1200 pairs a block, 300 rows) the
    block reads each row once (rows_of_bits gives X itself): the fit equals the one on the
    gathered rows to rounding (the sums' order differs), and the planted source's fit,
    which takes the same path, to the bit."""
    import onebit_dask.data.label_matrix as label_matrix

    full, X, Y = planted
    params = {**PARAMS, "batch_size": 3600, "threshold": "estimated", "step": "moment"}
    paths = []
    real = label_matrix.rows_of_bits
    monkeypatch.setattr(label_matrix, "rows_of_bits",
                        lambda X, rows: paths.append(real(X, rows)[1] is not None) or
                        real(X, rows))
    by_row = OneBitMultiLabel(2, **params).fit(X, Y)
    assert paths and all(paths)  # every block read by row
    np.testing.assert_array_equal(by_row.Q_, OneBitMultiLabel(2, **params).fit(full).Q_)
    monkeypatch.setattr(label_matrix, "rows_of_bits", lambda X, rows: (X[rows], None))
    gathered = OneBitMultiLabel(2, **params).fit(X, Y)
    np.testing.assert_allclose(by_row.Q_, gathered.Q_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(by_row.decision_function(X), gathered.decision_function(X),
                               rtol=0, atol=1e-10)


def _per_label(pieces, d2, d1):
    """The per-label sums of ``[(ActiveRows, n_active)]`` pieces, added into a dense
    ``(d2, d1)`` array, and their active counts."""
    out, n_active = np.zeros((d2, d1)), 0
    for rows, active in pieces:
        S = rows.X.toarray() if sp.issparse(rows.X) else np.asarray(rows.X)
        np.add.at(out, rows.labels, rows.weights[:, None] * S)
        n_active += active
    return out, n_active


@pytest.mark.parametrize("sparse", [False, True])
def test_partial_fits_label_block_shards_sum_as_the_gathered_rows(sparse):
    """partial_fit(X, Y)'s batch (issue 40): the pairs ``drawn_pairs`` draws are those of
    ``uniform_batch`` (same generator state, same pairs and bits), and the fit's
    label-block shards of them (``chosen_batch``; 1000 pairs a block over 80 rows: by
    row) give the per-label sums of the gathered rows cut into row ranges (``ArraySource``,
    the path before) to rounding, for the initial batch and for a step."""
    from onebit_dask.data.arrays import ArraySource
    from onebit_dask.data.label_matrix import drawn_pairs, uniform_batch
    from onebit_dask.data.shards import active_sums
    from onebit_dask.engine.blocks import StepModel

    rng = np.random.default_rng(0)
    X = (sp.random(80, 6, density=0.5, format="csr", random_state=3) if sparse
         else rng.standard_normal((80, 6)))
    Y = check_label_matrix(rng.random((80, 9)) < 0.3, 80)
    rows, labels = drawn_pairs(80, 9, 3000, np.random.default_rng(7))
    Xg, labels_g, y = uniform_batch(X, Y, 3000, np.random.default_rng(7))
    np.testing.assert_array_equal(labels_g, labels)
    Xr = X[rows]
    np.testing.assert_array_equal(Xg.toarray() if sparse else Xg, Xr.toarray() if sparse else Xr)
    np.testing.assert_array_equal(y, 2.0 * np.asarray(Y[rows, labels]).ravel() - 1)
    bounds = [0, 3, 6, 9]
    shards = LabelMatrixSource(X, Y, 0).chosen_batch(0, rows, labels, bounds)
    assert all(sh.bits()[3] is not None for sh in shards)  # each block reads by row
    A = rng.standard_normal((6, 4))
    B = rng.standard_normal((9, 4))
    for model in (StepModel(None), StepModel(A)):
        B_rows = None if model.A is None else [B[lo:hi] for lo, hi in zip(bounds[:-1],
                                                                             bounds[1:])]
        new = [sh.activate(model, None if B_rows is None else B_rows[s])
               for s, sh in enumerate(shards)]
        old = [piece for sh in ArraySource(Xg, labels, y, 9).batch(0, 3000, 3)
               for piece in active_sums(*sh.load(), model, B_rows, bounds)]
        S_new, n_new = _per_label(new, 9, 6)
        S_old, n_old = _per_label(old, 9, 6)
        assert n_new == n_old > 0
        np.testing.assert_allclose(S_new, S_old, rtol=0, atol=1e-12 * np.abs(S_old).max())
