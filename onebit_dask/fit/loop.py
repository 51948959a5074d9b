"""The fit loop of :class:`~onebit_dask.estimator.OneBitMultiLabel`, as plain functions
over an explicit state.

The estimator checks its parameters and its data, builds a :class:`~onebit_dask.data.
source.Source`, an engine (:mod:`onebit_dask.engine.placement`) and a fresh
:class:`FitState`, and hands them to :func:`fit_source` (or :func:`partial_step`); these
draw the batches, run the initialisation and the steps of :mod:`onebit_dask.algorithm`
on the engine, record the history, write the checkpoints and leave the fitted state,
label blocks included, in the :class:`FitState`.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from . import select as progressive
from .calibration import calibrate, held_out_batch
from .evaluation import planted_evaluations, planted_metrics
from .algorithm import init_dense, init_randomized, step
from ..engine import placement
from ..engine import blocks as B
from ..engine.blocks import StepModel
from ..ops.features import fitted_map_and_basis, ridge_basis, ridge_map, ridge_of
from ..ops.kernels import one_blas_thread
from . import steps
from .progress import StepProgress
from .queries import QueriedBatches
from .state import FitSettings, FitState, restore
from .validation import ValidationBits

def map_features(settings: FitSettings, state: FitState, rows, bits=None,
                 keep_basis: bool = False) -> None:
    """Estimate the feature map of ``settings.features`` from the training features
    ``rows()`` (:func:`onebit_dask.features.fit_feature_map`; an array, CSR matrix or
    ``RowChunks``, asked for only when there is a map) and, for the ridge map, the
    initial batch's bits ``bits()`` (``(X_rows, labels, y)`` pieces), its time counted
    as training time. ``keep_basis`` (a fit whose steps pool, with thresholds): also
    keep the ridge map's basis in ``state.ridge_basis`` (docs/ALGORITHM.md section 9f)."""
    if settings.features == "none":
        return
    start = time.perf_counter()
    state.feature_map, basis = fitted_map_and_basis(rows(), settings.features,
                                                    settings.whiten_components, state.rng,
                                                    bits, state.d2)
    state.ridge_basis = basis if keep_basis else None
    state.fit_s += time.perf_counter() - start


def initial_bits(source, settings: FitSettings):
    """The initial batch of ``source`` as ``(X_rows, labels, y)`` pieces, read one shard
    at a time where this runs (:func:`map_features`)."""
    return lambda: (shard.load() for shard in source.batch(0, settings.batch_size,
                                                            settings.n_shards))


def keep(state: FitState, engine) -> None:
    """Keep the fitted blocks (:func:`onebit_dask.engine.placement.keep`)."""
    state.blocks = placement.keep(engine, state.label_side_numbers)


def prepare(engine, shards, bounds):
    """The per-block data of a batch and its number of observations."""
    return engine.prepare(shards, bounds), sum(sh.n_obs for sh in shards)


def fit_source(settings: FitSettings, state: FitState, engine, source, checkpoint=None,
               heldout=None) -> None:
    """Run a whole fit of ``source`` on ``engine`` into ``state`` (``n_iter + 1``
    batches), resuming ``checkpoint`` (:class:`onebit_dask.persist.Checkpoint`) if it
    holds this fit, and recording the held-out metrics of ``heldout``
    (:class:`onebit_dask.fit.evaluation.HeldOut`)."""
    if checkpoint is None:
        return _run(settings, state, engine, source, None, heldout)
    with checkpoint:  # its one writer, from resume to the last write
        return _run(settings, state, engine, source, checkpoint, heldout)


