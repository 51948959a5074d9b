"""Engine benchmark: in-process vs Dask vs the data floor, and a 10^6-label run.

    python benchmarks/bench_engine.py                 # paper setting, ratios side by side
    python benchmarks/bench_engine.py --large         # d2 = 10^6, d1 = 100, k = 5, m = 10^6, 3 steps
    python benchmarks/bench_engine.py --smoke         # a tiny run of everything (CI)

The data floor is the time to draw the same shards (features, labels, bits) on the
same workers and discard them: the work no implementation can avoid.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import sys
import time

import numpy as np

from onebit_dask import OneBitMultiLabel, SyntheticProblem


def _draw(shard):
    shard.load()
    return shard.n_obs


def _philox_normals(args):
    seed, size = args
    np.random.Generator(np.random.Philox(seed)).standard_normal(size, dtype=np.float32)
    return size


def philox_floor(client, problem, batch_size, n_iter, n_shards) -> float:
    """Issue 6's yardstick: as many float32 Philox normals as the fit's features, drawn
    in the same pieces on the same workers."""
    sizes = [(i, sh.n_obs * problem.d1) for i, sh in enumerate(
        sh for t in range(n_iter + 1) for sh in problem.batch(t, batch_size, n_shards))]
    start = time.perf_counter()
    client.gather(client.map(_philox_normals, sizes, pure=False))
    return time.perf_counter() - start


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def data_floor(client, problem, batch_size, n_iter, n_shards) -> float:
    shards = [sh for t in range(n_iter + 1) for sh in problem.batch(t, batch_size, n_shards)]
    start = time.perf_counter()
    client.gather(client.map(_draw, shards, pure=False))
    return time.perf_counter() - start


def timed_fit(problem, client=None, **params):
    est = OneBitMultiLabel(problem.rank, engine="local" if client is None else "dask",
                           random_state=0, eval_every=0, **params)
    start = time.perf_counter()
    with contextlib.nullcontext() if client is None else client.as_current():
        est.fit(problem)
    return est, time.perf_counter() - start


def paper_setting(args):
    """Every measurement is repeated ``--repeat`` times, the runs of one repetition
    back to back (so slow spells of a shared machine hit all of them), and the
    medians are compared."""
    from distributed import Client, LocalCluster

    problem = SyntheticProblem(args.d1, args.d2, args.rank, seed=0, n_test=args.n_test,
                               sampler="explicit")  # the data floor is an explicit draw
    params = dict(batch_size=args.batch_size, n_iter=args.n_iter, n_shards=args.shards)
    shards = [sh for t in range(args.n_iter + 1)
              for sh in problem.batch(t, args.batch_size, args.shards)]

    def cluster(n):
        return LocalCluster(n_workers=n, threads_per_worker=args.threads_per_worker,
                            host="127.0.0.1", dashboard_address="127.0.0.1:0")

    times = {}

    def record(name, seconds):
        times.setdefault(name, []).append(seconds)

    dask_name = f"dask, {args.workers} workers"
    for _ in range(args.repeat):
        start = time.perf_counter()
        for sh in shards:
            _draw(sh)
        record("data floor, in-process", time.perf_counter() - start)
        local, _ = timed_fit(problem, **params)
        record("in-process", local.history_[-1]["fit_s"])
        with cluster(1) as c1, Client(c1) as client:
            one, _ = timed_fit(problem, client, **params)
        record("dask, 1 worker", one.history_[-1]["fit_s"])
        with cluster(args.workers) as cluster_n, Client(cluster_n) as client:
            timed_fit(problem, client, **dict(params, n_iter=1))  # warm the workers up
            est, _ = timed_fit(problem, client, **params)
            record(dask_name, est.history_[-1]["fit_s"])
            record(f"data floor, {args.workers} workers", data_floor(client, problem, **params))
            record(f"Philox float32 floor, {args.workers} workers",
                   philox_floor(client, problem, **params))
    med = {name: float(np.median(values)) for name, values in times.items()}
    dask_s = med[dask_name]
    floor = med[f"data floor, {args.workers} workers"]
    philox = med[f"Philox float32 floor, {args.workers} workers"]
    print(f"# d1={args.d1} d2={args.d2} k={args.rank} m={args.batch_size} T={args.n_iter} "
          f"shards={args.shards}; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, numpy {np.__version__}; median of {args.repeat}")
    print(f"{'run':34s} {'median s':>8s}   all runs")
    for name, values in times.items():
        print(f"{name:34s} {med[name]:8.2f}   {' '.join(f'{v:.2f}' for v in values)}")
    print(f"auc: in-process {local.history_[-1]['auc']:.4f}, dask {est.history_[-1]['auc']:.4f}")
    print(f"speedup dask/in-process       {med['in-process'] / dask_s:6.2f}x  (goal >= 1.7x)")
    print(f"dask / data floor             {dask_s / floor:6.2f}x  (goal <= 1.15x)")
    print(f"dask / Philox float32 floor   {dask_s / philox:6.2f}x  (goal <= 1.3x)")
    print(f"strong scaling efficiency     {med['dask, 1 worker'] / (args.workers * dask_s):6.2f}   "
          f"(1 worker / ({args.workers} x {args.workers} workers); goal >= 0.85)")
    print(f"data floor in-process/workers {med['data floor, in-process'] / floor:6.2f}x  "
          "(the most any speedup can be)")
    print(f"bit-identical results         {np.array_equal(local.Q_, est.Q_)}")


def large(args):
    """The scheduler and workers run as subprocesses (as on a real cluster), so the
    client's peak is the client's own."""
    from distributed import Client
    from distributed.deploy.subprocess import SubprocessCluster

    problem = SyntheticProblem(100, args.large_d2, 5, seed=0, n_test=args.n_test)
    params = dict(batch_size=args.large_m, n_iter=args.large_steps, n_shards=args.shards)
    with SubprocessCluster(host="127.0.0.1", n_workers=args.workers, threads_per_worker=1,
                           dashboard_address="127.0.0.1:0",
                           worker_kwargs={"memory_limit": 0}) as cluster, Client(cluster) as client:
        client.wait_for_workers(args.workers, timeout=120)
        est, wall = timed_fit(problem, client, **params)
        workers = client.run(peak_rss_mib)
        scheduler = client.run_on_scheduler(peak_rss_mib)
    report = {"d1": 100, "d2": args.large_d2, "rank": 5, "batch_size": args.large_m,
              "n_iter": args.large_steps, "n_shards": args.shards,
              "wall_s": round(wall, 1), "train_s": round(est.history_[-1]["fit_s"], 1),
              "auc": round(est.history_[-1]["auc"], 4),
              "frobenius_error": round(est.history_[-1]["frobenius_error"], 4),
              "client_peak_mib": round(peak_rss_mib()), "scheduler_peak_mib": round(scheduler),
              "worker_peak_mib": sorted(round(v) for v in workers.values())}
    print(json.dumps(report))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--large", action="store_true", help="the 10^6-label run")
    p.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--threads-per-worker", type=int, default=1)
    p.add_argument("--d1", type=int, default=500)
    p.add_argument("--d2", type=int, default=200)
    p.add_argument("--rank", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=100_000)
    p.add_argument("--n-iter", type=int, default=10)
    p.add_argument("--n-test", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3, help="repetitions; medians are compared")
    p.add_argument("--large-d2", type=int, default=1_000_000)
    p.add_argument("--large-m", type=int, default=1_000_000)
    p.add_argument("--large-steps", type=int, default=3)
    args = p.parse_args(argv)
    if args.smoke:
        args.d1, args.d2, args.batch_size, args.n_iter, args.n_test = 30, 20, 4000, 2, 200
        args.large_d2, args.large_m, args.repeat = 5000, 20_000, 1
        paper_setting(args)
        large(args)
    elif args.large:
        large(args)
    else:
        paper_setting(args)


if __name__ == "__main__":
    sys.exit(main())
