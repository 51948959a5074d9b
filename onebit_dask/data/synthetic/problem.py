r"""The synthetic one-bit single-label problem of docs/ALGORITHM.md section 1.

Everything is a pure function of ``(d1, d2, rank, flip, noise_std, positive_rate, seed)``:

* the truth ``W* = colnorm(U V^T) = A* B*^T`` from ``SeedSequence([seed, 2**32-1])``;
* the thresholds ``b*_j = Phi^{-1}(p_j)`` of the label priors ``p_j`` (``positive_rate``;
  zero for the paper's balanced model), a range's order from ``SeedSequence([seed, 2**32-5])``;
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
(PCG64); labels are ``sign(x^T w*_j + b*_j + noise_std g)`` flipped with probability
``flip``. The Gaussian noise is added to the unit-variance signal ``x^T w*_j``,
not to the ``sqrt(d2)``-scaled measurement of the paper's eq. (2).
"""

from __future__ import annotations

import dataclasses
from dataclasses import KW_ONLY, dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from scipy.special import ndtri

from ...utils.checks import show, check_choice, check_float, check_int, check_rank, check_seed
from .. import seeding
from ..seeding import (FULL_TAG, LABEL_SUBSET_TAG, PRIOR_ORDER_TAG, TEST_TAG, TRUTH_TAG,
                       label_blocks)
from ..shards import ShardKind, block_activation, block_scores, rows_of_bits
from ...ops.kernels import sign
from .conditional import draw_conditional_init, draw_conditional_step
from .draws import noisy_bits, span_basis
from .projected import draw_projected_init, draw_projected_step

SAMPLERS = ("conditional", "projected", "explicit")


TRUTH_CHUNK = 65_536  # rows of V* drawn (and normalised) at a time


def _truth_chunks(d1: int, d2: int, rank: int, seed: int, hi: int):
    """``U`` and the chunks of rows of ``B*`` up to row ``hi``, in order.

    ``V`` is drawn ``TRUTH_CHUNK`` rows at a time from the stream that drew ``U`` (NumPy's
    normals fill sequentially, so the chunks equal one draw of all ``d2`` rows), and each
    chunk is normalised on its own: a row's bits do not depend on who asks for it.
    """
    rng = seeding.rng(seed, TRUTH_TAG)
    U = rng.standard_normal((d1, rank))
    gram = U.T @ U
    yield U
    for a in range(0, min(hi, d2), TRUTH_CHUNK):
        V = rng.standard_normal((min(TRUTH_CHUNK, d2 - a), rank))
        norms = np.sqrt(np.einsum("ij,jk,ik->i", V, gram, V, optimize=True))
        yield V / norms[:, None]


def _read_only(*arrays):
    for a in arrays:
        a.setflags(write=False)
    return arrays


@lru_cache(maxsize=4)
def _truth(d1: int, d2: int, rank: int, seed: int):
    U, *chunks = _truth_chunks(d1, d2, rank, seed, d2)
    return _read_only(U, np.concatenate(chunks))


@lru_cache(maxsize=64)
def _truth_rows(d1: int, d2: int, rank: int, seed: int, lo: int, hi: int):
    """``(A*, B*[lo:hi])`` in ``O(hi k)`` time and ``O((hi - lo) k)`` memory."""
    chunks = _truth_chunks(d1, d2, rank, seed, hi)
    U = next(chunks)
    keep = []
    for a, B in zip(range(0, hi, TRUTH_CHUNK), chunks):
        if a + B.shape[0] > lo:
            keep.append(B[max(lo - a, 0): hi - a])
    return _read_only(U, np.concatenate(keep) if keep else np.empty((0, rank)))


def _check_rate(name: str, value) -> float:
    """A rate in the open interval ``(0, 1)`` (one message for every value outside it)."""
    try:
        rate = check_float(name, value, low=0.0, high=1.0, high_open=True)
    except ValueError:
        rate = 0.0
    if rate == 0.0:
        raise ValueError(f"{name}={show(value)} is not allowed: {name} must be in (0, 1)")
    return rate


