import numpy as np
import pytest

from onebit_dask.ops.kernels import LAMBDA
from onebit_dask.data.synthetic.problem import SyntheticProblem


def test_truth_is_rank_k_with_unit_columns():
    p = SyntheticProblem(20, 15, 3, seed=4)
    W = p.W()
    np.testing.assert_allclose(np.linalg.norm(W, axis=0), 1.0, rtol=1e-12)
    assert np.linalg.matrix_rank(W) == 3


def test_batch_is_the_same_whoever_draws_it():
    p = SyntheticProblem(10, 12, 2, flip=0.1, noise_std=0.2, seed=7)
    shards = p.batch(3, 1000, 4, sampler="explicit")
    forward = [sh.load() for sh in shards]
    backward = [sh.load() for sh in reversed(shards)][::-1]
    for a, b in zip(forward, backward):
        for x, z in zip(a, b):
            np.testing.assert_array_equal(x, z)
    assert sum(sh.n_obs for sh in shards) == 1000
    for sh, (X, labels, y) in zip(shards, forward):
        assert X.dtype == np.float32 and X.shape == (sh.n_obs, 10)
        assert labels.min() >= sh.lo and labels.max() < sh.hi
        assert set(np.unique(y)) <= {-1.0, 1.0}


def test_seeds_and_batches_differ():
    a = SyntheticProblem(10, 12, 2, seed=1)
    b = SyntheticProblem(10, 12, 2, seed=2)
    assert not np.array_equal(a.draw(0, 100)[0], b.draw(0, 100)[0])
    assert not np.array_equal(a.draw(0, 100)[0], a.draw(1, 100)[0])
    assert not np.array_equal(a.truth[0], b.truth[0])
    np.testing.assert_array_equal(a.draw(5, 100)[0], SyntheticProblem(10, 12, 2, seed=1).draw(5, 100)[0])


def test_noise_free_labels_are_signs_of_the_truth():
    p = SyntheticProblem(8, 6, 2, seed=3)
    X, labels, y = p.draw(0, 2000, 3)
    z = np.einsum("ij,ji->i", X.astype(np.float64), p.W()[:, labels])
    clear = np.abs(z) > 1e-4  # float32 features: signs agree away from zero
    np.testing.assert_array_equal(y[clear], np.where(z[clear] >= 0, 1.0, -1.0))


def test_flip_rate():
    clean = SyntheticProblem(8, 6, 2, seed=3).draw(0, 100_000)[2]
    noisy = SyntheticProblem(8, 6, 2, flip=0.2, seed=3).draw(0, 100_000)[2]
    rate = np.mean(clean != noisy)
    assert abs(rate - 0.2) < 5 * np.sqrt(0.2 * 0.8 / 100_000)


def test_gaussian_noise_agreement_rate():
    # P(sign(z) = sign(z + xi g)) = 1 - arctan(xi) / pi for z, g standard normal
    xi = 0.5
    clean = SyntheticProblem(8, 6, 2, seed=3).draw(0, 100_000)[2]
    noisy = SyntheticProblem(8, 6, 2, noise_std=xi, seed=3).draw(0, 100_000)[2]
    p = np.arctan(xi) / np.pi
    assert abs(np.mean(clean != noisy) - p) < 5 * np.sqrt(p * (1 - p) / 100_000)


def test_expected_initial_matrix_is_the_truth():
    """E[c sum_i y_i x_i e_{j_i}^T] = W* with c = d2 / (m lambda)."""
    p = SyntheticProblem(5, 3, 2, seed=8)
    m = 300_000
    X, labels, y = p.draw(0, m, 2)
    H0 = np.zeros((5, 3))
    for j in range(3):
        H0[:, j] = (y[labels == j, None] * X[labels == j]).sum(axis=0)
    H0 *= 3 / (m * LAMBDA)
    # each entry has standard deviation <= sqrt(d2 / m) / lambda
    assert np.abs(H0 - p.W()).max() < 5 * np.sqrt(3 / m) / LAMBDA


