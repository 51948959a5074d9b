"""``onebit-dask sweep``, ``report`` and ``list``: sweep specs into result cubes, their tables
and figures, and what ships with the package."""

from __future__ import annotations

import os
import sys

from ..utils.errors import EXIT_RUNTIME
from . import shipped
from .args import HelpFormatter, UsageError, add_common, add_target, connect, integer, target_of

def add_sweep(sub):
    p = sub.add_parser("sweep", formatter_class=HelpFormatter,
                       help="run (or resume, or extend) a sweep spec into a zarr result cube",
                       description="Run the cells of a sweep spec into a zarr result cube; "
                                   "the same command again resumes, skipping the cells done; "
                                   "a spec that appends values to grid keys of the cube's "
                                   "spec (everything else the same) extends the cube, its "
                                   "cells done kept.")
    p.add_argument("spec", help="a sweep spec file, or the name of a shipped one "
                                "(onebit-dask list), e.g. quickstart")
    p.add_argument("--out", required=True, help="the result cube's zarr store")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a store made from another spec (or start an extensible "
                        "one again)")
    p.add_argument("--allow-large", action="store_true",
                   help="allow a grid of more than 10^6 cells, and more than 256 workers")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--retries", type=integer(0), default=0,
                   help="run a cell that raised up to N more times (Dask's task retries; "
                        "a cell whose worker died is rescheduled by Dask anyway)")
    p.add_argument("--retry-failed", action="store_true",
                   help="run again the cells an earlier run marked failed (without it they "
                        "are skipped)")
    p.add_argument("--adapt", default=None, metavar="MIN:MAX",
                   help="adaptive cluster: between MIN and MAX workers (jobs for slurm/pbs "
                        "configs), following the work left; with --cluster or the embedded "
                        "cluster")
    add_target(p)
    add_common(p)
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
    from .client import check_cluster_target
    from ..sweep import load_spec, run_sweep
    from ..sweep.cube import local_output
    from ..sweep.plan import check_output

    adapt = _parse_adapt(args.adapt)
    if adapt is not None and (args.scheduler is not None or args.workers is not None):
        raise UsageError("--adapt needs a cluster this command starts (--cluster or the "
                         "embedded one): not with --scheduler or --workers")
    try:
        if adapt is not None:
            from ..utils.limits import check_workers

            check_workers("--adapt MAX", adapt[1], args.allow_large)
        spec = load_spec(shipped.resolve("pipelines", args.spec), allow_large=args.allow_large)
        target = check_cluster_target(**target_of(args))
        args.out = local_output(args.out)
        check_output(args.out, spec, args.overwrite)
    except (TypeError, ValueError) as exc:  # SpecError, StoreError, ClusterConfigError
        raise UsageError(str(exc)) from None  # (a damaged store: DamagedStoreError, exit 1)
    args.writes = args.out
    from ..io.stores.lock import StoreLock

    StoreLock(args.out).probe()  # in use: refuse before starting a cluster
    with connect(**target, timeout=args.connect_timeout,
                 worker_timeout=args.worker_timeout, quiet=args.quiet,
                 debug=args.debug, adapt=adapt) as client:
        summary = run_sweep(spec, args.out, client, overwrite=args.overwrite,
                            progress=not args.quiet, retries=args.retries,
                            retry_failed=args.retry_failed)
    print(f"sweep {spec.name}: {summary}; results in {args.out}")
    if summary.failed or summary.skipped_failed:
        from ..sweep.cube import failures_path

        print(f"onebit-dask: {summary.failed + summary.skipped_failed} cell(s) failed: see "
              f"{failures_path(args.out)}; --retry-failed runs them again", file=sys.stderr)
        return EXIT_RUNTIME
    return 0


# --- report --------------------------------------------------------------------------------

def add_report(sub):
    p = sub.add_parser("report", formatter_class=HelpFormatter,
                       help="tables (and figures) from a result cube",
                       description="Print tables of a sweep's result cube (mean +- std over "
                                   "seeds at the last iteration) and, with --plots, write PNG "
                                   "figures.")
    p.add_argument("store", help="a sweep's zarr store")
    p.add_argument("--plots", default=None, metavar="DIR",
                   help="write PNG figures into this directory (created if missing)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_common(p)
    p.set_defaults(run=_run_report)


def _run_report(args) -> int:
    from ..sweep.report import TooManyFacets, check_plot_dir, report
    from ..io.stores.zarr_format import group_attrs
    from ..sweep.cube import FORMAT

    attrs = group_attrs(args.store) if os.path.isdir(args.store) else None
    if attrs is None or attrs.get("format") != FORMAT:
        raise UsageError(f"store={args.store!r} is not an onebit-dask sweep store")
    created = args.plots is not None and not os.path.lexists(args.plots)
    try:
        if args.plots is not None:
            try:
                check_plot_dir(args.plots, cube=args.store)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            args.writes = args.plots
        text, paths = report(args.store, args.plots, progress=not args.quiet)
    except (TooManyFacets, FileExistsError) as exc:  # a user's file where a figure goes
        _remove_if_empty(args.plots if created else None)
        raise UsageError(str(exc)) from None
    except BaseException:  # Ctrl-C, a full disk, a refused directory: no empty one of ours
        _remove_if_empty(args.plots if created else None)
        raise
    print(text)
    for path in paths:
        print(f"wrote {path}")
    return 0


def _remove_if_empty(directory) -> None:
    """Remove ``directory`` (one this command created) if it holds nothing (its parents
    that ``os.makedirs`` created with it stay)."""
    if directory is not None:
        try:
            os.rmdir(directory)
        except OSError:  # not empty (figures were written), or already gone
            pass


# --- list ----------------------------------------------------------------------------------

def add_list(sub):
    p = sub.add_parser("list", formatter_class=HelpFormatter,
                       help="the sweep specs and cluster configs that ship with the package",
                       description="List the shipped sweep specs (onebit-dask sweep NAME) and "
                                   "cluster configs (--cluster NAME).")
    add_common(p)
    p.set_defaults(run=_run_list)


def _run_list(args) -> int:
    for kind, title in shipped.KINDS.items():
        print(f"{title} ({shipped.directory(kind)}):")
        print(shipped.describe(kind))
    return 0
