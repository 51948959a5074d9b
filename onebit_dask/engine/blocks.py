r"""Label blocks: the label-side rows of the state and the pure functions run on them.

Block ``s`` owns the labels ``[lo, hi)``: its rows of ``Q_bot``, ``V_bot`` and
``B`` (slots ``"Q"``, ``"V"``, ``"B"``), the temporaries of a step, and the active
rows of the current batch whose labels it owns. The client keeps the ``d1 x l`` top
blocks and the ``l x l`` Gram matrices (``docs/ALGORITHM.md``, label-sharded state):

* a dilation product ``Z = (W + eta H)_dil P`` is, per block,
  ``Z_s = c eta scatter_s(j, w * (X P_top)) + B_s (A^T P_top)`` (local) and the
  reductions ``X_s^T (w * P_s[j])`` (``d1 x l``) and ``B_s^T P_s`` (``l x l``), which
  give ``Z_top = c eta sum_s X_s^T (w P_s[j]) + A sum_s B_s^T P_s``;
* Cholesky-QR2 needs ``G = Z_top^T Z_top + sum_s Z_s^T Z_s``; each block then scales
  its own rows by ``R^{-1}``;
* the column norms ``n_j^2 = v_j^T (A^T A) v_j`` are local given ``A^T A``.

Every function here takes a :class:`Block` and small arguments and returns a **new**
block (inputs are never modified: Dask may run a task twice, after a worker died),
whose ``out`` carries the small result that goes back to the client. No Dask here:
:mod:`onebit_dask.engine.local` runs these functions in this process,
:mod:`onebit_dask.engine.dask_engine` where each block lives on the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple

import numpy as np
import scipy.sparse

from ..ops import thresholds
from ..data.shards import ShardKind, active_sums, merged_sums, row_scaled, scored_bits
from ..ops.features import ridge_parts
from ..ops.kernels import ActiveRows, aligned, row_norms
from ..metrics.planted import label_auc_sums
from ..ops.label_auc import label_aucs
from . import topk

if TYPE_CHECKING:
    from ..data.synthetic.problem import PlantedTruth

THRESHOLD_SLOTS = ("b", "p", "v")
"""The thresholded model's per-label state: the thresholds ``b``, and the share ``p`` of
positive bits they are estimated from, with its variance ``v``."""

STATE_SLOTS = ("Q", "V", "B") + THRESHOLD_SLOTS
"""A block's per-label state (the rest are a step's temporaries)."""

COPY_PREFIXES = ("best_", "alt_")
"""Prefixes of the copies of the state a block may hold during a fit, which a step keeps:
the best iterate on the validation bits (:mod:`onebit_dask.validation_bits`) and the
other branch of ``step="select"`` (:mod:`onebit_dask.progressive`)."""


class StepModel(NamedTuple):
    """What activating a batch needs of the model: ``A`` (``None`` for the initial batch,
    every row weighted by its bit), a projected sampler's :class:`Projection`, whether
    the model has per-label thresholds (:mod:`onebit_dask.thresholds`), the feature
    map the model is learned through (:class:`~onebit_dask.features.FeatureMap`, ``None``:
    the features as they are), whether a thresholded residual step scales each label
    by the Gaussian ``e^{b_j^2 / 2}`` (``False``: the balanced scale of ``step="refine"``;
    :func:`~onebit_dask.thresholds.step_factors`), and whether the bits are observed
    data rather than a planted problem's (``observed``: the initial and moment steps
    centre each label's bits on its own share of the batch, :func:`centred_sums`;
    ``docs/ALGORITHM.md`` section 9, "Observed data"), and, under chosen queries, the
    ``found`` rows of the label matrix whose positives found so far the model estimates
    (0: none; :func:`found_sums`, section 11), and whether the batch's sums join the
    block's :attr:`Block.pool` of all the fit's batches so far (``pooled``: the steps of
    ``step="pooled"``, section 9f), and whether the batch's pairs are uniform draws of
    the rows of a label matrix, whose mean row the feature map centres on
    (``uniform_rows``: a pool then keeps no sums of negative bits' rows, section 9f)."""

    A: np.ndarray | None
    projection: Any = None
    thresholds: bool = False
    features: Any = None
    gaussian_scale: bool = True
    observed: bool = False
    found: int = 0
    pooled: bool = False
    uniform_rows: bool = False


class Evaluation(NamedTuple):
    """What a block reports for the metrics: ``truth`` gives the planted factors' rows
    (:class:`onebit_dask.synthetic.PlantedTruth`, ``truth_rows(lo, hi)``); ``labels`` are
    the evaluated labels that lie in the block (sorted, global)."""

    truth: PlantedTruth
    labels: np.ndarray


@dataclass(frozen=True)
class Block:
    """The labels ``[lo, hi)``: slots of ``(hi - lo) x l`` arrays, the active rows of the
    current batch, ``out``, the last function's small result, and under
    ``step="pooled"`` the ``pool``: the per-label sums of every batch of the fit so far,
    as the batches gave them (before any weighting by the thresholds)."""

    lo: int
    hi: int
    slots: Mapping[str, np.ndarray] = field(default_factory=dict)
    active: ActiveRows | None = None
    out: Any = None
    pool: ActiveRows | None = None

    def evolve(self, out=None, active=None, **slots):
        """This block with ``out``, the ``slots`` given added or replaced, and ``active``
        (kept when ``None``)."""
        return replace(self, slots={**self.slots, **slots}, out=out,
                       active=self.active if active is None else active)


def map_leaves(leaf, value):
    """``value`` rebuilt with ``leaf`` applied to everything in it that is not a tuple,
    a named tuple (:class:`StepModel`, :class:`Projection`, ...) or a list."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return value._make(map_leaves(leaf, v) for v in value)
    if isinstance(value, (tuple, list)):
        return type(value)(map_leaves(leaf, v) for v in value)
    return leaf(value)


def _own(value):
    """``value`` with every array in it aligned (:func:`onebit_dask.kernels.aligned`)."""
    return map_leaves(_own_leaf, value)


def _own_leaf(value):
    if isinstance(value, np.ndarray):
        return aligned(value)
    if isinstance(value, Block):
        return replace(value, slots={k: aligned(v) for k, v in value.slots.items()},
                       active=_own_active(value.active), pool=_own_active(value.pool))
    return value


def _own_active(active: ActiveRows | None) -> ActiveRows | None:
    if active is None:
        return None
    return active._replace(X=aligned(active.X), labels=aligned(active.labels),
                           weights=aligned(active.weights))


def call(fn, block: Block, *args) -> Block:
    """``fn(block, *args)`` with the block's and the arguments' arrays aligned first: an
    array that arrived from another process can sit at any byte address, and the BLAS
    kernels for a transposed operand then sum in another order (1 ulp apart). Both
    engines run every block function through here."""
    return fn(_own(block), *(_own(a) for a in args))


# -- data -----------------------------------------------------------------------------
@dataclass(frozen=True)
class RowShards:
    """The row-range shards of a batch (:attr:`~onebit_dask.data.shards.ShardKind.ROW_RANGE`),
    each read once per step by :func:`~onebit_dask.data.shards.active_sums`: ``shards``
    are loaded ``(X, labels, y)`` (or the futures of the tasks that load them), ``bounds``
    the label blocks'."""

    shards: list
    bounds: list


def label_aligned(shards, bounds) -> bool:
    """Whether the batch is one :attr:`~onebit_dask.data.shards.ShardKind.LABEL_BLOCK`
    shard per label block (``False``: row-range shards)."""
    kinds = {sh.kind for sh in shards}
    if kinds != {ShardKind.LABEL_BLOCK}:
        if ShardKind.LABEL_BLOCK in kinds:
            raise ValueError(f"a batch mixes shard kinds {sorted(k.value for k in kinds)}")
        return False
    ranges = [(sh.lo, sh.hi) for sh in shards]
    if ranges != list(zip(bounds[:-1], bounds[1:])):
        raise ValueError(f"the batch's label blocks {ranges} are not the model's "
                         f"{list(zip(bounds[:-1], bounds[1:]))}: draw it with the same n_shards")
    return True


def load_shard(shard):
    """A row-range shard's ``(X, labels, y)``, read where the task runs."""
    return shard.load()


def read_row_shard(data, model: StepModel, B_rows, bounds, b_rows=None) -> list:
    """A loaded row-range shard ``(X, labels, y)`` read once: its pieces for every label
    block (:func:`~onebit_dask.data.shards.active_sums`)."""
    return active_sums(*data, model, B_rows, bounds, b_rows)


def score_row_shard(data, model: StepModel, B_rows, bounds, b_rows=None) -> list:
    """A loaded row-range shard ``(X, labels, y)`` scored once: its bits for every label
    block (:func:`~onebit_dask.data.shards.scored_bits`)."""
    return scored_bits(*data, model, B_rows, bounds, b_rows)


def slot_of(block: Block, slot: str):
    """A slot's array (the label blocks' ``B`` rows and thresholds ``b`` for
    :func:`read_row_shard`)."""
    return block.slots[slot]


def out_of(block: Block):
    """The small result of the last function run on ``block``."""
    return block.out


def new_block(lo: int, hi: int) -> Block:
    return Block(lo, hi)


def activate(block: Block, data, model: StepModel, expected: float = 0.0,
             eta: float = 1.0, moment: bool = False) -> Block:
    """Attach the active rows of this block's share of a batch; ``out = n_active``, or with
    thresholds ``(n_active, *moments)`` (:func:`~onebit_dask.thresholds.moments` of the
    labels' shares of positive bits, updated with the batch).

    ``data`` is this block's label-block shard, or its :class:`~onebit_dask.data.shards.Pieces`
    of the row-range shards: either way ``data.activate(model, B_rows, b_rows)`` with the
    block's rows of ``B`` and its thresholds (slot ``"b"``, ``None`` without them). With
    thresholds, in a step, each label's sum is scaled by
    :func:`~onebit_dask.thresholds.step_factors` (``expected = m / d2``) and
    :func:`~onebit_dask.thresholds.column_weights` with the thresholds the residuals used
    (the Gaussian scale unless ``model.gaussian_scale`` is ``False``), and the shares take
    their step of size ``eta``. A ``moment`` step (``model.A`` is
    ``None``: every row counts) weights each label's positive and negative rows as the
    initial batch does (:func:`centred_sums`: on the block's current thresholds, or on
    the labels' own shares of the batch for ``model.observed``), and its shares take
    :func:`~onebit_dask.thresholds.moment_share`. For ``model.observed`` the shares of
    either step are pooled over the batches (their ``pooled`` argument).
    """
    B_rows = block.slots.get("B")
    active, n_active = data.activate(model, B_rows, block.slots.get("b"))
    return _attach(block, active, n_active, model, expected, eta, moment)


def activate_pool(block: Block, model: StepModel, expected: float) -> Block:
    """:func:`activate` for the block's pool (the sums of every batch so far, added by
    :func:`pool_batch`) as the initial batch, read through ``model.features`` (the map
    of the pooled bits: docs/ALGORITHM.md section 9f); ``out`` as there, ``n_active`` the
    pooled observations."""
    pool = block.pool._replace(features=model.features)
    return _attach(block, pool, pool.n_obs, model, expected)


def _attach(block: Block, active: ActiveRows, n_active: int, model: StepModel,
            expected: float, eta: float = 1.0, moment: bool = False) -> Block:
    b_rows = block.slots.get("b")
    if not model.thresholds:
        return block.evolve(out=n_active, active=active)
    counts = thresholds.dense_counts(active.counts, block.lo, block.hi)
    active = active._replace(counts=counts)
    if model.found:
        p, v = thresholds.found_share(counts, model.found)
        active = found_sums(active)
    elif moment:
        p, v = thresholds.moment_share(block.slots["p"], block.slots["v"], counts, eta,
                                       model.observed)
        active = centred_sums(active, b_rows, block.lo, expected, model.observed)
    elif model.A is None:
        p, v = thresholds.initial_share(counts)
    else:
        at = active.labels - block.lo
        f = thresholds.step_factors(b_rows[at], counts.n_bits[at], expected,
                                    model.gaussian_scale)
        active = active._replace(X=row_scaled(f * thresholds.column_weights(b_rows[at]),
                                              active.X))
        p, v = thresholds.step_share(block.slots["p"], block.slots["v"], b_rows, counts, eta,
                                     model.observed)
    return block.evolve(out=(n_active, *thresholds.moments(p, v)), active=active, p=p, v=v)


def pool_batch(block: Block, data, model: StepModel) -> Block:
    """Add a batch's per-label sums, as the initial batch's (``model.A`` is ``None``), to
    the block's pool (the first batch's start it); ``out = None``."""
    active, _ = data.activate(model, block.slots.get("B"), block.slots.get("b"))
    if (model.uniform_rows and model.features is not None and model.thresholds
            and scipy.sparse.issparse(active.X_neg)):  # dense sums take no less room
        exact = exact_labels(active) if block.pool is None else block.pool.exact
        keep = np.isin(active.labels, exact)
        active = active._replace(X_neg=row_scaled(keep.astype(float), active.X_neg),
                                 exact=exact)
        active.X_neg.eliminate_zeros()
    pool = active if block.pool is None else merged_sums([block.pool, active])
    return replace(block, pool=pool, out=None)


EXACT_SHARE = 0.01
"""A pool of uniform rows keeps the negative sums of the labels whose share of positive
bits in the first batch is at least this; the others' asked rows are summed at their
mean, which multiplies the variance of their estimate by at most ``1 / (1 - p_j)``
(docs/ALGORITHM.md section 9f)."""


def exact_labels(active: ActiveRows) -> np.ndarray:
    """The labels of a first batch whose share of positive bits is at least
    :data:`EXACT_SHARE` (global, sorted)."""
    c = active.counts
    share = c.n_pos / np.maximum(c.n_bits, 1.0)
    return c.labels[share >= EXACT_SHARE]


def ridge_moments(block: Block, mean: np.ndarray) -> Block:
    """``out``: the block's share of the sums over labels that the empirical-Bayes ridge
    of the pooled bits takes (:func:`~onebit_dask.ops.features.ridge_parts` of the
    pool's sums of positive rows and counts)."""
    pool = block.pool
    S = pool.X if pool.features is None else pool.X[:, :-1]  # homogeneous rows [S_j, mass]
    counts = pool.counts
    at = np.searchsorted(counts.labels, pool.labels)
    return block.evolve(out=ridge_parts(S, counts.n_bits[at], counts.n_pos[at], mean))


def drop_pool(block: Block) -> Block:
    """The block without its pool (the fitted model keeps no batch)."""
    return replace(block, pool=None, out=None)


def centred_sums(active: ActiveRows, b_all, lo: int, expected: float,
                 observed: bool = False) -> ActiveRows:
    """The per-label sums of a batch's positive (``active.X``) and negative
    (``active.X_neg``) rows as one weighted sum: the bits centred on each label's mean
    (:func:`~onebit_dask.thresholds.init_weights`: the share ``Phi(b_j)`` of the
    thresholds ``b_all`` of the block's labels ``[lo, ...)`` on a planted problem, the
    label's own share of the batch's bits for ``observed`` data), scaled by
    :func:`~onebit_dask.thresholds.step_factors` and
    :func:`~onebit_dask.thresholds.column_weights`. A pool of uniform rows keeps the
    negative sums of ``active.exact`` only (:func:`pool_batch`): another label's asked
    rows are summed at their mean ``n_j mu`` (``docs/ALGORITHM.md`` section 9f), which
    the centred feature map maps to 0, so its sum is ``(w_pos - w_neg)`` times its
    positive rows' sum (its negative sum is zero)."""
    at = active.labels - lo
    b = b_all[at]
    share = thresholds.centring_shares(b, active.counts.n_pos[at], active.counts.n_bits[at],
                                       observed)
    w_pos, w_neg = thresholds.init_weights(share)
    f = thresholds.step_factors(b, active.counts.n_bits[at], expected)
    f = f * thresholds.column_weights(b)
    if active.exact is not None:  # a pool of uniform rows: some asked rows at their mean
        w_pos = np.where(np.isin(active.labels, active.exact), w_pos, w_pos - w_neg)
    return active._replace(X=row_scaled(f * w_pos, active.X) + row_scaled(f * w_neg, active.X_neg),
                           X_neg=None)


def found_sums(active: ActiveRows) -> ActiveRows:
    """Under chosen queries, each label's sum of its positive bits' rows, twice (the
    weights ``(2, 0)`` of a positive and a negative bit; ``docs/ALGORITHM.md`` section
    11): the positives found are the label matrix, and a negative bit adds nothing."""
    return active._replace(X=2.0 * active.X, X_neg=None)


def finalize_init(block: Block, prior: thresholds.Prior, expected: float,
                  observed: bool = False, found: bool = False) -> Block:
    """The thresholded model's initial batch, once the shares of positive bits of all
    labels are in: the thresholds (:func:`~onebit_dask.thresholds.shrink` towards their
    common ``prior``, not at all for a flat one), then each label's sums of positive and
    negative rows weighted as :func:`centred_sums` does (``found``: already weighted by
    :func:`found_sums`)."""
    b_all = thresholds.shrink(block.slots["p"], block.slots["v"], prior)
    if found:
        return block.evolve(active=block.active, b=b_all)
    return block.evolve(active=centred_sums(block.active, b_all, block.lo, expected, observed),
                        b=b_all)


def label_sums(block: Block) -> Block:
    """``out = (labels, S)``: the per-label sums ``S_j = sum_i w_i x_i`` of the active rows."""
    a = block.active  # one row per label (ActiveRows)
    rows = row_scaled(a.weights, a.X)
    if a.features is not None:  # homogeneous sums mapped: dense (n_labels, d1)
        rows = a.features.lower(rows.T).T
    return block.evolve(out=(a.labels, rows))


def _product(block: Block, P_rows, P_top, AtP, scale, moment: bool = False):
    """``(Z_s, X_s^T (w P_s[j]), B_s^T P_s)`` of the dilation product (module docstring);
    with a feature map the rows are homogeneous and read through it (``phi(X_s)``).
    ``moment``: the low-rank part is ``A V^T``, the last iterate before its column
    normalisation (``docs/ALGORITHM.md`` section 9c), instead of ``W D = A B^T D``."""
    a = block.active
    top = a.X.T @ (a.weights[:, None] * P_rows[a.labels - block.lo])
    if a.features is not None:
        top, P_top = a.features.lower(top), a.features.lift(P_top)
    rows = a.weights[:, None] * np.asarray(a.X @ P_top)  # one row per label
    Z = np.zeros((block.hi - block.lo, P_top.shape[1]))
    Z[a.labels - block.lo] += rows
    Z *= scale
    low = None
    if AtP is not None:
        B = block.slots["V" if moment else "B"]
        if "b" in block.slots and not moment:  # the thresholded model weights W's columns
            B = thresholds.column_weights(block.slots["b"])[:, None] * B
        Z += B @ AtP
        low = B.T @ P_rows
    return Z, top, low


def product(block: Block, src: str, dst: str, P_top, AtP, scale: float,
            with_gram: bool = False) -> Block:
    """``dst = Z_s``; ``out = (X_s^T (w P_s[j]), B_s^T P_s or None, Z_s^T Z_s or None)``.

    ``AtP = A^T P_top`` adds the low-rank part ``W = A B^T`` (``None``: ``W = 0``).
    """
    Z, top, low = _product(block, block.slots[src], P_top, AtP, scale)
    return block.evolve(out=(top, low, Z.T @ Z if with_gram else None), **{dst: Z})


def transform(block: Block, src: str, dst: str, M, with_gram: bool = False) -> Block:
    """``dst = src @ M`` (``M`` small); ``out = dst^T dst`` or ``None``."""
    Z = block.slots[src] @ M
    return block.evolve(out=Z.T @ Z if with_gram else None, **{dst: Z})


def cross(block: Block, a: str, b: str) -> Block:
    """``out = a^T b``."""
    return block.evolve(out=block.slots[a].T @ block.slots[b])


def random_slot(block: Block, dst: str, seed: int, width: int) -> Block:
    """``dst`` = standard normals from ``SeedSequence([seed, lo, hi])``."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, block.lo, block.hi]))
    return block.evolve(**{dst: rng.standard_normal((block.hi - block.lo, width))})


def warm_slot(block: Block, dst: str, seed: int, extra: int) -> Block:
    """``dst = [Q, R]``: the block's ``Q`` rows and ``extra`` standard normal columns ``R``
    (:func:`random_slot`'s)."""
    R = random_slot(block, dst, seed, extra).slots[dst]
    return block.evolve(**{dst: np.hstack([block.slots["Q"], R])})


def _evaluation(block: Block, evaluation: Evaluation | None):
    """``(gram of [B*_s, B_s], B_s and b_s at the evaluated labels)`` for the metrics
    (``b_s`` ``None`` for the paper's model)."""
    if evaluation is None:
        return None
    B = block.slots["B"]
    B_true = evaluation.truth.truth_rows(block.lo, block.hi)[1]
    R = np.hstack([B_true, B])
    at = evaluation.labels - block.lo
    b = block.slots.get("b")
    return R.T @ R, B[at], None if b is None else b[at]


def commit(block: Block, gram_A, evaluation: Evaluation | None = None, Q_rows=None,
           V_rows=None) -> Block:
    """The new state: ``Q``, ``V`` (the slots, or the rows given) and ``B = V / n`` with
    ``n_j^2 = v_j^T (A^T A) v_j``; temporaries and active rows are dropped. ``out`` = the
    evaluation pieces or ``None``."""
    Qs = block.slots["Q"] if Q_rows is None else Q_rows
    Vs = block.slots["V"] if V_rows is None else V_rows
    kept = {k: v for k, v in block.slots.items()
            if k in THRESHOLD_SLOTS or k.startswith(COPY_PREFIXES)}
    new = Block(block.lo, block.hi,
                {"Q": Qs, "V": Vs, "B": Vs / row_norms(Vs, gram_A)[:, None], **kept},
                pool=block.pool)
    return replace(new, out=_evaluation(new, evaluation))


def set_state(block: Block, rows, gram_A) -> Block:
    """The state from given rows ``(Q_s, V_s, evaluation)`` (the dense initialisation)."""
    Q_rows, V_rows, evaluation = rows
    return commit(block, gram_A, evaluation, Q_rows, V_rows)


# -- the fused rounds of a step -----------------------------------------------------------
def step_open(block: Block, data, model: StepModel, Q_top, AtQ, scale: float,
              expected: float = 0.0, eta: float = 1.0, moment: bool = False) -> Block:
    """Round 1: activate the batch (:func:`activate`), ``Y_s`` of ``Y = M_dil Q``;
    ``out = (n_active, X_s^T (w Q_s[j]), B_s^T Q_s, Y_s^T Y_s)``, and with thresholds the
    moments of the block's shares of positive bits."""
    block = activate(block, data, model, expected, eta, moment)
    n_active, *moments = block.out if model.thresholds else (block.out,)
    Y, top, low = _product(block, block.slots["Q"], Q_top, AtQ, scale, moment)
    return block.evolve(out=(n_active, top, low, Y.T @ Y, *moments), Y=Y)


def step_close(block: Block, evaluation: Evaluation | None, Rinv, Qn_top, AtQn, scale: float,
               gram_An, prior: thresholds.Prior | None = None, moment: bool = False) -> Block:
    """Round 3: ``Q'_s = Y_s R^{-1}``, ``V'_s`` of ``V' = M_dil Q'`` (the old ``B``), and the
    new state; ``out = (X_s^T (r Q'_s[j]), B_s^T Q'_s, evaluation pieces)``. With
    thresholds (a ``prior``), the new thresholds from the shares of positive bits
    (:func:`~onebit_dask.thresholds.shrink`), after the products that used the old ones."""
    Qn = block.slots["Y"] @ Rinv
    Vn, top, low = _product(block, Qn, Qn_top, AtQn, scale, moment)
    if prior is not None:
        block = block.evolve(active=block.active, b=thresholds.shrink(
            block.slots["p"], block.slots["v"], prior))
    new = commit(block, gram_An, evaluation, Qn, Vn)
    return replace(new, out=(top, low, new.out))


# -- copies of the state -------------------------------------------------------------------
def copy_state(block: Block, prefix: str) -> Block:
    """Copy the per-label state (:data:`STATE_SLOTS`) into ``prefix``-named slots."""
    return block.evolve(**{prefix + k: v for k, v in block.slots.items() if k in STATE_SLOTS})


def swap_state(block: Block, prefix: str) -> Block:
    """Exchange the per-label state with its ``prefix`` copy."""
    slots = dict(block.slots)
    for k in STATE_SLOTS:
        if k in slots:
            slots[k], slots[prefix + k] = slots[prefix + k], slots[k]
    return Block(block.lo, block.hi, slots, pool=block.pool)


def settle(block: Block, prefix: str, restore: bool) -> Block:
    """Drop the ``prefix`` copy, after taking its state back if ``restore``."""
    slots = {k: v for k, v in block.slots.items() if not k.startswith(prefix)}
    if restore:
        slots.update({k[len(prefix):]: v for k, v in block.slots.items()
                      if k.startswith(prefix)})
    return Block(block.lo, block.hi, slots, pool=block.pool)


def bit_auc(block: Block, data, model: StepModel) -> Block:
    """``out`` = :func:`~onebit_dask.metrics.label_auc_sums` of the block's bits of a batch
    scored by the current model without its thresholds (a label's AUC does not depend on
    them): ``data`` is the block's label-block shard or its
    :class:`~onebit_dask.data.shards.ScoredPieces`, either way
    ``data.scored(model, B_rows)``."""
    labels, y, s = data.scored(model, block.slots["B"])
    return block.evolve(out=label_auc_sums(labels, y, s))


# -- the fitted model ----------------------------------------------------------------------
def rows_of(block: Block, slot: str, labels=None) -> Block:
    """``out`` = the slot's rows (all, or at the given global labels that lie in the block)."""
    M = block.slots[slot]
    if labels is not None:
        labels = np.asarray(labels)
        M = M[labels[(labels >= block.lo) & (labels < block.hi)] - block.lo]
    return block.evolve(out=M)


def evaluation_pieces(block: Block, evaluation: Evaluation) -> Block:
    """``out`` = the block's evaluation pieces (as :func:`commit` reports them)."""
    return block.evolve(out=_evaluation(block, evaluation))


def ranking_pieces(block: Block, Y_test, XA, k: int) -> Block:
    """``out = (auc, labels, scores)`` of the block's labels on a held-out set: the ROC AUC
    of each label (NaN where the test set has one class) and, per test row, the block's
    ``k`` best labels by score ``x^T A b_j + b_j0`` and their scores, best first.

    ``Y_test`` is the ``(n_test, hi - lo)`` 0/1 CSR matrix of the block's labels, ``XA``
    the ``(n_test, l)`` products ``X_test A``; ``b_j0`` the block's thresholds (slot
    ``"b"``, 0 without it). The AUCs are those of the fixed-order scores
    (:func:`~onebit_dask.ops.label_auc.label_aucs`: only the labels with both classes
    are scored, those with few positives by BLAS products and exact counting); the top
    ``k`` come from the block's label index (:func:`~onebit_dask.engine.topk.top_k`), the
    labels and scores of brute force. Memory: about two tiles of
    :data:`~onebit_dask.engine.topk.SCORE_BUDGET` bytes of scores (a tile and its
    transpose) at a time.
    """
    Bm = block.slots["B"]
    b = block.slots.get("b")
    n = XA.shape[0]
    aucs = label_aucs(XA, Bm, b, Y_test, tile_bytes=topk.SCORE_BUDGET)
    rows, width = topk.tile_shape(n, Bm.shape[0], topk.SCORE_BUDGET)
    labels, scores = topk.top_k(block, XA, k, width, rows=rows, leaf_size=topk.LEAF_SIZE).out
    return block.evolve(out=(aucs, labels, scores))