def check_positive_rate(value):
    """``None``, a rate ``P`` in ``(0, 1)`` as a float, or a range ``(P_MIN, P_MAX)`` with
    ``0 < P_MIN <= P_MAX < 1`` as a tuple of floats."""
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"positive_rate={show(value)} is not allowed: give one rate P "
                             "in (0, 1) or a range (P_MIN, P_MAX) with 0 < P_MIN <= P_MAX < 1")
        low = _check_rate("positive_rate[0]", value[0])
        high = _check_rate("positive_rate[1]", value[1])
        if low > high:
            raise ValueError(f"positive_rate={show(value)} is not allowed: a range "
                             "(P_MIN, P_MAX) needs P_MIN <= P_MAX")
        return (low, high)
    return _check_rate("positive_rate", value)


def parse_positive_rate(value):
    """``positive_rate`` from the command line or a spec: ``none`` (or None), a rate
    ``P`` or a range ``P_MIN:P_MAX`` (text or numbers), checked by
    :func:`check_positive_rate`."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == "none":
            return None
        parts = text.split(":")
        try:
            numbers = [float(part) for part in parts]
        except ValueError:
            raise ValueError(f"positive_rate={value!r} is not allowed: give none, a rate P "
                             "in (0, 1) or a range P_MIN:P_MAX") from None
        value = tuple(numbers) if len(numbers) > 1 else numbers[0]
    return check_positive_rate(value)


@lru_cache(maxsize=2)
def _prior_order(d2: int, seed: int) -> np.ndarray:
    """The rank of each label's prior in a range (a seeded permutation of ``range(d2)``)."""
    order = seeding.rng(seed, PRIOR_ORDER_TAG).permutation(d2)
    return _read_only(order.astype(np.int32 if d2 < 2**31 else np.int64))[0]


def _priors(rate, d2: int, seed: int, labels: np.ndarray) -> np.ndarray:
    """The priors ``p_j`` of ``labels``: ``rate`` for a scalar; for a range, the values of
    ``np.geomspace(P_MIN, P_MAX, d2)`` in the order :func:`_prior_order`, computed for
    these labels only."""
    if not isinstance(rate, tuple):
        return np.full(labels.shape, rate)
    low, high = rate
    rank = _prior_order(d2, seed)[labels]
    frac = rank / max(d2 - 1, 1)
    return np.exp(np.log(low) + frac * (np.log(high) - np.log(low)))


