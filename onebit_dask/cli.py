"""The ``onebit-dask`` command line.

Bad input exits with status 2 and one line on stderr, before any work starts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


class UsageError(Exception):
    """Bad command-line input: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block
        raise UsageError(message)


def _add_fit(sub):
    p = sub.add_parser("fit", help="fit on a synthetic problem and print the test metrics")
    p.add_argument("--d1", type=int, default=500, help="feature dimension (default 500)")
    p.add_argument("--d2", type=int, default=200, help="number of labels (default 200)")
    p.add_argument("--rank", type=int, default=3, help="rank k (default 3)")
    p.add_argument("--batch-size", type=int, default=100_000, help="observations per batch m")
    p.add_argument("--n-iter", type=int, default=10, help="steps after the initial batch")
    p.add_argument("--flip", type=float, default=0.0, help="probability a bit is flipped")
    p.add_argument("--sampler", default="projected",
                   help="how synthetic batches are drawn: projected (exact in law, draws only "
                        "what the step uses) or explicit (every feature)")
    p.add_argument("--noise-std", type=float, default=0.0,
                   help="std of Gaussian noise added to x^T w_j")
    p.add_argument("--step", default="paper", help="step size rule: paper or averaged")
    p.add_argument("--seed", type=int, default=0, help="seed of the data and the start")
    p.add_argument("--n-test", type=int, default=10_000, help="test instances")
    p.add_argument("--max-eval-labels", type=int, default=1000,
                   help="labels scored for AUC/Hamming above this many labels")
    p.add_argument("--shards", type=int, default=4,
                   help="shards per batch, independent of the workers (default 4)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no dashboard line")
    _add_model_options(p)
    _add_target(p)
    p.set_defaults(run=_run_fit)


def _add_model_options(p):
    g = p.add_argument_group("the fitted model")
    g.add_argument("--save", default=None, metavar="MODEL",
                   help="write the fitted model to this zarr store (must not exist)")
    g.add_argument("--checkpoint", default=None, metavar="PATH",
                   help="checkpoint store: written during the fit; rerunning the same command "
                        "resumes from it")
    g.add_argument("--checkpoint-every", type=int, default=None, metavar="N",
                   help="iterations between checkpoints (default 1)")


def _add_predict(sub):
    p = sub.add_parser("predict", help="the top-k labels of observations by a saved model")
    p.add_argument("model", help="a model store written by fit --save")
    p.add_argument("--data", required=True, help="an observations store (its X is scored)")
    p.add_argument("--top-k", type=int, default=5, help="labels per row (default 5)")
    p.add_argument("--rows", type=int, default=10, help="first rows scored (default 10)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    _add_target(p, default="in-process")
    p.set_defaults(run=_run_predict)


def _add_evaluate(sub):
    p = sub.add_parser("evaluate", help="test metrics of a saved model fitted on a synthetic "
                                        "problem")
    p.add_argument("model", help="a model store written by fit --save")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    _add_target(p, default="in-process")
    p.set_defaults(run=_run_evaluate)


def _add_target(p, default="an embedded LocalCluster, one worker a core"):
    g = p.add_argument_group(f"where it runs (default: {default})")
    g.add_argument("--workers", type=int, default=None,
                   help="embedded LocalCluster of N worker processes on 127.0.0.1; 0: in-process")
    g.add_argument("--scheduler", default=None, help="address of a running scheduler, "
                   "tcp://HOST:PORT or tls://HOST:PORT")
    g.add_argument("--cluster", default=None, help="a cluster config file (see cluster/)")
    g.add_argument("--tls-ca-file", default=None, help="CA certificate for a tls:// scheduler")
    g.add_argument("--tls-cert", default=None, help="client certificate for a tls:// scheduler")
    g.add_argument("--tls-key", default=None, help="client key for a tls:// scheduler")
    g.add_argument("--connect-timeout", type=float, default=10.0,
                   help="seconds to wait for the scheduler (default 10)")


def _target(args) -> dict:
    tls = None
    if any((args.tls_ca_file, args.tls_cert, args.tls_key)):
        tls = {"ca_file": args.tls_ca_file, "cert": args.tls_cert, "key": args.tls_key}
    return dict(workers=args.workers, scheduler=args.scheduler, cluster=args.cluster, tls=tls)


def _add_sweep(sub):
    p = sub.add_parser("sweep", help="run (or resume) a sweep spec into a zarr result cube")
    p.add_argument("spec", help="a sweep spec, e.g. pipelines/quickstart.yaml")
    p.add_argument("--out", required=True, help="the result cube's zarr store")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a store made from another spec")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--retries", type=int, default=0,
                   help="run a cell that raised up to N more times (Dask's task retries; "
                        "a cell whose worker died is rescheduled by Dask anyway; default 0)")
    p.add_argument("--retry-failed", action="store_true",
                   help="run again the cells an earlier run marked failed (default: skip them)")
    p.add_argument("--adapt", default=None, metavar="MIN:MAX",
                   help="adaptive cluster: between MIN and MAX workers (jobs for slurm/pbs "
                        "configs), following the work left; with --cluster or the embedded "
                        "cluster")
    _add_target(p)
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


