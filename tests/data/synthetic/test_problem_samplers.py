"""The samplers of a :class:`SyntheticProblem`'s batches (``sampler=``: projected,
:mod:`onebit_dask.data.synthetic.projected`; conditional,
:mod:`onebit_dask.data.synthetic.conditional`) are exact in law against the explicit rows:
statistical tests at stated levels, with power."""

import contextlib
import copy
import dataclasses

import numpy as np
import pytest
import scipy.stats

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.data.synthetic import conditional, projected
from onebit_dask.ops import thresholds
from onebit_dask.engine import blocks as B
from onebit_dask.data.synthetic.problem import ProjectedShard


D1, D2, K = 5, 3, 1
PROBLEM = SyntheticProblem(D1, D2, K, flip=0.1, seed=3)


def model_state(seed=0, zero_row=False):
    """A fixed model ``(A, B)`` (``l = 2``) that is not the truth, and a probe ``P``;
    ``zero_row``: label 1's row of ``B`` is zero (its scores are 0, ``sign(0) = +1``)."""
    rng = np.random.default_rng(seed)
    A = np.linalg.qr(rng.standard_normal((D1, 2)))[0]
    Bm = rng.standard_normal((D2, 2))
    if zero_row:
        Bm[1] = 0.0
    P = rng.standard_normal((D1 + D2, 1))
    return A, Bm, P


def batch_products(problem, n_batches, m, A, Bm, P, wrong=None):
    """``apply(P)`` of ``n_batches`` independent batches (one shard each; the initial
    batch's weights ``y`` if ``A`` is None, else a step's residuals), as rows
    ``[X^T (w P_bot[j]); scatter(j, w X P_top)]`` of length ``d1 + d2``."""
    projection = problem.projection(A)
    out = np.empty((n_batches, D1 + D2))
    for t in range(n_batches):
        (shard,) = problem.batch(t + 1, m, 1)
        if wrong:
            shard = WRONG[wrong](**{f.name: getattr(shard, f.name)
                                    for f in dataclasses.fields(shard)})
        blk = B.activate(B.Block(0, D2, {"B": Bm, "P": P[D1:]}), shard,
                         B.StepModel(A, projection))
        blk = B.product(blk, "P", "Z", P[:D1], None, 1.0)
        out[t] = np.concatenate([blk.out[0][:, 0], blk.slots["Z"][:, 0]])
    return out



SAMPLER_MODULES = (projected, conditional)


@contextlib.contextmanager
def replaced(name, replacement):
    """``name`` replaced in every sampler module that looks it up (``complete_rows`` in
    both samplers', ``count_bits`` in the projected one's, ...)."""
    holders = [module for module in SAMPLER_MODULES if hasattr(module, name)]
    assert holders, name
    with pytest.MonkeyPatch.context() as patch:
        for module in holders:
            patch.setattr(module, name, replacement)
        yield

class Patched(ProjectedShard):
    """A deliberately broken sampler: ``draw_active`` with one function of the sampler
    modules replaced (:func:`replaced`)."""

    name, replacement = None, None

    def draw_active(self, projection, B_rows=None, b_rows=None, thresholded=False):
        with replaced(self.name, self.replacement):
            return super().draw_active(projection, B_rows, b_rows, thresholded)


class NoComplement(Patched):
    """Drops the orthogonal complement of ``span(P)``."""

    name, replacement = "complete_rows", staticmethod(lambda P, coef, scale, rng: coef @ P.T)


_ON_ARCS = conditional.uniform_on_arcs


class AnyAngle(Patched):
    """Right active counts, but the active rows drawn at any angle (not on their arcs)."""

    name = "uniform_on_arcs"
    replacement = staticmethod(lambda rng, starts, lengths, mask: _ON_ARCS(
        rng, starts, lengths, np.ones_like(mask)))


WRONG = {"no complement": NoComplement, "any angle": AnyAngle}
BROKEN = [("projected", "no complement"), ("conditional", "no complement"),
          ("conditional", "any angle")]  # (sampler, wrong) pairs the law test must reject
