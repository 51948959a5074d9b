"""Baselines: planted recovery, LEML's monotone objective, a closed form, sweeps."""

import numpy as np
import pytest

from onebit_dask import SyntheticProblem, metrics
from onebit_dask.baselines import LEML, ColumnwiseOneBit, OneVsAll
from onebit_dask.ops.kernels import LAMBDA
from onebit_dask.sweep import run_sweep
from onebit_dask.sweep.spec import parse_spec
from onebit_dask.sweep.cube import open_cube

PROBLEM = SyntheticProblem(30, 15, 2, seed=3, n_test=2000)
N = 30_000


@pytest.fixture(scope="module")
def data():
    X, labels, y = PROBLEM.draw(0, N, 2)
    return X.astype(np.float64), labels, y


@pytest.fixture(scope="module")
def fits(data):
    return {name: est.fit(*data, n_labels=PROBLEM.d2) for name, est in
            [("colwise", ColumnwiseOneBit()), ("onevsall", OneVsAll()),
             ("leml", LEML(2, n_iter=6, random_state=0))]}


def score(est):
    return metrics.evaluate(PROBLEM.test_set(), PROBLEM.truth, est.A_, est.B_)


def test_colwise_error_matches_its_closed_form(fits):
    # w_hat_j = normalise(lambda w_j + noise), noise ~ N(0, (I - lambda^2 w w^T) / n_j):
    # ||w_hat_j - w_j||^2 ~ (d1 - 1) / (n_j lambda^2), n_j ~ N / d2
    expected = np.sqrt((PROBLEM.d1 - 1) * PROBLEM.d2 / (N * LAMBDA**2))
    got = score(fits["colwise"])["frobenius_error"]
    assert 0.8 * expected < got < 1.25 * expected


@pytest.mark.parametrize("name", ["colwise", "onevsall", "leml"])
def test_planted_recovery_beats_chance(fits, name):
    # chance: AUC 0.5, and a random unit column is at RMS distance sqrt(2) from w_j
    result = score(fits[name])
    assert result["auc"] > 0.95
    assert result["frobenius_error"] < 0.3


def test_low_rank_and_logistic_beat_the_column_mean(fits):
    colwise = score(fits["colwise"])["frobenius_error"]
    assert score(fits["leml"])["frobenius_error"] < colwise / 2  # the low-rank link pays
    assert score(fits["onevsall"])["frobenius_error"] < colwise


def test_leml_objective_decreases_monotonically(fits):
    objective = np.asarray(fits["leml"].objective_)
    assert len(objective) == 12
    assert np.all(np.diff(objective) <= 1e-9 * np.abs(objective[1:]))
    assert objective[-1] < objective[0]


def test_leml_picks_lambda_on_held_out_observations(fits):
    est = fits["leml"]
    assert set(est.validation_errors_) == {1e-2, 1.0, 1e2}
    assert est.lam_ == min(est.validation_errors_, key=lambda v: (est.validation_errors_[v], -v))
    fixed = LEML(2, lam=5.0, n_iter=2).fit(*PROBLEM.draw(0, 2000), n_labels=PROBLEM.d2)
    assert fixed.lam_ == 5.0 and fixed.validation_errors_ == {}


def test_bad_parameters(data):
    with pytest.raises(ValueError, match="rank=16 is not allowed"):
        LEML(16).fit(*data)
    with pytest.raises(ValueError, match="lam=-1.0 is not allowed"):
        LEML(2, lam=-1.0).fit(*data)
    with pytest.raises(ValueError, match="C=0.0 is not allowed"):
        OneVsAll(C=0.0).fit(*data)
    with pytest.raises(AttributeError, match="not fitted"):
        LEML().predict(data[0])


def test_baselines_in_a_sweep(tmp_path):
    spec = parse_spec("""
grid:
  method: [onebit, colwise_1bit, onevsall]
  d1: [20]
  d2: [10]
  rank: [2]
  step: [paper, averaged]
  batch_size: [2000]
  n_iter: [3]
fixed: {n_test: 300, n_shards: 2}
""")
    summary = run_sweep(spec, str(tmp_path / "b.zarr"), progress=False)
    assert (summary.total, summary.ran, summary.failed) == (4, 4, 0)
    ds = open_cube(str(tmp_path / "b.zarr")).load().squeeze()
    assert ds["done"].all()
    colwise = ds["frobenius_error"].sel({"estimator": "colwise_1bit"})
    # one value, at the last iteration, the same along step
    assert np.isnan(colwise.isel(iteration=slice(0, 3))).all()
    assert colwise.sel(step="paper", iteration=3) == colwise.sel(step="averaged", iteration=3)
    assert ds["n_samples"].sel({"estimator": "colwise_1bit", "step": "paper"}).isel(iteration=3) \
        == 4 * 2000
