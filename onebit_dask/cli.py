"""The onebit-dask command line.

Exit status: 0 on success; 2 for bad input (one line on stderr, before any work
starts); 1 for a failure at run time (a cluster that does not start, a lost
scheduler, a full disk, a damaged store): one line naming what failed and what to
do. ``--debug`` shows the traceback instead.

Each command is a function ``_add_NAME(sub)`` that declares its options and sets
``run`` to the function that carries it out; add a command by writing one and
listing it in :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import sys
import time

from . import shipped
from .errors import EXIT_RUNTIME, EXIT_USAGE, RunError
from .failures import describe_failure
from .metric_names import METRICS, RANKING


class UsageError(Exception):
    """Bad command-line input: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block
        raise UsageError(message)


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default (options without one, or flags, show none)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


class _Given(argparse.Action):
    """Store a value and remember that it was given on the command line."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        given = set(getattr(namespace, "given", ()))
        setattr(namespace, "given", given | {self.dest})


def _seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed: give a positive, finite "
                                         "number of seconds")
    return value


def _integer(low: int):
    """An argparse type: an integer ``>= low``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed: give an integer "
                                             f">= {low}")
        return value
    return parse


def _number(low: float, high: float | None = None):
    """An argparse type: a finite number in ``[low, high)`` (``>= low`` without ``high``)."""
    allowed = f"in [{low:g}, {high:g})" if high is not None else f">= {low:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value < low or (high is not None and value >= high):
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed: give a number "
                                             f"{allowed}")
        return value
    return parse


def _positive_rate(text: str) -> str:
    """An argparse type: ``none``, a rate ``P`` or a range ``P_MIN:P_MAX`` (checked by
    :func:`onebit_dask.synthetic.parse_positive_rate`, kept as text)."""
    from .synthetic import parse_positive_rate

    try:
        parse_positive_rate(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not allowed: give none, a rate P with 0 < P < 1, or a range "
            "P_MIN:P_MAX with 0 < P_MIN <= P_MAX < 1") from None
    return text


def _common(p) -> None:
    p.add_argument("--debug", action="store_true",
                   help="show the traceback of a failure (and Dask's log messages)")


# --- fit -----------------------------------------------------------------------------------

SYNTHETIC_ONLY = ("d1", "d2", "flip", "noise_std", "positive_rate", "n_test", "max_eval_labels",
                  "sampler")