SAMPLERS = ("projected", "conditional")
CASES = {  # problem, whether the model has a zero row of B, initial batch or step
    "flip, step": (PROBLEM, True, False),
    "gaussian noise, step": (dataclasses.replace(PROBLEM, flip=0.0, noise_std=0.7), False, False),
    "flip, initial batch": (PROBLEM, False, True),
}


def moments(Z):
    """First moments and the upper triangle of the second moments, per batch."""
    iu = np.triu_indices(Z.shape[1])
    return np.hstack([Z, (Z[:, :, None] * Z[:, None, :])[:, iu[0], iu[1]]])


def min_p_value(a, b):
    """Smallest Welch two-sample p-value over the first and second moments."""
    return scipy.stats.ttest_ind(moments(a), moments(b), equal_var=False).pvalue.min()


LEVEL = 0.01  # family-wise, Bonferroni over the 8 + 36 moments


def assert_same_law(explicit, drawn):
    """No moment's Welch p-value below the family-wise :data:`LEVEL` (Bonferroni over the
    moments): the draws are not told apart from the explicit ones."""
    p = min_p_value(explicit, drawn)
    assert p > LEVEL / moments(explicit[:1]).shape[1], p


def assert_told_apart(explicit, drawn):
    """Some moment's Welch p-value below the Bonferroni bound of :func:`assert_same_law`."""
    p = min_p_value(explicit, drawn)
    assert p < LEVEL / moments(explicit[:1]).shape[1], p


def case_model(cases, name):
    """``(problem, A, B, P, initial)`` of case ``name`` of ``cases``: the fixed model of
    :func:`model_state` (``A`` None for the initial batch) and its probe ``P``."""
    problem, zero_row, initial = cases[name]
    A, Bm, P = model_state(zero_row=zero_row)
    return problem, None if initial else A, Bm, P, initial


N_BATCHES, M = 1500, 60


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    problem, A, Bm, P, initial = case_model(CASES, request.param)
    draws = lambda sampler, wrong=None: batch_products(  # noqa: E731
        dataclasses.replace(problem, sampler=sampler), N_BATCHES // (5 if wrong else 1), M,
        A, Bm, P, wrong)
    return draws, draws("explicit"), initial


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_batch_product_has_the_explicit_law(case, sampler):
    draws, explicit, _ = case
    assert_same_law(explicit, draws(sampler))


@pytest.mark.parametrize("sampler, wrong", BROKEN)
def test_the_law_test_rejects_a_wrong_sampler(case, sampler, wrong):
    """Power: a fifth of the batches suffices to reject each broken sampler."""
    draws, explicit, initial = case
    if wrong == "any angle" and initial:
        pytest.skip("the initial batch draws no angles")
    assert_told_apart(explicit, draws(sampler, wrong))


def active_fraction_case(problem):
    """``(A, B, W*, W, projection, shards)``: the model of ``model_state(1)``, the truth's
    and the model's ``W``, the model's projection and a batch of 300 000 observations in
    ``D2`` shards (one label per shard)."""
    A, Bm, _ = model_state(1)
    A_true, B_true = problem.truth
    return (A, Bm, A_true @ B_true.T, A @ Bm.T, problem.projection(A),
            problem.batch(1, 300_000, D2))


