"""Full-observation baselines: SVT closed form, a known trace-norm optimum, recovery."""

import numpy as np
import pytest
import scipy.linalg

from onebit_dask import SyntheticProblem, metrics
from onebit_dask.baselines import LEML, OneVsRestSVM, TraceNormMultiLabel, svt
from onebit_dask.baselines.trace_norm import _Loss, proximal_gradient

PROBLEM = SyntheticProblem(25, 12, 2, seed=4, n_test=1000)


@pytest.fixture(scope="module")
def full():
    return PROBLEM.full_observation(1500)


def test_svt_closed_form():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((9, 6))
    s = scipy.linalg.svdvals(W)
    tau = s[2]
    got = scipy.linalg.svdvals(svt(W, tau))
    np.testing.assert_allclose(got, np.maximum(s - tau, 0), atol=1e-12)
    U, _, Vt = scipy.linalg.svd(W, full_matrices=False)
    np.testing.assert_allclose(svt(W, tau), (U[:, :2] * (s[:2] - tau)) @ Vt[:2], atol=1e-12)


def test_squared_trace_norm_reaches_the_known_optimum():
    # X = I (n = d1): (1/n)||W - Y||_F^2 + tau ||W||_* has the optimum SVT(Y, tau n / 2)
    rng = np.random.default_rng(1)
    n, d2, tau = 8, 5, 0.2
    Y = np.where(rng.random((n, d2)) < 0.5, -1.0, 1.0)
    W, objective = proximal_gradient(_Loss("squared", np.eye(n), Y), tau, 300)
    np.testing.assert_allclose(W, svt(Y, tau * n / 2), atol=1e-8)
    assert objective[-1] <= objective[0]


def test_logistic_trace_norm_optimality():
    # at the optimum, 0 is in grad f(W) + tau * subdifferential: W = SVT(W - grad/L, tau/L);
    # W = 0 is optimal exactly when tau >= tau_max = ||grad f(0)||_2
    rng = np.random.default_rng(2)
    X = rng.standard_normal((60, 6))
    Y = np.where(X @ rng.standard_normal((6, 4)) >= 0, 1.0, -1.0)
    loss = _Loss("logistic", X, Y)
    tau_max = scipy.linalg.svdvals(loss.gradient(np.zeros((6, 4))))[0]
    step = 1 / loss.lipschitz
    W, objective = proximal_gradient(loss, 0.3 * tau_max, 3000)
    np.testing.assert_allclose(svt(W - step * loss.gradient(W), step * 0.3 * tau_max), W,
                               atol=1e-6)
    assert 0 < np.linalg.matrix_rank(W, tol=1e-8) < 4  # the penalty lowers the rank
    assert objective[-1] <= objective[0]
    W0, _ = proximal_gradient(loss, 1.01 * tau_max, 50)
    assert np.all(W0 == 0)


@pytest.mark.parametrize("est", [OneVsRestSVM(), TraceNormMultiLabel("logistic", n_iter=60),
                                 TraceNormMultiLabel("squared", n_iter=60), LEML(2, n_iter=5)],
                         ids=["svm", "lrt", "smt", "leml"])
def test_full_observation_recovery(full, est):
    X, Y = full
    est.fit(X, Y)
    result = metrics.evaluate(PROBLEM.test_set(), PROBLEM.truth, est.A_, est.B_)
    # chance is AUC 0.5; 1500 instances x 12 labels of a rank-2 model in 25 dimensions
    assert result["auc"] > 0.97, result


def test_svm_lbfgs_reaches_the_liblinear_optimum():
    # the summed L-BFGS fit and one LinearSVC per label minimise the same strictly
    # convex objective: same optimum (flipped bits keep it away from separability)
    problem = SyntheticProblem(20, 6, 2, flip=0.1, seed=5)
    X, Y = problem.full_observation(400)
    joint = OneVsRestSVM(tol=1e-12).fit(X, Y)
    per_label = OneVsRestSVM(solver="liblinear", max_iter=100_000).fit(X, Y)
    assert joint.objective_ <= per_label.objective_ * (1 + 1e-7)
    np.testing.assert_allclose(joint.W_, per_label.W_, atol=2e-3 * np.abs(per_label.W_).max())


def test_svm_bad_solver(full):
    with pytest.raises(ValueError, match="solver"):
        OneVsRestSVM(solver="sgd").fit(*full)


def test_leml_dense_objective_decreases(full):
    est = LEML(2, lam=1.0, n_iter=5).fit(*full)
    objective = np.asarray(est.objective_)
    assert np.all(np.diff(objective) <= 1e-9 * np.abs(objective[1:]))


def test_bad_label_matrix(full):
    X, Y = full
    with pytest.raises(ValueError, match=r"Y\[0, 0\]=-?2 is not allowed: Y must be -1 or \+1"):
        OneVsRestSVM().fit(X, Y * 2)
    with pytest.raises(ValueError, match=r"Y\[\d+, \d+\]=0 is not allowed with -1 elsewhere"):
        OneVsRestSVM().fit(X, np.where(Y > 0, 1, 0) - np.eye(*Y.shape, dtype=int))
    with pytest.raises(ValueError, match="Y has shape"):
        TraceNormMultiLabel().fit(X, Y[:10])
