"""``predict_proba`` and its link fitted at the end of a fit
(:mod:`onebit_dask.fit.calibration`): calibrated on a planted truth where the link is
exact, the link the maximum likelihood of the held-out bits it names, and on real data
better than each label's training share."""

from __future__ import annotations

import os

import numpy as np
import pytest
from scipy.special import ndtr

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.fit.calibration import CALIBRATION_NUMBERS
from onebit_dask.io.xc import read_xc
from onebit_dask.ops.calibration import fit_link
from tests.support.helpers import FILES

XI = 0.5
PROBLEM = SyntheticProblem(50, 40, 2, noise_std=XI, positive_rate=(0.05, 0.5), seed=1)
PARAMS = dict(batch_size=20_000, n_iter=10, engine="local", random_state=0)
ECE_BOUND = 0.01  # expected calibration error against the true probabilities
RESOLUTION = 0.1  # Brier excess over the truth's, as a share of the label shares'


@pytest.fixture(scope="module")
def fitted():
    return OneBitMultiLabel(2, **PARAMS).fit(PROBLEM)


def _ece(P, truth, bins=10) -> float:
    """Pairs binned by ``P``: the weighted ``|mean P - mean truth|`` (no sampling noise:
    the truth is each pair's probability)."""
    at = np.minimum((P * bins).astype(int), bins - 1).ravel()
    gap = np.bincount(at, P.ravel(), bins) - np.bincount(at, truth.ravel(), bins)
    return float(np.abs(gap).sum() / P.size)


def test_probabilities_are_calibrated_on_the_planted_model(fitted):
    """Against the exact ``P(y = +1 | x) = Phi((x^T w*_j + b*_j) / xi)`` of the test rows:
    the probabilities are calibrated (their bins' means match the truth's), where the
    scores read as a probit without the link are not, and they resolve the rows: the
    expected Brier score's excess over the truth's, ``mean (P - P*)^2``, is at most a tenth
    of the labels' true shares'."""
    X, labels, _ = PROBLEM.test_set()
    A, B = PROBLEM.truth
    b = PROBLEM.truth_bias(0, PROBLEM.d2)[labels]
    truth = ndtr((X @ A @ B[labels].T + b) / XI)
    P = fitted.predict_proba(X, labels)
    shares = np.broadcast_to(ndtr(b / np.sqrt(1 + XI ** 2)), truth.shape)
    assert _ece(P, truth) <= ECE_BOUND
    assert _ece(ndtr(fitted.decision_function(X, labels)), truth) > ECE_BOUND
    excess = np.mean((P - truth) ** 2)
    assert excess <= RESOLUTION * np.mean((shares - truth) ** 2)


