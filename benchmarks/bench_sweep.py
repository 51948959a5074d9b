"""Overhead and files per cell of a sweep of tiny cells (issue 13's benchmark).

    python benchmarks/bench_sweep.py               # 200 cells, in-process and 2 workers
    python benchmarks/bench_sweep.py --cells 10000 --workers 2 --no-warm --keep DIR

A cell is ``d1=20, d2=10, k=2, m=2000, T=3`` (``n_test=1000``). The overhead per cell
is everything but the cells' own fits and evaluations (``SweepSummary.cell_s``, timed
where the cell ran), store creation, lock, scheduling, writes and consolidation
included: ``(wall - cell_s) / n`` in-process and ``(W * wall - cell_s) / n`` on ``W``
single-threaded workers (worker time not spent in a cell). On workers it runs the sweep
twice on the same cluster, into two stores: "fresh" workers import onebit-dask for their
first cell (a fixed cost per worker, seconds, counted as overhead), "warm" ones have it
imported, like the runner's own process in the in-process row (this script imports the
runner before timing). It also times the creation of a 20,160-cell store and a resume of
the finished sweep (all cells skipped).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

SPEC = """
name: tiny
grid:
  d1: [20]
  d2: [10]
  rank: [2]
  batch_size: [2000]
  n_iter: [3]
  seed: {seeds}
fixed: {{n_test: 1000, n_shards: 4}}
"""


def files_in(path: str) -> int:
    return sum(len(files) for _, _, files in os.walk(path))


def one_run(spec, out, client, n_workers, label):
    from onebit_dask.sweep import run_sweep

    start = time.perf_counter()
    summary = run_sweep(spec, out, client, progress=False)
    wall = time.perf_counter() - start
    n = summary.ran
    overhead = (max(1, n_workers) * wall - summary.cell_s) / n
    start = time.perf_counter()
    resumed = run_sweep(spec, out, client, progress=False)
    resume = time.perf_counter() - start
    assert resumed.skipped == n and summary.failed == 0
    print(f"| {label} | {n} | {wall:.2f} | {summary.cell_s / n * 1e3:.1f} | "
          f"{overhead * 1e3:.1f} | {files_in(out)} | {files_in(out) / n:.3f} | "
          f"{resume:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--workers", type=int, nargs="*", default=[0, 2],
                        help="0: in-process; N: a LocalCluster of N single-threaded workers")
    parser.add_argument("--no-warm", action="store_true",
                        help="on workers, the fresh run only (not a second, warm one)")
    parser.add_argument("--keep", metavar="DIR", default=None,
                        help="write the stores into DIR (must not exist) and keep them, "
                             "e.g. for `onebit-dask report`")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from onebit_dask.sweep import cube as store
    from onebit_dask.sweep.spec import parse_spec

    spec = parse_spec(SPEC.format(seeds=list(range(args.cells))))
    if args.keep is not None:
        os.makedirs(args.keep)
    tmp = args.keep or tempfile.mkdtemp(prefix="bench-sweep-")
    try:
        print("| where | cells | wall (s) | in cells (ms/cell) | overhead (ms/cell) | files |"
              " files/cell | resume (s) |")
        print("|---|---|---|---|---|---|---|---|")
        for n_workers in args.workers:
            out = os.path.join(tmp, f"w{n_workers}.zarr")
            if n_workers == 0:
                one_run(spec, out, None, 0, "in-process")
                continue
            from distributed import Client, LocalCluster

            with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                              host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster, \
                    Client(cluster) as client:
                one_run(spec, out, client, n_workers, f"{n_workers} workers, fresh")
                if not args.no_warm:
                    one_run(spec, os.path.join(tmp, f"w{n_workers}-warm.zarr"), client,
                            n_workers, f"{n_workers} workers, warm")
        big = parse_spec(SPEC.format(seeds=list(range(20_160))))
        start = time.perf_counter()
        store.create(os.path.join(tmp, "big.zarr"), big)
        print(f"\ncreating the store of a 20,160-cell spec: {time.perf_counter() - start:.2f} s, "
              f"{files_in(os.path.join(tmp, 'big.zarr'))} files")
        shutil.rmtree(os.path.join(tmp, "big.zarr"))
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