def _run(settings, state, engine, source, checkpoint, heldout) -> None:
    first = 0  # the first iteration to run
    saved = None if checkpoint is None else checkpoint.resume(engine)
    if saved is not None:
        restore(state, saved)
        first = state.n_steps + 1
    n_iter = settings.n_iter
    fork, branches = steps.RULES[settings.step].fork(n_iter), None
    if fork is not None and fork < first <= n_iter:
        raise ValueError(
            f"the checkpoint holds iteration {first - 1} of a fit with step='select', "
            f"after its fork at iteration {fork}, where the two branches are not written "
            "(a checkpoint of a fit whose step='auto' meant 'moment'): resume it with "
            "step='moment', or start again with another checkpoint path")
    pooled = steps.pools_after(settings.step, max(first - 1, 0), n_iter)  # section 9f
    keep_basis = pooled and settings.threshold != "none"  # a ridge re-estimated a step
    if saved is None:
        map_features(settings, state, source.features, initial_bits(source, settings),
                     keep_basis)
        engine.start(state.bounds)
    elif keep_basis:  # the ridge map's basis, once more
        state.ridge_basis = ridge_basis(source.features, settings.features)
    state.blas = engine.blas()
    features = shared_features(state, engine)
    placed = source.place(engine, state.bounds)
    if settings.policy.uniform:
        chosen = None
        batches = lambda t: placed.batch(t, settings.batch_size, settings.n_shards)  # noqa: E731
    else:  # batch t asks what the model after batch t - 1 chooses: no prefetch
        chosen = QueriedBatches(settings, source, placed)
        if saved is not None:  # the pairs asked up to the checkpoint's batch
            chosen.asked = saved["asked"]
        state.found_rows, state.asked = source.n, chosen.asked
        batches = lambda t: chosen(t, state, engine)  # noqa: E731
    given, source = source, placed  # the data as given (here) and as the engine holds them
    if pooled and first > 0:
        rebuild_pools(settings, state, engine, batches, source, features, first)
    problem, planted = source.planted, None
    if problem is not None:
        test_set = problem.test_set()
        planted = (problem, test_set, planted_evaluations(problem, test_set.labels, state.bounds))
    ranking = None
    if heldout is not None:
        heldout.place(engine, state.bounds)
        ranking = (heldout, source.propensities())
    validation = None
    if settings.validation_fraction is not None:
        validation = ValidationBits(given, settings.n_iter + 1, settings.batch_size,
                                    settings.n_shards, settings.validation_fraction)
        validation.place(engine, state.bounds)
    with StepProgress(n_iter + 1, done=first, enabled=settings.progress) as bar:
        upcoming = prepare(engine, batches(first), state.bounds) if first <= n_iter else None
        for t in range(first, n_iter + 1):
            current = upcoming
            if t < n_iter and engine.prefetches and chosen is None:
                # the Dask engine loads batch t + 1 (user data) while step t runs
                upcoming = prepare(engine, batches(t + 1), state.bounds)
            last = t == n_iter
            due = last or (settings.eval_every and t % settings.eval_every == 0)
            step_args = (*current, source, planted if due else None, ranking if due else None,
                         features)
            if fork is not None and t >= fork:
                branches = branches or progressive.Branches(engine, state.top,
                                                            state.feature_map)
                advance_branches(settings, state, engine, branches, *step_args)
                if last:
                    branches.finish(state, engine)
            else:
                advance(settings, state, engine, *step_args)
            if pooled:  # each step's map (docs/ALGORITHM.md section 9f)
                features = shared_features(state, engine)
                if not steps.pools_after(settings.step, state.n_steps, n_iter):
                    engine.map(B.drop_pool)  # no step pools any more
                    pooled = False
            del current, step_args
            if chosen is not None:  # the pairs asked, not those the step used
                state.history[-1].update(chosen.last)
                state.n_samples_seen = chosen.last["n_samples"]
            if validation is not None:
                _validate(state, validation, engine)
            forked = fork is not None and fork <= t < n_iter  # two branches: no checkpoint
            if checkpoint is not None and checkpoint.due(t, last) and not (forked or last):
                checkpoint.write(state, engine)
                if pooled and engine.keeps_lineage:  # restarted blocks: no pools
                    rebuild_pools(settings, state, engine, batches, source, features, t + 1)
            if t < n_iter and (chosen is not None or not engine.prefetches):
                upcoming = prepare(engine, batches(t + 1), state.bounds)
            bar.update(state.history[-1])
    state.best_iteration = state.n_steps
    if validation is not None:
        _select(state, validation, engine)
        calibrate(state, engine, validation=validation)
    else:
        calibrate(state, engine, held_out_batch(source, settings, state.d1), features=features)
    if pooled:
        engine.map(B.drop_pool)
    state.ridge_basis = None
    if checkpoint is not None and first <= n_iter:  # the last: the model with its link
        checkpoint.write(state, engine)
    keep(state, engine)