def _add_fit(sub):
    p = sub.add_parser("fit", formatter_class=_Help,
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
    g.add_argument("--d1", type=_integer(1), default=500, action=_Given, help="feature dimension")
    g.add_argument("--d2", type=_integer(1), default=200, action=_Given, help="number of labels")
    g.add_argument("--flip", type=_number(0.0, 0.5), default=0.0, action=_Given,
                   help="probability a bit is flipped")
    g.add_argument("--noise-std", type=_number(0.0), default=0.0, action=_Given,
                   help="std of Gaussian noise added to x^T w_j")
    g.add_argument("--positive-rate", type=_positive_rate, default="none", action=_Given,
                   metavar="P|P_MIN:P_MAX",
                   help="label priors of the clean bits sign(x^T w*_j + b*_j): none (the "
                        "paper's balanced model), one rate P in (0, 1), or a range spread "
                        "log-uniformly over the labels in a seeded order")
    g.add_argument("--n-test", type=_integer(1), default=10_000, action=_Given,
                   help="test instances")
    g.add_argument("--max-eval-labels", type=_integer(1), default=1000, action=_Given,
                   help="labels scored for AUC/Hamming above this many labels")
    g.add_argument("--sampler", default="conditional", action=_Given,
                   choices=("conditional", "projected", "explicit"),
                   metavar="{conditional,projected,explicit}",
                   help="how batches are drawn, all exact in law: conditional (only the "
                        "active rows), projected (3k numbers a row, features of the active "
                        "rows) or explicit (every feature)")
    from .kernels import STEPS

    e = p.add_argument_group("the estimator")
    e.add_argument("--rank", type=_integer(1), default=3, help="rank k")
    e.add_argument("--batch-size", type=_integer(1), default=100_000,
                   help="observations per batch m")
    e.add_argument("--n-iter", type=_integer(0), default=10, help="steps after the initial batch")
    e.add_argument("--step", default="auto", choices=STEPS, metavar="{" + ",".join(STEPS) + "}",
                   help="the step: auto is paper on a planted problem and select on data "
                        "(moment steps, then the moment or the residual branch, kept by "
                        "progressive validation; docs/ALGORITHM.md section 9e)")
    e.add_argument("--threshold", default="estimated", choices=("none", "estimated"),
                   metavar="{none,estimated}",
                   help="per-label thresholds: none (the paper's model) or estimated from the "
                        "bits (for labels that are rarely positive)")
    e.add_argument("--features", default="none", choices=("none", "standardize", "whiten"),
                   metavar="{none,standardize,whiten}",
                   help="feature map estimated from the training features and applied "
                        "through the factors (sparse data stay sparse): none, standardize, "
                        "or whiten (also the leading principal directions to unit variance; "
                        "for real features, not with the synthetic problem)")
    e.add_argument("--whiten-components", type=_integer(1), default=None, metavar="Q",
                   help="with --features whiten: the directions whitened (default "
                        "min(d1, 200))")
    e.add_argument("--seed", type=_integer(0), default=0,
                   help="seed of the start (and of the synthetic data)")
    e.add_argument("--shards", type=_integer(1), default=4,
                   help="shards per batch, independent of the workers")
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    o.add_argument("--quiet", action="store_true", help="no progress bar, no dashboard line")
    o.add_argument("--allow-large", action="store_true",
                   help="allow arrays of more than 2^30 numbers (see onebit_dask.limits)")
    _add_model_options(p)
    _add_target(p)
    _common(p)
    p.set_defaults(run=_run_fit, writes=None)


def _add_model_options(p):
    g = p.add_argument_group("the fitted model")
    g.add_argument("--save", default=None, metavar="MODEL",
                   help="write the fitted model to this zarr store (must not exist)")
    g.add_argument("--checkpoint", default=None, metavar="PATH",
                   help="checkpoint store: written during the fit; rerunning the same command "
                        "resumes from it")
    g.add_argument("--checkpoint-every", type=_integer(1), default=None, metavar="N",
                   help="iterations between checkpoints (1 when not given)")





def _fit_inputs(args):
    """``fit``'s data arguments, their source and the estimator, checked."""
    from . import OneBitMultiLabel, SyntheticProblem
    from .data.inputs import as_source
    from .estimator import check_params
    from .features import check_source
    from .limits import check_sizes
    from .synthetic import SAMPLERS, parse_positive_rate
    from .stores.paths import is_url

    est = OneBitMultiLabel(args.rank, batch_size=args.batch_size, n_iter=args.n_iter,
                           step=args.step, n_shards=args.shards, random_state=args.seed,
                           progress=not args.quiet, threshold=args.threshold,
                           features=args.features,
                           whiten_components=args.whiten_components)
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
        return (problem,), as_source(problem), est, problem.d1, problem.d2
    path = os.fspath(args.data)
    if not is_url(path) and not os.path.exists(path):
        raise FileNotFoundError(f"--data {path!r} does not exist: give a data file (XC or "
                                "svmlight format), a CSR store or an observations store")
    if not is_url(path) and os.path.isdir(path):
        from .data.csr_store import FORMAT as CSR_FORMAT
        from .io import FORMAT as OBSERVATIONS_FORMAT
        from .stores.zarr_format import group_attrs

        if (group_attrs(path) or {}).get("format") not in (CSR_FORMAT, OBSERVATIONS_FORMAT):
            raise ValueError(f"--data {path!r} is a directory but not a CSR store or an "
                             "observations store (no onebit-dask format in its zarr.json): "
                             "give one of those, or a data file (XC or svmlight format)")
    given = sorted(set(getattr(args, "given", ())) & set(SYNTHETIC_ONLY))
    if given:
        names = ", ".join("--" + g.replace("_", "-") for g in given)
        raise ValueError(f"{names} set the synthetic problem: they do not apply with --data "
                         f"{args.data!r} (the store gives d1, d2 and the bits)")
    from ._checks import check_int
    from .data.xc import read_xc

    check_int("batch_size", args.batch_size, low=1)
    data = read_xc(path) if os.path.isfile(path) else (path,)
    source = as_source(*data, random_state=args.seed)
    _check_rank(args.rank, source.d1, source.d2, f"--data {args.data!r} has")
    check_sizes({"d1": source.d1, "d2": source.d2, **sizes}, "store", args.allow_large,
                {**FLAGS, "d1": f"the features of --data {path!r}",
                 "d2": f"the labels of --data {path!r}"})
    check_params(est.get_params(), source.d1, source.d2)
    return data, source, est, source.d1, source.d2


FLAGS = {name: "--" + name.replace("_", "-")
         for name in ("d1", "d2", "rank", "batch_size", "n_iter", "n_test")}
"""The command line's flag for each size :func:`onebit_dask.limits.check_sizes` checks."""


def _check_rank(rank: int, d1: int, d2: int, what: str) -> None:
    if rank > min(d1, d2):
        raise ValueError(f"--rank {rank} is not allowed: give at most min(d1, d2) = "
                         f"{min(d1, d2)} ({what} {d1} features and {d2} labels)")


def _run_fit(args) -> int:
    from .session import check_target

    try:
        target = check_target(**_target(args))
        if args.test_data is not None and args.data is None:
            raise ValueError("--test-data needs --data TRAIN: a synthetic problem has its own "
                             "test set")
        data, source, est, d1, d2 = _fit_inputs(args)
        fit_options = _check_model_options(args, est, source)
        if args.test_data is not None:
            from .data.heldout import HeldOut, read_test_data

            test = read_test_data(args.test_data, d1, d2, name="--test-data",
                                  training=f"--data {args.data!r}")
            HeldOut(test, d1, d2)  # checked before any work
            fit_options["eval_set"] = test
    except (TypeError, ValueError, FileNotFoundError, FileExistsError) as exc:
        raise UsageError(str(exc)) from None  # (also ClusterConfigError, ModelStoreError)
    with _client(**target, timeout=args.connect_timeout,
                 worker_timeout=args.worker_timeout, quiet=args.quiet,
                 debug=args.debug) as client:
        n_workers = 0 if client is None else len(client.scheduler_info()["workers"])
        start = time.perf_counter()
        est.set_params(engine="local" if client is None else "dask")  # the session's client
        est.fit(*data, **fit_options)
        wall = time.perf_counter() - start
        if args.save is not None:  # while the blocks' workers are still there
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


def _save(est, args) -> None:
    from .persist import SaveError

    try:
        est.save(args.save)
    except SaveError as exc:  # the fitted model ends with this process: say so
        again = ("run the same command again (it resumes from the checkpoint, which holds "
                 "the fitted model)" if args.checkpoint else "run the fit again")
        raise RunError(f"{exc.reason}; nothing was written at {exc.path!r} (the partial copy "
                       f"was removed) and the fitted model is lost with this command: free "
                       f"some space and {again}") from None


def _check_model_options(args, est, source) -> dict:
    """Check --save, --checkpoint and --checkpoint-every before anything runs; the keyword
    arguments of ``fit``."""
    if args.checkpoint is None and args.checkpoint_every is not None:
        raise ValueError("--checkpoint-every needs --checkpoint PATH")
    if args.save is None and args.checkpoint is None:
        return {}
    from .model_io import check_target, store_path  # zarr: only for a fit that writes
    from .persist import Checkpoint

    if args.save is not None:
        check_target(args.save, overwrite=False, kind="model", name="--save")
        if args.checkpoint is not None and store_path(args.save) == store_path(args.checkpoint):
            raise ValueError(f"--save={args.save!r} and --checkpoint={args.checkpoint!r} are one "
                             "path: give the model and the checkpoint two paths")
    if args.checkpoint is None:
        return {}
    check_target(args.checkpoint, overwrite=False, kind="checkpoint", name="--checkpoint")
    Checkpoint(args.checkpoint, args.checkpoint_every, est.get_params(deep=False),
               source.identity())
    return {"checkpoint": args.checkpoint, "checkpoint_every": args.checkpoint_every}



# --- saved models --------------------------------------------------------------------------

def _add_predict(sub):
    p = sub.add_parser("predict", formatter_class=_Help,
                       help="the top-k labels of observations by a saved model")
    p.add_argument("model", help="a model store written by fit --save")
    p.add_argument("--data", required=True, help="an observations store (its X is scored)")
    p.add_argument("--top-k", type=int, default=5, help="labels per row")
    p.add_argument("--rows", type=int, default=10, help="first rows scored")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    _add_target(p, default="in-process")
    _common(p)
    p.set_defaults(run=_run_predict, writes=None)


def _add_evaluate(sub):
    p = sub.add_parser("evaluate", formatter_class=_Help,
                       help="test metrics of a saved model fitted on a synthetic problem")
    p.add_argument("model", help="a model store written by fit --save")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    _add_target(p, default="in-process")
    _common(p)
    p.set_defaults(run=_run_evaluate, writes=None)


def _in_process_by_default(args) -> dict:
    target = _target(args)
    if target["workers"] is None and target["scheduler"] is None and target["cluster"] is None:
        target["workers"] = 0
    return target


def _load_model(args):
    """``(target, attrs)`` of the model store named on the command line, checked."""
    from . import model_io
    from .session import check_target

    try:
        target = check_target(**_in_process_by_default(args))
        attrs = model_io.read_attrs(model_io.store_path(args.model))
    except (TypeError, ValueError, FileNotFoundError) as exc:  # includes ModelStoreError
        raise UsageError(str(exc)) from None
    return target, attrs


def _read_model(path, client):
    """The model at ``path``, or ``None`` after one line on stderr when its blocks cannot be
    read (a damaged store: a runtime failure, exit status 1)."""
    from . import OneBitMultiLabel
    from .model_io import ModelStoreError

    try:
        return OneBitMultiLabel.load(path, engine="local" if client is None else "dask")
    except ModelStoreError as exc:
        print(f"onebit-dask: error: {exc}", file=sys.stderr)
        return None


def _run_predict(args) -> int:
    from .io import ZarrShard, ZarrSource

    target, attrs = _load_model(args)
    try:
        if args.top_k < 1 or args.top_k > attrs["n_labels"]:
            raise ValueError(f"--top-k={args.top_k} is not allowed: give 1 <= K <= "
                             f"{attrs['n_labels']} (the model's labels)")
        if args.rows < 1:
            raise ValueError(f"--rows={args.rows} is not allowed: give N >= 1")
        if os.path.isfile(os.fspath(args.data)):  # an XC/svmlight file: its features
            from .data.xc import read_xc

            X = read_xc(os.fspath(args.data), n_features=attrs["n_features_in"])[0]
            n = min(args.rows, X.shape[0])
            X = X[:n]
        else:
            source = ZarrSource(args.data)
            if source.d1 != attrs["n_features_in"]:
                raise ValueError(f"--data={args.data!r} has {source.d1} features, but the "
                                 f"model was fitted with {attrs['n_features_in']}")
            n = min(args.rows, source.n)
            X = ZarrShard(source.path, 0, n, (0, source.d2)).load()[0]
    except (TypeError, ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    with _client(**target, timeout=args.connect_timeout, quiet=True,
                 worker_timeout=args.worker_timeout, debug=args.debug) as client:
        est = _read_model(args.model, client)
        if est is None:
            return EXIT_RUNTIME
        labels, scores = est.predict_top_k(X, args.top_k)
    if args.json:
        print(json.dumps({"model": args.model, "data": args.data, "rows": list(range(n)),
                          "labels": labels.tolist(), "scores": scores.tolist()}))
    else:
        for i in range(n):
            best = "  ".join(f"{j}:{v:+.3f}" for j, v in zip(labels[i], scores[i]))
            print(f"row {i}: {best}")
    return 0


def _run_evaluate(args) -> int:
    from .data.problems import problem_from

    target, attrs = _load_model(args)
    try:
        problem = problem_from(attrs.get("data"))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"model={args.model!r}: its problem cannot be rebuilt ({exc})") from None
    if problem is None:
        raise UsageError(f"model={args.model!r} was not fitted on a synthetic problem (data: "
                         f"{(attrs.get('data') or {}).get('kind')}): evaluate needs its test "
                         "set; use predict")
    with _client(**target, timeout=args.connect_timeout, quiet=True,
                 worker_timeout=args.worker_timeout, debug=args.debug) as client:
        est = _read_model(args.model, client)
        if est is None:
            return EXIT_RUNTIME
        result = est.evaluate(problem)
    result.update(model=args.model, n_steps=est.n_steps_, n_samples=est.n_samples_seen_,
                  d1=est.n_features_in_, d2=est.n_labels_, rank=est.rank)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"onebit evaluate {args.model} d1={est.n_features_in_} d2={est.n_labels_} "
              f"rank={est.rank} steps={est.n_steps_}")
        for key in reversed(METRICS):  # auc first
            print(f"  {key:16s} {result[key]:.4f}")
    return 0