def assert_active_fractions(shards, counts, p):
    """The active rows ``counts[s]`` of shard ``s`` (label ``s``) against the probability
    ``p[s]``: a two-sided z-test per label at 1 % family-wise (Bonferroni over the
    labels)."""
    n = np.array([sh.n_obs for sh in shards])
    z = (counts / n - p) / np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(z) < scipy.stats.norm.ppf(1 - LEVEL / (2 * D2))), (counts / n, p)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_active_fraction_is_the_angle_over_pi(sampler):
    """Noise free, a row of label j is active with probability angle(w*_j, w_j) / pi."""
    problem = SyntheticProblem(D1, D2, K, seed=4, sampler=sampler)
    A, Bm, W_true, W, projection, shards = active_fraction_case(problem)
    cos = np.sum(W_true * W, axis=0) / np.linalg.norm(W, axis=0)
    p = np.arccos(np.clip(cos, -1, 1)) / np.pi
    counts = np.array([B.activate(B.Block(s, s + 1, {"B": Bm[s:s + 1]}), sh,
                                  B.StepModel(A, projection)).out
                       for s, sh in enumerate(shards)])
    assert_active_fractions(shards, counts, p)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_final_errors_agree_with_explicit_fits_over_seeds(sampler):
    """20 seeds each: a two-sample test does not tell the final errors apart at 1 %."""
    errors = {}
    for sampler in (sampler, "explicit"):
        errors[sampler] = [
            OneBitMultiLabel(2, batch_size=4000, n_iter=4, n_shards=2, random_state=seed,
                             eval_every=0)
            .fit(SyntheticProblem(20, 15, 2, flip=0.05, seed=seed, n_test=300, sampler=sampler))
            .history_[-1]["frobenius_error"]
            for seed in range(20)]
    result = scipy.stats.mannwhitneyu(*errors.values())
    assert result.pvalue > LEVEL, errors


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_fit_is_deterministic_and_seeded(sampler):
    problem = SyntheticProblem(20, 15, 2, flip=0.05, seed=1, n_test=200, sampler=sampler)
    fit = lambda p: OneBitMultiLabel(2, batch_size=3000, n_iter=3, random_state=0).fit(p)
    a, b = fit(problem), fit(problem)
    c = fit(dataclasses.replace(problem, seed=2))
    np.testing.assert_array_equal(a.Q_, b.Q_)
    assert not np.allclose(a.A_, c.A_)


# -- thresholds: bit y = sign(x^T w*_j + b*_j + noise) (flipped), score x^T w_j + b_j ------

THRESHOLDED = SyntheticProblem(D1, D2, K, flip=0.1, positive_rate=(0.1, 0.3), seed=3)
MODEL_BIAS = np.array([-1.0, 0.5, 0.0])  # the model's b_j (label 1 also has a zero row of B)


def per_label_sums(shard, projection, A, Bm, bm):
    """``T`` (``d1 x d2``): a sampler's per-label sums ``sum_{i in j} w_i x_i``, or for an
    explicit shard the dense reference ``w = y`` (initial batch) or
    ``w = y - sign(x^T A B[j] + b[j])`` in float64."""
    T = np.zeros((D1, D2))
    if isinstance(shard, ProjectedShard):
        active, _ = shard.draw_active(projection, Bm, bm)
        T[:, active.labels] += (active.weights[:, None] * active.X).T
        return T
    X, labels, y = shard.load()
    X = X.astype(np.float64)
    w = y if A is None else y - np.where(
        np.einsum("ij,ij->i", X @ A, Bm[labels]) + bm[labels] >= 0, 1.0, -1.0)
    np.add.at(T.T, labels, w[:, None] * X)
    return T


def thresholded_products(problem, n_batches, A, Bm, bm, P, wrong=None):
    """The statistic of :func:`batch_products` (``[T P_bot; T^T P_top]``) of ``n_batches``
    batches of ``M`` observations, from :func:`per_label_sums`."""
    projection = problem.projection(A)
    out = np.empty((n_batches, D1 + D2))
    for t in range(n_batches):
        (shard,) = problem.batch(t + 1, M, 1)
        if wrong == "score offsets ignored":
            T = per_label_sums(shard, projection, A, Bm, None)
        elif wrong == "angle only":  # the balanced draw: offsets ignored in the geometry
            with replaced("_has_offsets", lambda *b: False):
                T = per_label_sums(shard, projection, A, Bm, bm)
        else:
            T = per_label_sums(shard, projection, A, Bm, bm)
        out[t] = np.concatenate([T @ P[D1:, 0], T.T @ P[:D1, 0]])
    return out


THRESHOLD_BROKEN = [  # (sampler, wrong) pairs the thresholded law test must reject
    ("projected", "score offsets ignored"), ("conditional", "score offsets ignored"),
    ("conditional", "angle only")]
THRESHOLD_CASES = {  # problem, whether the model has a zero row of B, initial batch or step
    "thresholds, flip, step": (THRESHOLDED, True, False),
    "thresholds, gaussian noise, step": (
        dataclasses.replace(THRESHOLDED, flip=0.0, noise_std=0.7), False, False),
    "thresholds, flip, initial batch": (THRESHOLDED, False, True),
}


