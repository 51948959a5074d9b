r"""The synthetic one-bit single-label problem of ALGORITHM.md section 1.

Everything is a pure function of ``(d1, d2, rank, flip, noise_std, seed)``:

* the truth ``W* = colnorm(U V^T) = A* B*^T`` from ``SeedSequence([seed, 2**32-1])``;
* batch ``t`` (``t = 0`` initialises, step ``t`` uses batch ``t + 1``) is split into
  ``n_shards`` shards; shard ``s`` owns the contiguous label block
  ``[s d2 // S, (s+1) d2 // S)``, its observation count is multinomial (drawn from
  ``SeedSequence([seed, t, 2**32-1])``) and its data come from
  ``SeedSequence([seed, t, s])``, so a batch does not depend on who draws it;
* the test set from ``SeedSequence([seed, 2**32-2])``, the full-observation data set
  from ``SeedSequence([seed, 2**32-3])``.

(The tags sit at the top of the ``uint32`` range because ``SeedSequence`` pads with
zeros: ``SeedSequence([a, b])`` equals ``SeedSequence([a, b, 0])``.)

Features are float32 standard normals drawn with NumPy's default bit generator
(PCG64); labels are ``sign(x^T w*_j + noise_std g)`` flipped with probability
``flip``. The Gaussian noise is added to the unit-variance signal ``x^T w*_j``,
not to the ``sqrt(d2)``-scaled measurement of the paper's eq. (2).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ._validation import check_float, check_int, check_rank, check_seed
from .kernels import sign

TRUTH_TAG = 2**32 - 1
TEST_TAG = 2**32 - 2
FULL_TAG = 2**32 - 3
LABEL_SUBSET_TAG = 2**32 - 4
COUNT_TAG = 2**32 - 1


def _rng(*words: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(list(words)))


@lru_cache(maxsize=4)
def _truth(d1: int, d2: int, rank: int, seed: int):
    rng = _rng(seed, TRUTH_TAG)
    U = rng.standard_normal((d1, rank))
    V = rng.standard_normal((d2, rank))
    norms = np.sqrt(np.einsum("ij,jk,ik->i", V, U.T @ U, V, optimize=True))
    A, B = U, V / norms[:, None]
    A.setflags(write=False)
    B.setflags(write=False)
    return A, B


class TestSet(NamedTuple):
    """Held-out instances with noiseless labels on the evaluated labels."""

    X: np.ndarray  # (n_test, d1) float64
    labels: np.ndarray  # (n_eval,) the evaluated label indices
    Y: np.ndarray  # (n_test, n_eval) int8 in {-1, +1}: sign(X W*[:, labels])


def _label_blocks(problem, t, batch_size, n_shards):
    """``(t, s, n_obs, lo, hi)`` of each shard of batch ``t``: ``min(n_shards, d2)``
    contiguous label blocks with multinomial counts from ``[seed, t, 2**32-1]``."""
    t = check_int("t", t, low=0, high=2**31)
    m = check_int("batch_size", batch_size, low=1)
    S = min(check_int("n_shards", n_shards, low=1), problem.d2)
    bounds = [s * problem.d2 // S for s in range(S + 1)]
    counts = _rng(problem.seed, t, COUNT_TAG).multinomial(m, np.diff(bounds) / problem.d2)
    return [(t, s, int(counts[s]), bounds[s], bounds[s + 1]) for s in range(S)]


@dataclass(frozen=True)
class _BlockShard:
    """Shard ``s`` of batch ``t``: ``n_obs`` observations of the labels ``[lo, hi)`` of
    ``source``; small and picklable, its data are drawn where it is loaded."""

    source: object
    t: int
    s: int
    n_obs: int
    lo: int
    hi: int

    @property
    def label_range(self) -> tuple[int, int]:
        return self.lo, self.hi


class SyntheticShard(_BlockShard):
    """A shard of a :class:`SyntheticProblem`'s batch."""

    def load(self):
        """Draw ``(X, labels, y)``: ``X`` float32 ``(n_obs, d1)``, labels in ``[lo, hi)``."""
        p = self.source
        rng = _rng(p.seed, self.t, self.s)
        X = rng.standard_normal((self.n_obs, p.d1), dtype=np.float32)
        labels = self.lo + rng.integers(0, self.hi - self.lo, size=self.n_obs, dtype=np.int64)
        return X, labels, p._labels_for(X, labels, rng)