class PlantedTruth(NamedTuple):
    """What a label block's task needs of a planted truth for the test metrics: the four
    numbers that draw its factors (:meth:`truth_rows`), not the problem."""

    d1: int
    d2: int
    rank: int
    seed: int

    def truth_rows(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """``(A*, B*[lo:hi])`` without forming all of ``B*`` (cached per process)."""
        return _truth_rows(self.d1, self.d2, self.rank, self.seed, lo, hi)


class TestSet(NamedTuple):
    """Held-out instances with noiseless labels on the evaluated labels."""

    X: np.ndarray  # (n_test, d1) float64
    labels: np.ndarray  # (n_eval,) the evaluated label indices
    Y: np.ndarray  # (n_test, n_eval) int8 in {-1, +1}: sign(X W*[:, labels] + b*[labels])


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

    kind = ShardKind.LABEL_BLOCK

    @property
    def label_range(self) -> tuple[int, int]:
        return self.lo, self.hi

    def bits(self):
        """``(X, labels, y, at)``: the explicitly drawn observations (``load()``), one row
        of ``X`` a bit (``at`` ``None``)."""
        return (*self.load(), None)

    def activate(self, model, B_rows, b_rows=None):
        """``(ActiveRows, n_active)`` of the explicitly drawn observations (:meth:`bits`)."""
        return block_activation(self.bits(), model, B_rows, self.lo, self.hi, b_rows)

    def scored(self, model, B_rows):
        """``(labels, y, s)``: the explicitly drawn observations scored by the model
        without thresholds (:func:`~onebit_dask.data.shards.block_scores`)."""
        return block_scores(self.bits(), model, B_rows, self.lo, self.hi)


class SyntheticShard(_BlockShard):
    """A shard of a :class:`SyntheticProblem`'s batch, drawn explicitly."""

    def load(self):
        """Draw ``(X, labels, y)``: ``X`` float32 ``(n_obs, d1)``, labels in ``[lo, hi)``."""
        p = self.source
        rng = seeding.rng(p.seed, self.t, self.s)
        X = rng.standard_normal((self.n_obs, p.d1), dtype=np.float32)
        labels = self.lo + rng.integers(0, self.hi - self.lo, size=self.n_obs, dtype=np.int64)
        return X, labels, p._labels_for(X, labels, rng)


class Projection(NamedTuple):
    """What a projected shard needs of the current model (computed once per step on the
    client): ``P`` orthonormal with ``span(P) ⊇ span([A*, A])``, ``P^T A*`` and ``P^T A``
    (``None`` for the initial batch, where ``span(P) = span(A*)``)."""

    P: np.ndarray
    PtA_true: np.ndarray
    PtA: np.ndarray | None


class ProjectedShard(_BlockShard):
    """A shard of a :class:`SyntheticProblem`'s batch, drawn by projected sampling
    (:mod:`.projected`) or conditional sampling (:mod:`.conditional`): only what the step
    uses, exact in law."""

    def activate(self, model, B_rows, b_rows=None):
        """:meth:`draw_active` with the model's projection."""
        return self.draw_active(model.projection, B_rows, b_rows, thresholded=model.thresholds)

    def draw_active(self, projection: Projection, B_rows=None, b_rows=None,
                    thresholded: bool = False):
        """``(ActiveRows, n_active)``: per-label sums of ``w_i x_i`` over the active rows
        (``w = y`` for the initial batch, ``r = y - sign(s)`` for a step, with the score
        ``s_i = x_i^T A B[j_i] + b[j_i]``; ``b_rows``, the model's thresholds of the
        block's labels, ``None`` for zeros).

        ``thresholded`` (the thresholded model): what
        :meth:`SyntheticShard.activate` gives for explicit rows, in law:
        the batch's :class:`~onebit_dask.thresholds.LabelCounts` in ``counts``, and for
        the initial batch the sums of the positive bits' rows in ``X`` and of the
        negative bits' in ``X_neg`` (every label with bits, unit weights)."""
        p = self.source
        rng = seeding.rng(p.seed, self.t, self.s)
        B_true = _truth_rows(p.d1, p.d2, p.rank, p.seed, self.lo, self.hi)[1]
        b_true = None if p.positive_rate is None else p.truth_bias(self.lo, self.hi)
        if projection.PtA is None:
            init = draw_conditional_init if p.sampler == "conditional" else draw_projected_init
            active = init(rng, self.n_obs, self.lo, self.hi, projection.P, projection.PtA_true,
                          B_true, p.flip, p.noise_std, b_true_rows=b_true,
                          thresholded=thresholded)
            return active, self.n_obs
        draw = draw_conditional_step if p.sampler == "conditional" else draw_projected_step
        return draw(rng, self.n_obs, self.lo, self.hi, projection.P, projection.PtA_true,
                    B_true, projection.PtA, B_rows, p.flip, p.noise_std,
                    b_true_rows=b_true, b_rows=b_rows, thresholded=thresholded)


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
    positive_rate : None, float or (float, float), default None
        The label priors ``p_j = P(clean bit of label j = +1)``: ``None`` is the paper's
        balanced model (``b* = 0``); a rate ``P`` in ``(0, 1)`` gives every label
        ``p_j = P``; a range ``(P_MIN, P_MAX)``, ``0 < P_MIN <= P_MAX < 1``, spreads
        ``np.geomspace(P_MIN, P_MAX, d2)`` over the labels in a seeded random order (so
        every label block mixes rare and frequent labels). The clean bit is
        ``sign(x^T w*_j + b*_j)`` with ``b*_j = Phi^{-1}(p_j)`` (:meth:`truth_bias`);
        Gaussian noise is added inside the sign, flips apply after it.
    seed : int, default 0
        Seed in ``[0, 2**32 - 1]`` of the truth, every batch and the test set.
    n_test : int, default 10000
        Size of the held-out test set.
    max_eval_labels : int, default 1000
        Above this many labels, a fixed seeded subset of this size is evaluated.
    sampler : {"conditional", "projected", "explicit"}, default "conditional"
        How a batch is simulated; all three give the step's ``H`` exactly the same law.
        ``"explicit"`` draws every observation's ``d1`` features. ``"projected"`` draws,
        for every observation, only its coordinates ``u = P^T x`` in a basis ``P`` of
        ``span([A*, A])`` (which decide its bit and its score), and whole feature vectors
        only where the step uses them, as per-label sums over the rows with a non-zero
        residual: the step's ``H`` has exactly the same law (:mod:`.projected`), at a cost
        of ``m * 3k`` normals plus ``d1`` per active label instead of ``m * d1``.
        ``"conditional"`` draws, per label, how many of its observations are active
        (binomial, from the angle between the truth and the model) and only the active
        rows' coordinates, from their conditional law: a step then costs ``O(d2)`` plus
        two numbers per active row plus ``d1`` per active label, whatever ``m``
        (:func:`.conditional.draw_conditional_step`; with thresholds, three
        numbers and a few evaluations of Owen's ``T`` per active row). The samplers give different
        draws of the same distribution; baselines, which need explicit features, always
        see explicit draws.
    """

    d1: int
    d2: int
    rank: int
    _: KW_ONLY
    flip: float = 0.0
    noise_std: float = 0.0
    positive_rate: float | tuple[float, float] | None = None
    seed: int = 0
    n_test: int = 10_000
    max_eval_labels: int = 1000
    sampler: str = "conditional"

    def __post_init__(self):
        d1 = check_int("d1", self.d1, low=1)
        d2 = check_int("d2", self.d2, low=1)
        fields = dict(
            d1=d1, d2=d2, rank=check_rank(self.rank, d1, d2),
            flip=check_float("flip", self.flip, low=0.0, high=0.5, high_open=True),
            noise_std=check_float("noise_std", self.noise_std, low=0.0),
            positive_rate=check_positive_rate(self.positive_rate),
            seed=check_seed("seed", self.seed),
            n_test=check_int("n_test", self.n_test, low=1),
            max_eval_labels=check_int("max_eval_labels", self.max_eval_labels, low=1),
            sampler=check_choice("sampler", self.sampler, SAMPLERS),
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

    def truth_rows(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """``(A*, B*[lo:hi])`` without forming all of ``B*`` (cached per process)."""
        return self.planted().truth_rows(lo, hi)

    def planted(self) -> PlantedTruth:
        """The truth's :class:`PlantedTruth`."""
        return PlantedTruth(self.d1, self.d2, self.rank, self.seed)

    def truth_bias(self, lo: int, hi: int) -> np.ndarray:
        """The thresholds ``b*_j = Phi^{-1}(p_j)`` of the labels ``[lo, hi)``, shape
        ``(hi - lo,)`` float64 (zeros for the balanced model), in ``O(hi - lo)`` memory
        (a range keeps its ``d2`` label order cached per process)."""
        return self._bias_at(np.arange(lo, hi))

    def _bias_at(self, labels: np.ndarray) -> np.ndarray:
        if self.positive_rate is None:
            return np.zeros(labels.shape)
        return ndtri(_priors(self.positive_rate, self.d2, self.seed, labels))

    def _labels_for(self, X, labels, rng) -> np.ndarray:
        lo, hi = int(labels.min(initial=0)), int(labels.max(initial=0)) + 1
        A, B = self.truth_rows(lo, hi)
        z = np.einsum("ij,ij->i", X @ A.astype(X.dtype), B[labels - lo].astype(X.dtype))
        if self.positive_rate is not None:
            z = z + self.truth_bias(lo, hi)[labels - lo]
        return noisy_bits(z, self.flip, self.noise_std, rng)

    def projection(self, A=None) -> Projection | None:
        """What projected shards need of the model ``A`` (``None``: the initial batch);
        ``None`` for the explicit sampler."""
        if self.sampler == "explicit":
            return None
        A_true = self.truth_rows(0, 0)[0]
        P = span_basis(A_true) if A is None else span_basis(A_true, A)
        return Projection(P, P.T @ A_true, None if A is None else P.T @ A)

    # -- batches ----------------------------------------------------------------
    def batch(self, t: int, batch_size: int, n_shards: int, sampler: str | None = None):
        """The shards of batch ``t``: ``min(n_shards, d2)`` label blocks, drawn by this
        problem's sampler (or ``sampler``)."""
        kind = SyntheticShard if (sampler or self.sampler) == "explicit" else ProjectedShard
        return [kind(self, *block) for block in label_blocks(self, t, batch_size, n_shards)]

    def draw(self, t: int, batch_size: int, n_shards: int = 1):
        """Batch ``t`` drawn in this process: ``(X, labels, y)`` concatenated in shard order."""
        return self.draw_batches([t], batch_size, n_shards)

    def draw_batches(self, batches, batch_size: int, n_shards: int = 1):
        """The given batches drawn in this process and concatenated in order (e.g.
        ``range(n_iter + 1)``: every observation a fit of ``n_iter`` steps uses)."""
        parts = [shard.load() for t in batches
                 for shard in self.batch(t, batch_size, n_shards, sampler="explicit")]
        return tuple(np.concatenate(arrays) for arrays in zip(*parts))

    # -- evaluation data ----------------------------------------------------------
    @property
    def eval_labels(self) -> np.ndarray:
        """All labels, or a fixed seeded subset of ``max_eval_labels`` of them."""
        if self.d2 <= self.max_eval_labels:
            return np.arange(self.d2)
        rng = seeding.rng(self.seed, LABEL_SUBSET_TAG)
        return np.sort(rng.choice(self.d2, size=self.max_eval_labels, replace=False))

    def test_set(self) -> TestSet:
        """``n_test`` fresh instances with noiseless labels ``sign(X W* + b*)`` on ``eval_labels``
        (read-only; it does not depend on the noise or the sampler, so the cells of a sweep
        that differ only in those share the last one drawn in a process, up to
        ``TEST_CACHE_LIMIT`` numbers)."""
        if self.n_test * self.d1 > TEST_CACHE_LIMIT:
            return _draw_test_set(self)
        return _cached_test_set(dataclasses.replace(self, flip=0.0, noise_std=0.0,
                                                    sampler="explicit"))

    def eval_truth(self) -> tuple[np.ndarray, np.ndarray]:
        """``(A*, B*[eval_labels])``, streaming through ``B*`` in ``O(TRUTH_CHUNK k)`` memory."""
        labels = self.eval_labels
        if self.d2 <= TRUTH_CHUNK:
            A, B = self.truth
            return A, B[labels]
        chunks = _truth_chunks(self.d1, self.d2, self.rank, self.seed, self.d2)
        A = next(chunks)
        rows = [B[labels[(labels >= a) & (labels < a + B.shape[0])] - a]
                for a, B in zip(range(0, self.d2, TRUTH_CHUNK), chunks)]
        return A, np.concatenate(rows)

    def full_observation(self, n: int):
        """The full-observation data set of the paper's Sec. 5.2.

        Returns ``X`` of shape ``(n, d1)`` and ``Y`` of shape ``(n, d2)`` (int8, every
        label of every instance, with this problem's noise and flips).
        """
        return _full_data(self, check_int("n", n, low=1))

    def _full_observation(self, n: int):
        rng = seeding.rng(self.seed, FULL_TAG)
        X = rng.standard_normal((n, self.d1))
        A, B = self.truth
        Z = (X @ A) @ B.T
        if self.positive_rate is not None:
            Z += self.truth_bias(0, self.d2)
        if self.noise_std > 0:
            Z += self.noise_std * rng.standard_normal(Z.shape)
        Y = sign(Z)
        if self.flip > 0:
            Y[rng.random(Y.shape) < self.flip] *= -1.0
        return X, Y.astype(np.int8)


TEST_CACHE_LIMIT = 10**7  # numbers of a test set's X kept for the next cell


TEST_LABEL_BYTES = 1 << 23  # float64 scores of the test labels computed at a time


def _draw_test_set(problem: SyntheticProblem) -> TestSet:
    """The test set; its labels are computed ``TEST_LABEL_BYTES`` of scores at a time, so
    that only the ``int8`` labels are held whole."""
    X = seeding.rng(problem.seed, TEST_TAG).standard_normal((problem.n_test, problem.d1))
    A, B = problem.eval_truth()
    XA = X @ A
    bias = None if problem.positive_rate is None else problem._bias_at(problem.eval_labels)
    Y = np.empty((X.shape[0], B.shape[0]), dtype=np.int8)
    step = max(1, TEST_LABEL_BYTES // (8 * max(1, B.shape[0])))
    for a in range(0, X.shape[0], step):
        Z = XA[a:a + step] @ B.T
        if bias is not None:
            Z += bias
        Y[a:a + step] = np.where(Z >= 0, 1, -1)
    return TestSet(X, problem.eval_labels, Y)


@lru_cache(maxsize=1)
def _cached_test_set(problem: SyntheticProblem) -> TestSet:
    return TestSet(*_read_only(*_draw_test_set(problem)))


@lru_cache(maxsize=2)
def _full_data(problem: SyntheticProblem, n: int):
    X, Y = problem._full_observation(n)
    X.setflags(write=False)
    Y.setflags(write=False)
    return X, Y


def uniform_pairs(seed: int, t: int, s: int, n: int, n_obs: int, lo: int, hi: int):
    """``n_obs`` pairs ``(row, label)``, rows uniform on ``[0, n)`` and labels uniform on
    ``[lo, hi)``, from ``SeedSequence([seed, t, s])`` (shard ``s`` of batch ``t``)."""
    rng = seeding.rng(seed, t, s)
    rows = rng.integers(0, n, size=n_obs, dtype=np.int64)
    labels = lo + rng.integers(0, hi - lo, size=n_obs, dtype=np.int64)
    return rows, labels


class FullObservationShard(_BlockShard):
    """A shard of a :class:`FullObservationProblem`'s batch: ``n_obs`` pairs ``(i, j)``,
    ``i`` uniform on the instances, ``j`` uniform on ``[lo, hi)``, drawn from
    ``SeedSequence([seed, t, s])``."""

    def pairs(self):
        return uniform_pairs(self.source.problem.seed, self.t, self.s, self.source.n,
                             self.n_obs, self.lo, self.hi)

    def load(self):
        X, Y = self.source.arrays()
        rows, labels = self.pairs()
        return X[rows], labels, Y[rows, labels].astype(np.float64)

    def bits(self):
        """``(X, labels, y, at)`` of the block's pairs, each instance read once where the
        pairs outnumber the instances (as a label matrix's,
        :func:`~onebit_dask.data.shards.rows_of_bits`)."""
        X, Y = self.source.arrays()
        rows, labels = self.pairs()
        X, at = rows_of_bits(X, rows)
        return X, labels, Y[rows, labels].astype(np.float64), at


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

    positive_rate = property(lambda self: self.problem.positive_rate)

    def truth_rows(self, lo: int, hi: int):
        return self.problem.truth_rows(lo, hi)

    def planted(self) -> PlantedTruth:
        return self.problem.planted()

    def truth_bias(self, lo: int, hi: int) -> np.ndarray:
        return self.problem.truth_bias(lo, hi)

    def eval_truth(self):
        return self.problem.eval_truth()

    def projection(self, A=None) -> None:
        """Full-observation batches are drawn from fixed instances: no projection."""
        return None

    def test_set(self) -> TestSet:
        return self.problem.test_set()

    def arrays(self):
        """``(X, Y)``: the ``n x d1`` instances and their ``n x d2`` labels (cached)."""
        return self.problem.full_observation(self.n)

    def batch(self, t: int, batch_size: int, n_shards: int) -> list[FullObservationShard]:
        return [FullObservationShard(self, *block)
                for block in label_blocks(self.problem, t, batch_size, n_shards)]