N_THRESHOLD_BATCHES = 750  # wrong samplers are rejected at p < 1e-5 with a fifth of these


@pytest.fixture(scope="module", params=list(THRESHOLD_CASES))
def threshold_case(request):
    problem, A, Bm, P, initial = case_model(THRESHOLD_CASES, request.param)
    draws = lambda sampler, wrong=None: thresholded_products(  # noqa: E731
        dataclasses.replace(problem, sampler=sampler),
        N_THRESHOLD_BATCHES // (5 if wrong else 1),
        A, Bm, MODEL_BIAS, P, wrong)
    return draws, draws("explicit"), initial


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_thresholded_batch_product_has_the_explicit_law(threshold_case, sampler):
    """With ``b*`` (priors 0.1-0.3) and the model's ``b`` non-zero, the samplers' batch
    products are not told apart from the dense explicit reference (family-wise 1 %)."""
    draws, explicit, _ = threshold_case
    assert_same_law(explicit, draws(sampler))


@pytest.mark.parametrize("sampler, wrong", THRESHOLD_BROKEN)
def test_the_thresholded_law_test_rejects_a_wrong_sampler(threshold_case, sampler, wrong):
    """Power: a fifth of the batches rejects a sampler that leaves the model's offsets
    out of the score, or a conditional draw that samples angles only (as if
    ``b = b* = 0``)."""
    draws, explicit, initial = threshold_case
    if initial and wrong == "score offsets ignored":
        pytest.skip("the initial batch has no score")
    assert_told_apart(explicit, draws(sampler, wrong))


# -- the thresholded model's outputs: the initial batch's sums of positive and negative
#    rows apart and the counts (n_bits, n_pos, r_sum) of every bit ----------------------

def thresholded_outputs(shard, projection, A, Bm, bm):
    """``(S_pos, S_neg, n_bits, n_pos, r_sum)`` of a shard, each per label (``S``:
    ``d1 x d2``): a sampler's ``draw_active(..., thresholded=True)`` (``S_neg`` zeros in a
    step, ``S_pos`` the step's sums ``T``), or for an explicit shard the dense reference
    in float64 (initial batch: ``S_pos``/``S_neg`` the sums of the rows of positive/negative
    bits; a step: ``T = sum r_i x_i``, ``r = y - sign(x^T A B[j] + b[j])``, its ``r_sum``)."""
    S_pos, S_neg = np.zeros((D1, D2)), np.zeros((D1, D2))
    if isinstance(shard, ProjectedShard):
        active, _ = shard.draw_active(projection, Bm, bm, thresholded=True)
        S_pos[:, active.labels] = (active.weights[:, None] * active.X).T
        if A is None:
            S_neg[:, active.labels] = active.X_neg.T
        c = thresholds.dense_counts(active.counts, 0, D2)
        return S_pos, S_neg, c.n_bits, c.n_pos, c.r_sum
    X, labels, y = shard.load()
    X = X.astype(np.float64)
    if A is None:
        np.add.at(S_pos.T, labels[y > 0], X[y > 0])
        np.add.at(S_neg.T, labels[y < 0], X[y < 0])
        r = np.zeros(y.size)
    else:
        r = y - np.where(np.einsum("ij,ij->i", X @ A, Bm[labels]) + bm[labels] >= 0, 1.0, -1.0)
        np.add.at(S_pos.T, labels, r[:, None] * X)
    return (S_pos, S_neg, np.bincount(labels, minlength=D2).astype(float),
            np.bincount(labels, weights=y > 0, minlength=D2), np.bincount(labels, r, D2))


def thresholded_statistic(problem, n_batches, A, Bm, bm, P):
    """Per batch: initial batch ``[S_pos^T p, S_neg^T p, n_bits, n_pos]`` (``p = P_top``);
    a step ``[T P_bot, T^T p, n_bits, n_pos, r_sum]``."""
    projection = problem.projection(A)
    rows = []
    for t in range(n_batches):
        (shard,) = problem.batch(t + 1, M, 1)
        S_pos, S_neg, n_bits, n_pos, r_sum = thresholded_outputs(shard, projection, A, Bm, bm)
        p = P[:D1, 0]
        rows.append(np.concatenate([S_pos.T @ p, S_neg.T @ p, n_bits, n_pos]) if A is None
                    else np.concatenate([S_pos @ P[D1:, 0], S_pos.T @ p, n_bits, n_pos, r_sum]))
    return np.array(rows)