# --- where it runs -------------------------------------------------------------------------

@contextlib.contextmanager
def _client(*, debug: bool, **options):
    """:func:`onebit_dask.session.open_client` with Dask's log lines silenced (unless
    ``--debug``) while it is open: a failure is then one line."""
    from .session import open_client

    saved = {}
    if not debug and options.get("workers") != 0:  # in-process: distributed not imported
        import distributed  # noqa: F401  (its loggers exist once it is imported)

        names = {"distributed", "tornado", "bokeh"} | {
            n for n in logging.root.manager.loggerDict
            if n.split(".")[0] in ("distributed", "tornado", "bokeh")}
        for name in names:
            logger = logging.getLogger(name)
            saved[logger] = logger.level
            logger.setLevel(logging.CRITICAL + 1)
    try:
        with open_client(debug=debug, **options) as client:
            yield client
    finally:
        for logger, level in saved.items():
            logger.setLevel(level)


def _add_target(p, default="an embedded LocalCluster, one worker a core"):
    g = p.add_argument_group(f"where it runs (default: {default})")
    g.add_argument("--workers", type=_integer(0), default=None,
                   help="embedded LocalCluster of N worker processes on 127.0.0.1; 0: "
                        "in-process")
    g.add_argument("--scheduler", default=None, help="address of a running scheduler, "
                   "tcp://HOST:PORT or tls://HOST:PORT")
    g.add_argument("--cluster", default=None, help="a cluster config file, or the name of a "
                   "shipped one (onebit-dask list), e.g. local")
    g.add_argument("--tls-ca-file", default=None, help="CA certificate for a tls:// scheduler")
    g.add_argument("--tls-cert", default=None, help="client certificate for a tls:// scheduler")
    g.add_argument("--tls-key", default=None, help="client key for a tls:// scheduler")
    g.add_argument("--connect-timeout", type=_seconds, default=10.0,
                   help="seconds to wait for the scheduler")
    g.add_argument("--worker-timeout", type=_seconds, default=120.0,
                   help="seconds to wait for the first worker to join (a batch queue may "
                        "need longer)")


