"""The thresholded model (docs/ALGORITHM.md section 9): closed forms for Gaussian
features, recovery of a planted truth with label priors, the paper's numbers when the
thresholds are zero, and the same errors as the paper's model on balanced labels."""

import copy

import numpy as np
import pytest
import scipy.special
import scipy.stats

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.data.synthetic import conditional
from onebit_dask.ops import thresholds
from onebit_dask.engine.blocks import Block

phi = scipy.stats.norm.pdf


def _unit(rng, d):
    w = rng.standard_normal(d)
    return w / np.linalg.norm(w)


def _gaussian_bits(n, d, b_star, seed):
    rng = np.random.default_rng(seed)
    w = _unit(rng, d)
    X = rng.standard_normal((n, d))
    return X, w, np.where(X @ w + b_star >= 0, 1.0, -1.0)


@pytest.mark.parametrize("b_star, b", [(-1.5, -0.5), (-2.3, -2.0), (0.4, 0.0)])
def test_share_step_lands_on_the_truth(b_star, b):
    """``Phi(b) + sum r / (2 n)`` has mean ``Phi(b*)`` for Gaussian ``x`` and ``w = w*``, and
    its stated variance: the step's share is ``Phi(b*)`` within 4.5 of the standard errors
    it reports (two-sided level 7e-6); with the residual's sign reversed (a wrong step) it
    is not."""
    n = 100_000
    X, w, y = _gaussian_bits(n, 6, b_star, seed=1)
    r = y - np.where(X @ w + b >= 0, 1.0, -1.0)
    counts = thresholds.count_bits(np.zeros(n, dtype=np.int64), y, r)
    start = np.array([0.5]), np.array([np.inf])
    p, v = thresholds.step_share(*start, np.array([b]), counts, 1.0)
    assert v[0] == pytest.approx((r / 2).var() / n, rel=1e-9)
    assert abs(p[0] - scipy.special.ndtr(b_star)) < 4.5 * np.sqrt(v[0])
    wrong = counts._replace(r_sum=-counts.r_sum)
    p_wrong, _ = thresholds.step_share(*start, np.array([b]), wrong, 1.0)
    assert abs(p_wrong[0] - scipy.special.ndtr(b_star)) > 4.5 * np.sqrt(v[0])


def test_shares_average_with_the_step_size():
    counts = thresholds.LabelCounts(np.array([0, 2]), *(np.array([10.0, 4.0]),
                                    np.array([3.0, 1.0]), np.array([2.0, -2.0]),
                                    np.array([1.0, 1.0])))
    dense = thresholds.dense_counts(counts, 0, 3)
    p, v = thresholds.step_share(np.array([0.2, 0.4, 0.6]), np.array([0.01, 0.02, np.inf]),
                                 np.zeros(3), dense, 0.25)
    share0 = 0.5 + 2.0 / 20
    assert p[0] == pytest.approx(0.75 * 0.2 + 0.25 * share0)
    assert v[0] == pytest.approx(0.75**2 * 0.01 + 0.25**2 * (0.1 - 0.1**2) / 10)
    assert (p[1], v[1]) == (0.4, 0.02)  # no bits: unchanged
    assert p[2] == pytest.approx(0.5 - 2.0 / 8)  # first bits: the batch's share
    assert v[2] == pytest.approx(max((0.25 - 0.25**2) / 4, 0.25 / 16))