def test_test_set_and_label_subset():
    p = SyntheticProblem(6, 50, 2, n_test=30, max_eval_labels=10, seed=1)
    ts = p.test_set()
    assert ts.X.shape == (30, 6) and ts.labels.shape == (10,) and ts.Y.shape == (30, 10)
    np.testing.assert_array_equal(ts.Y, np.where(ts.X @ p.W()[:, ts.labels] >= 0, 1, -1))
    np.testing.assert_array_equal(ts.labels, p.eval_labels)  # fixed subset
    assert np.all(np.diff(ts.labels) > 0)


def test_full_observation_data():
    p = SyntheticProblem(6, 4, 2, seed=1)
    X, Y = p.full_observation(50)
    assert X.shape == (50, 6) and Y.shape == (50, 4) and Y.dtype == np.int8
    np.testing.assert_array_equal(Y, np.where(X @ p.W() >= 0, 1, -1))


def test_more_shards_than_labels_uses_one_shard_a_label():
    shards = SyntheticProblem(6, 3, 1).batch(0, 100, 8)
    assert [(sh.lo, sh.hi) for sh in shards] == [(0, 1), (1, 2), (2, 3)]


@pytest.mark.parametrize("kwargs, match", [
    (dict(d1=0, d2=5, rank=1), "d1=0"),
    (dict(d1=5, d2=5, rank=0), "rank=0"),
    (dict(d1=5, d2=3, rank=4), r"rank=4 .*min\(d1, d2\) = 3"),
    (dict(d1=5, d2=5, rank=1, flip=0.5), r"flip=0.5 .*\[0.0, 0.5\)"),
    (dict(d1=5, d2=5, rank=1, flip=-0.1), "flip=-0.1"),
    (dict(d1=5, d2=5, rank=1, noise_std=-1), "noise_std=-1"),
    (dict(d1=5, d2=5, rank=1, noise_std=float("nan")), "noise_std=nan"),
    (dict(d1=5, d2=5, rank=1, seed=-1), "seed=-1"),
    (dict(d1=5, d2=5, rank=1, seed=2**32), "seed=4294967296"),
])
def test_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SyntheticProblem(**kwargs)


def test_bad_types():
    with pytest.raises(TypeError, match="rank=2.5"):
        SyntheticProblem(5, 5, 2.5)
    with pytest.raises(TypeError, match="flip='a'"):
        SyntheticProblem(5, 5, 1, flip="a")


def test_full_observation_pairs_are_uniform():
    """Chi-square test (fixed seed) that batches draw (instance, label) pairs uniformly."""
    import scipy.stats

    from onebit_dask import FullObservationProblem

    data = FullObservationProblem(SyntheticProblem(5, 8, 2, seed=2), 25)
    counts = np.zeros((25, 8))
    for t in range(3):
        for shard in data.batch(t, 40_000, 3):
            rows, labels = shard.pairs()
            np.add.at(counts, (rows, labels), 1)
    assert counts.sum() == 120_000
    stat, p_value = scipy.stats.chisquare(counts.ravel())
    assert p_value > 1e-3, (stat, p_value)
    # and the bits are the fully observed labels of those pairs
    X_all, Y_all = data.arrays()
    shard = data.batch(0, 500, 3)[1]
    X, labels, y = shard.load()
    rows, _ = shard.pairs()
    np.testing.assert_array_equal(X, X_all[rows])
    np.testing.assert_array_equal(y, Y_all[rows, labels])


def test_full_observation_fit_recovers():
    from onebit_dask import FullObservationProblem, OneBitMultiLabel

    data = FullObservationProblem(SyntheticProblem(30, 12, 2, seed=1, n_test=500), 3000)
    est = OneBitMultiLabel(2, batch_size=6000, n_iter=5, random_state=0).fit(data)
    assert est.history_[-1]["auc"] > 0.98
    assert est.history_[-1]["frobenius_error"] < est.history_[0]["frobenius_error"]


# -- label priors: b*_j = Phi^{-1}(p_j) ---------------------------------------------------

