"""``onebit-dask fit``: a synthetic problem or the data at a path, checked before a cluster
starts, then fitted through the estimator's own path."""

from __future__ import annotations

import contextlib
import json
import os
import time

from ..metrics.names import METRICS, RANKING
from ..ops.features import KINDS as FEATURE_KINDS
from ..data.queries import QUERIES, WARMUP_SHARE
from ..ops.thresholds import THRESHOLDS
from ..utils.errors import RunError
from .args import (Given, HelpFormatter, UsageError, add_common, add_target, connect,
                   count_or_share, integer, number, positive_rate, target_of)

SYNTHETIC_ONLY = ("d1", "d2", "flip", "noise_std", "positive_rate", "n_test", "max_eval_labels",
                  "sampler")


def add_fit(sub):
    p = sub.add_parser("fit", formatter_class=HelpFormatter,
                       help="fit on a synthetic problem (or an observations store) and print "
                            "the metrics",
                       description="Fit the one-bit estimator on a synthetic problem with a "
                                   "planted truth and print its test metrics, or on an "
                                   "observations store (--data) and print the training summary.")
    p.add_argument("--data", default=None, metavar="STORE",
                   help="an observations store (onebit_dask.io.write_observations) or an "
                        "XC/svmlight multi-label file (a label matrix) to fit instead of a "
                        "synthetic problem; d1 and d2 come from the data")
    p.add_argument("--test-data", default=None, metavar="FILE",
                   help="with --data: a held-out XC/svmlight file whose ranking metrics "
                        "(auc, precision/ndcg/psp at 1, 3, 5) are reported per iteration")
    g = p.add_argument_group("the synthetic problem (not with --data)")
    g.add_argument("--d1", type=integer(1), default=500, action=Given, help="feature dimension")
    g.add_argument("--d2", type=integer(1), default=200, action=Given, help="number of labels")
    g.add_argument("--flip", type=number(0.0, 0.5), default=0.0, action=Given,
                   help="probability a bit is flipped")
    g.add_argument("--noise-std", type=number(0.0), default=0.0, action=Given,
                   help="std of Gaussian noise added to x^T w_j")
    g.add_argument("--positive-rate", type=positive_rate, default="none", action=Given,
                   metavar="P|P_MIN:P_MAX",
                   help="label priors of the clean bits sign(x^T w*_j + b*_j): none (the "
                        "paper's balanced model), one rate P in (0, 1), or a range spread "
                        "log-uniformly over the labels in a seeded order")
    g.add_argument("--n-test", type=integer(1), default=10_000, action=Given,
                   help="test instances")
    g.add_argument("--max-eval-labels", type=integer(1), default=1000, action=Given,
                   help="labels scored for AUC/Hamming above this many labels")
    g.add_argument("--sampler", default="conditional", action=Given,
                   choices=("conditional", "projected", "explicit"),
                   metavar="{conditional,projected,explicit}",
                   help="how batches are drawn, all exact in law: conditional (only the "
                        "active rows), projected (3k numbers a row, features of the active "
                        "rows) or explicit (every feature)")
    from ..fit.steps import STEPS

    e = p.add_argument_group("the estimator")
    e.add_argument("--rank", type=integer(1), default=3, help="rank k")
    e.add_argument("--batch-size", type=integer(1), default=100_000,
                   help="observations per batch m")
    e.add_argument("--n-iter", type=integer(0), default=10, help="steps after the initial batch")
    e.add_argument("--step", default="auto", choices=STEPS,
                   help="the step: auto is paper on a planted problem and select on data "
                        "(pooled steps, then the pooled or the residual branch, kept by "
                        "progressive validation; docs/ALGORITHM.md sections 9e-9f)")
    e.add_argument("--threshold", default="auto", choices=THRESHOLDS,
                   help="per-label thresholds: none (the paper's model), estimated from the "
                        "bits and shrunk (a planted problem's), or shares (each label's own "
                        "share, for data); auto (the default) picks estimated on a planted "
                        "problem and shares on data (docs/ALGORITHM.md section 9)")
    e.add_argument("--features", default="auto", choices=FEATURE_KINDS,
                   help="feature map estimated from the training features and applied "
                        "through the factors (sparse data stay sparse): auto (the default: "
                        "standardize for dense features, ridge for sparse ones, none for the "
                        "synthetic problem), none, standardize, ridge (each feature centred and "
                        "divided by sqrt(variance + lambda), lambda from the initial batch's "
                        "bits, and from all the bits so far at each pooled step), "
                        "or whiten (also the leading principal directions to unit variance)")
    e.add_argument("--whiten-components", type=integer(1), default=None, metavar="Q",
                   help="with --features whiten: the directions whitened (default "
                        "min(d1, 200))")
    e.add_argument("--queries", default="uniform", choices=QUERIES,
                   help="which pairs of a label matrix (an XC file) a batch asks about: uniform "
                        "(the default, the paper's), or, after --query-warmup uniform batches, "
                        "each drawn row's label among its --query-top-k best labels not asked "
                        "before, by the positives found (popularity) or by the model (model); "
                        "docs/ALGORITHM.md section 11")
    e.add_argument("--query-top-k", type=integer(1), default=20, metavar="K",
                   help="with chosen queries: the best unasked labels a query draws from")
    e.add_argument("--query-explore", type=number(0.0, 1.0), default=0.1, metavar="SHARE",
                   help="with chosen queries: the share of queries with a uniform label")
    e.add_argument("--query-warmup", type=count_or_share, default=WARMUP_SHARE,
                   metavar="N|SHARE",
                   help="with chosen queries: the uniform batches before the policy chooses, "
                        "a count N >= 1 or a share in (0, 1) of the --n-iter + 1 batches "
                        "(rounded, halves up, at least 1 and at most --n-iter)")
    e.add_argument("--seed", type=integer(0), default=0,
                   help="seed of the start (and of the synthetic data)")
    e.add_argument("--shards", type=integer(1), default=4,
                   help="shards per batch, independent of the workers")
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    o.add_argument("--quiet", action="store_true", help="no progress bar, no dashboard line")
    o.add_argument("--allow-large", action="store_true",
                   help="allow arrays of more than 2^30 numbers, and more than 256 workers "
                        "(see onebit_dask.utils.limits)")
    _add_model_options(p)
    add_target(p)
    add_common(p)
    p.set_defaults(run=_run_fit, writes=None)