def _target(args) -> dict:
    tls = None
    if any((args.tls_ca_file, args.tls_cert, args.tls_key)):
        tls = {"ca_file": args.tls_ca_file, "cert": args.tls_cert, "key": args.tls_key}
    cluster = None if args.cluster is None else shipped.resolve("cluster", args.cluster)
    return dict(workers=args.workers, scheduler=args.scheduler, cluster=cluster, tls=tls)


# --- sweep ---------------------------------------------------------------------------------

def _add_sweep(sub):
    p = sub.add_parser("sweep", formatter_class=_Help,
                       help="run (or resume) a sweep spec into a zarr result cube",
                       description="Run the cells of a sweep spec into a zarr result cube; "
                                   "the same command again resumes, skipping the cells done.")
    p.add_argument("spec", help="a sweep spec file, or the name of a shipped one "
                                "(onebit-dask list), e.g. quickstart")
    p.add_argument("--out", required=True, help="the result cube's zarr store")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a store made from another spec")
    p.add_argument("--allow-large", action="store_true",
                   help="allow a grid of more than 10^6 cells")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--retries", type=_integer(0), default=0,
                   help="run a cell that raised up to N more times (Dask's task retries; "
                        "a cell whose worker died is rescheduled by Dask anyway)")
    p.add_argument("--retry-failed", action="store_true",
                   help="run again the cells an earlier run marked failed (without it they "
                        "are skipped)")
    p.add_argument("--adapt", default=None, metavar="MIN:MAX",
                   help="adaptive cluster: between MIN and MAX workers (jobs for slurm/pbs "
                        "configs), following the work left; with --cluster or the embedded "
                        "cluster")
    _add_target(p)
    _common(p)
    p.set_defaults(run=_run_sweep)


