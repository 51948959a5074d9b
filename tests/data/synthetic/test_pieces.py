"""The plane's pieces of the conditional sampler with thresholds
(:mod:`onebit_dask.data.synthetic.pieces`): their probabilities against scipy's
bivariate normal, and the law of a row drawn on them against rejection sampling."""

import numpy as np
import pytest
import scipy.special
import scipy.stats

from onebit_dask.data.synthetic import pieces as plane

LEVEL = 0.01  # family-wise, Bonferroni


def test_upper_orthant_matches_scipy():
    """``P(X1 >= h, X2 >= k)`` (Owen's T) against scipy's bivariate normal cdf, with
    ``h = 0``, ``k = 0`` and parallel boundaries (``rho = +-1``)."""
    rng = np.random.default_rng(0)
    h, k, rho = rng.normal(0, 2, 60), rng.normal(0, 2, 60), rng.uniform(-0.99, 0.99, 60)
    h[:6], k[3:9] = 0.0, 0.0
    got = plane.upper_orthant(h, k, rho, np.sqrt(1 - rho ** 2))
    want = [scipy.stats.multivariate_normal([0, 0], [[1, r], [r, 1]]).cdf([-a, -b])
            for a, b, r in zip(h, k, rho)]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)
    norm = scipy.stats.norm
    np.testing.assert_allclose(
        plane.upper_orthant(np.array([0.3, 0.3, -0.5]), np.array([1.2, -1.0, -0.2]),
                            np.array([1.0, -1.0, -1.0]), np.zeros(3)),
        [norm.sf(1.2), norm.cdf(1.0) - norm.cdf(0.3), norm.cdf(0.2) - norm.cdf(-0.5)],
        atol=1e-15)


# -- the law of one thresholded active row in its plane, against rejection sampling -------

PLANE_CASES = [  # (c, b*, e, b) in the plane: general, a rare label, a zero e, parallel
    ((0.8, 0.3), -1.5, (0.5, -0.6), -0.7), ((1.0, 0.0), -2.3, (0.9, 0.1), -2.0),
    ((0.3, 0.4), 0.2, (0.0, 0.0), -0.1), ((1.0, 0.0), -1.0, (2.0, 0.0), -1.2)]


@pytest.fixture(scope="module")
def plane_references():
    """Per case and for disagreeing (unflipped) then agreeing (flipped) rows: the pieces,
    and ``r z`` of the rows of 1.5 million ``N(0, I_2)`` draws in that set (rejection)."""
    rng = np.random.default_rng(0)
    out = []
    for c, beta, e, b in PLANE_CASES:
        c2, e2 = np.array([c]), np.array([e])
        pieces = plane.plane_pieces(c2, np.array([beta]), e2, np.array([b]))
        z = rng.standard_normal((1_500_000, 2))
        bit = np.where(z @ c2[0] + beta >= 0, 1, -1)
        score = np.where(z @ e2[0] + b >= 0, 1, -1)
        for agree in (False, True):
            keep = (bit == score) if agree else (bit != score)
            out.append((pieces, agree, (-2.0 * score[keep])[:, None] * z[keep]))
    return out


def plane_min_p_value(references):
    """Smallest Welch p-value over the first and second moments of ``r z``: 5000 rows
    drawn by :func:`plane.rows_in_pieces` (``r`` the residual of the piece drawn, as
    the conditional step takes it) against the rejection reference."""
    rng = np.random.default_rng(1)
    stats = lambda a: np.column_stack([a, a[:, :1] ** 2, a[:, :1] * a[:, 1:], a[:, 1:] ** 2])  # noqa: E731

    def residual_rows(pieces, agree):
        z, pick = plane.rows_in_pieces(rng, pieces, np.zeros(5000, dtype=int),
                                       np.full(5000, agree))
        return plane.PIECE_RESIDUAL[pick][:, None] * z

    p = [scipy.stats.ttest_ind(stats(residual_rows(pieces, agree)), stats(ref),
                               equal_var=False).pvalue.min() for pieces, agree, ref in references]
    return min(p), 5 * len(p)


def test_thresholded_row_has_the_law_of_its_pieces(plane_references):
    """Family-wise 1 % (Bonferroni over 8 sets x 5 moments)."""
    p, n_tests = plane_min_p_value(plane_references)
    assert p > LEVEL / n_tests


@pytest.mark.parametrize("name, replacement", [
    ("inverse_marginal",  # s from the first constraint alone
     lambda u, t1, t2, rho, tau, mass: np.clip(
         -scipy.special.ndtri_exp(np.log(u) + scipy.special.log_ndtr(-t1)), t1, 40.0)),
    ("log_ndtr", lambda x: np.zeros_like(x)),  # w not truncated by the second constraint
])
def test_the_row_law_test_rejects_a_wrong_draw(plane_references, monkeypatch, name,
                                               replacement):
    monkeypatch.setattr(plane, name, replacement)
    p, n_tests = plane_min_p_value(plane_references)
    assert p < LEVEL / n_tests
