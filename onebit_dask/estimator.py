"""The scikit-learn style estimator :class:`OneBitMultiLabel`."""

from __future__ import annotations

import contextlib
import contextvars
import time
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions

from . import metrics
from .features import KINDS as FEATURE_KINDS, check_feature_params, check_source, \
    fit_feature_map, project
from ._base import FactorPredictor
from ._validation import (RANDOM_STATE, as_generator, check_int, check_observations, check_rank,
                          validate_params)
from .algorithm import init_dense, init_randomized, step
from .engine import LocalEngine, make_engine
from .engine.blocks import Evaluation, StepModel, best_k, evaluation_pieces, rows_of, top_k
from .kernels import one_blas_thread, step_size
from . import persist
from .data.arrays import ArraySource
from .data.heldout import HeldOut
from .data.inputs import as_source
from .data.source import warn_if_cycling
from .persist import Checkpoint, fingerprint
from .progress import StepProgress
from .synthetic import FullObservationProblem, SyntheticProblem
from .validation_bits import ValidationBits, check_fraction

DENSE_INIT_LIMIT = 2_000_000  # entries of H0 that init_svd="auto" forms on the client (16 MB)
KEEP_LOCAL_LIMIT = 3_000_000  # label-side numbers (Q, V, B; 24 MB) gathered here after a fit
GATHER_LIMIT = 50_000_000  # label-side numbers Q_, V_ or B_ may gather
PICKLE_LIMIT = KEEP_LOCAL_LIMIT * 10  # label-side numbers (Q, V, B) pickling may gather (240 MB)

PARAMETER_CONSTRAINTS = {
    "rank": [Interval(Integral, 1, None, closed="left")],
    "batch_size": [Interval(Integral, 1, None, closed="left")],
    "n_iter": [Interval(Integral, 0, None, closed="left")],
    "step": [StrOptions({"paper", "averaged", "harmonic"})],
    "n_shards": [Interval(Integral, 1, None, closed="left")],
    "init_svd": [StrOptions({"auto", "dense", "randomized"})],
    "init_power_iter": [Interval(Integral, 0, None, closed="left")],
    "random_state": RANDOM_STATE,
    "engine": [StrOptions({"auto", "local", "dask"})],
    "eval_every": [Interval(Integral, 0, None, closed="left")],
    "progress": ["boolean"],
    "threshold": [StrOptions({"none", "estimated"})],
    "features": [StrOptions(set(FEATURE_KINDS))],
    "whiten_components": [Interval(Integral, 1, None, closed="left"), None],
    "validation_fraction": [None, Interval(Real, 0, 1, closed="right")],
}


def check_params(params: dict, d1: int, d2: int) -> None:
    """Check :class:`OneBitMultiLabel` parameters for data with ``d1`` features and ``d2``
    labels, before any work: the declared table (``_parameter_constraints``) and
    ``rank <= min(d1, d2)``.

    Parameters
    ----------
    params : dict
        Parameter names and values (those not given take their defaults), as
        ``get_params()`` returns them.
    d1, d2 : int

    Raises
    ------
    ValueError or TypeError
        Naming the parameter, its value and what is allowed.
    """
    unknown = sorted(set(params) - set(PARAMETER_CONSTRAINTS))
    if unknown:
        raise ValueError(f"{unknown[0]}={params[unknown[0]]!r} is not allowed: not a parameter "
                         f"of OneBitMultiLabel (choose from {', '.join(PARAMETER_CONSTRAINTS)})")
    validate_params(PARAMETER_CONSTRAINTS, params, "OneBitMultiLabel")
    check_feature_params(params.get("features", "none"), params.get("whiten_components"))
    if "rank" in params:
        check_rank(params["rank"], d1, d2)


_CLIENT = contextvars.ContextVar("onebit_dask_client", default=None)


@contextlib.contextmanager
def use_client(client):
    """Run the fits inside on ``client`` (``engine="auto"`` or ``"dask"``), in this thread
    or task only.

    Like ``client.as_current()``, without its change of dask's global scheduler setting,
    which threads entering and leaving it at once can leave behind (here, several threads
    each fit on the cluster).
    """
    token = _CLIENT.set(client)
    try:
        yield client
    finally:
        _CLIENT.reset(token)


