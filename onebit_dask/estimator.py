"""The scikit-learn style estimator :class:`OneBitMultiLabel`: its parameters, data
checks and API. The fit loop is :mod:`onebit_dask.fitting`; where the label blocks live,
:mod:`onebit_dask.engine.placement`; saving and loading, :mod:`onebit_dask.persist`."""

from __future__ import annotations

from dataclasses import replace
from functools import cache, partial
from numbers import Integral, Real
from typing import Any, NamedTuple

import numpy as np
from scipy.special import ndtr
from sklearn.base import BaseEstimator
from sklearn.metrics import roc_auc_score
from sklearn.utils.metaestimators import available_if
from sklearn.utils._param_validation import Interval, RealNotInt, StrOptions

from .fit import loop as fitting
from .fit.state import FitSettings, new_state, restored
from .base import FactorPredictor
from .utils.checks import check_int, check_rank
from .utils.validation import (RANDOM_STATE, check_features, check_observations,
                               validate_params)
from .data.arrays import ArraySource
from .fit import evaluation
from .fit.evaluation import HeldOut
from .ops.thresholds import THRESHOLDS
from .data.dask_inputs import check_not_a_task_key
from .data.inputs import as_source
from .data.label_matrix import (LabelMatrixSource, binary_target, check_label_count,
                                check_label_matrix, drawn_pairs, is_one_dimensional)
from .data.source import warn_if_cycling
from .engine import LocalEngine, placement, topk
from .engine.blocks import evaluation_pieces
from .engine.placement import use_client
from .io.stores import paths
from .fit.steps import RULES, STEPS
from .ops.features import KINDS as FEATURE_KINDS, check_feature_params, check_source, project
from .data.synthetic.problem import FullObservationProblem, SyntheticProblem
from .fit.validation import check_fraction
from .data.queries import QUERIES, WARMUP_SHARE

__all__ = ["OneBitMultiLabel", "check_params", "use_client"]

PICKLE_LIMIT = placement.KEEP_LOCAL_LIMIT * 10  # label-side numbers pickling may gather (240 MB)

