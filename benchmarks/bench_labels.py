"""Large label counts: d1 = 100, k = 3, d2 = 10^5 or 10^6, to a target AUC.

    python benchmarks/bench_labels.py --d2 100000            # goal: auc >= 0.99 in < 5 min
    python benchmarks/bench_labels.py --d2 1000000 --n-iter 40
    python benchmarks/bench_labels.py --d2 10000000 --batch-size 20000000 --n-iter 20 --shards 16
    python benchmarks/bench_labels.py --smoke

Runs on an embedded cluster whose scheduler and workers are subprocesses, with the
averaged step (the paper's step stalls at one batch's error floor), and prints the AUC
(macro over 1000 sampled labels) every few steps, the time, and the peak RSS of the
client, the scheduler and each worker.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

from onebit_dask import OneBitMultiLabel, SyntheticProblem


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d1", type=int, default=100)
    p.add_argument("--d2", type=int, default=100_000)
    p.add_argument("--rank", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=1_000_000)
    p.add_argument("--n-iter", type=int, default=20)
    p.add_argument("--step", default="averaged")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--sampler", default="conditional",
                   choices=["conditional", "projected", "explicit"])
    p.add_argument("--n-test", type=int, default=5000)
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    if args.smoke:
        args.d2, args.batch_size, args.n_iter = 2000, 20_000, 3

    from distributed import Client
    from distributed.deploy.subprocess import SubprocessCluster

    problem = SyntheticProblem(args.d1, args.d2, args.rank, seed=0, n_test=args.n_test,
                               max_eval_labels=1000, sampler=args.sampler)
    with SubprocessCluster(host="127.0.0.1", n_workers=args.workers, threads_per_worker=1,
                           dashboard_address="127.0.0.1:0",
                           worker_kwargs={"memory_limit": 0}) as cluster, Client(cluster) as client:
        client.wait_for_workers(args.workers, timeout=120)
        est = OneBitMultiLabel(args.rank, batch_size=args.batch_size, n_iter=args.n_iter,
                               step=args.step, n_shards=args.shards, random_state=0,
                               eval_every=args.eval_every, engine="dask")  # the default client
        start = time.perf_counter()
        est.fit(problem)
        wall = time.perf_counter() - start
        workers = client.run(peak_rss_mib)
        scheduler = client.run_on_scheduler(peak_rss_mib)
    for h in est.history_:
        if "auc" in h:
            print(f"iteration {h['iteration']:3d}  observations {h['n_samples']:>12,}  "
                  f"train {h['fit_s']:7.1f} s  auc {h['auc']:.4f}  "
                  f"frobenius_error {h['frobenius_error']:.4f}  active {h['n_active']:,}")
    last = est.history_[-1]
    steps = est.history_[1:]
    print(json.dumps({"d1": args.d1, "d2": args.d2, "rank": args.rank, "shards": args.shards,
                      "sampler": args.sampler,
                      "client_bytes_per_step": round(sum(h["client_bytes"] for h in steps)
                                                     / max(len(steps), 1)),
                      "batch_size": args.batch_size, "n_iter": args.n_iter, "step": args.step,
                      "wall_s": round(wall, 1), "train_s": round(last["fit_s"], 1),
                      "auc": round(last["auc"], 4), "client_peak_mib": round(peak_rss_mib()),
                      "scheduler_peak_mib": round(scheduler),
                      "worker_peak_mib": sorted(round(v) for v in workers.values())}))


if __name__ == "__main__":
    sys.exit(main())