def current_client():
    """The client of :func:`use_client`, else the current default ``distributed.Client``
    (``distributed.default_client()``), else ``None``. distributed is imported only here,
    and only if installed."""
    if _CLIENT.get() is not None:
        return _CLIENT.get()
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:  # no client
        return None


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
    step : {"paper", "averaged", "harmonic"}, default "paper"
        ``"paper"``: ``eta_t = 1`` (Algorithm 1). ``"averaged"``: ``eta_t = 1`` for
        ``t < 3``, then ``1 / (t - 1)``; averages batches so the error keeps
        falling under noise. ``"harmonic"``: ``eta_t = 1 / (t + 2)``, averaging from the
        first step (on real features, where a full step overshoots).
    n_shards : int, default 4
        Pieces each batch is split into (at most ``d2`` for synthetic problems).
        It fixes the data, not where they are computed: results do not depend on
        the number of workers.
    init_svd : {"auto", "dense", "randomized"}, default "auto"
        How the top-``k`` SVD of the first batch's ``H0`` is found. ``"dense"``:
        ``H0`` (``d1 x d2``) is summed in one pass over the batch and decomposed
        exactly. ``"randomized"``: matrix-free randomised subspace iteration on the
        dilation, ``O(k (d1 + d2))`` memory. ``"auto"``: dense when
        ``d1 * d2 <= 2 * 10**6`` (the client then holds a few ``d1 x d2`` arrays).
    init_power_iter : int, default 4
        Subspace iterations of the randomised initial SVD.
    random_state : int, RandomState, Generator or None
        Seeds the start block of the randomised initial SVD and, for a label matrix
        (``fit(X, Y)``), its batches: an int is their seed itself, anything else
        gives one int drawn from it (:func:`onebit_dask.data.inputs.batch_seed`).
        Problems and stores carry their own seeds or order.
    engine : {"auto", "local", "dask"}, default "auto"
        Where the shards are computed and the label blocks live. ``"local"``: in this
        process. ``"dask"``: on the workers of the current default Dask client (the
        last ``distributed.Client`` created, or the one of ``with client.as_current():``);
        an error without one. ``"auto"``: ``"dask"`` when there is a default client at
        ``fit``, else ``"local"``. The numbers are bit-identical either way. A fitted
        model pickles (its label blocks are gathered into the pickle), so it survives
        ``clone``, ``joblib`` and being sent to workers.
    eval_every : int, default 1
        With a problem's test set, record the metrics every ``eval_every``
        iterations and always at the last one; ``0``: only at the last one. The
        evaluation runs on the client between steps (on the Dask engine, while
        the workers already draw the next batch).
    progress : bool, default False
        Show a progress bar of the steps on stderr.
    threshold : {"none", "estimated"}, default "estimated"
        ``"none"``: the paper's model ``y = sign(x^T w_j)`` (Algorithm 1 as published).
        ``"estimated"``: per-label thresholds, scores ``x^T w_j + b_j``, with
        ``b_j = Phi^{-1}(p_j)`` for the label's share ``p_j`` of positive bits (a control
        variate on the step's residuals, averaged with the step size and shrunk towards
        the thresholds' common mean by an empirical-Bayes rule), the per-label step scale
        ``c_j = 1 / (2 n_j phi(b_j))`` from the label's own bits ``n_j`` in the batch, the
        power iteration on ``M diag(phi(b_j) / phi(0))``, and the initial batch's bits
        centred on each label's mean (``docs/ALGORITHM.md`` section 9). On balanced labels
        it gives the paper's errors; on rare labels the paper's model collapses.
    features : {"none", "standardize", "whiten"}, default "none"
        The feature map ``phi(x) = T^T D^{-1} (x - mu)`` the model is learned through,
        estimated once before the fit from the training features (every row of a label
        matrix, file or store; the observations' rows for ``fit(X, labels, bits)``;
        the first call's rows for ``partial_fit``) and applied through the factors: a
        sparse ``X`` stays sparse (``docs/ALGORITHM.md`` section 10). ``"none"``: the
        features as they are (the paper's setting). ``"standardize"``: each feature
        centred and divided by its deviation. ``"whiten"``: also the ``whiten_components``
        leading principal directions of the standardised features scaled to unit
        variance (exact up to 4096 features, ARPACK above). Real features need it: a
        full step assumes ``E[x x^T] = I`` and overshoots along their leading
        directions. Not with a planted problem (its features are ``N(0, I)``).
    whiten_components : int or None, default None
        With ``features="whiten"``: the directions whitened (``None``: ``min(d1, 200)``);
        not allowed with the other maps.
    validation_fraction : float in (0, 1] or None, default None
        Keep the best iterate on a validation split of the bits (``fit`` only;
        :mod:`onebit_dask.validation_bits`). The validation bits are the first
        ``ceil(validation_fraction * n_s)`` observations of each shard of batch
        ``n_iter + 1`` of the data (the batch after the training batches: a further
        ``validation_fraction * batch_size`` bits, none of the training bits), drawn
        once. After the initial batch and after every step, each label block scores its
        labels' validation bits; the fit returns the iterate with the best macro
        AUC on them (the mean of the labels' AUCs over the validation bits). While fitting, every
        label block keeps a copy of its best state (``Q``, ``V``, ``B``, thresholds):
        twice the label blocks' memory. ``None``: the last iterate. Not with
        ``checkpoint`` nor ``partial_fit``. A label matrix's validation pairs are of the
        training instances; when the bits cover its ``n x d2`` cells several times, pass
        observations whose rows after the training rows are of held-out instances.

    Attributes
    ----------
    feature_names_in_ : ndarray of str
        Column names of a DataFrame ``X`` given to ``fit``; ``predict`` then checks them.
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
    feature_map_ : FeatureMap or None
        The fitted map (:class:`onebit_dask.features.FeatureMap`: ``mean``, ``scale``,
        ``directions``, ``factors``); ``None`` for ``features="none"``. ``A_``, ``Q_``,
        ``V_`` and ``coef_`` live in the mapped space; every score is
        ``phi(x)^T W + b``.
    intercept_ : ndarray of shape (d2,)
        The thresholds ``b`` (zeros for ``threshold="none"``): scores are
        ``x^T W + b``.
    history_ : list of dict
        One entry per iteration (0 = after the initialisation): ``iteration``,
        ``n_samples``, ``n_active`` (observations with a non-zero residual),
        ``fit_s`` (cumulative training time), ``client_bytes`` (array bytes the
        client sent to and gathered from the label blocks in that iteration; 0
        in-process) and, when the data come with a test
        set, ``spectral_error``, ``frobenius_error``, ``hamming_loss``, ``auc``; with
        ``fit(..., eval_set=...)``, the held-out ranking metrics (``auc``,
        ``precision_at_k``, ``ndcg_at_k``, ``psp_at_k``, ``k = 1, 3, 5``); with
        ``validation_fraction``, ``validation_auc`` (the selection score: the mean of
        the labels' AUCs on the validation bits) and ``validation_pairs_auc`` (the same
        AUCs weighted by their pairs).
    best_iteration_ : int
        The iteration whose factors and thresholds the model holds (with
        ``validation_fraction``, the best by ``validation_auc``; else the last).
    validation_score_ : ndarray of shape (n_iter + 1,)
        ``validation_auc`` after each iteration (only with ``validation_fraction``).
    """

    def __init__(self, rank=3, *, batch_size=100_000, n_iter=10, step="paper", n_shards=4,
                 init_svd="auto", init_power_iter=4, random_state=None, engine="auto",
                 eval_every=1, progress=False, threshold="estimated", features="none",
                 whiten_components=None, validation_fraction=None):
        self.rank = rank
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.step = step
        self.n_shards = n_shards
        self.init_svd = init_svd
        self.init_power_iter = init_power_iter
        self.random_state = random_state
        self.engine = engine
        self.eval_every = eval_every
        self.progress = progress
        self.threshold = threshold
        self.features = features
        self.whiten_components = whiten_components
        self.validation_fraction = validation_fraction

    _parameter_constraints = PARAMETER_CONSTRAINTS

    # -- parameters -----------------------------------------------------------
    def _check_params(self, d1: int, d2: int) -> None:
        """The parameter table (``_validate_params``) and ``rank <= min(d1, d2)``."""
        self._validate_params()
        check_feature_params(self.features, self.whiten_components)
        check_rank(self.rank, d1, d2)

    def _make_engine(self):
        """The engine ``engine`` names: in-process, or on the current default client."""
        if self.engine == "local":
            return LocalEngine()
        client = current_client()
        if client is None and self.engine == "dask":
            raise ValueError("engine='dask' is not allowed without a Dask client: create one "
                             "(distributed.Client(...) becomes the default) or run inside "
                             "`with client.as_current():`, or pass engine='local' or 'auto'")
        return make_engine(client)

    # -- fitting ----------------------------------------------------------------
    def fit(self, X, Y=None, bits=None, *, n_labels=None, eval_set=None, checkpoint=None,
            checkpoint_every=None):
        """Learn from a problem's fresh batches, a label matrix or given observations.

        Parameters
        ----------
        X : SyntheticProblem, FullObservationProblem, str or os.PathLike, or array-like
            A problem streams ``n_iter + 1`` fresh batches of ``batch_size`` (for a
            :class:`FullObservationProblem`, pairs drawn from its ``n`` fully
            labelled instances) and records the test metrics in ``history_``. A path
            is an observations store (:mod:`onebit_dask.io`), read shard by shard
            where the shards run. Otherwise the features of single-label
            observations.
            where the shards run, or an XC/svmlight multi-label text file (read as a
            label matrix). Otherwise the features, ``(n, d1)``, dense or
            ``scipy.sparse`` (kept sparse: the cost of a step follows the batch's
            non-zeros).
        Y : array-like or scipy.sparse matrix of shape (n, d2), or of int of shape (n,)
            A 2-D 0/1 indicator (bool, int or float) is a label matrix: batch ``t``
            draws ``batch_size`` pairs ``(i, j)`` uniformly from the ``n x d2`` grid and
            observes ``y = 2 Y_ij - 1`` (the paper's Sec. 5.2 on these data,
            :mod:`onebit_dask.data.label_matrix`); the batches are seeded by
            ``random_state`` (an int seeds them as a :class:`FullObservationProblem`
            with that seed; ``None`` draws fresh ones). With ``bits``: the observed
            label of each row, in ``[0, d2)``.
        bits : array-like of shape (n,), optional
            The observed bit of each row: ``-1``/``+1``, ``0``/``1`` or booleans
            (single-label observations ``(X, Y, bits)``, used in order, ``batch_size``
            rows a batch).
        n_labels : int, optional
            ``d2`` of single-label observations; defaults to ``Y.max() + 1``.
        eval_set : tuple (X_test, Y_test), optional
            Held-out features (dense or sparse, ``d1`` columns) and their 0/1 label
            matrix (``d2`` columns): ``history_`` records, at each evaluated iteration,
            ``auc`` (macro over the labels with both classes in the test set),
            ``precision_at_k`` and ``ndcg_at_k`` for ``k = 1, 3, 5``, and, when a
            label matrix was fitted, ``psp_at_k`` (propensities of the training
            labels, Jain et al. 2016, ``A = 0.55``, ``B = 1.5``). Computed block by
            block where the label blocks live. Not with a problem (it has a test set).
        checkpoint : str or os.PathLike, optional
            A model store (:meth:`save`'s format) that receives the state every
            ``checkpoint_every`` iterations (and after the last), each label block
            written where it lives, atomically (a killed process leaves the previous
            checkpoint whole). If it holds a checkpoint of this same fit (same
            parameters apart from ``engine``, ``progress``, ``eval_every``, and the
            same data), the fit resumes after its last iteration and ends with the
            same factors as an uninterrupted fit; a checkpoint of another fit is
            refused. On Dask the workers must see the path.
        checkpoint_every : int, optional
            Iterations between checkpoints (default 1); only with ``checkpoint``.

        Returns
        -------
        self
        """
        if checkpoint is None and checkpoint_every is not None:
            raise ValueError(f"checkpoint_every={checkpoint_every!r} is not allowed without "
                             "checkpoint: pass checkpoint=PATH too, or drop checkpoint_every")
        self._set_feature_names(X)
        self._validate_params()  # the table, before the data are read
        source = as_source(X, Y, bits, n_labels=n_labels, random_state=self.random_state)
        self._check_params(source.d1, source.d2)
        check_source(self.features, source.planted)
        heldout = None
        if eval_set is not None:
            if source.planted is not None:
                raise TypeError("fit(problem) takes no eval_set: the problem's own test set "
                                "is evaluated")
            heldout = HeldOut(eval_set, source.d1, source.d2)
        if self.validation_fraction is not None and checkpoint is not None:
            raise ValueError(f"validation_fraction={self.validation_fraction!r} is not allowed "
                             "with checkpoint: a checkpoint does not hold the best iterate; "
                             "drop one of them")
        check_fraction(self.validation_fraction, self.n_iter, source, self.batch_size)
        warn_if_cycling(source, self.batch_size, self.n_iter + 1)
        data = source.identity()
        return self._fit_source(source, data, self._checkpoint(checkpoint, checkpoint_every,
                                                               data), heldout)

    def partial_fit(self, X, labels, y, *, n_labels=None):
        """One step on the batch ``(X, labels, y)`` (the first call initialises); ``X``
        dense or ``scipy.sparse``.

        ``n_labels`` (``d2``) is required on the first call; later calls may repeat it.

        Returns
        -------
        self
        """
        if self.validation_fraction is not None:
            raise ValueError(f"validation_fraction={self.validation_fraction!r} is not allowed "
                             "in partial_fit (it has no validation bits): pass "
                             "validation_fraction=None, or use fit")
        first = not hasattr(self, "A_")
        if first and n_labels is None:
            raise TypeError("n_labels=None is not allowed on the first call to partial_fit: "
                            "pass n_labels=d2, the number of labels")
        if not first:
            if n_labels is not None and n_labels != self.n_labels_:
                raise ValueError(f"n_labels={n_labels!r} is not allowed: this model was started "
                                 f"with n_labels={self.n_labels_}; pass the same number (or "
                                 "omit it), or fit a new model")
            n_labels = self.n_labels_
        X = self._validate_X(X, reset=first)
        X, labels, y, d2 = check_observations(X, labels, y, n_labels=n_labels)
        self._check_params(X.shape[1], d2)
        shards = ArraySource(X, labels, y, d2).batch(0, X.shape[0], self.n_shards)
        engine = self._make_engine()
        if first:
            self._start(X.shape[1], d2)
            self.feature_map_ = fit_feature_map(X, self.features, self.whiten_components,
                                                self._rng)
            engine.start(self._bounds)
        else:
            engine = self._blocks_on(engine)
        self._advance(engine, *self._prepare(engine, shards), None, None, None)
        self.best_iteration_ = self.n_steps_
        self._keep(engine)
        return self

    # -- internals ------------------------------------------------------------------
    def _checkpoint(self, path, every, data):
        """The fit's :class:`~onebit_dask.persist.Checkpoint` (checked now), or ``None``."""
        return None if path is None else Checkpoint(path, every, fingerprint(self, data))

    def _start(self, d1, d2):
        for attr in ("A_", "_top", "_blocks", "validation_score_"):
            self.__dict__.pop(attr, None)
        self.n_features_in_, self.n_labels_ = d1, d2
        self.n_steps_ = -1  # the first batch initialises
        self.n_samples_seen_ = 0
        self.history_ = []
        self._fit_s = 0.0
        self._data = None  # what fit ran on (saved with the model)
        self._rng = as_generator(self.random_state)
        n_blocks = min(self.n_shards, d2)
        self._bounds = [s * d2 // n_blocks for s in range(n_blocks + 1)]

    def _prepare(self, engine, shards):
        """The per-block data of a batch and its number of observations."""
        return engine.prepare(shards, self._bounds), sum(sh.n_obs for sh in shards)

    def _fit_source(self, source, data=None, checkpoint=None, heldout=None):
        if checkpoint is None:
            return self._run_source(source, data, None, heldout)
        with checkpoint:  # its one writer, from resume to the last write
            return self._run_source(source, data, checkpoint, heldout)

    def _run_source(self, source, data, checkpoint, heldout):
        self._start(source.d1, source.d2)
        self._data = data
        engine = self._make_engine()
        first = 0  # the first iteration to run
        if checkpoint is not None and checkpoint.resume(self, engine):
            first = self.n_steps_ + 1
        else:
            start = time.perf_counter()
            self.feature_map_ = None if self.features == "none" else fit_feature_map(
                source.features(), self.features, self.whiten_components, self._rng)
            self._fit_s += time.perf_counter() - start
            engine.start(self._bounds)
        source = source.place(engine, self._bounds)
        batches = lambda t: source.batch(t, self.batch_size, self.n_shards)  # noqa: E731
        problem, evaluation = source.planted, None
        if problem is not None:
            self._test_set = problem.test_set()
            evaluation = self._evaluations(problem, self._test_set.labels)
        ranking = None
        if heldout is not None:
            heldout.place(engine, self._bounds)
            ranking = (heldout, source.propensities())
        validation = None
        if self.validation_fraction is not None:
            validation = ValidationBits(source, self.n_iter + 1, self.batch_size, self.n_shards,
                                        self.validation_fraction)
            validation.place(engine, self._bounds)
        with StepProgress(self.n_iter + 1, enabled=self.progress) as bar:
            upcoming = self._prepare(engine, batches(first)) if first <= self.n_iter else None
            for t in range(first, self.n_iter + 1):
                current = upcoming
                if t < self.n_iter and engine.prefetches:
                    # the Dask engine loads batch t + 1 (user data) while step t runs
                    upcoming = self._prepare(engine, batches(t + 1))
                last = t == self.n_iter
                due = last or (self.eval_every and t % self.eval_every == 0)
                self._advance(engine, *current, source, evaluation if due else None,
                              ranking if due else None)
                del current
                if validation is not None:
                    self._validate(validation, engine)
                if checkpoint is not None and checkpoint.due(t, last):
                    checkpoint.write(self, engine)
                if t < self.n_iter and not engine.prefetches:
                    upcoming = self._prepare(engine, batches(t + 1))
                bar.update(self.history_[-1])
        self.best_iteration_ = self.n_steps_
        if validation is not None:
            self._select(validation, engine)
        self._keep(engine)
        return self

    def _validate(self, validation, engine) -> None:
        """Score the iterate on the validation bits (its time counts as training time)."""
        start = time.perf_counter()
        record = validation.update(engine, self.A_, self._top, self.n_steps_,
                                   self.feature_map_)
        self._fit_s += time.perf_counter() - start
        self.history_[-1].update(record, fit_s=self._fit_s)

    def _select(self, validation, engine) -> None:
        """Take back the best iterate the validation bits selected."""
        self.best_iteration_, top = validation.finish(engine, self.n_steps_)
        if top is not None:
            self._top = top
            self.A_ = top.Q
        self.validation_score_ = np.array([h["validation_auc"] for h in self.history_])

    def _advance(self, engine, data, n_obs, source, evaluation, ranking):
        """Initialise (first batch) or take one step, then record the iteration (with the
        planted truth's ``evaluation`` and the held-out ``ranking = (heldout,
        propensities)`` metrics when given)."""
        projection = (lambda A=None: None) if source is None else source.projection
        start = time.perf_counter()
        traffic = engine.bytes_sent + engine.bytes_received
        with one_blas_thread():  # small products: no thread start-up
            n_active, outs = self._update(engine, data, n_obs, projection, evaluation)
        self.n_steps_ += 1
        self.n_samples_seen_ += n_obs
        self._fit_s += time.perf_counter() - start
        record = {"iteration": self.n_steps_, "n_samples": self.n_samples_seen_,
                  "n_active": n_active, "fit_s": self._fit_s,
                  "client_bytes": engine.bytes_sent + engine.bytes_received - traffic}
        if evaluation is not None:
            record.update(self._metrics(source.planted, self._test_set, outs))
        if ranking is not None:
            with one_blas_thread():
                record.update(ranking[0].metrics(engine, self.A_, ranking[1],
                                                 self.feature_map_))
        self.history_.append(record)

    def _update(self, engine, data, n_obs, projection, evaluation):
        """The initialisation or one step; returns ``(n_active, the blocks' evaluation
        pieces)``."""
        d1, d2 = self.n_features_in_, self.n_labels_
        if self.n_steps_ < 0:
            model = StepModel(None, projection(None), self.threshold == "estimated",
                              self.feature_map_)
            if self._dense_init(d1, d2):
                self._top, outs = init_dense(engine, data, model, n_obs, d1, d2, self.rank,
                                             self._bounds, evaluation)
            else:
                self._top, outs = init_randomized(engine, data, model, n_obs, d1, d2, self.rank,
                                                  self._rng, self.init_power_iter, evaluation)
            n_active = n_obs
        else:
            eta = step_size(self.step, self.n_steps_)
            model = StepModel(self.A_, projection(self.A_), self.threshold == "estimated",
                              self.feature_map_)
            self._top, n_active, outs = step(engine, data, model, self._top, n_obs, d2, eta,
                                             evaluation)
        self.A_ = self._top.Q
        return n_active, outs

    def _metrics(self, problem, test_set, outs) -> dict:
        """The test metrics from the blocks' evaluation pieces (``[gram, B rows]`` each)."""
        gram = sum(o[0] for o in outs)
        B_eval = np.concatenate([o[1] for o in outs])
        b_eval = None if outs[0][2] is None else np.concatenate([o[2] for o in outs])
        return metrics.evaluate_factored(test_set, problem.truth_rows(0, 0)[0], self.A_, gram,
                                         B_eval, self.n_labels_, b_eval=b_eval)

    def _dense_init(self, d1: int, d2: int) -> bool:
        return self.init_svd == "dense" or (self.init_svd == "auto" and d1 * d2 <= DENSE_INIT_LIMIT)

    # -- where the label blocks live ----------------------------------------------------
    def _keep(self, engine) -> None:
        """Keep the blocks: in this process when they are small (the model outlives the
        client), else where they are (save the model before closing the client)."""
        small = self.n_labels_ * self.A_.shape[1] * 3 <= KEEP_LOCAL_LIMIT
        self._blocks = engine.local() if small else engine

    def _blocks_on(self, engine):
        """The fitted blocks, moved to ``engine`` if they live elsewhere."""
        held = self._live_blocks()
        if type(held) is type(engine) and getattr(held, "client", None) is getattr(
                engine, "client", None):
            return held
        if hasattr(engine, "adopt"):
            engine.adopt(held.blocks())
            return engine
        return held.local()

    def _live_blocks(self):
        self._check_fitted()
        blocks = self._blocks
        client = getattr(blocks, "client", None)
        if client is not None and client.status != "running":
            raise RuntimeError(
                f"this model's {len(blocks.handles)} label blocks lived on a Dask cluster that "
                "is gone (its client is closed): call save(path) before closing the client, "
                "or refit")
        return blocks

    def _label_rows(self, slot: str, labels=None) -> np.ndarray:
        """Rows of a label-side slot (``"Q"``, ``"V"``, ``"B"``), gathered block by block."""
        if labels is None:
            size = self.n_labels_ * self.A_.shape[1]
            if size > GATHER_LIMIT:
                raise MemoryError(
                    f"{slot}_ would gather {size} numbers ({self.n_labels_} labels x "
                    f"{self.A_.shape[1]}) into this process (> {GATHER_LIMIT}): use "
                    "decision_function(X, labels=...), predict_top_k(X, k) or save(path), "
                    "which work block by block")
        if labels is None:
            return np.concatenate(self._live_blocks().map(rows_of, slot))
        uniq, inverse = np.unique(labels, return_inverse=True)
        return np.concatenate(self._live_blocks().map(rows_of, slot, uniq))[inverse]

    @property
    def Q_(self) -> np.ndarray:
        """Orthonormal basis ``(d1 + d2, 2 rank)`` of the dilation (gathered)."""
        return np.vstack([self._top.Q, self._label_rows("Q")])

    @property
    def V_(self) -> np.ndarray:
        """``M_dil Q_`` of the last step, ``(d1 + d2, 2 rank)`` (gathered)."""
        return np.vstack([self._top.V, self._label_rows("V")])

    @property
    def B_(self) -> np.ndarray:
        """Label factor ``(d2, 2 rank)`` of ``W = A_ B_^T`` (gathered)."""
        self._check_fitted()
        return self._label_rows("B")

    def _B_rows(self, labels):
        return self._label_rows("B", labels)

    def _b_rows(self, labels=None):
        if self.threshold == "none":
            return 0.0
        return self._label_rows("b", labels)

    @property
    def intercept_(self) -> np.ndarray:
        """The thresholds ``b`` of shape ``(d2,)`` (zeros for ``threshold="none"``)."""
        self._check_fitted()
        b = self._b_rows()
        return np.zeros(self.n_labels_) if np.isscalar(b) else b

    def _project(self, X) -> np.ndarray:
        """``phi(X) A_`` (``X A_`` for ``features="none"``), through the fitted map."""
        return project(X, self.A_, self.feature_map_)

    def predict_top_k(self, X, k: int = 5):
        """The ``k`` labels with the highest scores ``x^T w_j`` for each row of ``X``,
        computed block by block where the label blocks live.

        Returns
        -------
        labels : ndarray of shape (n, k), int64
            Best first; ties go to the smaller label.
        scores : ndarray of shape (n, k)
        """
        self._check_fitted()
        k = check_int("k", k, low=1, high=self.n_labels_)
        XA = self._project(self._validate_X(X, reset=False))
        parts = self._live_blocks().map(top_k, XA, k)
        return best_k(np.hstack([p[0] for p in parts]), np.hstack([p[1] for p in parts]), k)

    def evaluate(self, problem) -> dict:
        """The test metrics of ``history_`` (``spectral_error``, ``frobenius_error``,
        ``hamming_loss``, ``auc``) on a problem's test set, computed block by block.

        Parameters
        ----------
        problem : SyntheticProblem or FullObservationProblem
            With ``d1 = n_features_in_`` and ``d2 = n_labels_``.
        """
        self._check_fitted()
        if not isinstance(problem, (SyntheticProblem, FullObservationProblem)):
            raise TypeError(f"problem={problem!r} is not allowed: pass a SyntheticProblem or "
                            "FullObservationProblem")
        if (problem.d1, problem.d2) != (self.n_features_in_, self.n_labels_):
            raise ValueError(f"problem has d1={problem.d1}, d2={problem.d2}, but the model was "
                             f"fitted with d1={self.n_features_in_}, d2={self.n_labels_}: "
                             "pass a problem of the same shape")
        check_source(self.features, problem)
        test_set = problem.test_set()
        outs = self._live_blocks().map(evaluation_pieces,
                                       per_block=self._evaluations(problem, test_set.labels))
        return self._metrics(problem, test_set, outs)

    def _evaluations(self, problem, labels) -> list:
        """One :class:`Evaluation` per label block: the evaluated labels it owns."""
        return [Evaluation(problem, labels[(labels >= lo) & (labels < hi)])
                for lo, hi in zip(self._bounds[:-1], self._bounds[1:])]

    # -- persistence -------------------------------------------------------------------------
    def save(self, path, *, overwrite=False) -> str:
        """Write the fitted model to a zarr (v3) store at ``path`` (no pickle).

        Each label block is written by the task that holds it (on Dask, by its worker:
        the path must be visible to the workers); the store appears at ``path`` only
        once it is whole. Layout: :mod:`onebit_dask.model_io`.

        Parameters
        ----------
        path : str or os.PathLike
        overwrite : bool, default False
            Replace a model store at ``path``; anything else there is never replaced.

        Returns
        -------
        str
            The absolute path of the store.
        """
        return persist.save(self, path, overwrite)

    @classmethod
    def load(cls, path, engine="auto"):
        """A model written by :meth:`save` (or a checkpoint of ``fit``).

        Parameters
        ----------
        path : str or os.PathLike
        engine : {"auto", "local", "dask"}, default "auto"
            Where the label blocks are read, as the constructor's ``engine``:
            ``"local"`` in this process; ``"dask"`` each block by a worker of the current
            default client (and kept there when the model is large); ``"auto"`` on the
            default client if there is one. The loaded model has this ``engine``.

        Returns
        -------
        OneBitMultiLabel
            Predicts exactly as the saved model (same ``A_``, ``B_``, scores).
        """
        return persist.load(cls, path, engine)

    # -- pickling ------------------------------------------------------------------------
    def __getstate__(self):
        """The state with the label blocks gathered into it, so that a model fitted on a
        cluster pickles and unpickles anywhere (in-process blocks). Refused above
        ``PICKLE_LIMIT`` label-side numbers: :meth:`save` writes those block by block."""
        state = dict(super().__getstate__())  # a copy: the model keeps its blocks where they are
        blocks = state.get("_blocks")
        if blocks is not None and not isinstance(blocks, LocalEngine):
            size = 3 * self.n_labels_ * self.A_.shape[1]
            if size > PICKLE_LIMIT:
                raise ValueError(
                    f"this model's label blocks hold {size} numbers (> {PICKLE_LIMIT}) on a "
                    "Dask cluster: pickling would gather them into this process; use "
                    "save(path) and OneBitMultiLabel.load(path), which work block by block")
            state["_blocks"] = self._live_blocks().local()
        return state