def test_the_link_is_the_maximum_likelihood_of_the_batch_after_the_fit(fitted):
    """A dense reference: batch ``n_iter + 1`` drawn explicitly (at most
    CALIBRATION_NUMBERS / d1 bits), its projections from ``decision_function``, and the
    link fitted to them."""
    size = min(PARAMS["batch_size"], max(1024, CALIBRATION_NUMBERS // PROBLEM.d1))
    shards = PROBLEM.batch(PARAMS["n_iter"] + 1, size, fitted.n_shards, sampler="explicit")
    X, labels, y = (np.concatenate(a) for a in zip(*(shard.load() for shard in shards)))
    rows = np.arange(len(labels))
    b = fitted.intercept_[labels]
    u = fitted.decision_function(X)[rows, labels] - b
    link, _ = fit_link(u, b, y)
    # the blocks score the shards' float32 features in float32 (their rounding)
    np.testing.assert_allclose(fitted.calibration_, link, rtol=1e-6)


def test_predict_proba_of_some_labels(fitted):
    X = PROBLEM.test_set().X[:50]
    P = fitted.predict_proba(X)
    assert P.shape == (50, PROBLEM.d2) and np.all((P >= 0) & (P <= 1))
    np.testing.assert_array_equal(fitted.predict_proba(X, labels=[7, 3]), P[:, [7, 3]])
    alpha, beta = fitted.calibration_
    s = fitted.decision_function(X)
    np.testing.assert_allclose(P, ndtr(alpha * s + (beta - alpha) * fitted.intercept_),
                               rtol=1e-12)
    with pytest.raises(ValueError, match="labels="):
        fitted.predict_proba(X, labels=[PROBLEM.d2])


def test_the_validation_bits_fit_the_link_when_there_are_some():
    with_validation = OneBitMultiLabel(2, validation_fraction=0.25, **PARAMS).fit(PROBLEM)
    assert with_validation.calibration_[0] > 0
    assert not np.array_equal(with_validation.calibration_,
                              OneBitMultiLabel(2, **PARAMS).fit(PROBLEM).calibration_)


def test_partial_fit_leaves_no_link(fitted):
    X, labels, y = PROBLEM.draw(20, 2000)
    model = OneBitMultiLabel(2, **PARAMS).partial_fit(X, labels, y, n_labels=PROBLEM.d2)
    with pytest.raises(AttributeError, match="predict_proba") as refused:
        model.predict_proba(X[:3])
    assert "partial_fit" in str(refused.value.__cause__)  # says why there is none
    assert not hasattr(model, "predict_proba")  # scikit-learn's scorers use the scores
    assert hasattr(OneBitMultiLabel(2), "predict_proba")  # before a fit: "not fitted"
    refit = OneBitMultiLabel(2, **PARAMS).fit(PROBLEM).partial_fit(X, labels, y)
    assert not hasattr(refit, "calibration_")  # fitted to the model before the step
    assert not hasattr(refit, "predict_proba")


def test_on_real_data_better_than_the_training_shares():
    """emotions (tests/files, the whole MULAN set): one-bit feedback from the training
    label matrix; on the test rows the Brier score of every label with a test positive
    is below the one of its training share (the calibrated guess without features), and
    the mean one too."""
    X, Y = read_xc(os.path.join(FILES, "emotions_full_train.txt"))
    X_test, Y_test = read_xc(os.path.join(FILES, "emotions_full_test.txt"))
    Y, Y_test = Y.toarray() > 0, Y_test.toarray() > 0
    model = OneBitMultiLabel(3, batch_size=2000, n_iter=5, random_state=0, engine="local")
    P = model.fit(X, Y.astype(np.int8)).predict_proba(X_test)
    brier = np.mean((P - Y_test) ** 2, axis=0)
    base = np.mean((Y.mean(axis=0) - Y_test) ** 2, axis=0)
    assert np.all(brier < base), (brier, base)


def test_the_bits_numbers_are_not_kept_with_the_model(fitted):
    """The blocks return three numbers a calibration bit; the fitted model does not keep
    them: a pickled model holds its factors and thresholds, a few kB here, not the
    20 000 bits' 480 kB."""
    import pickle

    assert len(pickle.dumps(fitted)) < 3 * 8 * 20_000 / 10


def test_top_k_by_probability_is_the_brute_force_of_predict_proba(fitted):
    """``predict_top_k(X, k, by="proba")``: the labels of a stable argsort of
    ``-predict_proba(X)`` (ties to the smaller label) and their probabilities, found
    through the label index with the thresholds scaled by ``beta`` and the rows by
    ``alpha``; a ranking that ignored the link would be the scores' (not the case here)."""
    X = PROBLEM.test_set()[0][:400]
    P = fitted.predict_proba(X)
    order = np.argsort(-P, axis=1, kind="stable")[:, :5]
    labels, probabilities = fitted.predict_top_k(X, 5, by="proba")
    np.testing.assert_array_equal(labels, order)
    np.testing.assert_allclose(probabilities, np.take_along_axis(P, order, axis=1),
                               rtol=0, atol=1e-12)
    assert not np.array_equal(labels, fitted.predict_top_k(X, 5)[0])


def test_ranking_by_probability_gains_expected_precision_on_a_noisy_planted_model():
    """With much noise (``xi = 2``: ``alpha ~ 1 / 2``, ``beta ~ 1.1``) the score
    ``u + b`` weighs a label's popularity ``b`` half as much as the probit does: on the
    planted model, the expected precision at 5 of the labels ranked by probability,
    ``mean_i sum_{j in top 5} P*(y_ij = +1) / 5`` (exact probabilities: no sampling
    noise), is above the one ranked by score, and below the truth's own ranking. (A
    ranking by probability that ignored the thresholds' scale is the scores': equal.)"""
    xi = 2.0
    problem = SyntheticProblem(50, 40, 2, noise_std=xi, positive_rate=(0.05, 0.5), seed=2)
    model = OneBitMultiLabel(2, **PARAMS).fit(problem)
    X, labels, _ = problem.test_set()
    A, B = problem.truth
    truth = ndtr((X @ A @ B[labels].T + problem.truth_bias(0, problem.d2)[labels]) / xi)
    precision = {by: np.take_along_axis(truth, model.predict_top_k(X, 5, by=by)[0],
                                        axis=1).mean() for by in ("score", "proba")}
    oracle = np.sort(truth, axis=1)[:, -5:].mean()
    assert precision["score"] < precision["proba"] <= oracle, (precision, oracle)


def test_top_k_by_is_checked(fitted):
    X = PROBLEM.test_set()[0][:5]
    with pytest.raises(ValueError, match=r"by='probability' is not allowed: rank by 'score'"):
        fitted.predict_top_k(X, 2, by="probability")
    X_bits, labels, y = PROBLEM.draw(20, 2000)
    model = OneBitMultiLabel(2, **PARAMS).partial_fit(X_bits, labels, y, n_labels=PROBLEM.d2)
    with pytest.raises(AttributeError, match="calibration_"):
        model.predict_top_k(X, 2, by="proba")