def _add_model_options(p):
    g = p.add_argument_group("the fitted model")
    g.add_argument("--save", default=None, metavar="MODEL",
                   help="write the fitted model to this zarr store (must not exist)")
    g.add_argument("--checkpoint", default=None, metavar="PATH",
                   help="checkpoint store: written during the fit; rerunning the same command "
                        "resumes from it")
    g.add_argument("--checkpoint-every", type=integer(1), default=None, metavar="N",
                   help="iterations between checkpoints (1 when not given)")





def _fit_inputs(args):
    """``fit``'s data (a problem or a path), its source (built once, by the library's
    :func:`~onebit_dask.data.inputs.as_source`) and the estimator, checked."""
    from .. import OneBitMultiLabel, SyntheticProblem
    from ..data.inputs import PATH_KINDS, as_source
    from ..estimator import check_params
    from ..ops.features import check_source
    from ..utils.limits import check_sizes
    from ..data.synthetic.problem import SAMPLERS, parse_positive_rate
    from ..io import detect
    from ..io.stores.paths import is_url

    est = OneBitMultiLabel(args.rank, batch_size=args.batch_size, n_iter=args.n_iter,
                           step=args.step, n_shards=args.shards, random_state=args.seed,
                           progress=not args.quiet, threshold=args.threshold,
                           features=args.features,
                           whiten_components=args.whiten_components, queries=args.queries,
                           query_top_k=args.query_top_k, query_explore=args.query_explore,
                           query_warmup=args.query_warmup)
    sizes = {"rank": args.rank, "batch_size": args.batch_size, "n_iter": args.n_iter}
    if args.data is None:
        _check_rank(args.rank, args.d1, args.d2, "--d1 and --d2 give")
        check_sizes({"d1": args.d1, "d2": args.d2, **sizes, "n_test": args.n_test},
                    args.sampler if args.sampler in SAMPLERS else "explicit", args.allow_large,
                    FLAGS)
        problem = SyntheticProblem(args.d1, args.d2, args.rank, flip=args.flip,
                                   noise_std=args.noise_std,
                                   positive_rate=parse_positive_rate(args.positive_rate),
                                   seed=args.seed, n_test=args.n_test,
                                   max_eval_labels=args.max_eval_labels, sampler=args.sampler)
        check_params(est.get_params(), problem.d1, problem.d2)
        check_source(est.features, problem)
        return problem, as_source(problem), est, problem.d1, problem.d2
    path = os.fspath(args.data)
    kind = detect(path)  # the library's dispatcher: what as_source will read
    if not is_url(path) and not os.path.exists(path):
        raise FileNotFoundError(f"--data {path!r} does not exist: give a data file (XC or "
                                "svmlight format), a CSR store or an observations store")
    if not is_url(path) and os.path.isdir(path) and kind not in PATH_KINDS:
        raise ValueError(f"--data {path!r} is a directory but not a CSR store or an "
                         "observations store (no onebit-dask format in its zarr.json): "
                         "give one of those, or a data file (XC or svmlight format)")
    given = sorted(set(getattr(args, "given", ())) & set(SYNTHETIC_ONLY))
    if given:
        names = ", ".join("--" + g.replace("_", "-") for g in given)
        raise ValueError(f"{names} set the synthetic problem: they do not apply with --data "
                         f"{args.data!r} (the store gives d1, d2 and the bits)")
    from ..utils.checks import check_int

    check_int("batch_size", args.batch_size, low=1)
    source = as_source(path, random_state=args.seed)
    _check_rank(args.rank, source.d1, source.d2, f"--data {args.data!r} has")
    check_sizes({"d1": source.d1, "d2": source.d2, **sizes}, "store", args.allow_large,
                {**FLAGS, "d1": f"the features of --data {path!r}",
                 "d2": f"the labels of --data {path!r}"}, row_numbers=source.row_numbers)
    check_params(est.get_params(), source.d1, source.d2)
    return path, source, est, source.d1, source.d2