# Draws of the balanced model recorded from the code before positive_rate existed (main at
# fd51f5d): (n_active, first active label sum's first two entries for a step, the same
# for the initial batch), for SyntheticProblem(6, 4, 1, seed=5, sampler=..., flip or
# noise_std=0.3), a model A = qr(N(0,1)^(6x2)), B = N(0,1)^(4x2) from default_rng(0),
# batch 1 (step) and 0 (initial), 500 observations, one shard.
BALANCED_BEFORE = {
    ("conditional", "flip"): (242, [-13.169324669, -48.179185939], [-7.453895919, -20.536242912]),
    ("conditional", "noise_std"): (209, [-5.019382296, -53.494187527],
                                   [-15.135226893, -43.270584634]),
    ("projected", "flip"): (213, [9.593098626, -25.374947225], [-19.326880852, -18.228958169]),
    ("projected", "noise_std"): (225, [7.78666307, -70.807824437], [16.851961003, -33.479558152]),
}


@pytest.mark.parametrize("sampler, noise", list(BALANCED_BEFORE))
def test_balanced_model_draws_what_it_drew_before_thresholds(sampler, noise):
    rng = np.random.default_rng(0)
    A = np.linalg.qr(rng.standard_normal((6, 2)))[0]
    Bm = rng.standard_normal((4, 2))
    p = SyntheticProblem(6, 4, 1, seed=5, sampler=sampler, **{noise: 0.3})
    n_active, step, init = BALANCED_BEFORE[sampler, noise]
    for b_rows in (None, np.zeros(4)):  # the model's thresholds fixed at 0: the same numbers
        active, n = p.batch(1, 500, 1)[0].draw_active(p.projection(A), Bm, b_rows)
        assert n == n_active
        np.testing.assert_allclose(active.X[0, :2], step, rtol=1e-9)
    active0, _ = p.batch(0, 500, 1)[0].draw_active(p.projection(None))
    np.testing.assert_allclose(active0.X[0, :2], init, rtol=1e-9)


def test_balanced_explicit_test_and_full_data_are_unchanged():
    """Recorded from the code before positive_rate (main at fd51f5d)."""
    p = SyntheticProblem(6, 4, 1, seed=5, flip=0.1, noise_std=0.5, n_test=5)
    X, labels, y = p.draw(2, 8)
    np.testing.assert_array_equal(X[0, :2], np.float32([1.717829704284668, -0.69756019115448]))
    np.testing.assert_array_equal(labels, [1, 1, 0, 3, 1, 2, 2, 3])
    np.testing.assert_array_equal(y, [1, -1, 1, 1, 1, 1, 1, 1])
    np.testing.assert_array_equal(p.test_set().Y, [[-1, -1, 1, 1], [-1, -1, 1, 1],
                                                   [1, 1, -1, -1], [-1, -1, 1, 1],
                                                   [-1, -1, 1, 1]])
    np.testing.assert_array_equal(p.full_observation(3)[1], [[-1, 1, 1, -1], [-1, -1, 1, 1],
                                                             [-1, 1, 1, 1]])
    assert not p.truth_bias(0, 4).any()


LEVEL = 0.01


def _positive_share_z(problem, m, priors):
    _, labels, y = problem.draw(0, m, 4)
    n = np.bincount(labels, minlength=problem.d2)
    pos = np.bincount(labels, weights=y > 0, minlength=problem.d2)
    return (pos / n - priors) / np.sqrt(priors * (1 - priors) / n)


@pytest.mark.parametrize("rate", [0.1, (0.02, 0.4)])
def test_priors_are_realised(rate):
    """The share of positive clean bits of each label matches ``p_j``: a binomial z-test
    per label at 1 % family-wise (Bonferroni over 40 labels); the same test rejects the
    priors placed in another order (its power)."""
    import scipy.stats
    from scipy.special import ndtr

    p = SyntheticProblem(8, 40, 2, positive_rate=rate, seed=3)
    priors = ndtr(p.truth_bias(0, 40))
    bound = scipy.stats.norm.ppf(1 - LEVEL / (2 * 40))
    z = _positive_share_z(p, 200_000, priors)
    assert np.all(np.abs(z) < bound), z
    if isinstance(rate, tuple):
        assert np.abs(_positive_share_z(p, 200_000, priors[::-1])).max() > bound
        np.testing.assert_allclose(np.sort(priors), np.geomspace(0.02, 0.4, 40), rtol=1e-12)