def _parse_adapt(text):
    """``"MIN:MAX"`` -> ``(MIN, MAX)`` with ``0 <= MIN <= MAX``, ``MAX >= 1``."""
    if text is None:
        return None
    parts = text.split(":")
    try:
        low, high = (int(p) for p in parts) if len(parts) == 2 else (None, None)
    except ValueError:
        low = high = None
    if low is None or low < 0 or high < max(1, low):
        raise UsageError(f"--adapt {text!r} is not allowed: give MIN:MAX, integers with "
                         "0 <= MIN <= MAX and MAX >= 1, e.g. --adapt 1:8")
    return low, high


def _run_sweep(args) -> int:
    from .session import check_target
    from .sweep import load_spec, run_sweep
    from .sweep.store import check_output

    adapt = _parse_adapt(args.adapt)
    if adapt is not None and (args.scheduler is not None or args.workers is not None):
        raise UsageError("--adapt needs a cluster this command starts (--cluster or the "
                         "embedded one): not with --scheduler or --workers")
    try:
        spec = load_spec(shipped.resolve("pipelines", args.spec), allow_large=args.allow_large)
        target = check_target(**_target(args))
        check_output(args.out, spec, args.overwrite)
    except (TypeError, ValueError) as exc:  # SpecError, StoreError, ClusterConfigError
        raise UsageError(str(exc)) from None  # (a damaged store: DamagedStoreError, exit 1)
    args.writes = args.out
    from .stores.lock import StoreLock

    StoreLock(args.out).probe()  # in use: refuse before starting a cluster
    with _client(**target, timeout=args.connect_timeout,
                 worker_timeout=args.worker_timeout, quiet=args.quiet,
                 debug=args.debug, adapt=adapt) as client:
        summary = run_sweep(spec, args.out, client, overwrite=args.overwrite,
                            progress=not args.quiet, retries=args.retries,
                            retry_failed=args.retry_failed)
    print(f"sweep {spec.name}: {summary}; results in {args.out}")
    if summary.failed or summary.skipped_failed:
        from .sweep.store import failures_path

        print(f"onebit-dask: {summary.failed + summary.skipped_failed} cell(s) failed: see "
              f"{failures_path(args.out)}; --retry-failed runs them again", file=sys.stderr)
        return EXIT_RUNTIME
    return 0