class SharedComplement:
    """A wrong ``complete_rows``: every second call reuses the normals of the call before
    (the negative rows' complement equal to the positive rows')."""

    def __init__(self):
        self.state = None

    def __call__(self, P, coef, scale, rng):
        if self.state is None:
            self.state = copy.deepcopy(rng.bit_generator.state)
            return COMPLETE_ROWS(P, coef, scale, rng)
        replay = np.random.Generator(type(rng.bit_generator)())
        replay.bit_generator.state, self.state = self.state, None
        return COMPLETE_ROWS(P, coef, scale, replay)


COMPLETE_ROWS, COUNT_BITS, CONDITIONAL_COUNTS = (
    projected.complete_rows, projected.count_bits, conditional._conditional_counts)
THRESHOLDED_WRONG = {  # the sampler modules' functions each broken draw replaces
    "shared complement": lambda: {"complete_rows": SharedComplement()},
    "residuals of the wrong sign": lambda: {  # r_sum from +2 sign(s) instead of -2 sign(s)
        "count_bits": lambda labels, y, r=None: COUNT_BITS(labels, y, None if r is None else -r),
        "_conditional_counts": lambda rng, lo, n_j, flips, k_dis, k_agree, j, r_row, mass:
            CONDITIONAL_COUNTS(rng, lo, n_j, flips, k_dis, k_agree, j, -r_row, mass)._replace(
                n_pos=CONDITIONAL_COUNTS(rng, lo, n_j, flips, k_dis, k_agree, j, r_row,
                                         mass).n_pos)},
}


