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
    _add_target(p)
    p.set_defaults(run=_run_fit)


def _add_target(p):
    g = p.add_argument_group("where it runs (default: an embedded LocalCluster, one worker a core)")
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
    return parser


def _run_fit(args) -> int:
    from . import OneBitMultiLabel, SyntheticProblem
    from .session import check_target, open_client

    try:
        check_target(**_target(args))
        problem = SyntheticProblem(args.d1, args.d2, args.rank, flip=args.flip,
                                   noise_std=args.noise_std, seed=args.seed, n_test=args.n_test,
                                   max_eval_labels=args.max_eval_labels)
        est = OneBitMultiLabel(args.rank, batch_size=args.batch_size, n_iter=args.n_iter,
                               step=args.step, n_shards=args.shards, random_state=args.seed,
                               progress=not args.quiet)
        est._check_params(problem.d1, problem.d2)
    except (TypeError, ValueError) as exc:  # includes ClusterConfigError
        raise UsageError(str(exc)) from None
    try:
        with open_client(**_target(args), timeout=args.connect_timeout, quiet=args.quiet) as client:
            n_workers = 0 if client is None else len(client.scheduler_info()["workers"])
            start = time.perf_counter()
            est.set_params(client=client).fit(problem)
            wall = time.perf_counter() - start
    except OSError as exc:
        raise UsageError(str(exc)) from None
    last = est.history_[-1]
    result = {key: last[key] for key in ("spectral_error", "frobenius_error", "hamming_loss", "auc")}
    result.update(
        wall_s=wall, fit_s=last["fit_s"], n_samples=est.n_samples_seen_, d1=args.d1, d2=args.d2,
        rank=args.rank, seed=args.seed, flip=args.flip, noise_std=args.noise_std,
        step=args.step, batch_size=args.batch_size, n_iter=args.n_iter,
        n_shards=min(args.shards, args.d2), n_workers=n_workers, history=est.history_,
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
