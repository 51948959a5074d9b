"""The ridge map and ``features="auto"`` (docs/ALGORITHM.md section 10b): the
empirical-Bayes ridge against a dense NumPy reference and against a planted prior, the
rule ``"auto"`` follows, the fit through the map against a fit on ``phi(X)``, and the
engines."""

import numpy as np
import pytest
import scipy.sparse

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.ops import features as F
from onebit_dask.testing import assert_same_fit

RTOL = 1e-8  # the map's products against phi(X) formed in NumPy (as test_features.py)


def sparse_data(n=400, d1=30, d2=8, density=0.06, seed=0):
    """Binary sparse features (each column present in about ``density`` of the rows, some
    much rarer) and a 0/1 label matrix from a planted linear rule with rare labels."""
    rng = np.random.default_rng(seed)
    share = density * rng.uniform(0.1, 2.0, d1)
    X = (rng.random((n, d1)) < share).astype(float)
    S = X @ rng.standard_normal((d1, d2))
    Y = (S > np.quantile(S, 0.8, axis=0)).astype(np.int8)
    return scipy.sparse.csr_matrix(X), Y


def reference_ridge(X, labels, y, d2, mean, var):
    """The rule of section 10b in dense NumPy, label by label."""
    X = X.toarray() if scipy.sparse.issparse(X) else np.asarray(X)
    total, noise_weight, signal_weight, inverse = 0.0, 0.0, 0.0, []
    for j in range(d2):
        mine = labels == j
        n = mine.sum()
        if n == 0:
            continue
        p = (y[mine] > 0).mean()
        C = X[mine & (y > 0)].sum(axis=0) / n - p * mean
        total += C @ C
        noise_weight += p * (1 - p) / n
        signal_weight += p * (1 - p)
        inverse.append(1.0 / n)
    kappa = (total - noise_weight * var.sum()) / (signal_weight * (var**2).sum())
    return float(np.mean(inverse) / kappa)


def bits_of(X, Y, m, seed):
    rng = np.random.default_rng(seed)
    rows, labels = rng.integers(0, X.shape[0], m), rng.integers(0, Y.shape[1], m)
    return rows, labels, 2.0 * Y[rows, labels] - 1


def test_ridge_equals_the_dense_reference_in_any_pieces():
    X, Y = sparse_data()
    rows, labels, y = bits_of(X, Y, 6000, 1)
    mean = np.asarray(X.mean(axis=0)).ravel()
    var = np.asarray(X.multiply(X).mean(axis=0)).ravel() - mean**2
    want = reference_ridge(X[rows], labels, y, Y.shape[1], mean, var)
    assert np.isfinite(want) and want > 0
    whole = F.ridge_from_bits([(X[rows], labels, y)], mean, var, Y.shape[1])
    cuts = [0, 1000, 1001, 4000, 6000]  # row ranges: a label's sums across pieces
    pieces = F.ridge_from_bits([(X[rows[a:b]], labels[a:b], y[a:b])
                                for a, b in zip(cuts, cuts[1:])], mean, var, Y.shape[1])
    dense = F.ridge_from_bits([(X[rows].toarray(), labels, y)], mean, var, Y.shape[1])
    for got in (whole, pieces, dense):
        assert got == pytest.approx(want, rel=1e-10)


def test_no_signal_is_no_ridge():
    """Bits that are all negative (or no bits) show no signal: ``inf``, the identity."""
    X, Y = sparse_data()
    rows, labels, _ = bits_of(X, Y, 2000, 2)
    mean, var = np.full(30, 0.1), np.full(30, 0.09)
    assert F.ridge_from_bits([(X[rows], labels, -np.ones(2000))], mean, var, 8) == np.inf
    assert F.ridge_from_bits([], mean, var, 8) == np.inf
    fm = F.fit_feature_map(X, "ridge", bits=lambda: [(X[rows], labels, -np.ones(2000))],
                           n_labels=8)
    np.testing.assert_array_equal(fm.scale, np.ones(30))
    np.testing.assert_allclose(fm.mean, np.asarray(X.mean(axis=0)).ravel(), rtol=1e-12)