def test_a_range_mixes_every_label_block():
    """Every one of 4 label blocks holds priors from the lowest and the highest tenth."""
    p = SyntheticProblem(5, 1000, 1, positive_rate=(0.005, 0.3), seed=0)
    b = p.truth_bias(0, 1000)
    low, high = np.quantile(b, [0.1, 0.9])
    for shard in p.batch(0, 10, 4):
        block = p.truth_bias(shard.lo, shard.hi)
        np.testing.assert_array_equal(block, b[shard.lo:shard.hi])
        assert block.min() < low and block.max() > high
    other = SyntheticProblem(5, 1000, 1, positive_rate=(0.005, 0.3), seed=1).truth_bias(0, 1000)
    assert not np.array_equal(b, other) and np.array_equal(np.sort(b), np.sort(other))


def test_thresholds_enter_test_set_and_full_data():
    from scipy.special import ndtri

    p = SyntheticProblem(6, 50, 2, n_test=300, max_eval_labels=10, seed=1, positive_rate=0.2)
    np.testing.assert_array_equal(p.truth_bias(3, 7), np.full(4, ndtri(0.2)))
    ts = p.test_set()
    b = p.truth_bias(0, 50)
    np.testing.assert_array_equal(
        ts.Y, np.where(ts.X @ p.W()[:, ts.labels] + b[ts.labels] >= 0, 1, -1))
    X, Y = p.full_observation(400)
    np.testing.assert_array_equal(Y, np.where(X @ p.W() + b >= 0, 1, -1))
    assert 0.1 < np.mean(Y > 0) < 0.3
    X, labels, y = p.draw(0, 2000, 3)
    z = np.einsum("ij,ji->i", X.astype(np.float64), p.W()[:, labels]) + b[labels]
    clear = np.abs(z) > 1e-4
    np.testing.assert_array_equal(y[clear], np.where(z[clear] >= 0, 1.0, -1.0))


def test_positive_rate_is_part_of_the_problem():
    import dataclasses
    import json

    from onebit_dask import FullObservationProblem
    from onebit_dask.data.synthetic.source import problem_from

    a = SyntheticProblem(5, 5, 1, positive_rate=[0.01, 0.2])
    assert a.positive_rate == (0.01, 0.2) and hash(a) == hash(dataclasses.replace(a))
    assert a != SyntheticProblem(5, 5, 1) and "positive_rate=(0.01, 0.2)" in repr(a)
    saved = json.loads(json.dumps({"kind": "SyntheticProblem", **dataclasses.asdict(a)}))
    assert problem_from(saved) == a
    full = FullObservationProblem(a, 10)
    assert full.positive_rate == (0.01, 0.2)
    np.testing.assert_array_equal(full.truth_bias(0, 5), a.truth_bias(0, 5))


@pytest.mark.parametrize("value, match", [
    (0, r"positive_rate=0 is not allowed: positive_rate must be in \(0, 1\)"),
    (1.0, r"positive_rate=1.0 is not allowed: positive_rate must be in \(0, 1\)"),
    (-0.1, "positive_rate=-0.1"),
    (float("nan"), "positive_rate=nan"),
    ((0.3, 0.1), r"positive_rate=\(0.3, 0.1\) is not allowed: .*P_MIN <= P_MAX"),
    ((0.1,), r"positive_rate=\(0.1,\) is not allowed: give one rate"),
    ((0.0, 0.1), r"positive_rate\[0\]=0.0 is not allowed"),
])
def test_bad_positive_rate(value, match):
    with pytest.raises(ValueError, match=match):
        SyntheticProblem(5, 5, 1, positive_rate=value)


def test_parse_positive_rate():
    from onebit_dask.data.synthetic.problem import parse_positive_rate

    assert parse_positive_rate("none") is None and parse_positive_rate(None) is None
    assert parse_positive_rate("0.05") == 0.05 and parse_positive_rate(0.05) == 0.05
    assert parse_positive_rate("0.005:0.3") == (0.005, 0.3)
    with pytest.raises(ValueError, match="positive_rate='a:b' is not allowed"):
        parse_positive_rate("a:b")
    with pytest.raises(ValueError, match=r"positive_rate=\(0.1, 0.2, 0.3\)"):
        parse_positive_rate("0.1:0.2:0.3")