@dataclass(frozen=True)
class SyntheticProblem:
    """A planted rank-``rank`` model ``W*`` with unit-norm columns and its data.

    Parameters
    ----------
    d1, d2 : int
        Feature dimension and number of labels.
    rank : int
        Rank ``k`` of ``W*``, ``1 <= k <= min(d1, d2)``.
    flip : float, default 0
        Probability in ``[0, 0.5)`` that an observed bit is flipped.
    noise_std : float, default 0
        Standard deviation ``xi >= 0`` of Gaussian noise added to ``x^T w*_j``.
    seed : int, default 0
        Seed in ``[0, 2**32 - 1]`` of the truth, every batch and the test set.
    n_test : int, default 10000
        Size of the held-out test set.
    max_eval_labels : int, default 1000
        Above this many labels, a fixed seeded subset of this size is evaluated.
    """

    d1: int
    d2: int
    rank: int
    _: KW_ONLY
    flip: float = 0.0
    noise_std: float = 0.0
    seed: int = 0
    n_test: int = 10_000
    max_eval_labels: int = 1000

    def __post_init__(self):
        d1 = check_int("d1", self.d1, low=1)
        d2 = check_int("d2", self.d2, low=1)
        fields = dict(
            d1=d1, d2=d2, rank=check_rank(self.rank, d1, d2),
            flip=check_float("flip", self.flip, low=0.0, high=0.5, high_open=True),
            noise_std=check_float("noise_std", self.noise_std, low=0.0),
            seed=check_seed("seed", self.seed),
            n_test=check_int("n_test", self.n_test, low=1),
            max_eval_labels=check_int("max_eval_labels", self.max_eval_labels, low=1),
        )
        for key, value in fields.items():
            object.__setattr__(self, key, value)

    # -- the truth ------------------------------------------------------------
    @property
    def truth(self) -> tuple[np.ndarray, np.ndarray]:
        """Factors ``(A*, B*)`` of ``W* = A* B*^T``: shapes ``(d1, k)``, ``(d2, k)``."""
        return _truth(self.d1, self.d2, self.rank, self.seed)

    def W(self) -> np.ndarray:
        """The dense ``d1 x d2`` truth (for small problems and tests only)."""
        A, B = self.truth
        return A @ B.T

    def _labels_for(self, X, labels, rng) -> np.ndarray:
        A, B = self.truth
        z = np.einsum("ij,ij->i", X @ A.astype(X.dtype), B[labels].astype(X.dtype))
        z = z.astype(np.float64)
        if self.noise_std > 0:
            z += self.noise_std * rng.standard_normal(z.shape[0])
        y = sign(z)
        if self.flip > 0:
            y[rng.random(y.shape[0]) < self.flip] *= -1.0
        return y

    # -- batches ----------------------------------------------------------------
    def batch(self, t: int, batch_size: int, n_shards: int) -> list[SyntheticShard]:
        """The shards of batch ``t``: ``min(n_shards, d2)`` label blocks."""
        return [SyntheticShard(self, *block) for block in _label_blocks(self, t, batch_size,
                                                                         n_shards)]

    def draw(self, t: int, batch_size: int, n_shards: int = 1):
        """Batch ``t`` drawn in this process: ``(X, labels, y)`` concatenated in shard order."""
        return self.draw_batches([t], batch_size, n_shards)

    def draw_batches(self, batches, batch_size: int, n_shards: int = 1):
        """The given batches drawn in this process and concatenated in order (e.g.
        ``range(n_iter + 1)``: every observation a fit of ``n_iter`` steps uses)."""
        parts = [shard.load() for t in batches for shard in self.batch(t, batch_size, n_shards)]
        return tuple(np.concatenate(arrays) for arrays in zip(*parts))

    # -- evaluation data ----------------------------------------------------------
    @property
    def eval_labels(self) -> np.ndarray:
        """All labels, or a fixed seeded subset of ``max_eval_labels`` of them."""
        if self.d2 <= self.max_eval_labels:
            return np.arange(self.d2)
        rng = _rng(self.seed, LABEL_SUBSET_TAG)
        return np.sort(rng.choice(self.d2, size=self.max_eval_labels, replace=False))

    def test_set(self) -> TestSet:
        """``n_test`` fresh instances with noiseless labels ``sign(X W*)`` on ``eval_labels``."""
        X = _rng(self.seed, TEST_TAG).standard_normal((self.n_test, self.d1))
        labels = self.eval_labels
        A, B = self.truth
        return TestSet(X, labels, np.where((X @ A) @ B[labels].T >= 0, 1, -1).astype(np.int8))

    def full_observation(self, n: int):
        """The full-observation data set of the paper's Sec. 5.2.

        Returns ``X`` of shape ``(n, d1)`` and ``Y`` of shape ``(n, d2)`` (int8, every
        label of every instance, with this problem's noise and flips).
        """
        return _full_data(self, check_int("n", n, low=1))

    def _full_observation(self, n: int):
        rng = _rng(self.seed, FULL_TAG)
        X = rng.standard_normal((n, self.d1))
        A, B = self.truth
        Z = (X @ A) @ B.T
        if self.noise_std > 0:
            Z += self.noise_std * rng.standard_normal(Z.shape)
        Y = sign(Z)
        if self.flip > 0:
            Y[rng.random(Y.shape) < self.flip] *= -1.0
        return X, Y.astype(np.int8)


