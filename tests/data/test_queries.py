"""The query policies' draws (:mod:`onebit_dask.data.queries`) against their law: rows
uniform, a share ``explore`` of uniform labels, the rest uniform over each row's
``top_k`` best labels not asked before. Each statistical test has a fixed seed, the level
``ALPHA``, and a check that it rejects draws of a wrong law."""

import numpy as np
import pytest
from scipy import stats

from onebit_dask.data.queries import Asked, QueryPolicy, choose, occurrence

ALPHA = 1e-3
N, D2, M, K = 4000, 40, 3000, 5


def ranking(rows, k):
    """A fixed order of the labels for each row (the model's candidates)."""
    return (rows[:, None] * 7 + np.arange(k)[None, :] * 3) % D2


def asked_before():
    """Every row's second-best label asked, and one row's whole top ``K``."""
    asked = Asked(D2)
    rows = np.arange(N)
    second = ranking(rows, 2)[:, 1]
    asked.add(rows, second, np.where(rows % 3 == 0, 1.0, -1.0))
    asked.add(np.zeros(K + 1, dtype=np.int64), ranking(np.zeros(1, dtype=np.int64), K + 1)[0],
              -np.ones(K + 1))
    return asked


def draws(policy, t):
    asked = asked_before()
    rows, labels, explored = choose(policy, 7, t, N, M, asked, ranking)
    return asked, rows, labels, explored


def unasked_best(asked, rows):
    """Each row's ``K`` best labels not asked, as the policy defines them."""
    cand = ranking(rows, D2)
    fresh = ~asked.contains(rows, cand)
    return np.array([c[f][:K] for c, f in zip(cand, fresh)])


def positions(best, labels):
    """Where each label sits in its row's list (``-1``: not in it)."""
    hit = best == labels[:, None]
    return np.where(hit.any(axis=1), hit.argmax(axis=1), -1)


def chi2_uniform(counts) -> float:
    return stats.chisquare(counts).pvalue


def test_model_queries_are_uniform_over_the_best_unasked_labels():
    policy = QueryPolicy("model", top_k=K, explore=0.1)
    asked, rows, labels, explored = draws(policy, 3)
    chosen = ~explored
    # the exploration share: Binomial(M, 0.1) (rows without K unasked labels explored too)
    short = np.isin(rows, [0])
    assert stats.binomtest(int(explored[~short].sum()), int((~short).sum()),
                           0.1).pvalue > ALPHA
    # every chosen label is among its row's K best unasked; their positions are uniform
    best = unasked_best(asked, rows[chosen])
    pos = positions(best, labels[chosen])
    assert (pos >= 0).all()
    assert not asked.contains(rows[chosen], labels[chosen][:, None]).any()
    assert chi2_uniform(np.bincount(pos, minlength=K)) > ALPHA
    # the explored labels are uniform over the labels, the rows uniform over the rows
    assert chi2_uniform(np.bincount(labels[explored], minlength=D2)) > ALPHA
    assert chi2_uniform(np.bincount(rows % 20, minlength=20)) > ALPHA
    # the test rejects a wrong law: always the best unasked label, or the asked ones kept
    assert chi2_uniform(np.bincount(np.zeros(chosen.sum(), dtype=int), minlength=K)) < ALPHA
    kept = ranking(rows[chosen], K)
    wrong = kept[np.arange(kept.shape[0]), np.random.default_rng(0).integers(0, K, chosen.sum())]
    assert asked.contains(rows[chosen], wrong[:, None]).any()


def test_a_row_drawn_twice_gets_distinct_labels_and_a_short_row_is_explored():
    policy = QueryPolicy("model", top_k=2, explore=0.0)
    asked = Asked(D2)
    asked.add(np.array([1]), ranking(np.array([1]), 1)[0], np.array([1.0]))
    rows, labels, explored = choose(policy, 0, 1, 3, 300, asked, ranking)
    for i in range(3):
        mine = labels[(rows == i) & ~explored]
        assert mine.size == np.unique(mine).size <= 2
    assert explored.sum() == 300 - 6  # 3 rows, 2 chosen labels each; the rest explored


def test_popularity_orders_labels_by_the_positives_found():
    asked = Asked(D2)
    y = np.r_[np.ones(10), np.ones(7), -np.ones(3), np.ones(3), -np.ones(7)]
    asked.add(np.arange(30), np.repeat([4, 9, 2], 10), y)
    assert list(asked.popular(4)) == [4, 9, 2, 0]  # 10, 7, 3 positives, then ties by label
    policy = QueryPolicy("popularity", top_k=2, explore=0.0)
    rows, labels, explored = choose(policy, 0, 1, 1000, 500, asked, None)
    _, inverse, counts = np.unique(rows, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(explored, occurrence(inverse, counts) >= 2)  # a 3rd draw
    rows, labels = rows[~explored], labels[~explored]
    assert not asked.contains(rows, labels[:, None]).any()
    first = rows < 10  # asked about label 4: their two best unasked are 9 and 2
    assert set(labels[first]) <= {9, 2} and set(labels[rows >= 30]) <= {4, 9}


def test_the_draws_depend_on_the_seed_and_batch_only():
    policy = QueryPolicy("model", top_k=K, explore=0.2)
    a, b = draws(policy, 5), draws(policy, 5)
    for x, y in zip(a[1:], b[1:]):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(draws(policy, 6)[2], a[2])


def test_occurrence_counts_earlier_draws_of_a_row():
    rows = np.array([5, 3, 5, 5, 3, 9])
    _, inverse, counts = np.unique(rows, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(occurrence(inverse, counts), [0, 0, 1, 2, 1, 0])


def test_asked_counts_each_positive_pair_once():
    asked = Asked(D2)
    new = asked.add(np.array([1, 1, 2, 1]), np.array([3, 3, 3, 4]), np.ones(4))
    np.testing.assert_array_equal(new, [True, False, True, True])
    new = asked.add(np.array([2, 5]), np.array([3, 3]), np.ones(2))
    np.testing.assert_array_equal(new, [False, True])
    assert asked.positives[3] == 3 and asked.positives[4] == 1


def test_asked_membership_and_counts_against_a_set():
    rng = np.random.default_rng(1)
    asked, seen = Asked(D2), set()
    for _ in range(3):
        r, j = rng.integers(0, 50, 200), rng.integers(0, D2, 200)
        asked.add(r, j, rng.choice([-1.0, 1.0], 200))
        seen |= set(zip(r.tolist(), j.tolist()))
    rows = np.arange(50)
    cand = np.tile(np.arange(D2), (50, 1))
    want = np.array([[(i, j) in seen for j in range(D2)] for i in rows])
    np.testing.assert_array_equal(asked.contains(rows, cand), want)
    np.testing.assert_array_equal(asked.per_row(rows), want.sum(axis=1))


@pytest.mark.parametrize("explore", [0.0, 1.0])
def test_exploration_extremes(explore):
    policy = QueryPolicy("model", top_k=K, explore=explore)
    _, rows, labels, explored = draws(policy, 2)
    short = rows == 0
    assert explored[~short].all() if explore == 1.0 else not explored[~short].any()