def _validate(state, validation, engine) -> None:
    """Score the iterate on the validation bits (its time counts as training time)."""
    start = time.perf_counter()
    record = validation.update(engine, state.top.Q, state.top, state.n_steps,
                               state.feature_map)
    state.fit_s += time.perf_counter() - start
    state.history[-1].update(record, fit_s=state.fit_s)


def _select(state, validation, engine) -> None:
    """Take back the best iterate the validation bits selected, with its feature map."""
    state.best_iteration, best = validation.finish(engine, state.n_steps)
    if best is not None:
        state.top, state.feature_map = best
    state.validation_score = np.array([h["validation_auc"] for h in state.history])


def partial_step(settings: FitSettings, state: FitState, engine, shards) -> None:
    """Initialise (a fresh ``state``) or take one step on the given ``shards`` (all of a
    batch), then keep the blocks."""
    state.blas = engine.blas()
    advance(settings, state, engine, *prepare(engine, shards, state.bounds), None, None, None,
            shared_features(state, engine))
    state.best_iteration = state.n_steps
    state.calibration = None  # the link was fitted to the model before this step
    keep(state, engine)


def shared_features(state: FitState, engine):
    """``state``'s feature map as the blocks' tasks take it (:meth:`engine.share`: sent to
    the cluster once, not with every task), or ``None``."""
    return None if state.feature_map is None else engine.share(state.feature_map)


def advance(settings, state, engine, data, n_obs, source, planted, ranking,
            features) -> None:
    """Initialise (first batch) or take one step, then record the iteration: with
    ``planted = (problem, test_set, per-block evaluations)`` its test metrics, with
    ``ranking = (heldout, propensities)`` the held-out ranking metrics; ``features``:
    :func:`shared_features`."""
    start = time.perf_counter()
    traffic = engine.bytes_sent + engine.bytes_received
    with one_blas_thread():  # small products: no thread start-up
        n_active, outs = _update(settings, state, engine, data, n_obs, source,
                                 None if planted is None else planted[2], features)
    state.n_steps += 1
    state.n_samples_seen += n_obs
    state.fit_s += time.perf_counter() - start
    record = {"iteration": state.n_steps, "n_samples": state.n_samples_seen,
              "n_active": n_active, "fit_s": state.fit_s,
              "client_bytes": engine.bytes_sent + engine.bytes_received - traffic}
    start = time.perf_counter()
    if planted is not None:
        record.update(planted_metrics(planted[0], planted[1], state.top.Q, state.d2, outs))
    if ranking is not None:
        with one_blas_thread():
            record.update(ranking[0].metrics(engine, state.top.Q, ranking[1],
                                             state.feature_map))
    if ranking is not None or planted is not None:
        record["eval_s"] = time.perf_counter() - start  # not training: not in fit_s
    state.history.append(record)


def advance_branches(settings, state, engine, branches, data, n_obs, source, planted,
                     ranking, features) -> None:
    """A forked iteration of ``step="select"`` (:mod:`onebit_dask.progressive`): each
    branch scores the batch's bits with its iterate, then takes its own rule's step
    (:func:`advance`); the pooled branch's record stands in the history until
    :meth:`~onebit_dask.progressive.Branches.finish`."""
    before = state.n_steps, state.n_samples_seen
    traffic = engine.bytes_sent + engine.bytes_received
    records = {}
    for k, rule in enumerate(steps.RULES[settings.step].branches):
        if k:
            branches.swap(state, engine)
            state.n_steps, state.n_samples_seen = before
            features = shared_features(state, engine)  # each branch's own map
        start = time.perf_counter()
        with one_blas_thread():
            score = progressive.batch_auc(engine, data,
                                          StepModel(state.top.Q, None, False, features))
        state.fit_s += time.perf_counter() - start
        advance(replace(settings, step=rule), state, engine, data, n_obs, source, planted,
                ranking, features)
        records[rule] = {**state.history.pop(), "progressive_auc": score}
    branches.swap(state, engine)
    for record in records.values():  # both branches' time and traffic are the iteration's
        record.update(fit_s=state.fit_s,
                      client_bytes=engine.bytes_sent + engine.bytes_received - traffic)
    branches.add(records)
    state.history.append(branches.records[steps.RULES[settings.step].branches[0]][-1])