@lru_cache(maxsize=2)
def _full_data(problem: SyntheticProblem, n: int):
    X, Y = problem._full_observation(n)
    X.setflags(write=False)
    Y.setflags(write=False)
    return X, Y


class FullObservationShard(_BlockShard):
    """A shard of a :class:`FullObservationProblem`'s batch: ``n_obs`` pairs ``(i, j)``,
    ``i`` uniform on the instances, ``j`` uniform on ``[lo, hi)``, drawn from
    ``SeedSequence([seed, t, s])``."""

    def pairs(self):
        rng = _rng(self.source.problem.seed, self.t, self.s)
        rows = rng.integers(0, self.source.n, size=self.n_obs, dtype=np.int64)
        labels = self.lo + rng.integers(0, self.hi - self.lo, size=self.n_obs, dtype=np.int64)
        return rows, labels

    def load(self):
        X, Y = self.source.arrays()
        rows, labels = self.pairs()
        return X[rows], labels, Y[rows, labels].astype(np.float64)


@dataclass(frozen=True)
class FullObservationProblem:
    """The full-observation setting of the paper's Sec. 5.2: ``n`` training instances
    with every label observed (``problem.full_observation(n)``). A batch is
    ``batch_size`` pairs ``(instance, label)`` drawn uniformly with replacement, in
    the same label blocks as :class:`SyntheticProblem`; the test set and the truth
    are the problem's.
    """

    problem: SyntheticProblem
    n: int

    def __post_init__(self):
        object.__setattr__(self, "n", check_int("n_train", self.n, low=1))

    d1 = property(lambda self: self.problem.d1)
    d2 = property(lambda self: self.problem.d2)
    rank = property(lambda self: self.problem.rank)
    truth = property(lambda self: self.problem.truth)

    def test_set(self) -> TestSet:
        return self.problem.test_set()

    def arrays(self):
        """``(X, Y)``: the ``n x d1`` instances and their ``n x d2`` labels (cached)."""
        return self.problem.full_observation(self.n)

    def batch(self, t: int, batch_size: int, n_shards: int) -> list[FullObservationShard]:
        return [FullObservationShard(self, *block)
                for block in _label_blocks(self.problem, t, batch_size, n_shards)]