FLAGS = {name: "--" + name.replace("_", "-")
         for name in ("d1", "d2", "rank", "batch_size", "n_iter", "n_test")}
"""The command line's flag for each size :func:`onebit_dask.utils.limits.check_sizes` checks."""


def _check_rank(rank: int, d1: int, d2: int, what: str) -> None:
    if rank > min(d1, d2):
        raise ValueError(f"--rank {rank} is not allowed: give at most min(d1, d2) = "
                         f"{min(d1, d2)} ({what} {d1} features and {d2} labels)")


def _run_fit(args) -> int:
    from .client import check_cluster_target

    try:
        target = check_cluster_target(**target_of(args))
        if args.test_data is not None and args.data is None:
            raise ValueError("--test-data needs --data TRAIN: a synthetic problem has its own "
                             "test set")
        X, source, est, d1, d2 = _fit_inputs(args)
        checkpoint = _check_model_options(args)
        heldout = None
        if args.test_data is not None:
            from ..fit.evaluation import HeldOut, read_test_data

            test = read_test_data(args.test_data, d1, d2, name="--test-data",
                                  training=f"--data {args.data!r}")
            heldout = HeldOut(test, d1, d2)
        # the estimator's own checks and objects, built once, before any cluster starts
        est._set_feature_names(X)
        est._validate_params()
        prepared = est._prepare(source, heldout=heldout, **checkpoint)
    except (TypeError, ValueError, FileNotFoundError, FileExistsError) as exc:
        raise UsageError(str(exc)) from None  # (also ClusterConfigError, ModelStoreError)

    with _save_target(args) as save_lock, connect(
            **target, timeout=args.connect_timeout, worker_timeout=args.worker_timeout,
            quiet=args.quiet, debug=args.debug) as client:
        n_workers = 0 if client is None else len(client.scheduler_info()["workers"])
        start = time.perf_counter()
        est.set_params(engine="local" if client is None else "dask")  # the session's client
        est._fit_prepared(prepared)
        wall = time.perf_counter() - start
        if args.save is not None:  # while the blocks' workers are still there
            if save_lock is not None:  # the save takes the same lock: a moment's gap
                save_lock.release()
            _save(est, args)
    last = est.history_[-1]
    synthetic = args.data is None
    metric_keys = METRICS if synthetic else tuple(k for k in RANKING if k in last)
    result = {key: last[key] for key in metric_keys}
    result.update(
        wall_s=wall, fit_s=last["fit_s"], n_samples=est.n_samples_seen_, d1=d1, d2=d2,
        rank=args.rank, seed=args.seed, step=args.step, batch_size=args.batch_size,
        n_iter=args.n_iter, n_shards=min(args.shards, d2), n_workers=n_workers,
    )
    if synthetic:
        result.update(flip=args.flip, noise_std=args.noise_std,
                      positive_rate=source.planted.positive_rate, sampler=args.sampler)
    else:
        result.update(data=args.data, test_data=args.test_data)
    result["model"] = args.save
    result["history"] = est.history_
    if args.json:
        print(json.dumps(result))
        return 0
    where = f"workers={n_workers or 'in-process'} shards={result['n_shards']}"
    if synthetic:
        print(f"onebit fit d1={d1} d2={d2} rank={args.rank} m={args.batch_size} "
              f"T={args.n_iter} flip={args.flip} noise_std={args.noise_std} step={args.step} "
              f"{where}")
    else:
        print(f"onebit fit data={args.data} d1={d1} d2={d2} rank={args.rank} "
              f"m={args.batch_size} T={args.n_iter} step={args.step} {where}")
    for key in metric_keys:
        print(f"  {key:16s} {result[key]:.4f}")
    print(f"  {'observations':16s} {result['n_samples']:,}")
    print(f"  {'wall time':16s} {wall:.2f} s (training {last['fit_s']:.2f} s)")
    if args.save is not None:
        print(f"  {'model':16s} {args.save}")
    return 0