def _add_report(sub):
    p = sub.add_parser("report", help="tables (and figures) from a result cube")
    p.add_argument("store", help="a sweep's zarr store")
    p.add_argument("--plots", default=None, help="write PNG figures into this directory")
    p.set_defaults(run=_run_report)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="onebit-dask", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_fit(sub)
    _add_sweep(sub)
    _add_report(sub)
    _add_predict(sub)
    _add_evaluate(sub)
    return parser


def _run_fit(args) -> int:
    from . import OneBitMultiLabel, SyntheticProblem
    from .session import check_target, open_client

    try:
        check_target(**_target(args))
        problem = SyntheticProblem(args.d1, args.d2, args.rank, flip=args.flip,
                                   sampler=args.sampler,
                                   noise_std=args.noise_std, seed=args.seed, n_test=args.n_test,
                                   max_eval_labels=args.max_eval_labels)
        est = OneBitMultiLabel(args.rank, batch_size=args.batch_size, n_iter=args.n_iter,
                               step=args.step, n_shards=args.shards, random_state=args.seed,
                               progress=not args.quiet)
        est._check_params(problem.d1, problem.d2)
        fit_options = _check_model_options(args, est, problem)
    except (TypeError, ValueError) as exc:  # includes ClusterConfigError
        raise UsageError(str(exc)) from None
    try:
        with open_client(**_target(args), timeout=args.connect_timeout, quiet=args.quiet) as client:
            n_workers = 0 if client is None else len(client.scheduler_info()["workers"])
            start = time.perf_counter()
            est.set_params(client=client).fit(problem, **fit_options)
            wall = time.perf_counter() - start
            if args.save is not None:
                est.save(args.save)
    except OSError as exc:
        raise UsageError(str(exc)) from None
    last = est.history_[-1]
    result = {key: last[key] for key in ("spectral_error", "frobenius_error", "hamming_loss", "auc")}
    result.update(
        wall_s=wall, fit_s=last["fit_s"], n_samples=est.n_samples_seen_, d1=args.d1, d2=args.d2,
        rank=args.rank, seed=args.seed, flip=args.flip, noise_std=args.noise_std,
        step=args.step, sampler=args.sampler, batch_size=args.batch_size, n_iter=args.n_iter,
        n_shards=min(args.shards, args.d2), n_workers=n_workers, history=est.history_,
        model=args.save,
    )
    if args.json:
        print(json.dumps(result))
    else:
        print(f"onebit fit d1={args.d1} d2={args.d2} rank={args.rank} m={args.batch_size} "
              f"T={args.n_iter} flip={args.flip} noise_std={args.noise_std} step={args.step} "
              f"workers={n_workers or 'in-process'} shards={result['n_shards']}")
        for key in ("auc", "hamming_loss", "frobenius_error", "spectral_error"):
            print(f"  {key:16s} {result[key]:.4f}")
        print(f"  {'observations':16s} {result['n_samples']:,}")
        print(f"  {'wall time':16s} {wall:.2f} s (training {last['fit_s']:.2f} s)")
        if args.save is not None:
            print(f"  {'model':16s} {args.save}")
    return 0


def _check_model_options(args, est, problem) -> dict:
    """Check --save, --checkpoint and --checkpoint-every before anything runs; the keyword
    arguments of ``fit``."""
    import os

    from .persist import Checkpoint, data_identity, fingerprint

    if args.save is not None and os.path.exists(args.save):
        raise ValueError(f"--save={args.save!r} exists: give a new path, or delete it first")
    if args.checkpoint is None:
        if args.checkpoint_every is not None:
            raise ValueError("--checkpoint-every needs --checkpoint PATH")
        return {}
    Checkpoint(args.checkpoint, args.checkpoint_every, fingerprint(est, data_identity(problem)))
    return {"checkpoint": args.checkpoint, "checkpoint_every": args.checkpoint_every}


def _in_process_by_default(args) -> dict:
    target = _target(args)
    if target["workers"] is None and target["scheduler"] is None and target["cluster"] is None:
        target["workers"] = 0
    return target


def _load_model(args):
    """``(target, attrs)`` of the model store named on the command line, checked."""
    from . import model_io
    from .session import check_target

    target = _in_process_by_default(args)
    try:
        check_target(**target)
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
        return OneBitMultiLabel.load(path, client=client)
    except ModelStoreError as exc:
        print(f"onebit-dask: error: {exc}", file=sys.stderr)
        return None