# --- report --------------------------------------------------------------------------------

def _add_report(sub):
    p = sub.add_parser("report", formatter_class=_Help,
                       help="tables (and figures) from a result cube",
                       description="Print tables of a sweep's result cube (mean +- std over "
                                   "seeds at the last iteration) and, with --plots, write PNG "
                                   "figures.")
    p.add_argument("store", help="a sweep's zarr store")
    p.add_argument("--plots", default=None, metavar="DIR",
                   help="write PNG figures into this directory (created if missing)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    _common(p)
    p.set_defaults(run=_run_report)


def _run_report(args) -> int:
    from .sweep.report import TooManyFacets, check_plot_dir, report
    from .stores.zarr_format import group_attrs
    from .sweep.store import FORMAT

    attrs = group_attrs(args.store) if os.path.isdir(args.store) else None
    if attrs is None or attrs.get("format") != FORMAT:
        raise UsageError(f"store={args.store!r} is not an onebit-dask sweep store")
    if args.plots is not None:
        try:
            check_plot_dir(args.plots)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        args.writes = args.plots
    try:
        text, paths = report(args.store, args.plots, progress=not args.quiet)
    except (TooManyFacets, FileExistsError) as exc:  # a user's file where a figure goes
        raise UsageError(str(exc)) from None
    print(text)
    for path in paths:
        print(f"wrote {path}")
    return 0


# --- list ----------------------------------------------------------------------------------

def _add_list(sub):
    p = sub.add_parser("list", formatter_class=_Help,
                       help="the sweep specs and cluster configs that ship with the package",
                       description="List the shipped sweep specs (onebit-dask sweep NAME) and "
                                   "cluster configs (--cluster NAME).")
    _common(p)
    p.set_defaults(run=_run_list)


def _run_list(args) -> int:
    for kind, title in shipped.KINDS.items():
        print(f"{title} ({shipped.directory(kind)}):")
        print(shipped.describe(kind))
    return 0


# --- main ----------------------------------------------------------------------------------

COMMANDS = (_add_fit, _add_sweep, _add_report, _add_predict, _add_evaluate, _add_list)


def _version() -> str:
    from . import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="onebit-dask", description=__doc__.splitlines()[0],
                     formatter_class=_Help)
    parser.add_argument("--version", action="version", version=f"onebit-dask {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for add in COMMANDS:
        add(sub)
    return parser


class _Stderr(logging.StreamHandler):
    """The package's log records as plain lines on the current ``sys.stderr``."""

    def __init__(self):
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):  # StreamHandler sets it; the current sys.stderr is used
        pass


