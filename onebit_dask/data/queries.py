r"""Queries the learner chooses: which label of a row a batch asks about
(``OneBitMultiLabel(queries=...)``, ``docs/ALGORITHM.md`` section 11).

``"uniform"`` (the paper's) draws the pairs ``(i, j)`` uniformly from the ``n x d2``
grid of a label matrix. From batch ``warmup`` on, ``"popularity"`` and ``"model"`` draw
the ``m`` rows ``i`` uniformly, and for each row

* with probability ``explore`` a label uniformly from ``[0, d2)`` (exploration);
* otherwise a label uniformly from the ``top_k`` best labels of the row that were not
  asked about before, best by the positive bits found so far (``"popularity"``, the same
  order for every row) or by the current model's scores (``"model"``: each label's
  threshold at least that of a label the uniform batches never saw positive,
  :func:`unseen_share`). A row drawn
  ``c`` times in a batch gets ``c`` distinct such labels (without replacement); where it
  has fewer, the rest are explored.

:class:`Asked` keeps every pair asked and what it returned. Pure NumPy: the scores of
``"model"`` come from a ``candidates`` function the fit loop passes in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral

import numpy as np

from .seeding import QUERY_TAG, rng as stream

QUERIES = ("uniform", "popularity", "model")
"""``OneBitMultiLabel``'s ``queries`` values."""

WARMUP_SHARE = 0.6
"""``OneBitMultiLabel``'s default ``query_warmup``: the share of a fit's ``n_iter + 1``
batches drawn uniformly before the policy chooses (``docs/ALGORITHM.md`` section 11)."""


def warmup_batches(warmup, n_iter: int) -> int:
    """The uniform batches of a fit of ``n_iter + 1`` batches for ``query_warmup``: an int
    is the count itself; a share ``s`` in ``(0, 1)`` is ``max(1, floor(s (n_iter + 1) +
    1/2))`` (halves round up, not to even, so the count never hangs on its parity), at
    most ``n_iter`` when ``n_iter >= 1`` (a share leaves a batch to choose)."""
    if isinstance(warmup, Integral):
        return int(warmup)
    count = max(1, math.floor(float(warmup) * (n_iter + 1) + 0.5))
    return min(count, n_iter) if n_iter >= 1 else count


@dataclass(frozen=True)
class QueryPolicy:
    """A policy of :data:`QUERIES` and its knobs (``OneBitMultiLabel``'s ``queries``,
    ``query_top_k``, ``query_explore``, ``query_warmup``)."""

    kind: str = "uniform"
    top_k: int = 20
    explore: float = 0.1
    warmup: int = 1

    @property
    def uniform(self) -> bool:
        return self.kind == "uniform"

    def chooses(self, t: int) -> bool:
        """Whether batch ``t``'s labels are chosen (not uniform)."""
        return not self.uniform and t >= self.warmup


