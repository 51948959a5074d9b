"""Projected sampling is exact in law: statistical tests at stated levels, with power."""

import dataclasses

import numpy as np
import pytest
import scipy.stats

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask import sampling
from onebit_dask.engine import blocks as B
from onebit_dask.synthetic import ProjectedShard

D1, D2, K = 5, 3, 1
PROBLEM = SyntheticProblem(D1, D2, K, flip=0.1, seed=3)


def model_state(seed=0):
    """A fixed model ``(A, B)`` (``l = 2``) that is not the truth, and a probe ``P``."""
    rng = np.random.default_rng(seed)
    A = np.linalg.qr(rng.standard_normal((D1, 2)))[0]
    Bm = rng.standard_normal((D2, 2))
    P = rng.standard_normal((D1 + D2, 1))
    return A, Bm, P


def batch_products(problem, n_batches, m, A, Bm, P, wrong=False):
    """``apply(P)`` of ``n_batches`` independent step batches (one shard each), as rows
    ``[X^T (r P_bot[j]); scatter(j, r X P_top)]`` of length ``d1 + d2``."""
    projection = problem.projection(A)
    out = np.empty((n_batches, D1 + D2))
    for t in range(n_batches):
        (shard,) = problem.batch(t + 1, m, 1)
        if wrong:
            shard = WrongShard(**{f.name: getattr(shard, f.name)
                                  for f in dataclasses.fields(shard)})
        blk = B.activate(B.Block(0, D2, {"B": Bm, "P": P[D1:]}), shard,
                         B.StepModel(A, projection))
        blk = B.product(blk, "P", "Z", P[:D1], None, 1.0)
        out[t] = np.concatenate([blk.out[0][:, 0], blk.slots["Z"][:, 0]])
    return out


class WrongShard(ProjectedShard):
    """A broken projected sampler: it drops the orthogonal complement of ``span(P)``."""

    def draw_active(self, projection, B_rows=None):
        original = sampling.complete_rows
        sampling.complete_rows = lambda P, coef, scale, rng: coef @ P.T
        try:
            return super().draw_active(projection, B_rows)
        finally:
            sampling.complete_rows = original


def moments(Z):
    """First moments and the upper triangle of the second moments, per batch."""
    iu = np.triu_indices(Z.shape[1])
    return np.hstack([Z, (Z[:, :, None] * Z[:, None, :])[:, iu[0], iu[1]]])


def min_p_value(a, b):
    """Smallest Welch two-sample p-value over the first and second moments."""
    return scipy.stats.ttest_ind(moments(a), moments(b), equal_var=False).pvalue.min()


@pytest.fixture(scope="module")
def products():
    A, Bm, P = model_state()
    projected = dataclasses.replace(PROBLEM, sampler="projected")
    explicit = dataclasses.replace(PROBLEM, sampler="explicit")
    n, m = 1500, 60
    return (batch_products(explicit, n, m, A, Bm, P),
            batch_products(projected, n, m, A, Bm, P),
            batch_products(projected, n, m, A, Bm, P, wrong=True))


LEVEL = 0.01  # family-wise, Bonferroni over the 8 + 36 moments


def test_projected_batch_product_has_the_explicit_law(products):
    explicit, projected, _ = products
    n_tests = moments(explicit[:1]).shape[1]
    assert min_p_value(explicit, projected) > LEVEL / n_tests


def test_the_law_test_rejects_a_sampler_without_the_complement(products):
    explicit, _, wrong = products
    n_tests = moments(explicit[:1]).shape[1]
    assert min_p_value(explicit, wrong) < LEVEL / n_tests


def test_active_fraction_is_the_angle_over_pi():
    """Noise free, a row of label j is active with probability angle(w*_j, w_j) / pi."""
    problem = SyntheticProblem(D1, D2, K, seed=4)
    A, Bm, _ = model_state(1)
    A_true, B_true = problem.truth
    W_true, W = A_true @ B_true.T, A @ Bm.T
    cos = np.sum(W_true * W, axis=0) / np.linalg.norm(W, axis=0)
    p = np.arccos(np.clip(cos, -1, 1)) / np.pi
    projection = problem.projection(A)
    shards = problem.batch(1, 300_000, D2)  # one label per shard
    counts = np.array([B.activate(B.Block(s, s + 1, {"B": Bm[s:s + 1]}), sh,
                                  B.StepModel(A, projection)).out
                       for s, sh in enumerate(shards)])
    n = np.array([sh.n_obs for sh in shards])
    z = (counts / n - p) / np.sqrt(p * (1 - p) / n)
    # two-sided z-test per label at 1 % family-wise (Bonferroni over 3 labels)
    assert np.all(np.abs(z) < scipy.stats.norm.ppf(1 - LEVEL / (2 * D2))), (counts / n, p)


def test_final_errors_of_projected_and_explicit_fits_agree_over_seeds():
    """20 seeds each: a two-sample test does not tell the final errors apart at 1 %."""
    errors = {}
    for sampler in ("projected", "explicit"):
        errors[sampler] = [
            OneBitMultiLabel(2, batch_size=4000, n_iter=4, n_shards=2, random_state=seed,
                             eval_every=0)
            .fit(SyntheticProblem(20, 15, 2, flip=0.05, seed=seed, n_test=300, sampler=sampler))
            .history_[-1]["frobenius_error"]
            for seed in range(20)]
    result = scipy.stats.mannwhitneyu(errors["projected"], errors["explicit"])
    assert result.pvalue > LEVEL, errors


def test_projected_fit_is_deterministic_and_seeded():
    problem = SyntheticProblem(20, 15, 2, flip=0.05, seed=1, n_test=200)
    fit = lambda p: OneBitMultiLabel(2, batch_size=3000, n_iter=3, random_state=0).fit(p)
    a, b = fit(problem), fit(problem)
    c = fit(dataclasses.replace(problem, seed=2))
    np.testing.assert_array_equal(a.Q_, b.Q_)
    assert not np.allclose(a.A_, c.A_)


def test_span_basis_contains_its_factors():
    rng = np.random.default_rng(0)
    F1, F2 = rng.standard_normal((9, 2)), rng.standard_normal((9, 4))
    P = sampling.span_basis(F1, F2)
    assert P.shape == (9, 6)
    np.testing.assert_allclose(P.T @ P, np.eye(6), atol=1e-12)
    for F in (F1, F2):
        np.testing.assert_allclose(P @ (P.T @ F), F, atol=1e-12)