def planted_prior_bits(kappa, n_per_label=5000, d1=50, d2=20, p=0.3, seed=0):
    """Bits of the linear probability model ``P(y = 1) = p + beta_j^T (x - mu)`` with
    ``beta_jf ~ N(0, kappa p (1 - p))``: binary features of known frequencies; the
    oracle ``kappa`` of the realised coefficients (the prior's, given these betas)."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.02, 0.3, d1)
    mean, var = q, q * (1 - q)
    beta = rng.normal(0.0, np.sqrt(kappa * p * (1 - p)), (d2, d1))
    labels = np.repeat(np.arange(d2), n_per_label)
    X = (rng.random((labels.size, d1)) < q).astype(float)
    prob = np.clip(p + np.einsum("if,if->i", X - mean, beta[labels]), 0.0, 1.0)
    y = np.where(rng.random(labels.size) < prob, 1.0, -1.0)
    oracle = ((beta * var) ** 2).sum() / (d2 * p * (1 - p) * (var**2).sum())
    return scipy.sparse.csr_matrix(X), labels, y, mean, var, oracle, n_per_label


def test_ridge_recovers_a_planted_prior():
    """Method of moments on bits drawn from the prior of section 10b: ``lambda`` within
    10 % of ``1 / (n_j kappa)`` for the realised coefficients' ``kappa``. The estimate's
    spread is about 3 % here (2.6 % from the cross term, the noise term's own 4.5 % of a
    sixth of the total), so 10 % is above 3 standard deviations; leaving the noise term
    out (a wrong rule) is 17 % off and is rejected."""
    X, labels, y, mean, var, oracle, n = planted_prior_bits(kappa=0.01)
    got = F.ridge_from_bits([(X, labels, y)], mean, var, 20)
    assert got == pytest.approx(1.0 / (n * oracle), rel=0.10)
    # power: the rule without its noise term, on the same bits
    d2 = 20
    p = np.array([(y[labels == j] > 0).mean() for j in range(d2)])
    total = sum(((X[labels == j][y[labels == j] > 0].sum(axis=0).A1 / n) - p[j] * mean)
                @ ((X[labels == j][y[labels == j] > 0].sum(axis=0).A1 / n) - p[j] * mean)
                for j in range(d2))
    wrong = 1.0 / (n * total / ((p * (1 - p)).sum() * (var**2).sum()))
    assert wrong != pytest.approx(1.0 / (n * oracle), rel=0.10)


def test_auto_standardises_dense_and_ridges_sparse_features():
    X, Y = sparse_data()
    rows, labels, y = bits_of(X, Y, 4000, 3)
    bits = lambda: [(X[rows], labels, y)]  # noqa: E731
    ridged = F.fit_feature_map(X, "auto", bits=bits, n_labels=Y.shape[1])
    mean = np.asarray(X.mean(axis=0)).ravel()
    var = np.asarray(X.multiply(X).mean(axis=0)).ravel() - mean**2
    lam = F.ridge_from_bits(bits(), mean, var, Y.shape[1])
    np.testing.assert_allclose(ridged.mean, mean, rtol=1e-12)  # centred (section 10b)
    np.testing.assert_allclose(ridged.scale, np.sqrt(var + lam), rtol=1e-12)
    assert ridged.n_components == 0
    dense = np.random.default_rng(0).standard_normal((200, 6)) * [1, 2, 3, 4, 5, 6] + 7
    auto = F.fit_feature_map(dense, "auto")
    standard = F.fit_feature_map(dense, "standardize")
    for name in ("mean", "scale", "directions", "factors"):
        np.testing.assert_array_equal(getattr(auto, name), getattr(standard, name))
    # the share of non-zeros decides, not the container: a dense array of sparse rows
    # (its variance from a centred second pass: the same to rounding)
    np.testing.assert_allclose(
        F.fit_feature_map(X.toarray(), "auto", bits=bits, n_labels=Y.shape[1]).scale,
        ridged.scale, rtol=1e-12)


def test_the_ridge_map_never_densifies(monkeypatch):
    X, Y = sparse_data()
    rows, labels, y = bits_of(X, Y, 4000, 3)
    for cls in (scipy.sparse.csr_matrix, scipy.sparse.csr_array):
        for name in ("toarray", "todense"):
            monkeypatch.setattr(cls, name, lambda *a, **k: pytest.fail("densified"))
    fm = F.fit_feature_map(X, "auto", bits=lambda: [(X[rows], labels, y)], n_labels=8)
    assert fm.n_components == 0 and np.all(fm.scale > 0)


def test_the_default_on_a_planted_problem_is_the_paper_bit_for_bit():
    problem = SyntheticProblem(30, 20, 2, seed=4, n_test=200)
    params = dict(batch_size=3000, n_iter=2, random_state=0, engine="local")
    default = OneBitMultiLabel(2, **params).fit(problem)
    none = OneBitMultiLabel(2, features="none", **params).fit(problem)
    assert default.feature_map_ is None
    assert_same_fit(default, none, problem.test_set().X)


@pytest.mark.parametrize("data", ["label_matrix", "observations"])
def test_fit_through_the_ridge_map_equals_a_fit_on_phi_x(data):
    X, Y = sparse_data()
    params = dict(batch_size=3000, n_iter=3, n_shards=3, random_state=0, engine="local",
                  step="moment")
    if data == "observations":
        rows, labels, y = bits_of(X, Y, 12_000, 4)
        args = lambda Z: (Z[rows], labels, y)  # noqa: E731
    else:
        args = lambda Z: (Z, Y)  # noqa: E731
    model = OneBitMultiLabel(3, **params).fit(*args(X))
    fm = model.feature_map_
    seen = args(X)[0]
    np.testing.assert_allclose(fm.mean, np.asarray(seen.mean(axis=0)).ravel(), rtol=1e-12)
    assert fm.n_components == 0 and np.all(fm.scale**2 > fm.scale.min()**2 / 2)
    Z = fm.transform(X)
    reference = OneBitMultiLabel(3, features="none", **params).fit(*args(Z))
    for name in ("A_", "B_", "intercept_"):
        np.testing.assert_allclose(getattr(model, name), getattr(reference, name), rtol=RTOL,
                                   atol=RTOL, err_msg=name)


def test_ridge_on_dask_equals_in_process(client2):
    X, Y = sparse_data()
    params = dict(batch_size=3000, n_iter=2, n_shards=3, random_state=1)
    local = OneBitMultiLabel(3, engine="local", **params).fit(X, Y)
    with client2.as_current():
        there = OneBitMultiLabel(3, engine="dask", **params).fit(X, Y)
    np.testing.assert_array_equal(local.feature_map_.scale, there.feature_map_.scale)
    assert_same_fit(local, there, X)