def test_shrinkage_is_the_empirical_bayes_rule():
    """Balanced labels (no spread beyond the noise) share one threshold; well separated
    labels keep theirs; a label without bits takes the prior mean."""
    rng = np.random.default_rng(0)
    n = 1000.0
    p_bal = rng.binomial(int(n), 0.5, 200) / n
    v_bal = np.full(200, 0.25 / n)
    pri = thresholds.prior([thresholds.moments(p_bal, v_bal)])
    s2 = 0.25 / n / scipy.stats.norm.pdf(0) ** 2
    assert abs(pri.mean) < 4 * np.sqrt(s2 / 200)
    assert pri.var < 4 * s2 * np.sqrt(2 / 200)  # zero within the noise of its estimate
    z = scipy.special.ndtri(p_bal)
    spread = np.std(thresholds.shrink(p_bal, v_bal, pri))
    assert spread < 0.5 * np.std(z)
    p = np.array([0.005, 0.05, 0.3, 0.5])
    v = np.array([1e-8, 1e-8, 1e-8, np.inf])
    pri = thresholds.prior([thresholds.moments(p[:2], v[:2]), thresholds.moments(p[2:], v[2:])])
    z = scipy.special.ndtri(p[:3])
    assert pri.mean == pytest.approx(z.mean()) and pri.var == pytest.approx(z.var(), rel=1e-4)
    b = thresholds.shrink(p, v, pri)
    s2 = v[:3] / scipy.stats.norm.pdf(z) ** 2
    np.testing.assert_allclose(b[:3], pri.mean + pri.var / (pri.var + s2) * (z - pri.mean),
                               rtol=1e-12)
    np.testing.assert_allclose(b[:3], z, atol=1e-4)  # little noise: barely shrunk
    assert b[3] == pri.mean


@pytest.mark.parametrize("b_star, b", [(-2.0, -1.0), (-1.0, -2.0), (0.5, 0.3)])
def test_scaled_step_has_the_truth_as_mean(b_star, b):
    """``E[w + c sum_i r_i x_i] = (phi(b*) / phi(b)) w*`` with ``c = 1 / (2 n phi(b))``,
    whatever the current ``w`` (section 9): checked on 4e5 Gaussian bits, each component
    within 4.5 standard errors; the paper's ``c`` (``b = 0`` in the scale) misses."""
    n, d = 400_000, 4
    X, w_star, y = _gaussian_bits(n, d, b_star, seed=2)
    w = _unit(np.random.default_rng(3), d)
    r = y - np.where(X @ w + b >= 0, 1.0, -1.0)
    terms = r[:, None] * X / (2 * phi(b))
    M = w + terms.mean(0)
    se = terms.std(0) / np.sqrt(n)
    target = phi(b_star) / phi(b) * w_star
    assert np.all(np.abs(M - target) < 4.5 * se)
    paper = w + terms.mean(0) * phi(b) / phi(0.0)
    assert np.any(np.abs(paper - target) > 4.5 * se)


def test_step_factors_and_weights_closed_forms():
    b = np.array([0.0, -1.0, 2.0])
    f = thresholds.step_factors(b, np.array([10.0, 5.0, 20.0]), 10.0)
    np.testing.assert_allclose(f, [1.0, 2 * np.exp(0.5), 0.5 * np.exp(2.0)], rtol=1e-15)
    assert thresholds.step_factors(np.zeros(1), np.array([7.0]), 7.0)[0] == 1.0  # exactly
    p = scipy.special.ndtr(b)
    w_pos, w_neg = thresholds.init_weights(p)
    # E[(y - (2p - 1))] = 0 and the weights' ratio (1 - p) / p
    np.testing.assert_allclose(p * w_pos + (1 - p) * w_neg, 0.0, atol=1e-15)
    np.testing.assert_allclose(w_pos / -w_neg, (1 - p) / p, rtol=1e-12)
    np.testing.assert_allclose(thresholds.column_weights(b), phi(b) / phi(0.0), rtol=1e-12)


def test_initial_share():
    c = thresholds.LabelCounts(np.arange(3), np.array([0.0, 10.0, 1000.0]),
                               np.array([0.0, 0.0, 500.0]), np.zeros(3), np.zeros(3))
    p, v = thresholds.initial_share(c)
    np.testing.assert_allclose(p, [0.5, 0.5 / 11, 0.5])
    assert v[0] == np.inf and v[2] == pytest.approx(0.25 / 1001)


@pytest.fixture(scope="module")
def imbalanced():
    problem = SyntheticProblem(40, 30, 2, positive_rate=(0.01, 0.3), sampler="explicit",
                               seed=0, n_test=2000)
    fit = lambda threshold: OneBitMultiLabel(  # noqa: E731
        2, batch_size=20_000, n_iter=8, step="averaged", threshold=threshold,
        random_state=0).fit(problem)
    return problem, fit("estimated"), fit("none")