class Asked:
    """The pairs ``(i, j)`` asked so far, as sorted keys ``i d2 + j``, and the positive
    bits found per label.

    Parameters
    ----------
    d2 : int
        Labels.
    """

    def __init__(self, d2: int):
        self.d2 = int(d2)
        self.keys = np.empty(0, dtype=np.int64)
        self.found = np.empty(0, dtype=np.int64)  # the positive pairs' keys, sorted
        self.n_asked = 0  # every draw, repeats included

    def add(self, rows: np.ndarray, labels: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Record the pairs ``(rows, labels)`` and their bits ``y`` (``+1``: positive);
        returns which pairs are new (not asked before, and the first of their repeats in
        ``rows``), whose positives join the found pairs."""
        keys = rows.astype(np.int64) * self.d2 + labels
        new = np.zeros(keys.size, dtype=bool)
        new[np.unique(keys, return_index=True)[1]] = True
        new &= ~self.contains(rows, labels[:, None])[:, 0]
        self.keys = np.union1d(self.keys, keys)
        self.found = np.union1d(self.found, keys[new & (y > 0)])
        self.n_asked += keys.size
        return new

    @property
    def positives(self) -> np.ndarray:
        """The positive pairs found of each label, ``(d2,)``."""
        return np.bincount(self.found % self.d2, minlength=self.d2)

    def found_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, labels)`` of every positive pair found, sorted by row, then label."""
        return self.found // self.d2, self.found % self.d2

    def per_row(self, rows: np.ndarray) -> np.ndarray:
        """How many labels of each of ``rows`` were asked about."""
        lo = np.searchsorted(self.keys, rows.astype(np.int64) * self.d2)
        return np.searchsorted(self.keys, (rows.astype(np.int64) + 1) * self.d2) - lo

    def contains(self, rows: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """Whether each pair (``rows[:, None]``, ``labels``) was asked (same shape as
        ``labels``)."""
        keys = rows.astype(np.int64)[:, None] * self.d2 + labels
        if self.keys.size == 0:
            return np.zeros(keys.shape, dtype=bool)
        at = np.minimum(np.searchsorted(self.keys, keys), self.keys.size - 1)
        return self.keys[at] == keys

    def popular(self, k: int) -> np.ndarray:
        """The ``k`` labels with the most positive bits found, ties to the smaller label."""
        return np.argsort(-self.positives, kind="stable")[:k]


def unseen_share(positive_labels: np.ndarray, n_bits: int, d2: int) -> float:
    r"""The Good-Turing share of a label that ``n_bits`` uniform bits never saw positive
    (``docs/ALGORITHM.md`` section 11): a uniform bit is a positive of label ``j`` with
    probability ``p_j / d2``, and the chance that the next one is a positive of a label
    with no positive among the ``n_bits`` is about ``N_1 / n_bits`` (Good, 1953), ``N_1``
    the labels with exactly one positive among them; over the ``U_0`` labels with none
    that is the mean share ``N_1 d2 / (n_bits U_0)``.

    Parameters
    ----------
    positive_labels : ndarray of int
        The label of each positive bit among the uniform bits.
    n_bits : int
        The uniform bits, positive or not.
    d2 : int
        Labels.

    Returns
    -------
    float
        The share; 0 where no label was seen exactly once or every label was seen.
    """
    counts = np.bincount(np.asarray(positive_labels, dtype=np.int64), minlength=d2)
    n1, u0 = int(np.count_nonzero(counts == 1)), int(np.count_nonzero(counts == 0))
    if n1 == 0 or u0 == 0 or n_bits <= 0:
        return 0.0
    return min(1.0, n1 * d2 / (n_bits * u0))


def occurrence(inverse: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """For each draw of a row, how many earlier draws of the same row the batch holds
    (``inverse``, ``counts``: ``np.unique``'s of the drawn rows)."""
    order = np.argsort(inverse, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    out = np.empty(inverse.size, dtype=np.int64)
    out[order] = np.arange(inverse.size) - np.repeat(starts, counts)
    return out


def choose(policy: QueryPolicy, seed: int, t: int, n: int, m: int, asked: Asked,
           candidates) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Batch ``t``'s ``m`` chosen pairs (module docstring).

    Parameters
    ----------
    policy : QueryPolicy
        ``"popularity"`` or ``"model"``.
    seed, t : int
        The stream ``[seed, t, QUERY_TAG]`` draws the rows, the exploration and the
        choices, in this order, so the pairs depend only on it, ``asked`` and
        ``candidates``.
    n, m : int
        Rows of the data; pairs of the batch.
    asked : Asked
        The pairs asked in batches ``0, ..., t - 1``.
    candidates : callable
        ``candidates(rows, k)``: each of the distinct ``rows``' ``k`` best labels, best
        first, an ``(len(rows), k)`` int array (only called for ``"model"``).

    Returns
    -------
    rows, labels : ndarray of int64 of shape (m,)
    explored : ndarray of bool of shape (m,)
        The pairs whose label was drawn uniformly.
    """
    d2 = asked.d2
    g = stream(seed, t, QUERY_TAG)
    rows = g.integers(0, n, size=m, dtype=np.int64)
    explored = g.random(m) < policy.explore
    unique, inverse, counts = np.unique(rows, return_inverse=True, return_counts=True)
    k = int(min(d2, policy.top_k + asked.per_row(unique).max(initial=0)))
    if policy.kind == "model":
        cand = np.asarray(candidates(unique, k), dtype=np.int64)
    else:
        cand = np.broadcast_to(asked.popular(k), (unique.size, k))
    fresh = ~asked.contains(unique, cand)
    usable = fresh & (np.cumsum(fresh, axis=1) <= policy.top_k)  # the top_k best unasked
    keys = np.where(usable, g.random(cand.shape), 2.0)  # a uniform order of the usable
    shuffled = np.take_along_axis(cand, np.argsort(keys, axis=1, kind="stable"), axis=1)
    nth = np.zeros(m, dtype=np.int64)  # earlier chosen draws of the row in the batch
    mine = inverse[~explored]
    nth[~explored] = occurrence(mine, np.bincount(mine, minlength=unique.size))
    has = nth < usable.sum(axis=1)[inverse]
    labels = shuffled[inverse, np.minimum(nth, k - 1)]
    explored |= ~has
    labels[explored] = g.integers(0, d2, size=int(explored.sum()), dtype=np.int64)
    return rows, labels, explored