def initial_model(settings: FitSettings, state: FitState, source, features,
                  pooled: bool) -> StepModel:
    """The :class:`StepModel` of the initial batch, and of every pooled step (whose
    batches join the blocks' pools, ``pooled``: docs/ALGORITHM.md section 9f);
    ``source`` ``None`` for ``partial_fit``'s given batch."""
    return StepModel(None, None if source is None else source.projection(None),
                     settings.threshold != "none", features,
                     observed=settings.threshold == "shares", found=state.found_rows,
                     pooled=pooled, uniform_rows=source is not None and source.uniform_rows)


def pooled_map(state: FitState, engine):
    """The ridge map of the pooled bits (``docs/ALGORITHM.md`` section 9f): the
    empirical-Bayes ridge of the blocks' pools (:func:`~onebit_dask.ops.features.ridge_of`)
    on the training features' mean and variance; set as ``state.feature_map`` and
    returned as the blocks' tasks take it."""
    mean, var = state.ridge_basis
    ridge = ridge_of(engine.map(B.ridge_moments, mean), var)
    state.feature_map = ridge_map(mean, var, ridge)
    return shared_features(state, engine)


def rebuild_pools(settings, state, engine, batches, source, features, first: int) -> None:
    """The pools of a pooled fit whose blocks restarted from a checkpoint (a resume, or on
    an engine that restarts them after each checkpoint it writes: ``keeps_lineage``):
    batches ``0, ..., first - 1`` added in the order the fit added them (a checkpoint
    holds the state, not the batches)."""
    model = initial_model(settings, state, source, features, True)
    for t in range(first):
        data, _ = prepare(engine, batches(t), state.bounds)
        engine.map(B.pool_batch, model, per_block=engine.by_block(data, model))


def _update(settings, state, engine, data, n_obs, source, evaluation, features):
    """The initialisation or one step; returns ``(n_active, the blocks' evaluation
    pieces)``."""
    d1, d2 = state.d1, state.d2
    thresholded = settings.threshold != "none"
    observed = settings.threshold == "shares"
    rule = steps.RULES[settings.step]
    if state.n_steps < 0 or rule.pooled(state.n_steps, settings.n_iter):  # section 9f
        pooled = state.n_steps >= 0 or steps.pools_after(settings.step, 0, settings.n_iter)
        model = initial_model(settings, state, source, features, pooled)
        start = None if state.n_steps < 0 else state.top
        if model.pooled:
            engine.map(B.pool_batch, model, per_block=engine.by_block(data, model))
            data = None  # the blocks' pools
            if start is not None and state.ridge_basis is not None:  # None: no thresholds
                model = model._replace(features=pooled_map(state, engine))
        n_pooled = n_obs + (0 if start is None else state.n_samples_seen)
        if settings.dense_init(d1, d2):
            state.top, outs = init_dense(engine, data, model, n_pooled, d1, d2, settings.rank,
                                         state.bounds, evaluation)
        else:
            state.top, outs = init_randomized(engine, data, model, n_pooled, d1, d2,
                                              settings.rank, state.rng,
                                              settings.init_power_iter, evaluation,
                                              start=start)
        return n_obs, outs
    moment = rule.moment(state.n_steps, settings.n_iter)
    A = None if moment else state.top.Q  # a moment step: every row counts
    projection = None if source is None else source.projection(A)
    model = StepModel(A, projection, thresholded, features,
                      gaussian_scale=rule.gaussian_scale, observed=observed,
                      found=state.found_rows)
    eta = 1.0 if state.found_rows else rule.size(state.n_steps)  # all the positives found
    state.top, n_active, outs = step(engine, data, model, state.top, n_obs, d2, eta,
                                     evaluation, moment)
    return n_active, outs