@contextlib.contextmanager
def _save_target(args):
    """The lock of ``--save``'s store, held from before the fit until the save, so a
    second command saving to the same path is refused at its start (exit 1, one line:
    :class:`~onebit_dask.io.stores.lock.StoreLockedError`) rather than after its
    training; ``None`` without ``--save`` or for a URL (object stores have no lock)."""
    from ..io.stores.lock import StoreLock
    from ..io.stores.paths import is_url, normalise

    if args.save is None or is_url(normalise(args.save)):
        yield None
        return
    lock = StoreLock(normalise(args.save), writer="fit --save")
    lock.acquire()
    try:
        yield lock
    finally:
        lock.release()


def _save(est, args) -> None:
    from ..persist.saving import SaveError

    try:
        est.save(args.save)
    except SaveError as exc:  # the fitted model ends with this process: say so
        again = ("run the same command again (it resumes from the checkpoint, which holds "
                 "the fitted model)" if args.checkpoint else "run the fit again")
        raise RunError(f"{exc.reason}; nothing was written at {exc.path!r} (the partial copy "
                       f"was removed) and the fitted model is lost with this command: free "
                       f"some space and {again}") from None


def _check_model_options(args) -> dict:
    """Check --save, --checkpoint and --checkpoint-every before anything runs (the
    checkpoint itself is built by the estimator's checks); the keyword arguments of
    ``fit``."""
    if args.checkpoint is None and args.checkpoint_every is not None:
        raise ValueError("--checkpoint-every needs --checkpoint PATH")
    for flag, value in (("--save", args.save), ("--checkpoint", args.checkpoint)):
        if value is not None and str(value).startswith("memory://"):
            raise ValueError(f"{flag} {value!r}: a memory:// store ends with this command, "
                             "and what it holds with it: give a path or a lasting URL")
    if args.save is None and args.checkpoint is None:
        return {}
    from ..persist import check_store_target, store_path  # zarr: only for a fit that writes

    if args.save is not None:
        check_store_target(args.save, overwrite=False, kind="model", name="--save")
        if args.checkpoint is not None and store_path(args.save) == store_path(args.checkpoint):
            raise ValueError(f"--save={args.save!r} and --checkpoint={args.checkpoint!r} are one "
                             "path: give the model and the checkpoint two paths")
    if args.checkpoint is None:
        return {}
    check_store_target(args.checkpoint, overwrite=False, kind="checkpoint", name="--checkpoint")
    return {"checkpoint": args.checkpoint, "checkpoint_every": args.checkpoint_every}