@contextlib.contextmanager
def _package_log():
    """INFO records of the ``onebit_dask`` loggers (progress lines, the dashboard address)
    on stderr while a command runs."""
    logger = logging.getLogger("onebit_dask")
    handler, level, propagate = _Stderr(), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def main(argv=None) -> int:
    with _package_log():
        return _main(argv)


def return_freed_memory() -> None:
    """Have glibc's ``malloc`` give freed memory back to the system in this process: a
    fixed 1 MiB ``mmap`` threshold and trim threshold (``mallopt``). The process that runs
    a fit (and, with a ``LocalCluster``, its scheduler) allocates and frees arrays of
    megabytes at every step; with glibc's default, dynamic threshold they come from the
    heap, which keeps them (at ``d2 = 10^6``, ~100 MiB freed but still resident after a
    fit; docs/PERFORMANCE.md). Dask's Nanny sets the trim threshold for its workers
    (``MALLOC_TRIM_THRESHOLD_``). Nothing where the C library is not glibc."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's malloc.h
    mallopt(m_mmap_threshold, 2**20)
    mallopt(m_trim_threshold, 2**20)


def run() -> None:
    """The ``onebit-dask`` program: :func:`main` on ``sys.argv`` in a process of its own,
    which returns the memory it frees to the system (:func:`return_freed_memory`)."""
    return_freed_memory()
    sys.exit(main())


def _main(argv=None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    args = None
    try:
        args = parser.parse_args(argv)
        return args.run(args)
    except UsageError as exc:
        print(f"onebit-dask: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("onebit-dask: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            raise
        writes = getattr(args, "writes", None)
        print(f"onebit-dask: error: {describe_failure(exc, writes)}", file=sys.stderr)
        return EXIT_RUNTIME


__all__ = ["main", "run", "return_freed_memory", "build_parser", "UsageError", "RunError"]

if __name__ == "__main__":  # pragma: no cover
    run()