@pytest.fixture(scope="module", params=list(THRESHOLD_CASES))
def counts_case(request):
    problem, A, Bm, P, initial = case_model(THRESHOLD_CASES, request.param)
    draws = lambda sampler, n=N_THRESHOLD_BATCHES: thresholded_statistic(
        dataclasses.replace(problem, sampler=sampler), n, A, Bm, MODEL_BIAS, P)
    return draws, draws("explicit"), initial


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_thresholded_outputs_have_the_explicit_law(counts_case, sampler):
    """``thresholded=True``: the initial batch's sums of the positive and of the negative
    bits' rows, and the counts ``n_bits``, ``n_pos`` (and a step's ``r_sum``) with the sums,
    are not told apart from the dense explicit reference (Welch tests of the first and
    second moments, family-wise 1 %, Bonferroni)."""
    draws, explicit, _ = counts_case
    assert_same_law(explicit, draws(sampler))


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("wrong", list(THRESHOLDED_WRONG))
def test_the_thresholded_outputs_test_rejects_a_wrong_draw(counts_case, sampler, wrong):
    """Power: a fifth of the batches rejects the negative rows' complement shared with the
    positive rows' (initial batch) and ``r_sum`` summed with the wrong sign (a step)."""
    draws, explicit, initial = counts_case
    if initial != (wrong == "shared complement"):
        pytest.skip("the initial batch has no residuals; a step no negative sums")
    with contextlib.ExitStack() as stack:
        for name, replacement in THRESHOLDED_WRONG[wrong]().items():
            stack.enter_context(replaced(name, replacement))
        drawn = draws(sampler, N_THRESHOLD_BATCHES // 5)
    assert_told_apart(explicit, drawn)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_thresholded_draw_has_the_explicit_structure(sampler):
    """The structure ``read_row_shard`` gives explicit rows: the initial batch lists every
    label with bits (sorted) with unit weights, ``r_sum = 0`` and ``S_pos - S_neg`` the
    sums of ``y_i x_i``; a step's sums are the numbers drawn without thresholds, its
    counts every bit's (``n_bits`` summing to the shard's observations)."""
    problem = dataclasses.replace(THRESHOLDED, sampler=sampler)
    A, Bm, _ = model_state()
    (shard,) = problem.batch(1, 40, 1)
    init, n = shard.draw_active(problem.projection(None), thresholded=True)
    c = init.counts
    np.testing.assert_array_equal(init.labels, c.labels)
    assert np.all(c.n_bits > 0) and np.all(np.diff(c.labels) > 0) and n == shard.n_obs
    assert c.n_bits.sum() == shard.n_obs and np.all(c.n_pos <= c.n_bits)
    np.testing.assert_array_equal(c.r_sum, 0.0)
    np.testing.assert_array_equal(init.weights, 1.0)
    assert init.X.shape == init.X_neg.shape == (c.labels.size, D1)
    projection = problem.projection(A)
    plain, n_plain = shard.draw_active(projection, Bm, MODEL_BIAS)
    step, n_step = shard.draw_active(projection, Bm, MODEL_BIAS, thresholded=True)
    assert n_plain == n_step and plain.counts is None
    np.testing.assert_array_equal(plain.X, step.X)
    np.testing.assert_array_equal(plain.labels, step.labels)
    assert step.counts.n_bits.sum() == shard.n_obs
    assert np.all(np.isin(step.labels, step.counts.labels))
    assert np.all(np.abs(step.counts.r_sum) <= 2 * step.counts.n_bits)


@pytest.mark.parametrize("initial", [True, False])
def test_explicit_shard_activate_matches_the_dense_reference(initial):
    """The reference of the law tests is what the estimator's explicit path computes."""
    A, Bm, _ = model_state()
    A = None if initial else A
    (shard,) = dataclasses.replace(THRESHOLDED, sampler="explicit").batch(1, 200, 1)
    (piece,) = B.read_row_shard(shard.load(), B.StepModel(A, None, True),
                                None if initial else [Bm], [0, D2],
                                None if initial else [MODEL_BIAS])
    active, _ = piece
    S_pos, S_neg, n_bits, n_pos, r_sum = thresholded_outputs(shard, None, A, Bm, MODEL_BIAS)
    np.testing.assert_allclose(active.X, S_pos.T[active.labels], rtol=1e-5, atol=1e-5)
    if initial:
        np.testing.assert_allclose(active.X_neg, S_neg.T[active.labels], rtol=1e-5, atol=1e-5)
    c = thresholds.dense_counts(active.counts, 0, D2)
    for got, want in ((c.n_bits, n_bits), (c.n_pos, n_pos), (c.r_sum, r_sum)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_active_fraction_with_thresholds_is_the_orthant_probability(sampler):
    """Noise free, a row of label ``j`` is active with probability
    ``q_j = Phi(u) + Phi(v) - 2 F(u, v)``, ``u = -b*_j``, ``v = -b_j / |w_j|`` and ``F`` the
    bivariate normal cdf with correlation ``cos angle(w*_j, w_j)`` (scipy's, an independent
    reference): a z-test per label at 1 % family-wise."""
    problem = SyntheticProblem(D1, D2, K, seed=4, sampler=sampler, positive_rate=(0.05, 0.4))
    A, Bm, W_true, W, projection, shards = active_fraction_case(problem)
    norms = np.linalg.norm(W, axis=0)
    cos = np.sum(W_true * W, axis=0) / norms
    u, v = -problem.truth_bias(0, D2), -MODEL_BIAS / norms
    p = np.array([scipy.stats.norm.cdf(u[j]) + scipy.stats.norm.cdf(v[j]) - 2 *
                  scipy.stats.multivariate_normal([0, 0], [[1, cos[j]], [cos[j], 1]])
                  .cdf([u[j], v[j]]) for j in range(D2)])
    counts = np.array([sh.draw_active(projection, Bm[s:s + 1], MODEL_BIAS[s:s + 1])[1]
                       for s, sh in enumerate(shards)])
    assert_active_fractions(shards, counts, p)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_zero_thresholds_draw_the_balanced_numbers(sampler):
    """The model's thresholds fixed at 0 give the paper's draws bit for bit."""
    problem = dataclasses.replace(PROBLEM, sampler=sampler)
    A, Bm, _ = model_state()
    (shard,) = problem.batch(1, 500, 1)
    a, n_a = shard.draw_active(problem.projection(A), Bm)
    b, n_b = shard.draw_active(problem.projection(A), Bm, np.zeros(D2))
    assert n_a == n_b
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.labels, b.labels)
