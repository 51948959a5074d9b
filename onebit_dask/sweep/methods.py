"""The methods a sweep can run, each on one cell's synthetic problem (``onebit`` also on
a file dataset: :func:`.datafiles.run_files`).

A method returns per-iteration arrays ``spectral_error``, ``frobenius_error``,
``hamming_loss``, ``auc``, ``n_samples``, ``fit_s`` (cumulative training seconds) and
``n_active`` (observations with a non-zero residual, all of them in a moment or pooled
step; NaN
for the baselines), at most ``n_iter + 1`` entries (a method without iterations gives
one entry, stored at its last iteration), and the training time ``wall_s``.
``uses_step`` says whether the ``step`` dimension applies; a method without it is run
once and its result stored along ``step``.
A method with ``distributable`` takes ``client=``: its fit then runs with the Dask
engine across the cluster (:func:`.placement.runs_distributed` decides which cells do).

The estimators are imported when a method runs: what reads the table (the runner on a
cluster's client, the report) does not import scikit-learn.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..metrics import planted as metrics
from ..metrics.names import METRICS
from ..data.synthetic.problem import FullObservationProblem, SyntheticProblem, parse_positive_rate
from .noise import parse_noise


@dataclass(frozen=True)
class Method:
    run: Callable
    uses_step: bool
    description: str
    modes: tuple = ("single",)  # "single": streamed single-label batches; "full": n_train > 0;
    #                             "files": a spec's file datasets (.datafiles)
    distributable: bool = False  # run(params, fixed, client=...) fits on the cluster


def make_problem(params: dict, fixed: dict) -> SyntheticProblem:
    model, level = parse_noise(params["noise"])
    return SyntheticProblem(
        params["d1"], params["d2"], params["rank"],
        flip=level if model == "flip" else 0.0,
        noise_std=level if model == "gaussian" else 0.0,
        positive_rate=parse_positive_rate(params.get("positive_rate", "none")),
        seed=params["seed"], n_test=fixed["n_test"], max_eval_labels=fixed["max_eval_labels"],
        sampler=fixed["sampler"])


def run_onebit(params: dict, fixed: dict, client=None) -> dict:
    if "train_path" in params:  # a file dataset
        from .datafiles import run_files

        return run_files(params, fixed, client)
    from ..estimator import OneBitMultiLabel, use_client

    problem = make_problem(params, fixed)
    if params["n_train"] > 0:
        problem = FullObservationProblem(problem, params["n_train"])
    est = OneBitMultiLabel(params["rank"], batch_size=params["batch_size"],
                           n_iter=params["n_iter"], step=params["step"],
                           threshold=params.get("threshold", "none"),
                           n_shards=fixed["n_shards"], random_state=params["seed"],
                           engine="local" if client is None else "dask")
    with contextlib.nullcontext() if client is None else use_client(client):
        est.fit(problem)
    out = {key: np.array([h[key] for h in est.history_], dtype=float)
           for key in (*METRICS, "n_samples", "fit_s", "n_active")}
    out["wall_s"] = est.history_[-1]["fit_s"]
    return out


def observations(params: dict, fixed: dict, problem: SyntheticProblem):
    """The observations the one-bit estimator of the same cell uses: batches
    ``0..n_iter`` of ``batch_size``, drawn with the same shards."""
    return problem.draw_batches(range(params["n_iter"] + 1), params["batch_size"],
                                fixed["n_shards"])


def _run_baseline(estimator):
    """Single-label: the cell's one-bit observations; full: the ``n_train x d2`` labels.
    ``estimator(baselines, params)`` builds the estimator from :mod:`onebit_dask.baselines`."""
    def run(params: dict, fixed: dict) -> dict:
        from .. import baselines

        problem = make_problem(params, fixed)
        if params["n_train"] > 0:
            data = problem.full_observation(params["n_train"])
            n_samples = data[1].size
        else:
            data = observations(params, fixed, problem)
            n_samples = data[0].shape[0]
        start = time.perf_counter()
        est = estimator(baselines, params)
        est.fit(*data, **({} if params["n_train"] > 0 else {"n_labels": problem.d2}))
        wall = time.perf_counter() - start
        scores = metrics.evaluate(problem.test_set(), problem.truth, est.A_, est.B_)
        return {**{k: [v] for k, v in scores.items()}, "n_samples": [n_samples],
                "fit_s": [wall], "n_active": [np.nan], "wall_s": wall}
    return run


BOTH = ("single", "full")
METHODS = {
    "onebit": Method(run_onebit, True, "one-bit alternating power iteration (this package)",
                     (*BOTH, "files"), distributable=True),
    "leml": Method(_run_baseline(lambda b, p: b.LEML(p["rank"], random_state=p["seed"])), False,
                   "LEML, squared loss, lambda by a validation split", BOTH),
    "onevsall": Method(_run_baseline(lambda b, p: b.OneVsAll()), False,
                       "one logistic regression per label"),
    "colwise_1bit": Method(_run_baseline(lambda b, p: b.ColumnwiseOneBit()), False,
                           "column-wise one-bit compressed sensing"),
    "svm": Method(_run_baseline(lambda b, p: b.OneVsRestSVM()), False,
                  "one-vs-rest linear SVM", ("full",)),
    "lrt": Method(_run_baseline(lambda b, p: b.TraceNormMultiLabel(
                      "logistic", random_state=p["seed"])),
                  False, "logistic loss + trace norm, proximal gradient", ("full",)),
    "smt": Method(_run_baseline(lambda b, p: b.TraceNormMultiLabel(
                      "squared", random_state=p["seed"])),
                  False, "squared loss + trace norm, proximal gradient", ("full",)),
}
