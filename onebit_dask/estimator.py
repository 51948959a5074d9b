"""The scikit-learn style estimator :class:`OneBitMultiLabel`."""

from __future__ import annotations

import os
import time

from sklearn.base import BaseEstimator

from . import metrics
from ._base import FactorPredictor
from ._validation import (as_generator, check_choice, check_int, check_observations,
                          check_rank)
from .algorithm import initialise, initialise_dense, step
from .engine import LocalEngine
from .kernels import normalised_factors, step_size
from .io import ZarrSource
from .progress import StepProgress
from .sources import ArraySource, source_warn_if_cycling
from .synthetic import FullObservationProblem, SyntheticProblem

DENSE_INIT_LIMIT = 10_000_000  # entries of H0 that init_svd="auto" forms


class OneBitMultiLabel(FactorPredictor, BaseEstimator):
    r"""Low-rank multi-label model learned from one-bit, single-label feedback.

    Alternating power iteration on the Hermitian dilation (Algorithm 1 of Qiu,
    Luo, Ye, Lin), in factored form: the state is an orthonormal
    ``(d1 + d2) x 2k`` basis ``Q`` and ``V = M_dil Q``; the estimate is
    ``W = colnorm(Q[:d1] V[d1:]^T) = A B^T``. Each step uses a fresh batch of
    ``m`` observations ``(x_i, j_i, y_i)``:

    .. math::

        r_i = y_i - \mathrm{sign}(x_i^T W e_{j_i}), \quad
        H = \frac{d_2}{m \lambda} \sum_i r_i x_i e_{j_i}^T, \quad
        Q' = \mathrm{qr}((W + \eta_t H)_{dil} Q), \quad V' = (W + \eta_t H)_{dil} Q'.

    Memory is ``O(k (d1 + d2))`` plus one batch; a step costs ``O(m d1 k)``.

    Parameters
    ----------
    rank : int
        Rank ``k`` of the model, ``1 <= k <= min(d1, d2)``.
    batch_size : int, default 100000
        Observations ``m`` per batch (the initialisation uses one batch too).
    n_iter : int, default 10
        Steps ``T`` after the initialisation; ``fit`` uses ``T + 1`` batches.
    step : {"paper", "averaged"}, default "paper"
        ``"paper"``: ``eta_t = 1`` (Algorithm 1). ``"averaged"``: ``eta_t = 1`` for
        ``t < 3``, then ``1 / (t - 1)``; averages batches so the error keeps
        falling under noise.
    n_shards : int, default 4
        Pieces each batch is split into (at most ``d2`` for synthetic problems).
        It fixes the data, not where they are computed: results do not depend on
        the number of workers.
    init_svd : {"auto", "dense", "randomized"}, default "auto"
        How the top-``k`` SVD of the first batch's ``H0`` is found. ``"dense"``:
        ``H0`` (``d1 x d2``) is summed in one pass over the batch and decomposed
        exactly. ``"randomized"``: matrix-free randomised subspace iteration on the
        dilation, ``O(k (d1 + d2))`` memory. ``"auto"``: dense when
        ``d1 * d2 <= 10**7``.
    init_power_iter : int, default 4
        Subspace iterations of the randomised initial SVD.
    random_state : int, RandomState, Generator or None
        Seeds the start block of the randomised initial SVD (the only random
        choice of the estimator; the data carry their own seeds).
    client : distributed.Client or None
        ``None`` computes in this process; a client computes each shard on the
        Dask workers.
    eval_every : int, default 1
        With a problem's test set, record the metrics every ``eval_every``
        iterations and always at the last one; ``0``: only at the last one. The
        evaluation runs on the client between steps (on the Dask engine, while
        the workers already draw the next batch).
    progress : bool, default False
        Show a progress bar of the steps on stderr.

    Attributes
    ----------
    Q_ : ndarray of shape (d1 + d2, 2 rank)
        Orthonormal basis of the dilation.
    V_ : ndarray of shape (d1 + d2, 2 rank)
        ``M_dil Q_`` of the last step.
    A_, B_ : ndarray of shape (d1, 2 rank) and (d2, 2 rank)
        Factors of the estimate ``W = A_ @ B_.T`` (unit-norm columns).
    n_features_in_ : int
        ``d1``.
    n_labels_ : int
        ``d2``.
    n_steps_ : int
        Steps done after the initialisation.
    n_samples_seen_ : int
        Observations used, the initial batch included.
    history_ : list of dict
        One entry per iteration (0 = after the initialisation): ``iteration``,
        ``n_samples``, ``n_active`` (observations with a non-zero residual),
        ``fit_s`` (cumulative training time) and, when the data come with a test
        set, ``spectral_error``, ``frobenius_error``, ``hamming_loss``, ``auc``.
    """

    def __init__(self, rank=3, *, batch_size=100_000, n_iter=10, step="paper", n_shards=4,
                 init_svd="auto", init_power_iter=4, random_state=None, client=None,
                 eval_every=1, progress=False):
        self.rank = rank
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.step = step
        self.n_shards = n_shards
        self.init_svd = init_svd
        self.init_power_iter = init_power_iter
        self.random_state = random_state
        self.client = client
        self.eval_every = eval_every
        self.progress = progress

    # -- parameters -----------------------------------------------------------
    def _check_params(self, d1: int, d2: int) -> None:
        check_rank(self.rank, d1, d2)
        check_int("batch_size", self.batch_size, low=1)
        check_int("n_iter", self.n_iter, low=0)
        check_choice("step", self.step, ("paper", "averaged"))
        check_int("n_shards", self.n_shards, low=1)
        check_choice("init_svd", self.init_svd, ("auto", "dense", "randomized"))
        check_int("init_power_iter", self.init_power_iter, low=0)
        as_generator(self.random_state)
        check_int("eval_every", self.eval_every, low=0)

    def _engine(self):
        if self.client is None:
            return LocalEngine()
        from .dask_engine import DaskEngine

        return DaskEngine(self.client)

    # -- fitting ----------------------------------------------------------------
    def fit(self, X, labels=None, y=None, *, n_labels=None):
        """Learn from a problem's fresh batches or from given observations.

        Parameters
        ----------
        X : SyntheticProblem, FullObservationProblem, str or os.PathLike, or array-like
            A problem streams ``n_iter + 1`` fresh batches of ``batch_size`` (for a
            :class:`FullObservationProblem`, pairs drawn from its ``n`` fully
            labelled instances) and records the test metrics in ``history_``. A path
            is an observations store (:mod:`onebit_dask.io`), read shard by shard
            where the shards run. Otherwise the features of single-label
            observations.
        labels : array-like of int of shape (n,)
            Observed label index of each row, in ``[0, d2)``.
        y : array-like of shape (n,)
            The observed bit, ``-1`` or ``+1``.
        n_labels : int, optional
            ``d2``; defaults to ``labels.max() + 1``.

        Returns
        -------
        self
        """
        if isinstance(X, (SyntheticProblem, FullObservationProblem)):
            if labels is not None or y is not None or n_labels is not None:
                raise TypeError("fit(problem) takes no labels, y or n_labels: the problem "
                                "draws them")
            problem = X
            self._check_params(problem.d1, problem.d2)
            batches = lambda t: problem.batch(t, self.batch_size, self.n_shards)  # noqa: E731
            return self._fit_batches(batches, problem.d1, problem.d2, problem)
        if isinstance(X, (str, os.PathLike)):
            if labels is not None or y is not None or n_labels is not None:
                raise TypeError("fit(path) takes no labels, y or n_labels: the store holds them")
            check_int("batch_size", self.batch_size, low=1)
            source = ZarrSource(X, self.batch_size)
            self._check_params(source.d1, source.d2)
            source_warn_if_cycling(source, self.n_iter + 1)
            return self._fit_batches(lambda t: source.batch(t, self.n_shards), source.d1, source.d2)
        if labels is None or y is None:
            raise TypeError("fit(X, labels, y): labels and y are required with an array X")
        X, labels, y, d2 = check_observations(X, labels, y, n_labels=n_labels)
        self._check_params(X.shape[1], d2)
        source = ArraySource(X, labels, y, d2, self.batch_size)
        source_warn_if_cycling(source, self.n_iter + 1)
        return self._fit_batches(lambda t: source.batch(t, self.n_shards), X.shape[1], d2)

    def partial_fit(self, X, labels, y, *, n_labels=None):
        """One step on the batch ``(X, labels, y)`` (the first call initialises).

        ``n_labels`` (``d2``) is required on the first call.

        Returns
        -------
        self
        """
        first = not hasattr(self, "Q_")
        if first and n_labels is None:
            raise TypeError("n_labels=None is not allowed on the first call to partial_fit: "
                            "pass n_labels=d2, the number of labels")
        if not first:
            n_labels = self.n_labels_
        X, labels, y, d2 = check_observations(
            X, labels, y, n_labels=n_labels, n_features=None if first else self.n_features_in_)
        self._check_params(X.shape[1], d2)
        shards = ArraySource(X, labels, y, d2, X.shape[0]).batch(0, self.n_shards)
        if first:
            self._start(X.shape[1], d2)
        engine = self._engine()
        self._advance(engine, engine.load(shards), None)
        return self

    def _start(self, d1, d2):
        self.n_features_in_, self.n_labels_ = d1, d2
        self.n_steps_ = -1  # the first batch initialises
        self.n_samples_seen_ = 0
        self.history_ = []
        self._fit_s = 0.0
        self._rng = as_generator(self.random_state)

    def _fit_batches(self, batches, d1, d2, problem=None):
        self._start(d1, d2)
        for attr in ("Q_", "V_", "A_", "B_"):
            self.__dict__.pop(attr, None)
        engine = self._engine()
        evaluation = (problem.test_set(), problem.truth) if problem is not None else None
        with StepProgress(self.n_iter + 1, enabled=self.progress) as bar:
            upcoming = engine.load(batches(0))
            for t in range(self.n_iter + 1):
                loaded = upcoming
                # the Dask engine draws batch t + 1 on the workers while step t runs
                upcoming = engine.load(batches(t + 1)) if t < self.n_iter else None
                last = t == self.n_iter
                due = last or (self.eval_every and t % self.eval_every == 0)
                self._advance(engine, loaded, evaluation if due else None)
                del loaded
                bar.update(self.history_[-1])
        return self

    def _advance(self, engine, loaded, evaluation):
        """Initialise (first batch) or take one step, then record the iteration."""
        d1, d2 = self.n_features_in_, self.n_labels_
        start = time.perf_counter()
        if self.n_steps_ < 0 and self._dense_init(d1, d2):
            n_obs, S = engine.label_sums(loaded, d1, d2)
            self.Q_, self.V_ = initialise_dense(S, n_obs, d1, d2, self.rank)
            n_active = n_obs
        else:
            if self.n_steps_ < 0:
                batch = engine.open_batch(loaded, d1, d2)
                self.Q_, self.V_ = initialise(batch, d1, d2, self.rank, self._rng,
                                              self.init_power_iter)
            else:
                eta = step_size(self.step, self.n_steps_)
                batch = engine.open_batch(loaded, d1, d2, self.A_, self.B_)
                self.Q_, self.V_ = step(batch, self.Q_, self.A_, self.B_, d2, eta)
            batch.release()
            n_obs, n_active = batch.n_obs, batch.n_active
        self.A_, self.B_ = normalised_factors(self.Q_, self.V_, d1)
        self.n_steps_ += 1
        self.n_samples_seen_ += n_obs
        self._fit_s += time.perf_counter() - start
        record = {"iteration": self.n_steps_, "n_samples": self.n_samples_seen_,
                  "n_active": n_active, "fit_s": self._fit_s}
        if evaluation is not None:
            record.update(metrics.evaluate(evaluation[0], evaluation[1], self.A_, self.B_))
        self.history_.append(record)

    def _dense_init(self, d1: int, d2: int) -> bool:
        return self.init_svd == "dense" or (self.init_svd == "auto" and d1 * d2 <= DENSE_INIT_LIMIT)
