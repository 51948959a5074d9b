"""The probit link of ``predict_proba`` (:mod:`onebit_dask.ops.calibration`): exact on bits
of the planted model with Gaussian noise, the penalised maximum against SciPy's optimiser,
and the separated case."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_ndtr, ndtr

from onebit_dask import SyntheticProblem
from onebit_dask.ops.calibration import fit_link

Z_LEVEL = 4.0  # |estimate - truth| <= 4 standard errors: two-sided level 6e-5 a number


def _planted_bits(xi, m=200_000, seed=3):
    """Bits of a planted problem with the truth's own projections ``u = x^T w*_j`` and
    the thresholds a fit estimates, ``b_j = Phi^{-1}(p_j) = b*_j / sqrt(1 + xi^2)``."""
    problem = SyntheticProblem(20, 30, 2, noise_std=xi, positive_rate=(0.05, 0.5), seed=seed)
    X, labels, y = problem.draw(0, m)
    A, B = problem.truth
    u = np.einsum("ij,ij->i", X @ A, B[labels])
    b = problem.truth_bias(0, problem.d2)[labels] / np.sqrt(1 + xi ** 2)
    return u, b, y


@pytest.mark.parametrize("xi", [0.5, 1.0])
def test_the_link_is_exact_on_the_planted_model(xi):
    u, b, y = _planted_bits(xi)
    link, covariance = fit_link(u, b, y)
    se = np.sqrt(np.diag(covariance))
    exact = np.array([1 / xi, np.sqrt(1 + xi ** 2) / xi])
    assert np.all(np.abs(link - exact) <= Z_LEVEL * se), (link, exact, se)
    # thresholds taken as the truth's b* (the share's sigma forgotten): beta would be 1/xi
    assert abs(link[1] - 1 / xi) > Z_LEVEL * se[1]


def test_the_maximum_equals_scipys():
    rng = np.random.default_rng(0)
    u, b = rng.normal(size=500), rng.normal(size=500)
    y = np.where(rng.random(500) < ndtr(0.7 * u - 0.4 * b), 1, -1)
    scale = 0.5  # a prior that moves the maximum

    def negative(theta):
        return -(log_ndtr(y * (theta[0] * u + theta[1] * b)).sum()
                 - 0.5 * theta @ theta / scale ** 2)

    reference = minimize(negative, np.zeros(2), method="BFGS", options={"gtol": 1e-10}).x
    link, _ = fit_link(u, b, y, prior_scale=scale)
    np.testing.assert_allclose(link, reference, atol=1e-6)


def test_without_thresholds_only_alpha_is_fitted():
    u, _, y = _planted_bits(0.5, m=50_000)
    u, y = u, np.where(ndtr(2.0 * u) > np.random.default_rng(1).random(u.size), 1, -1)
    link, covariance = fit_link(u, np.zeros_like(u), y)
    assert link[1] == 0 and covariance[1, 1] == 0
    assert abs(link[0] - 2.0) <= Z_LEVEL * np.sqrt(covariance[0, 0])


def test_separated_bits_give_a_finite_steep_link():
    u = np.linspace(-3, 3, 1000)
    link, covariance = fit_link(u, np.zeros_like(u), np.sign(u))
    assert np.isfinite(link).all() and np.isfinite(covariance).all()
    assert link[0] > 10  # steeper than any noisy bits' link
    p = ndtr(link[0] * u)
    assert np.all((p > 0.5) == (u > 0))


@pytest.mark.parametrize("u, b, y, match", [
    (np.zeros(3), np.zeros(2), np.ones(3), "one length"),
    (np.zeros(0), np.zeros(0), np.zeros(0), "at least one"),
])
def test_bad_input_is_refused(u, b, y, match):
    with pytest.raises(ValueError, match=match):
        fit_link(u, b, y)


def test_a_link_of_anti_aligned_scores_is_the_shares():
    """``alpha`` is kept at 0 or above (a model worse than chance): scores whose bits say
    the opposite give ``alpha = 0`` and ``beta`` of the shares alone, the maximum of the
    objective on that boundary (checked against the unconstrained 1-D maximum in
    ``beta``)."""
    u, b, y = _planted_bits(0.5, m=50_000)
    link, covariance = fit_link(-u, b, y)
    assert link[0] == 0 and covariance[0, 0] == 0
    alone, _ = fit_link(b, np.zeros_like(b), y)  # Phi(beta b): b in the first column
    np.testing.assert_allclose(link[1], alone[0], rtol=1e-9)
    _, _, y0 = _planted_bits(0.5, m=2000, seed=4)
    no_threshold, _ = fit_link(-y0.astype(float), np.zeros(y0.size), y0)
    assert np.array_equal(no_threshold, [0.0, 0.0])