def test_planted_imbalanced_recovery(imbalanced):
    problem, est, paper = imbalanced
    errors = [h["frobenius_error"] for h in est.history_]
    assert errors[-1] < 0.5 * errors[0]
    assert all(b < a for a, b in zip(errors[3:], errors[4:]))  # the averaged steps
    assert errors[-1] < paper.history_[-1]["frobenius_error"] / 3
    assert est.history_[-1]["hamming_loss"] < paper.history_[-1]["hamming_loss"] / 5
    assert est.history_[-1]["auc"] > 0.99
    b_true = problem.truth_bias(0, problem.d2)
    assert np.sqrt(np.mean((est.intercept_ - b_true) ** 2)) < 0.1
    np.testing.assert_array_equal(paper.intercept_, 0.0)
    X = problem.test_set().X[:20]
    np.testing.assert_allclose(est.decision_function(X), X @ est.coef_ + est.intercept_,
                               rtol=1e-10, atol=1e-12)
    top, scores = est.predict_top_k(X, 3)
    np.testing.assert_allclose(scores, np.take_along_axis(est.decision_function(X), top, 1),
                               rtol=1e-10, atol=1e-12)


def _exact_count_batch(rng, m, d1, d2, W):
    """A batch with exactly ``m / d2`` bits of every label."""
    labels = rng.permutation(np.repeat(np.arange(d2), m // d2))
    X = rng.standard_normal((m, d1))
    return X, labels, np.where(np.einsum("ij,ji->i", X, W[:, labels]) >= 0, 1, -1)


def test_zero_thresholds_take_the_papers_step_bit_for_bit():
    """From the same state, with ``b = 0`` and exactly ``m / d2`` bits per label, the
    thresholded step computes the paper's numbers to the bit (every factor is exactly 1)."""
    rng = np.random.default_rng(5)
    d1, d2, m = 12, 6, 600
    W = rng.standard_normal((d1, d2))
    W /= np.linalg.norm(W, axis=0)
    batches = [_exact_count_batch(rng, m, d1, d2, W) for _ in range(2)]
    paper = OneBitMultiLabel(2, batch_size=m, n_shards=2, threshold="none",
                             step="paper").partial_fit(
        *batches[0], n_labels=d2)
    mine = copy.deepcopy(paper)
    mine.set_params(threshold="estimated")
    blocks = mine._state.blocks
    blocks.handles = [Block(h.lo, h.hi, {**h.slots, "b": np.zeros(h.hi - h.lo),
                                         "p": np.full(h.hi - h.lo, 0.5),
                                         "v": np.full(h.hi - h.lo, 0.01)})
                      for h in blocks.handles]
    paper.partial_fit(*batches[1])
    mine.partial_fit(*batches[1])
    for name in ("Q_", "V_", "B_", "A_"):
        np.testing.assert_array_equal(getattr(mine, name), getattr(paper, name))
    assert not np.array_equal(mine._state.blocks.handles[0].slots["p"], 0.5)  # shares took a step


def test_balanced_labels_errors_not_told_apart_from_the_papers():
    """On the balanced planted model, final errors of the thresholded and the paper's model
    over 10 seeds: a two-sided Wilcoxon signed-rank test does not reject equality at 1 %.
    The same test rejects when one side has half the observations (power check)."""
    def final(threshold, seed, m=6000):
        problem = SyntheticProblem(30, 20, 2, seed=seed, n_test=10, sampler="explicit")
        est = OneBitMultiLabel(2, batch_size=m, n_iter=6, step="averaged",
                               threshold=threshold, eval_every=0, random_state=0)
        return est.fit(problem).history_[-1]["frobenius_error"]

    seeds = range(10)
    paper = np.array([final("none", s) for s in seeds])
    mine = np.array([final("estimated", s) for s in seeds])
    assert scipy.stats.wilcoxon(mine, paper).pvalue > 0.01
    half = np.array([final("estimated", s, m=3000) for s in seeds])
    assert scipy.stats.wilcoxon(half, paper).pvalue < 0.01


def test_threshold_parameter_is_checked():
    with pytest.raises(ValueError, match="threshold='yes'"):
        OneBitMultiLabel(2, threshold="yes").fit(SyntheticProblem(10, 5, 1))


# -- every sampler of the synthetic problem (exact in law: the fits' errors agree) --------
SAMPLERS = ("conditional", "projected", "explicit")
N_SEEDS = 12
LEVEL = 0.01


def final_errors(sampler, step="averaged"):
    """The final Frobenius error of ``N_SEEDS`` small thresholded fits (priors 2 %-30 %)."""
    return [OneBitMultiLabel(3, batch_size=3000, n_iter=4, step=step,
                             threshold="estimated", random_state=seed, eval_every=0)
            .fit(SyntheticProblem(20, 15, 3, positive_rate=(0.02, 0.3), sampler=sampler,
                                  seed=seed, n_test=300))
            .history_[-1]["frobenius_error"] for seed in range(N_SEEDS)]


@pytest.fixture(scope="module")
def errors():
    return {sampler: final_errors(sampler) for sampler in SAMPLERS}


def test_thresholded_fits_agree_across_samplers(errors):
    """A Kruskal-Wallis test over the three samplers' 12 seeds each does not tell the
    final errors apart at 1 %."""
    result = scipy.stats.kruskal(*errors.values())
    assert result.pvalue > LEVEL, errors


def test_moment_fits_agree_across_samplers():
    """The moment step draws the initial batch's law at every step: as above, the three
    samplers' final errors are not told apart at 1 % (Kruskal-Wallis, 12 seeds each). The
    power check of the sums' law is the initial batch's (``test_problem_samplers``)."""
    result = scipy.stats.kruskal(*(final_errors(s, "moment") for s in SAMPLERS))
    assert result.pvalue > LEVEL, result


def test_the_fit_test_rejects_residuals_of_the_wrong_sign(errors, monkeypatch):
    """Power: conditional draws whose ``r_sum`` has the wrong sign (the thresholds then
    move away from the labels' shares) are told apart from the explicit fits at 1 %
    (Mann-Whitney)."""
    right = conditional._conditional_counts

    def wrong_sign(*args):
        counts = right(*args)
        return counts._replace(r_sum=-counts.r_sum)

    monkeypatch.setattr(conditional, "_conditional_counts", wrong_sign)
    wrong = final_errors("conditional")
    result = scipy.stats.mannwhitneyu(wrong, errors["explicit"])
    assert result.pvalue < LEVEL, (wrong, errors["explicit"])
    assert np.median(wrong) > np.median(errors["explicit"])


def test_thresholded_model_round_trips_through_its_store(tmp_path, imbalanced):
    """A saved thresholded model predicts to the bit as the fitted one; a damaged
    threshold is refused naming the part."""
    import zarr

    from onebit_dask.io.stores.zarr_format import DamagedStoreError

    problem, est, _ = imbalanced
    path = str(tmp_path / "m.zarr")
    est.save(path)
    back = OneBitMultiLabel.load(path)
    X = problem.test_set().X[:30]
    np.testing.assert_array_equal(back.decision_function(X), est.decision_function(X))
    np.testing.assert_array_equal(back.intercept_, est.intercept_)
    b = zarr.open_array(f"{path}/blocks/0/b", mode="r+")
    b[0] = np.nan
    with pytest.raises(DamagedStoreError, match="blocks/0/b"):
        OneBitMultiLabel.load(path)


# -- the moment step (docs/ALGORITHM.md section 9c) -------------------------------------------
def test_moment_share_is_the_batch_share_averaged():
    counts = thresholds.LabelCounts(np.arange(3), np.array([10.0, 0.0, 4.0]),
                                    np.array([3.0, 0.0, 0.0]), np.zeros(3), np.zeros(3))
    p, v = thresholds.moment_share(np.array([0.2, 0.4, 0.6]), np.array([0.01, 0.02, np.inf]),
                                   counts, 0.25)
    assert p[0] == pytest.approx(0.75 * 0.2 + 0.25 * 0.3)
    assert v[0] == pytest.approx(0.75**2 * 0.01 + 0.25**2 * 0.3 * 0.7 / 10)
    assert (p[1], v[1]) == (0.4, 0.02)  # no bits: unchanged
    assert p[2] == pytest.approx(0.5 / 5)  # first bits, none positive: the floor 1 / (2 (n + 1))
    assert v[2] == pytest.approx(0.25 / 16)


def _history(problem, step="moment"):
    return OneBitMultiLabel(3, batch_size=100_000, n_iter=8, step=step,
                            random_state=0).fit(problem).history_


def _moment_errors(problem, step="moment"):
    return [h["frobenius_error"] for h in _history(problem, step)]


@pytest.fixture(scope="module")
def pooled_problem():
    problem = SyntheticProblem(200, 100, 3, positive_rate=(0.005, 0.3), seed=0, n_test=2000)
    pooled = OneBitMultiLabel(3, batch_size=900_000, n_iter=0, random_state=0).fit(problem)
    return problem, pooled.history_[-1]["frobenius_error"]


@pytest.mark.parametrize("step", ["moment", "pooled"])
def test_moment_steps_pool_the_initial_estimate(pooled_problem, step):
    """On the planted imbalanced model (priors 0.5 %-30 %), the moment step's error falls
    at every step, to about the initial estimate's error on all 9 batches pooled (its
    fixed point, up to the rank-k truncation at each step: within 10 %), and its ratio to
    the first error is near ``1 / sqrt(9)`` (the error of an average of 9 unbiased
    estimates; within [0.25, 0.45]). The pooled step (docs/ALGORITHM.md section 9f) is
    that initial estimate of the batches so far, without the truncation."""
    problem, pooled = pooled_problem
    errors = _moment_errors(problem, step)
    assert all(b < a for a, b in zip(errors, errors[1:])), errors
    assert errors[-1] <= 1.1 * pooled, (errors[-1], pooled)
    assert 0.25 <= errors[-1] / errors[0] <= 0.45, errors


def test_the_moment_test_rejects_a_step_that_forgets(pooled_problem, monkeypatch):
    """Power: with ``eta_t = 1`` (each step replaces the estimate by one batch's) the
    error stays at one batch's and the test above fails."""
    from dataclasses import replace

    from onebit_dask.fit import steps

    for name, rule in steps.RULES.items():
        monkeypatch.setitem(steps.RULES, name, replace(rule, size=lambda t: 1.0))
    problem, pooled = pooled_problem
    errors = _moment_errors(problem)
    assert errors[-1] > 1.1 * pooled and errors[-1] / errors[0] > 0.45, errors


def test_refine_takes_pooled_steps_then_residual_steps_that_keep_falling(pooled_problem):
    """``step="refine"`` (docs/ALGORITHM.md section 9d) on the planted imbalanced model:
    its first ``n_iter // 2 = 4`` steps are the pooled steps, bit for bit; the next four
    are residual steps (only the bits the model gets wrong are active), and with the
    balanced scale they still lower the error at every step."""
    problem, _ = pooled_problem
    pooled = _moment_errors(problem, "pooled")
    history = _history(problem, "refine")
    refine = [h["frobenius_error"] for h in history]
    assert refine[:5] == pooled[:5]
    assert all(b < a for a, b in zip(refine[4:], refine[5:])), refine
    active = [h["n_active"] for h in history]
    assert active[:5] == [100_000] * 5 and max(active[5:]) < 50_000, active


def _shifted_fits(shift):
    """The initial estimate of a label matrix's fit (moment step, no steps after it), on
    ``X`` and on ``X + shift`` (the same bits: the same seed and labels)."""
    rng = np.random.default_rng(7)
    n, d1, d2 = 2000, 6, 30
    X = rng.standard_normal((n, d1))
    W = rng.standard_normal((d1, d2))
    Y = (X @ W + rng.standard_normal((n, d2)) > 2.0).astype(np.int8)
    fit = lambda Xf: OneBitMultiLabel(  # noqa: E731
        2, batch_size=6000, n_iter=0, step="moment", features="none", engine="local",
        random_state=0).fit(Xf, Y)
    return fit(X), fit(X + shift)


def test_an_observed_batch_is_centred_on_each_labels_own_share(monkeypatch):
    """Observed data: each label's bits are centred on the label's own share of the batch,
    so the initial estimate ``sum_pos x_i - p_j sum_i x_i`` is the same when a constant is
    added to every row (``features="none"``, no map to centre ``x``): ``A_`` and ``V_``
    agree to rounding (``rtol 1e-7``; the shift is 100 standard deviations). Centred on the
    model's share ``Phi(b_j)`` (a planted problem's centring, ``x`` centred in law), each
    label gains ``(n_pos - n_j Phi(b_j))`` times the shift: refused."""
    shift = 100.0 * np.linspace(1.0, 2.0, 6)
    a, b = _shifted_fits(shift)
    np.testing.assert_allclose(b.V_, a.V_, rtol=1e-7, atol=1e-7 * np.abs(a.V_).max())
    np.testing.assert_allclose(b.A_, a.A_, rtol=1e-7, atol=1e-7)
    planted_share = thresholds.centring_shares
    monkeypatch.setattr(thresholds, "centring_shares",
                        lambda b, n_pos, n_bits, observed: planted_share(b, n_pos, n_bits, False))
    a, b = _shifted_fits(shift)
    assert not np.allclose(b.A_, a.A_, rtol=1e-2, atol=1e-2)


def test_a_flat_prior_leaves_each_labels_threshold_as_its_share_says():
    """``threshold="shares"``: no shrinkage; each seen label's ``b_j = Phi^{-1}(p_j)``, so
    the thresholds keep the labels' order by share (their popularity), which the shrunk
    ones lose when ``tau^2`` comes out 0; a label without bits takes the prior's mean."""
    p = np.array([0.002, 0.004, 0.03, 0.2, 0.5])
    v = np.array([0.05, 0.05, 0.05, 0.05, np.inf])
    pri = thresholds.prior([thresholds.moments(p, v)])
    assert pri.var == 0.0  # the noise swamps the spread: shrunk, every label alike
    np.testing.assert_array_equal(thresholds.shrink(p, v, pri), pri.mean)
    flat = thresholds.shrink(p, v, thresholds.flat(pri))
    np.testing.assert_allclose(flat[:4], scipy.special.ndtri(p[:4]), rtol=1e-15)
    assert flat[4] == pri.mean and np.all(np.diff(flat[:4]) > 0)


def test_pooled_shares_of_observed_data_are_the_share_of_all_the_bits():
    """On observed data the moment steps' shares, averaged with eta_t = 1 / (t + 1), are
    the mean of the batches' shares, the first one smoothed: (p_0 + sum_t q_t) / (T + 1),
    to rounding. Floored per batch at 1 / (2 (n_j + 1)) (the planted problem's rule), a
    label without positive bits stays at about that floor, and the labels' order by share
    is all but lost: 0 and 1 positive bits in 200 come out within 20 %, pooled 3x apart."""
    rng = np.random.default_rng(0)
    labels, T = np.arange(6), 9
    n = np.full(6, 20.0)
    positives = rng.binomial(20, [0.0, 0.0, 0.005, 0.05, 0.3, 1.0], size=(T + 1, 6))
    positives[:, 1] = 0
    positives[3, 1] = 1  # one positive bit in all the batches
    zeros = np.zeros(6)
    counts = [thresholds.LabelCounts(labels, n, pos.astype(float), zeros, zeros)
              for pos in positives]
    p0, v0 = thresholds.initial_share(counts[0])
    results = {}
    for pooled in (True, False):
        p, v = p0, v0
        for t in range(1, T + 1):
            p, v = thresholds.moment_share(p, v, counts[t], 1.0 / (t + 1), pooled)
        results[pooled] = p
    expected = (p0 + (positives[1:] / 20.0).sum(axis=0)) / (T + 1)
    np.testing.assert_allclose(results[True], expected, rtol=1e-14)
    assert 0 < results[True].min() and results[True].max() < 1
    assert results[True][1] / results[True][0] > 3  # one positive in 200 bits: 3x none
    floored = results[False]
    assert floored[0] > 0.02 and floored[1] / floored[0] < 1.2