def _run_predict(args) -> int:
    from .io import ZarrShard, ZarrSource
    from .session import open_client

    target, attrs = _load_model(args)
    try:
        if args.top_k < 1 or args.top_k > attrs["n_labels"]:
            raise ValueError(f"--top-k={args.top_k} is not allowed: give 1 <= K <= "
                             f"{attrs['n_labels']} (the model's labels)")
        if args.rows < 1:
            raise ValueError(f"--rows={args.rows} is not allowed: give N >= 1")
        source = ZarrSource(args.data, 1)
        if source.d1 != attrs["n_features_in"]:
            raise ValueError(f"--data={args.data!r} has {source.d1} features, but the model "
                             f"was fitted with {attrs['n_features_in']}")
        n = min(args.rows, source.n)
        X = ZarrShard(source.path, 0, n, (0, source.d2)).load()[0]
    except (TypeError, ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    with open_client(**target, timeout=args.connect_timeout, quiet=True) as client:
        est = _read_model(args.model, client)
        if est is None:
            return 1
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
    from .persist import problem_from
    from .session import open_client

    target, attrs = _load_model(args)
    try:
        problem = problem_from(attrs.get("data"))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"model={args.model!r}: its problem cannot be rebuilt ({exc})") from None
    if problem is None:
        raise UsageError(f"model={args.model!r} was not fitted on a synthetic problem (data: "
                         f"{(attrs.get('data') or {}).get('kind')}): evaluate needs its test "
                         "set; use predict")
    with open_client(**target, timeout=args.connect_timeout, quiet=True) as client:
        est = _read_model(args.model, client)
        if est is None:
            return 1
        result = est.evaluate(problem)
    result.update(model=args.model, n_steps=est.n_steps_, n_samples=est.n_samples_seen_,
                  d1=est.n_features_in_, d2=est.n_labels_, rank=est.rank)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"onebit evaluate {args.model} d1={est.n_features_in_} d2={est.n_labels_} "
              f"rank={est.rank} steps={est.n_steps_}")
        for key in ("auc", "hamming_loss", "frobenius_error", "spectral_error"):
            print(f"  {key:16s} {result[key]:.4f}")
    return 0


def _run_sweep(args) -> int:
    from .session import check_target, open_client
    from .sweep import load_spec, run_sweep
    from .sweep.store import check_output

    from .sweep.errors import SweepRuntimeError

    adapt = _parse_adapt(args.adapt)
    if args.retries < 0:
        raise UsageError(f"--retries {args.retries} is not allowed: give an integer >= 0")
    if adapt is not None and (args.scheduler is not None or args.workers is not None):
        raise UsageError("--adapt needs a cluster this command starts (--cluster or the "
                         "embedded one): not with --scheduler or --workers")
    try:
        spec = load_spec(args.spec)
        check_target(**_target(args))
        check_output(args.out, spec, args.overwrite)
    except (TypeError, ValueError) as exc:  # SpecError, StoreError, ClusterConfigError
        raise UsageError(str(exc)) from None
    except SweepRuntimeError as exc:  # a damaged store
        print(f"onebit-dask: error: {exc}", file=sys.stderr)
        return 1
    try:
        from .sweep.lock import StoreLock

        StoreLock(args.out).probe()  # in use: refuse before starting a cluster
        with open_client(**_target(args), timeout=args.connect_timeout, quiet=args.quiet,
                         adapt=adapt) as client:
            summary = run_sweep(spec, args.out, client, overwrite=args.overwrite,
                                progress=not args.quiet, retries=args.retries,
                                retry_failed=args.retry_failed)
    except SweepRuntimeError as exc:  # store in use, damaged, full disk
        print(f"onebit-dask: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        raise UsageError(str(exc)) from None
    print(f"sweep {spec.name}: {summary}; results in {args.out}")
    if summary.failed or summary.skipped_failed:
        from .sweep.store import failures_path

        print(f"onebit-dask: {summary.failed + summary.skipped_failed} cell(s) failed: see "
              f"{failures_path(args.out)}; --retry-failed runs them again", file=sys.stderr)
        return 1
    return 0


def _run_report(args) -> int:
    import os

    from .sweep.report import report
    from .sweep.store import FORMAT, read_attrs

    attrs = read_attrs(args.store) if os.path.isdir(args.store) else None
    if attrs is None or attrs.get("format") != FORMAT:
        raise UsageError(f"store={args.store!r} is not an onebit-dask sweep store")
    text, paths = report(args.store, args.plots)
    print(text)
    for path in paths:
        print(f"wrote {path}")
    return 0


def main(argv=None) -> int:
    from .cluster import ClusterStartError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return args.run(args)
    except UsageError as exc:
        print(f"onebit-dask: error: {exc}", file=sys.stderr)
        return 2
    except ClusterStartError as exc:  # a checked config whose cluster did not start
        print(f"onebit-dask: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