PARAMETER_CONSTRAINTS = {
    "rank": [Interval(Integral, 1, None, closed="left")],
    "batch_size": [Interval(Integral, 1, None, closed="left")],
    "n_iter": [Interval(Integral, 0, None, closed="left")],
    "step": [StrOptions(set(STEPS))],
    "n_shards": [Interval(Integral, 1, None, closed="left")],
    "init_svd": [StrOptions({"auto", "dense", "randomized"})],
    "init_power_iter": [Interval(Integral, 0, None, closed="left")],
    "random_state": RANDOM_STATE,
    "engine": [StrOptions({"auto", "local", "dask"})],
    "eval_every": [Interval(Integral, 0, None, closed="left")],
    "progress": ["boolean"],
    "threshold": [StrOptions(set(THRESHOLDS))],
    "features": [StrOptions(set(FEATURE_KINDS))],
    "whiten_components": [Interval(Integral, 1, None, closed="left"), None],
    "validation_fraction": [None, Interval(Real, 0, 1, closed="right")],
    "queries": [StrOptions(set(QUERIES))],
    "query_top_k": [Interval(Integral, 1, None, closed="left")],
    "query_explore": [Interval(Real, 0, 1, closed="left")],
    "query_warmup": [Interval(Integral, 1, None, closed="left"),
                     Interval(RealNotInt, 0, 1, closed="neither")],
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
    check_feature_params(params.get("features", "auto"), params.get("whiten_components"))
    if "rank" in params:
        check_rank(params["rank"], d1, d2)


class _Prepared(NamedTuple):
    """A fit checked before any work (:meth:`OneBitMultiLabel._prepare`)."""

    source: Any
    settings: Any
    heldout: Any
    checkpoint: Any
    data: dict


def _has_link(estimator) -> bool:
    """Whether ``predict_proba`` is offered: before a fit (it then says "not fitted"), and
    after a fit that fitted the link (``calibration_``), not after ``partial_fit`` alone, a
    checkpoint or a store without it; scikit-learn's scorers then use the scores."""
    state = estimator.__dict__.get("_state")
    if state is not None and state.top is not None:
        estimator.calibration_  # without a link: the AttributeError that says why (the cause)
    return True


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
    step : {"auto", "paper", "averaged", "harmonic", "moment", "refine", "select", \
            "pooled"}, default "auto"
        The step. ``"paper"``, ``"averaged"`` and ``"harmonic"`` correct ``W`` by the
        residuals of the bits it gets wrong (Algorithm 1) with the step size
        ``eta_t``: ``"paper"`` 1; ``"averaged"`` 1 for ``t < 3``, then
        ``1 / (t - 1)``, which averages batches so the error keeps falling under
        noise; ``"harmonic"`` ``1 / (t + 2)``, averaging from the first step.
        ``"moment"``: ``M_t = (1 - eta_t) P_A M_{t-1} + eta_t H_t`` with
        ``eta_t = 1 / (t + 2)``, ``P_A M_{t-1} = A_ V_[d1:]^T`` the last iterate before
        its column normalisation and ``H_t`` the initial estimate of the step's batch
        (every bit, centred on its label's share): the initial estimate pooled over the
        batches in ``O(k (d1 + d2))`` memory (``docs/ALGORITHM.md`` section 9c).
        ``"pooled"``: step ``t`` is the initial estimate of batches ``0..t + 1`` as one
        batch (their per-label sums kept with the label blocks, the ridge map's
        ``lambda`` re-estimated from them), warm started from the last iterate: the
        pooled estimate without ``"moment"``'s truncation, in memory the pooled sums
        (section 9f). Not in ``partial_fit``.
        ``"refine"``: pooled steps for ``t < n_iter // 2``, then residual steps with
        ``eta_t = 1 / (t + 2)`` and each label's residuals scaled by its own count of
        bits only (no Gaussian ``e^{b_j^2 / 2}``; section 9d; where it does better than
        ``"moment"`` and where worse: EXPERIMENTS.md, "Step rules on real data").
        ``"select"``: ``"refine"``'s pooled steps, then from iteration
        ``n_iter // 2 + 1`` both ``"pooled"``'s and ``"refine"``'s steps side by side,
        each branch scoring every batch's bits before it steps on them (progressive
        validation: the macro AUC of bits it has not used); ``fit`` keeps the branch
        with the better mean score, and its history (section 9e,
        :mod:`onebit_dask.fit.select`). Costs both branches' steps and twice the label
        blocks' memory from the fork on; no checkpoint is written between the fork
        and the last iteration. Not in ``partial_fit``, nor with
        ``validation_fraction``, nor with a problem's projected or conditional sampler.
        ``"auto"``: ``"paper"`` on a planted problem (where the model holds) and when
        ``partial_fit`` continues a fit of one; on data (arrays, label matrices, stores
        and files) ``"select"`` in ``fit``, ``"moment"`` in ``partial_fit`` and with
        ``validation_fraction`` (why: EXPERIMENTS.md, "Step rules on real data").
        The rules are the entries of :data:`onebit_dask.fit.steps.RULES`.
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
    threshold : {"auto", "none", "estimated", "shares"}, default "auto"
        ``"none"``: the paper's model ``y = sign(x^T w_j)`` (Algorithm 1 as published).
        ``"estimated"``: per-label thresholds, scores ``x^T w_j + b_j``, with
        ``b_j = Phi^{-1}(p_j)`` for the label's share ``p_j`` of positive bits (a control
        variate on the step's residuals, averaged with the step size and shrunk towards
        the thresholds' common mean by an empirical-Bayes rule), the per-label step scale
        ``c_j = 1 / (2 n_j phi(b_j))`` from the label's own bits ``n_j`` in the batch, the
        power iteration on ``M diag(phi(b_j) / phi(0))``, and the initial batch's bits
        centred on each label's mean ``Phi(b_j)`` (``docs/ALGORITHM.md`` section 9). On
        balanced labels it gives the paper's errors; on rare labels the paper's model
        collapses. ``"shares"``: the same model for observed data, whose features have a
        mean and whose labels are not exchangeable: the bits of the initial batch and of
        the moment steps centred on each label's own share of the batch (the initial and
        moment estimates do not change when a constant is added to every ``x``), and the
        thresholds not shrunk (their spread is the labels' popularity). ``"auto"``:
        ``"estimated"`` on a planted problem, ``"shares"`` on data. With ``"estimated"`` on
        sparse data give ``features="none"`` or ``"standardize"``: its steps depend on
        the centring of the (centred) ridge map, measured to collapse there
        (EXPERIMENTS.md, "Extreme label counts").
    features : {"auto", "none", "standardize", "ridge", "whiten"}, default "auto"
        The feature map ``phi(x) = T^T D^{-1} (x - mu)`` the model is learned through,
        estimated before the fit from the training features (every row of a label
        matrix, file or store; the observations' rows for ``fit(X, labels, bits)``;
        the first call's rows for ``partial_fit``) and applied through the factors: a
        sparse ``X`` stays sparse (``docs/ALGORITHM.md`` section 10). ``"none"``: the
        features as they are (the paper's setting). ``"standardize"``: each feature
        centred and divided by its deviation. ``"ridge"``: each feature centred and
        divided by ``sqrt(var_f + lambda)``, with the empirical-Bayes ridge
        ``lambda`` of the initial batch's bits (section 10b), estimated again from all
        the bits so far at each pooled step (section 9f): a feature seen in few rows is
        not blown up by its small variance. ``"whiten"``: also the
        ``whiten_components`` leading principal directions of the standardised features
        scaled to unit variance (exact up to 4096 features, ARPACK above). ``"auto"``:
        ``"none"`` on a planted problem (its features are ``N(0, I)``), else
        ``"standardize"`` for dense features (more than 1/8 of the entries non-zero)
        and ``"ridge"`` for sparse ones. Real features need a map: a full step assumes
        ``E[x x^T] = I``. Only ``"none"`` and ``"auto"`` with a planted problem.
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
    queries : {"uniform", "popularity", "model"}, default "uniform"
        Which pairs ``(i, j)`` of a label matrix (``fit(X, Y)``, an XC file) a batch asks
        about (:mod:`onebit_dask.data.queries`, ``docs/ALGORITHM.md`` section 11).
        ``"uniform"``: uniformly from the ``n x d2`` grid (the paper's). From batch
        ``query_warmup`` on, ``"popularity"`` and ``"model"`` draw the rows uniformly and
        ask, for each, about a label drawn uniformly from its ``query_top_k`` best labels
        not asked before (best by the positive bits found so far, or by the model
        after the previous batch, found by the top-``k`` engine), or, with probability
        ``query_explore``, about a uniform label. Chosen bits are not a uniform sample:
        the model estimates the positives found as the label matrix, every step on all
        of them (``step="auto"`` is ``"moment"``, the other rules and thresholds other
        than ``"shares"`` are refused), and the history's bit counts describe the
        queries. Not
        with given bits (observations, ``partial_fit``), CSR stores, planted problems
        nor ``validation_fraction`` (its pairs are of the training rows). A
        ``checkpoint`` holds the pairs asked and the positives found: a resume asks the
        same queries.
    query_top_k : int, default 20
        The ``K`` best unasked labels a chosen query draws from.
    query_explore : float in [0, 1), default 0.1
        The share of a chosen batch's queries whose label is uniform.
    query_warmup : int >= 1 or float in (0, 1), default 0.6
        The uniform batches before the policy chooses (the initial batch is the first):
        an int is their count (at most ``n_iter``), a float their share of the fit's
        ``n_iter + 1`` batches, ``max(1, floor(share (n_iter + 1) + 1/2))`` of them (halves
        round up) and at most ``n_iter`` (a share needs ``n_iter >= 1``). A count does not
        carry from one budget to another; a share does. The default 0.6 is the earliest
        share where the measured precision levels off (EXPERIMENTS.md, "Query policies";
        ``docs/ALGORITHM.md`` section 11). Not used by ``queries="uniform"``.

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
        ``directions``, ``factors``); ``None`` without a map (``features="none"``, or
        ``"auto"`` on a planted problem). ``A_``, ``Q_``,
        ``V_`` and ``coef_`` live in the mapped space; every score is
        ``phi(x)^T W + b``.
    intercept_ : ndarray of shape (d2,)
        The thresholds ``b`` (zeros for ``threshold="none"``): scores are
        ``x^T W + b``.
    history_ : list of dict
        One entry per iteration (0 = after the initialisation): ``iteration``,
        ``n_samples``, ``n_active`` (observations with a non-zero residual; every
        observation of a moment or pooled step),
        ``fit_s`` (cumulative training time; with chosen queries, choosing them too),
        under chosen queries ``positive_bits``, ``explored_bits`` and ``repeated_pairs``
        (the batch's new positive pairs, its uniform draws, and its pairs asked before,
        which add nothing; ``n_samples`` counts every pair asked, ``n_active`` the
        positive pairs found so far, which each step uses; the chosen pairs are not a
        uniform sample, so these describe the queries, not the label matrix),
        ``client_bytes``
        (array bytes the
        client sent to and gathered from the label blocks in that iteration; 0
        in-process) and, when the data come with a test
        set, ``spectral_error``, ``frobenius_error``, ``hamming_loss``, ``auc``; with
        ``fit(..., eval_set=...)``, the held-out ranking metrics (``auc``,
        ``precision_at_k``, ``ndcg_at_k``, ``psp_at_k``, ``k = 1, 3, 5``); with either,
        ``eval_s`` (the seconds those metrics took, which ``fit_s`` leaves out); with
        ``validation_fraction``, ``validation_auc`` (the selection score: the mean of
        the labels' AUCs on the validation bits) and ``validation_pairs_auc`` (the same
        AUCs weighted by their pairs); with ``step="select"``, from the fork on,
        ``progressive_auc_pooled`` and ``progressive_auc_refine`` (each branch's
        iterate scored on the step's batch before it stepped) and ``branch`` (the one
        kept, whose records these are).
    best_iteration_ : int
        The iteration whose factors and thresholds the model holds (with
        ``validation_fraction``, the best by ``validation_auc``; else the last).
    validation_score_ : ndarray of shape (n_iter + 1,)
        ``validation_auc`` after each iteration (only with ``validation_fraction``).
    calibration_ : ndarray of shape (2,)
        ``(alpha, beta)``, the link of :meth:`predict_proba`, fitted by maximum
        likelihood on held-out bits at the end of ``fit`` (the validation bits, else the
        batch after the last training batch, scored by the label blocks:
        :mod:`onebit_dask.fit.calibration`); not after ``partial_fit``.
    """

    def __init__(self, rank=3, *, batch_size=100_000, n_iter=10, step="auto", n_shards=4,
                 init_svd="auto", init_power_iter=4, random_state=None, engine="auto",
                 eval_every=1, progress=False, threshold="auto", features="auto",
                 whiten_components=None, validation_fraction=None, queries="uniform",
                 query_top_k=20, query_explore=0.1, query_warmup=WARMUP_SHARE):
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
        self.queries = queries
        self.query_top_k = query_top_k
        self.query_explore = query_explore
        self.query_warmup = query_warmup

    _parameter_constraints = PARAMETER_CONSTRAINTS

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.single_output = True  # a 1-D binary y: one label (classes_)
        return tags

    # -- fitting ----------------------------------------------------------------
    def fit(self, X, Y=None, bits=None, *, n_labels=None, eval_set=None, checkpoint=None,
            checkpoint_every=None, storage_options=None):
        """Learn from a problem's fresh batches, a label matrix or given observations.

        Parameters
        ----------
        X : SyntheticProblem, FullObservationProblem, str or os.PathLike, or array-like
            A problem streams ``n_iter + 1`` fresh batches of ``batch_size`` (for a
            :class:`FullObservationProblem`, pairs drawn from its ``n`` fully
            labelled instances) and records the test metrics in ``history_``. A path
            is an observations store (:mod:`onebit_dask.io`) or a CSR store of a label
            matrix (:mod:`onebit_dask.data.csr_store`), read shard by shard where the
            shards run, or an XC/svmlight multi-label text file (read as a label
            matrix). Otherwise the features, ``(n, d1)``, dense or
            ``scipy.sparse`` (kept sparse: the cost of a step follows the batch's
            non-zeros), or, with a label matrix or a binary target ``Y``, a dask array
            of dense chunks, never computed whole in this process: checked by dask
            reductions, each row chunk computed by a worker on the Dask engine (in
            process, when rows of it are read; two kept), the label blocks reading
            their rows from the chunks; the same model, bit for bit, as the fit of
            ``X.compute()`` (and the same checkpoint identity). Its chunk sizes must be
            known (``X = X.compute_chunk_sizes()``); sparse chunks are refused.
        Y : array-like or scipy.sparse matrix of shape (n, d2), or of shape (n,)
            A 2-D 0/1 indicator (bool, int or float) is a label matrix: batch ``t``
            draws ``batch_size`` pairs ``(i, j)`` uniformly from the ``n x d2`` grid
            (``queries="uniform"``; else as ``queries`` says) and
            observes ``y = 2 Y_ij - 1`` (the paper's Sec. 5.2 on these data,
            :mod:`onebit_dask.data.label_matrix`); the batches are seeded by
            ``random_state`` (an int seeds them as a :class:`FullObservationProblem`
            with that seed; ``None`` draws fresh ones). A 1-D ``y`` of two classes
            without ``bits`` is a binary target: the label matrix of one label
            ``y == classes_[1]``, with scikit-learn's binary classifier outputs
            (:meth:`predict` of the classes, :meth:`predict_proba` of shape
            ``(n, 2)``). A dask array ``Y`` is gathered into a CSR matrix here, a row
            chunk at a time. With ``bits``: the observed label of each row, in
            ``[0, d2)`` (then ``X`` in memory, not a dask array).
        bits : array-like of shape (n,), optional
            The observed bit of each row: ``-1``/``+1``, ``0``/``1`` or booleans
            (single-label observations ``(X, Y, bits)``, used in order, ``batch_size``
            rows a batch).
        n_labels : int, optional
            ``d2`` of single-label observations; defaults to ``Y.max() + 1``.
        eval_set : tuple (X_test, Y_test), optional
            Held-out features (dense or sparse, ``d1`` columns; a dask array of dense
            chunks is read a row chunk at a time at each evaluation, never whole) and
            their 0/1 label matrix (``d2`` columns, a dask array gathered a row chunk at
            a time; for a binary target, their 1-D classes):
            ``history_`` records, at each evaluated iteration, ``auc`` (macro over the
            labels with both classes in the test set), ``precision_at_k`` and
            ``ndcg_at_k`` for ``k = 1, 3, 5``, and, when a label matrix was fitted,
            ``psp_at_k`` (propensities of the training labels, Jain et al. 2016,
            ``A = 0.55``, ``B = 1.5``). Computed block by block where the label blocks
            live. Not with a problem (it has a test set).
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
        storage_options : dict, optional
            fsspec's options for the URLs given as strings for ``X`` and ``checkpoint``,
            used in this process only (as :meth:`save`'s): Dask workers that read the
            shards or write the blocks use their own fsspec configuration. ``X`` and
            ``checkpoint`` may also be zarr or fsspec store objects, each with its own
            URL and options.

        Returns
        -------
        self
        """
        if checkpoint is None and checkpoint_every is not None:
            raise ValueError(f"checkpoint_every={checkpoint_every!r} is not allowed without "
                             "checkpoint: pass checkpoint=PATH too, or drop checkpoint_every")
        with paths.each_with_options(storage_options, X=X, checkpoint=checkpoint) as located:
            X, checkpoint = located["X"], located["checkpoint"]
            self._set_feature_names(X)
            self._validate_params()  # the table, before the data are read
            source = as_source(X, Y, bits, n_labels=n_labels, random_state=self.random_state)
            return self._fit_prepared(self._prepare(source, eval_set=eval_set,
                                                    checkpoint=checkpoint,
                                                    checkpoint_every=checkpoint_every))

    def _prepare(self, source, *, eval_set=None, heldout=None, checkpoint=None,
                 checkpoint_every=None) -> "_Prepared":
        """Every check of a fit on ``source`` that can run before any work, and what the
        fit needs, built once: the settings, the held-out data (``eval_set``, or a
        :class:`HeldOut` the caller built), the checkpoint. The command line calls it
        before it starts a cluster, then :meth:`_fit_prepared`."""
        check_feature_params(self.features, self.whiten_components)
        check_rank(self.rank, source.d1, source.d2)
        check_source(self.features, source.planted)
        self._check_queries(source)
        if eval_set is not None:
            if source.planted is not None:
                raise TypeError("fit(problem) takes no eval_set: the problem's own test set "
                                "is evaluated")
            if (source.classes is not None and isinstance(eval_set, (tuple, list))
                    and len(eval_set) == 2 and is_one_dimensional(eval_set[1])):
                X_test, y_test = eval_set
                eval_set = (X_test, binary_target(y_test, len(y_test), source.classes)[1])
            heldout = HeldOut(eval_set, source.d1, source.d2)
        if self.validation_fraction is not None and checkpoint is not None:
            raise ValueError(f"validation_fraction={self.validation_fraction!r} is not allowed "
                             "with checkpoint: a checkpoint does not hold the best iterate; "
                             "drop one of them")
        check_fraction(self.validation_fraction, self.n_iter, source, self.batch_size)
        params = self.get_params(deep=False)
        settings = FitSettings.of(params, source.planted is not None)
        problem = source.planted
        if (RULES[settings.step].branches and isinstance(problem, SyntheticProblem)
                and problem.sampler != "explicit"):
            raise ValueError(f"step={settings.step!r} is not allowed with sampler="
                             f"{problem.sampler!r}: "
                             "it scores every bit of a batch, and this sampler draws only "
                             "the rows a step uses; pass sampler='explicit' to the problem, "
                             "or another step")
        warn_if_cycling(source, self.batch_size, self.n_iter + 1)
        data = source.identity()
        if checkpoint is not None:  # checked now, before any work
            from .persist import Checkpoint  # zarr: imported by the fits that write to a store

            checkpoint = Checkpoint(checkpoint, checkpoint_every, params, data)
        return _Prepared(source, settings, heldout, checkpoint, data)

    def _check_queries(self, source) -> None:
        """Refuse a query policy where there are no queries to choose."""
        if self.queries == "uniform":
            return
        if not source.queryable:
            what = ("a planted problem (its batches are drawn by its sampler)"
                    if source.planted is not None else
                    "given bits (observations, a store) or a CSR store: the pairs are "
                    "fixed, or read where the shards run")
            raise ValueError(f"queries={self.queries!r} is not allowed with {what}: pass "
                             "a label matrix (fit(X, Y) or an XC file), or queries='uniform'")

    def _fit_prepared(self, prepared: "_Prepared"):
        """The fit :meth:`_prepare` checked, on this estimator's engine."""
        source = prepared.source
        self._begin(new_state(source.d1, source.d2, self.n_shards, self.random_state,
                                      prepared.data))
        self._state.classes = source.classes
        engine = placement.engine_named(self.engine)
        fitting.fit_source(prepared.settings, self._state, engine, source, prepared.checkpoint,
                           prepared.heldout)
        return self

    def partial_fit(self, X, Y, bits=None, *, n_labels=None, classes=None):
        """One step on one batch (the first call initialises); ``X`` dense or
        ``scipy.sparse``.

        The batch is either single-label observations ``(X, Y, bits)``, used as given,
        or a label matrix ``(X, Y)``, of which the step observes ``batch_size`` pairs
        ``(i, j)`` drawn uniformly from the ``n x d2`` grid (``y = 2 Y_ij - 1``, as a
        batch of :meth:`fit` on a label matrix), with the fit's random generator (seeded
        by ``random_state``): the form ``dask_ml.wrappers.Incremental`` and loops over a
        stream of labelled chunks call. The step is a fit's on those pairs (one label-block
        shard each): a block whose pairs outnumber the chunk's rows reads each row once.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n, d1)
        Y : array-like or sparse matrix of shape (n, d2), or of shape (n,)
            A 2-D 0/1 indicator (label matrix) without ``bits``, or a 1-D binary target
            (as in :meth:`fit`; its two classes from ``classes`` or from the first
            batch); with ``bits`` the observed label of each row, in ``[0, d2)``.
        bits : array-like of shape (n,), optional
            The observed bit of each row: ``-1``/``+1``, ``0``/``1`` or booleans.
        n_labels : int, optional
            ``d2``: required on the first call with ``bits`` (unless ``classes`` gives
            it); later calls and label matrices may repeat it.
        classes : array-like of shape (d2,) or (2,), optional
            scikit-learn's ``partial_fit`` argument: one entry per label (a label
            matrix's columns), checked against ``d2``; a binary target's two classes.

        Returns
        -------
        self
        """
        if self.validation_fraction is not None:
            raise ValueError(f"validation_fraction={self.validation_fraction!r} is not allowed "
                             "in partial_fit (it has no validation bits): pass "
                             "validation_fraction=None, or use fit")
        if self.queries != "uniform":
            raise ValueError(f"queries={self.queries!r} is not allowed in partial_fit: it "
                             "steps on the batch it is given, with no queries to choose; "
                             "pass queries='uniform', or use fit")
        first = not hasattr(self, "A_")
        self._validate_params()
        X = self._validate_X(X, reset=first)
        check_not_a_task_key(Y)
        binary = None  # a 1-D target's two classes
        if bits is None and is_one_dimensional(Y):
            if not first and self._state.classes is None:
                raise ValueError("a 1-D y is not allowed: this model was started on a label "
                                 "matrix; pass a 2-D (n, d2) 0/1 label matrix Y")
            known = classes if first else self._state.classes
            if not first and classes is not None and not np.array_equal(
                    np.unique(np.asarray(classes)), known):
                raise ValueError(f"classes={classes!r} is not allowed: this model was started "
                                 f"with the classes {known.tolist()!r}")
            binary, Y = binary_target(Y, X.shape[0], known)
            classes = None  # a binary target's one label
        if bits is None:
            Y = check_label_matrix(Y, X.shape[0])
            n_labels, given = check_label_count(n_labels, classes, Y.shape[1], "Y.shape[1]")
        else:
            n_labels, given = check_label_count(n_labels, classes, None, None)
        if first and n_labels is None:
            raise TypeError("n_labels=None is not allowed on the first call to partial_fit "
                            "with bits: pass n_labels=d2, the number of labels")
        if not first:
            if n_labels is not None and n_labels != self.n_labels_:
                raise ValueError(f"{given} is not allowed: this model was started with "
                                 f"n_labels={self.n_labels_}; pass the same number of labels "
                                 "(or omit n_labels), or fit a new model")
            n_labels = self.n_labels_
        settings = FitSettings.of(self.get_params(deep=False),
                                          planted=not first and self._state.planted,
                                          partial=True)
        check_feature_params(self.features, self.whiten_components)
        check_rank(self.rank, X.shape[1], n_labels)
        state = (new_state(X.shape[1], n_labels, self.n_shards, self.random_state)
                 if first else self._state)
        if bits is None:  # a fit's label-block shards of the drawn pairs (issue 40)
            X = check_features(X, training=True)
            rows, labels = drawn_pairs(X.shape[0], n_labels, self.batch_size, state.rng)
            source = LabelMatrixSource(X, Y, 0)
            shards = partial(LabelMatrixSource.chosen_batch, t=0, rows=rows, labels=labels,
                             bounds=state.bounds)  # the model's blocks, as placed
            # the feature map sees the pairs' rows, each as many times as it was drawn
            drawn = cache(lambda: ArraySource(X[rows], labels, source.bits_at(rows, labels),
                                              n_labels))
        else:
            X, labels, y, d2 = check_observations(X, Y, bits, n_labels=n_labels)
            source = ArraySource(X, labels, y, d2)
            shards = partial(ArraySource.batch, t=0, batch_size=source.n,
                             n_shards=self.n_shards)
            drawn = lambda: source  # noqa: E731
        engine = placement.engine_named(self.engine)
        if first:
            state.classes = binary
            self._begin(state)
            fitting.map_features(settings, self._state, lambda: drawn().X, lambda: (
                shard.load() for shard in drawn().batch(0, drawn().n, self.n_shards)))
            engine.start(self._state.bounds)
        else:
            engine = placement.moved_to(self._state.blocks, engine)
        placed = source.place(engine, self._state.bounds)  # X sent to a cluster once
        try:
            fitting.partial_step(settings, self._state, engine, shards(placed))
        finally:
            if placed is not source:
                placed.unplace(engine)
        return self

    # -- the fitted state (a fit.state.FitState) ---------------------------------------
    def _begin(self, state) -> None:
        """Start from ``state``, forgetting an earlier fit."""
        self._state = state
        self.n_features_in_ = state.d1

    def _fitted_state(self, name: str):
        state = self.__dict__.get("_state")
        if state is None or state.top is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r} "
                                 "(not fitted)")
        return state

    def _fitted_value(self, name: str, field: str, missing: str):
        """The fitted state's ``field``, or no attribute ``name`` (``missing`` says why)
        where the fit has none."""
        value = getattr(self._fitted_state(name), field)
        if value is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r} "
                                 f"({missing})")
        return value

    @property
    def A_(self) -> np.ndarray:
        """Feature factor ``(d1, 2 rank)`` of ``W = A_ B_^T`` (``= Q_[:d1]``)."""
        return self._fitted_state("A_").top.Q

    @property
    def n_labels_(self) -> int:
        """``d2``."""
        return self._fitted_state("n_labels_").d2

    @property
    def feature_map_(self):
        """The fitted feature map (see the class docstring), or ``None``."""
        return self._fitted_state("feature_map_").feature_map

    @property
    def best_iteration_(self) -> int:
        """The iteration whose factors and thresholds the model holds."""
        return self._fitted_value("best_iteration_", "best_iteration",
                                  "a model saved without it")

    @property
    def validation_score_(self) -> np.ndarray:
        """``validation_auc`` after each iteration (only with ``validation_fraction``)."""
        return self._fitted_value("validation_score_", "validation_score",
                                  "fitted without validation_fraction")

    @property
    def n_steps_(self) -> int:
        """Steps done after the initialisation."""
        return self._fitted_state("n_steps_").n_steps

    @property
    def n_samples_seen_(self) -> int:
        """Observations used, the initial batch included."""
        return self._fitted_state("n_samples_seen_").n_samples_seen

    @property
    def queries_asked_(self) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, labels)``: every distinct pair a fit with chosen queries asked about
        (the uniform batches' included), sorted by row, then label; ``AttributeError``
        after a fit with ``queries="uniform"`` and on a loaded model."""
        asked = self._fitted_value("queries_asked_", "asked", "queries='uniform' asks "
                                   "no chosen queries, and a saved model keeps none")
        return asked.keys // asked.d2, asked.keys % asked.d2

    @property
    def positives_found_(self) -> np.ndarray:
        """Distinct positive pairs found of each label over all the batches of a fit with
        chosen queries (``(d2,)``: the found shares' ``f_j``, ``docs/ALGORITHM.md`` section
        11)."""
        return self._fitted_value("positives_found_", "asked", "queries='uniform' asks "
                                  "no chosen queries, and a saved model keeps none").positives

    @property
    def history_(self) -> list:
        """One record per iteration (see the class docstring)."""
        return self._fitted_state("history_").history

    def _label_rows(self, slot: str, labels=None) -> np.ndarray:
        """Rows of a label-side slot, gathered block by block (all, or ``labels``')."""
        self._check_fitted()
        state = self._state
        return placement.label_rows(state.blocks, slot, state.d2, state.width, labels)

    def _live_blocks(self):
        self._check_fitted()
        return placement.live(self._state.blocks)

    @property
    def Q_(self) -> np.ndarray:
        """Orthonormal basis ``(d1 + d2, 2 rank)`` of the dilation (gathered)."""
        self._check_fitted()
        return np.vstack([self._state.top.Q, self._label_rows("Q")])

    @property
    def V_(self) -> np.ndarray:
        """``M_dil Q_`` of the last step, ``(d1 + d2, 2 rank)`` (gathered)."""
        self._check_fitted()
        return np.vstack([self._state.top.V, self._label_rows("V")])

    @property
    def B_(self) -> np.ndarray:
        """Label factor ``(d2, 2 rank)`` of ``W = A_ B_^T`` (gathered)."""
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

    @property
    def calibration_(self) -> np.ndarray:
        """``(alpha, beta)``: :meth:`predict_proba`'s link (see the class docstring)."""
        return np.array(self._fitted_value(
            "calibration_", "calibration", "fitted by partial_fit, loaded from a checkpoint "
            "(the training state) or from a store saved without it: fit the model with fit "
            "to have predict_proba"))

    @property
    def classes_(self) -> np.ndarray:
        """A binary target's two classes (``fit(X, y)`` with a 1-D ``y``); else ``[0, 1]``,
        the values of each label's indicator (as in ``predict``)."""
        self._check_fitted()
        classes = self._state.classes
        return np.array([0, 1]) if classes is None else classes

    def decision_function(self, X, labels=None):
        """Scores ``X W`` plus the thresholds, as :meth:`FactorPredictor.decision_function`;
        for a binary target (``classes_`` of a 1-D ``y``) without ``labels``, shape
        ``(n,)``: ``z = alpha s + (beta - alpha) b``, the argument of
        :meth:`predict_proba`'s probit ``P(classes_[1]) = Phi(z)`` (the score ``s`` of the
        one label itself when the fit has no link), so that ``predict``, the sign of ``z``,
        is the class of the larger probability.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n, d1)
        labels : array-like of int, optional
            Only these labels' columns, in the order given.

        Returns
        -------
        ndarray of shape (n, d2), (n, len(labels)) or, for a binary target, (n,); float64
            A dask array for a dask array ``X``.
        """
        if self._binary_classes(labels) is None:
            return super().decision_function(X, labels)
        if self._state.calibration is None:
            return self._scores(X, None, self._b_rows())[:, 0]
        return self._linked(X, None)[:, 0]

    def predict(self, X, labels=None):
        """The multi-label indicator, as :meth:`FactorPredictor.predict`; for a binary
        target without ``labels``, shape ``(n,)``: ``classes_[1]`` where
        :meth:`decision_function` is positive, else ``classes_[0]``.

        Returns
        -------
        ndarray of shape (n, d2), (n, len(labels)) or, for a binary target, (n,)
            A dask array for a dask array ``X``.
        """
        classes = self._binary_classes(labels)
        if classes is None:
            return super().predict(X, labels)
        positive = (self.decision_function(X) > 0).astype(np.intp)
        if callable(getattr(positive, "__dask_graph__", None)):
            return positive.map_blocks(classes.take, dtype=classes.dtype)
        return classes.take(positive)

    def score(self, X, y, sample_weight=None) -> float:
        """Macro-averaged ROC AUC, as :meth:`FactorPredictor.score`; for a binary target
        and a 1-D ``y`` of its classes, the ROC AUC of :meth:`decision_function`.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n, d1)
        y : array-like of shape (n, d2), or (n,) of ``classes_`` for a binary target
        sample_weight : array-like of shape (n,), optional

        Returns
        -------
        float
        """
        self._check_fitted()
        if self._binary_classes(None) is None or not is_one_dimensional(y):
            return super().score(X, y, sample_weight)
        X = self._validate_X(X, reset=False)
        _, Y = binary_target(y, X.shape[0], self._state.classes)
        return float(roc_auc_score(Y.toarray()[:, 0], self.decision_function(X),
                                   sample_weight=sample_weight))

    def _binary_classes(self, labels):
        """A fitted binary target's two classes where the outputs take its binary form
        (without ``labels``), else ``None`` (also before a fit: the multi-label
        methods then say "not fitted")."""
        state = self.__dict__.get("_state")
        if labels is not None or state is None or state.top is None:
            return None
        return state.classes

    def _linked(self, X, labels):
        """``alpha s + (beta - alpha) b`` of the labels (the probit's argument), the
        thresholds ``b`` gathered once."""
        alpha, beta = self.calibration_
        b = self._b_rows(labels)
        return alpha * self._scores(X, labels, b) + (beta - alpha) * b

    @available_if(_has_link)
    def predict_proba(self, X, labels=None):
        r"""Each label's probability of being positive,
        ``P(y_ij = +1) = Phi(alpha phi(x_i)^T w_j + beta b_j)``.

        The probit link of the thresholded model's bit ``sign(x^T w*_j + b*_j + xi g)``
        (docs/ALGORITHM.md section 12): exact for the planted model with Gaussian noise,
        where ``alpha = 1 / xi`` and ``beta = sqrt(1 + xi^2) / xi``; ``(alpha, beta) =
        calibration_`` are fitted on held-out bits at the end of ``fit``. Marginal
        probabilities of each label, as scikit-learn's ``OneVsRestClassifier`` gives them
        for multi-label data (rows need not sum to one); dense ``(n, d2)`` by contract, as
        :meth:`decision_function`.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n, d1)
        labels : array-like of int, optional
            Only these labels' columns, in the order given.

        Returns
        -------
        ndarray of shape (n, d2), or (n, len(labels)), float64 in [0, 1]
            For a binary target without ``labels``, ``(n, 2)``: the probabilities of
            ``classes_[0]`` and ``classes_[1]`` (scikit-learn's binary classifiers').
            A dask array for a dask array ``X`` (as :meth:`decision_function`).
        """
        labels = self._checked_labels(labels)
        positive = ndtr(self._linked(X, labels))
        if self._binary_classes(labels) is None:
            return positive
        return np.concatenate([1.0 - positive, positive], axis=1)  # dask's for a dask array

    def predict_top_k(self, X, k: int = 5, *, by: str = "score"):
        """The ``k`` labels with the highest scores ``x^T w_j + b_j`` (or probabilities)
        for each row of ``X``, streamed: rows in chunks, each label block searched where
        it lives through its label index (:mod:`onebit_dask.engine.topk`,
        :mod:`onebit_dask.ops.mips`: only the labels that can be in the top ``k`` are
        scored; the index is built at the first call, and after a load or a new fit), only
        ``k`` labels per row sent back. Memory does not grow with ``n x d2``, unlike
        :meth:`decision_function`.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n, d1)
        k : int, default 5
            ``1 <= k <= d2``.
        by : {"score", "proba"}, default "score"
            Rank by the score (:meth:`decision_function`), or by the probability of a
            positive label (:meth:`predict_proba`, a model with ``calibration_``):
            ``Phi(alpha u + beta b_j)`` with ``u = phi(x)^T w_j``, which weighs each
            label's threshold (its popularity) against the direction by the fitted link
            rather than one to one; the labels of the highest probabilities are those of
            the highest ``alpha u + beta b_j`` (``Phi`` increases), found through the
            same index (docs/ALGORITHM.md section 12). A row's most probable labels are
            what precision at ``k`` rewards.

        Returns
        -------
        labels : ndarray of shape (n, k), int64
            Best first; ties go to the smaller label (as a stable ``argsort`` of the
            negated scores, or of ``-(alpha u + beta b)``).
        scores : ndarray of shape (n, k)
            The scores, or with ``by="proba"`` the probabilities.
        """
        self._check_fitted()
        k = check_int("k", k, low=1, high=self.n_labels_)
        if by not in ("score", "proba"):
            raise ValueError(f"by={by!r} is not allowed: rank by 'score' (the decision "
                             "function) or 'proba' (the calibrated probability)")
        link = self.calibration_ if by == "proba" else None  # no link: says why
        XA = self._project(self._validate_X(X, reset=False))
        if link is None:
            return topk.predict_top_k(self._live_blocks(), XA, k, self._state.bounds)
        alpha, beta = (float(v) for v in link)
        labels, z = topk.predict_top_k(self._live_blocks(), alpha * XA, k,
                                       self._state.bounds, scale=beta)
        return labels, ndtr(z)

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
        per_block = evaluation.planted_evaluations(problem, test_set.labels,
                                                   self._state.bounds)
        outs = self._live_blocks().map(evaluation_pieces, per_block=per_block)
        return evaluation.planted_metrics(problem, test_set, self.A_, self.n_labels_, outs)

    # -- persistence -------------------------------------------------------------------------
    def save(self, path, *, overwrite=False, storage_options=None) -> str:
        """Write the fitted model to a zarr (v3) store at ``path`` (no pickle).

        Each label block is written by the task that holds it (on Dask, by its worker:
        the path must be visible to the workers); the store appears at ``path`` only
        once it is whole. Layout: :mod:`onebit_dask.model_io`.

        Parameters
        ----------
        path : str, os.PathLike, zarr FsspecStore or LocalStore, or fsspec FSMap
            A local path or a URL (``s3://...``), or a store object (its URL and its
            file system's options).
        overwrite : bool, default False
            Replace a model store at ``path``; anything else there is never replaced.
        storage_options : dict, optional
            fsspec's options for a URL (credentials, ``endpoint_url``), used in this
            process only: Dask workers in other processes, which write their blocks,
            use their own fsspec configuration (docs/STORES.md).

        Returns
        -------
        str
            The absolute path of the store.
        """
        self._check_fitted()
        from . import persist

        path, storage_options = paths.location(path, storage_options)
        with paths.options(storage_options, path):
            return persist.save(path, overwrite, self.get_params(deep=False), self._state,
                                self._live_blocks())

    @classmethod
    def load(cls, path, engine="auto", storage_options=None):
        """A model written by :meth:`save` (or a checkpoint of ``fit``).

        Parameters
        ----------
        path : str, os.PathLike, zarr FsspecStore or LocalStore, or fsspec FSMap
            As :meth:`save`'s.
        engine : {"auto", "local", "dask"}, default "auto"
            Where the label blocks are read, as the constructor's ``engine``:
            ``"local"`` in this process; ``"dask"`` each block by a worker of the current
            default client (and kept there when the model is large); ``"auto"`` on the
            default client if there is one. The loaded model has this ``engine``.
        storage_options : dict, optional
            As :meth:`save`'s (Dask workers that read their blocks use their own).

        Returns
        -------
        OneBitMultiLabel
            Predicts exactly as the saved model (same ``A_``, ``B_``, scores).
        """
        path, storage_options = paths.location(path, storage_options)
        with paths.options(storage_options, path):
            return cls._load(path, engine)

    @classmethod
    def _load(cls, path, engine):
        from . import persist

        from .io.stores.zarr_format import DamagedStoreError

        path, attrs = persist.open_model(path)
        unknown = sorted(set(attrs["params"]) - set(cls._get_param_names()))
        if unknown:
            raise DamagedStoreError(f"model store {path!r} is damaged: its params hold "
                                    f"{unknown[0]!r}, which {cls.__name__} does not take")
        est = cls(**{**attrs["params"], "engine": engine})
        try:
            est._validate_params()
        except ValueError as exc:
            raise DamagedStoreError(f"model store {path!r} is damaged: its params do not "
                                    f"make a {cls.__name__} ({exc})") from None
        engine = placement.engine_named(est.engine)
        state = restored(persist.read_state(path, attrs, engine))
        fitting.keep(state, engine)
        est._begin(state)
        return est

    # -- pickling ------------------------------------------------------------------------
    def __getstate__(self):
        """The state with the label blocks gathered into it, so that a model fitted on a
        cluster pickles and unpickles anywhere (in-process blocks). Refused above
        ``PICKLE_LIMIT`` label-side numbers: :meth:`save` writes those block by block."""
        state = dict(super().__getstate__())  # a copy: the model keeps its blocks where they are
        fitted = state.get("_state")
        if fitted is not None and fitted.blocks is not None and not isinstance(
                fitted.blocks, LocalEngine):
            size = fitted.label_side_numbers
            if size > PICKLE_LIMIT:
                raise ValueError(
                    f"this model's label blocks hold {size} numbers (> {PICKLE_LIMIT}) on a "
                    "Dask cluster: pickling would gather them into this process; use "
                    "save(path) and OneBitMultiLabel.load(path), which work block by block")
            state["_state"] = replace(fitted, blocks=placement.live(fitted.blocks).local())
        return state
