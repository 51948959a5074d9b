"""The thresholded model (``threshold="estimated"``) fitted on every sampler of the
synthetic problem: the samplers are exact in law, so the fits' errors agree."""

import numpy as np
import pytest
import scipy.stats

from onebit_dask import OneBitMultiLabel, SyntheticProblem, sampling

SAMPLERS = ("conditional", "projected", "explicit")
N_SEEDS = 12
LEVEL = 0.01


def final_errors(sampler):
    """The final Frobenius error of ``N_SEEDS`` small thresholded fits (priors 2 %-30 %)."""
    return [OneBitMultiLabel(3, batch_size=3000, n_iter=4, step="averaged",
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


def test_the_fit_test_rejects_residuals_of_the_wrong_sign(errors, monkeypatch):
    """Power: conditional draws whose ``r_sum`` has the wrong sign (the thresholds then
    move away from the labels' shares) are told apart from the explicit fits at 1 %
    (Mann-Whitney)."""
    right = sampling._conditional_counts

    def wrong_sign(*args):
        counts = right(*args)
        return counts._replace(r_sum=-counts.r_sum)

    monkeypatch.setattr(sampling, "_conditional_counts", wrong_sign)
    wrong = final_errors("conditional")
    result = scipy.stats.mannwhitneyu(wrong, errors["explicit"])
    assert result.pvalue < LEVEL, (wrong, errors["explicit"])
    assert np.median(wrong) > np.median(errors["explicit"])
