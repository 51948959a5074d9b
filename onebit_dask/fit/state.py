"""A fit's settings and state: :class:`FitSettings` (what the estimator's parameters ask of
the loop) and :class:`FitState` (what the fit has learned, between steps and after)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from numbers import Integral
from typing import Any

from ..data.queries import QueryPolicy, warmup_batches
from ..data.synthetic.source import PROBLEM_KINDS
from ..utils.checks import as_generator
from . import steps
from .algorithm import TopState

DENSE_INIT_LIMIT = 2_000_000  # entries of H0 that init_svd="auto" forms on the client (16 MB)


@dataclass(frozen=True)
class FitSettings:
    """The estimator's parameters the fit loop reads (``OneBitMultiLabel``'s, which
    documents them)."""

    rank: int
    batch_size: int
    n_iter: int
    step: str
    n_shards: int
    init_svd: str
    init_power_iter: int
    eval_every: int
    progress: bool
    threshold: str
    features: str
    whiten_components: int | None
    validation_fraction: float | None
    queries: str
    query_top_k: int
    query_explore: float
    query_warmup: int  # the uniform batches: a share resolved against n_iter

    @classmethod
    def of(cls, params: dict, planted: bool, partial: bool = False) -> "FitSettings":
        """The settings in ``params`` (``get_params()``; other keys are not the loop's) for
        a planted problem or for data (``planted``), in ``fit`` or ``partial_fit``
        (``partial``): ``features="auto"`` is ``"none"`` on a planted problem (its features
        are ``N(0, I)``), ``threshold="auto"`` is ``"estimated"`` there and ``"shares"`` on
        data, and ``step="auto"`` is ``"paper"`` there; on data
        ``"select"``, or ``"moment"`` in ``partial_fit`` and with ``validation_fraction``
        (whose bits then choose the iterate). ``step="select"`` is refused there: its
        branches need the fit's whole schedule, and the validation bits would choose
        within one branch. Under chosen queries (``queries`` not ``"uniform"``)
        ``"auto"`` is ``"moment"`` and ``"select"`` is refused: its branches score each
        batch's bits as a uniform sample, which chosen bits are not."""
        settings = {f.name: params[f.name] for f in fields(cls)}
        fraction = settings["validation_fraction"]
        chosen = settings["queries"] != "uniform"
        rule = steps.resolve(settings["step"], planted=planted, partial=partial,
                             validation=fraction is not None, chosen=chosen)
        if chosen:
            check_chosen(settings["queries"], rule or settings["step"], settings["threshold"],
                         warmup=settings["query_warmup"], n_iter=settings["n_iter"],
                         validation_fraction=fraction)
        if rule is None and partial:
            why = ("its two branches run over a fit's second half"
                   if steps.RULES[settings["step"]].branches else
                   "its pooled steps re-read the fit's earlier batches")
            raise ValueError(f"step={settings['step']!r} is not allowed in partial_fit (one "
                             f"step at a time on the batch given: {why}): pass "
                             "step='moment'")
        if rule is None:
            raise ValueError(f"step={settings['step']!r} is not allowed with "
                             f"validation_fraction={fraction!r} (the validation bits would "
                             "choose within one branch): pass step='pooled' or "
                             "step='refine', or validation_fraction=None")
        settings["step"] = rule
        settings["query_warmup"] = warmup_batches(settings["query_warmup"], settings["n_iter"])
        if planted and settings["features"] == "auto":  # a planted problem's N(0, I)
            settings["features"] = "none"
        if settings["threshold"] == "auto":
            settings["threshold"] = "estimated" if planted else "shares"
        return cls(**settings)

    @property
    def policy(self) -> QueryPolicy:
        """The query policy (:mod:`onebit_dask.data.queries`)."""
        return QueryPolicy(self.queries, self.query_top_k, self.query_explore,
                           self.query_warmup)

    def dense_init(self, d1: int, d2: int) -> bool:
        """Whether the initial SVD forms ``H0`` (``d1 x d2``) on the client."""
        return self.init_svd == "dense" or (self.init_svd == "auto"
                                            and d1 * d2 <= DENSE_INIT_LIMIT)


def check_chosen(queries: str, rule: str, threshold: str, *, warmup, n_iter: int,
                 validation_fraction: float | None = None) -> None:
    """The settings a fit under chosen queries refuses. It estimates the positives found
    (``docs/ALGORITHM.md`` section 11): its initial and moment steps, with the shares'
    thresholds. Residual steps and the progressive scores of ``"select"`` take a batch's
    bits as a uniform sample, which chosen bits are not; validation pairs are of the
    training rows the queries go after; and with ``warmup > n_iter`` (a count) or
    ``n_iter = 0`` (a share) no batch chooses."""
    if rule != "moment":
        raise ValueError(f"step={rule!r} is not allowed with queries={queries!r}: chosen bits "
                         "are not a uniform sample, which its residual steps (and "
                         "'select''s scores) assume; pass step='moment' (what 'auto' picks "
                         "there), or queries='uniform'")
    if threshold not in ("auto", "shares"):
        raise ValueError(f"threshold={threshold!r} is not allowed with queries={queries!r}: "
                         "the thresholds are the shares of the positives found; pass "
                         "threshold='shares' (what 'auto' picks there), or queries='uniform'")
    if validation_fraction is not None:
        raise ValueError(f"queries={queries!r} is not allowed with "
                         f"validation_fraction={validation_fraction!r}: the validation pairs "
                         "are of the training rows, whose positives the queries go after "
                         "and the model then holds; drop one of them")
    if not isinstance(warmup, Integral) and n_iter < 1:
        raise ValueError(f"query_warmup={warmup!r} is not allowed with n_iter={n_iter!r}: "
                         "a share of the fit's one batch leaves no batch to choose; pass "
                         "n_iter >= 1, or queries='uniform'")
    if isinstance(warmup, Integral) and warmup > n_iter:
        raise ValueError(f"query_warmup={warmup!r} is not allowed with n_iter={n_iter!r}: "
                         "the fit's batches 0..n_iter would all be uniform; pass "
                         "query_warmup <= n_iter, or queries='uniform'")


@dataclass
class FitState:
    """A fit's state between steps, and a fitted model's.

    Attributes
    ----------
    d1, d2 : int
        Features and labels.
    bounds : list of int
        The label blocks' bounds: block ``s`` owns the labels ``[bounds[s], bounds[s+1])``.
    rng : numpy.random.Generator or None
        Seeds the randomised initial SVD (``None`` for a loaded model that saved none).
    data : dict or None
        What the fit ran on (``Source.identity()``; saved with the model).
    feature_map : FeatureMap or None
        The map the model is learned through (:mod:`onebit_dask.features`).
    top : TopState or None
        The client's ``Q_top`` (``= A``) and ``V_top``; ``None`` before the initialisation.
    blocks : engine or None
        Where the fitted label blocks live (:func:`onebit_dask.engine.placement.keep`).
    n_steps : int
        Steps done after the initialisation (``-1`` before it).
    n_samples_seen : int
    fit_s : float
        Cumulative training time.
    history : list of dict
        One record per iteration (``OneBitMultiLabel.history_``).
    best_iteration : int or None
        The iteration whose state the model holds (the last, or the best on the
        validation bits); ``None`` for a model loaded from a store saved without it.
    validation_score : ndarray or None
        ``validation_auc`` after each iteration (with ``validation_fraction``).
    found_rows : int
        Under chosen queries, the rows of the label matrix whose positives found the
        model estimates (``docs/ALGORITHM.md`` section 11); 0 otherwise.
    asked : Asked or None
        Under chosen queries, the pairs asked and the positives found
        (:class:`~onebit_dask.data.queries.Asked`); written to a checkpoint, not saved
        with the model.
    ridge_basis : tuple of ndarray or None
        Under ``step="pooled"`` with the ridge map, the training features' mean and
        variance (:func:`~onebit_dask.ops.features.ridge_basis`): each pooled step
        re-estimates the ridge from the pooled bits (``docs/ALGORITHM.md`` section 9f);
        computed again on a resume, never saved.
    calibration : list of float or None
        ``[alpha, beta]``, the link of ``predict_proba`` fitted on held-out bits
        (:mod:`onebit_dask.fit.calibration`); ``None`` after ``partial_fit`` and for a
        model loaded from a store saved without it.
    classes : ndarray of shape (2,) or None
        A binary target's two classes (the model's one label is ``y == classes[1]``);
        ``None`` for a multi-label model.
    blas : str or None
        The BLAS of the processes that fitted it
        (:func:`onebit_dask.provenance.blas_summary`); ``None`` for a model loaded from a
        store saved without it.
    """

    d1: int
    d2: int
    bounds: list
    rng: Any = None
    data: dict | None = None
    feature_map: Any = None
    top: TopState | None = None
    blocks: Any = None
    n_steps: int = -1
    n_samples_seen: int = 0
    fit_s: float = 0.0
    history: list = field(default_factory=list)
    best_iteration: int | None = None
    validation_score: Any = None
    calibration: list | None = None
    classes: Any = None
    blas: str | None = None
    found_rows: int = 0
    asked: Any = None
    ridge_basis: Any = None

    @property
    def width(self) -> int:
        """``l = 2 rank``, the columns of the factors."""
        return self.top.Q.shape[1]

    @property
    def planted(self) -> bool:
        """Whether the fit ran on a planted problem (``data``'s kind): ``step="auto"``
        continues it with the paper's step."""
        return self.data is not None and self.data.get("kind") in PROBLEM_KINDS

    @property
    def label_side_numbers(self) -> int:
        """The numbers the label blocks hold: ``Q``, ``V`` and ``B``, ``d2 x l`` each."""
        return 3 * self.d2 * self.width


def new_state(d1: int, d2: int, n_shards: int, random_state, data: dict | None = None
              ) -> FitState:
    """The state before the initialisation: ``min(n_shards, d2)`` label blocks of equal
    size (to one label)."""
    n_blocks = min(n_shards, d2)
    return FitState(d1, d2, [s * d2 // n_blocks for s in range(n_blocks + 1)],
                    rng=as_generator(random_state), data=data)


def restore(state: FitState, saved: dict) -> None:
    """Set ``state`` from a saved model's or checkpoint's state
    (:func:`onebit_dask.persist.read_state`); a saved ``rng`` of ``None`` keeps
    ``state.rng``. A resumed fit keeps its own target's ``classes``."""
    for name in ("d1", "d2", "n_steps", "n_samples_seen", "history", "fit_s", "bounds",
                 "data", "feature_map", "best_iteration", "validation_score", "calibration",
                 "blas"):
        setattr(state, name, saved[name])
    if saved["rng"] is not None:
        state.rng = saved["rng"]
    state.top = TopState(*saved["top"])


def restored(saved: dict) -> FitState:
    """A fitted model's state from :func:`onebit_dask.persist.read_state`."""
    state = FitState(saved["d1"], saved["d2"], saved["bounds"], classes=saved["classes"])
    restore(state, saved)
    return state
