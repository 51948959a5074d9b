"""What an evaluated iteration (``eval_set``'s held-out ranking metrics) costs on a cluster,
against a step, at many labels.

    python benchmarks/bench_eval_cluster.py       # d2 = 10^6, rank 3, m = 10^6, 10^4 rows
    python benchmarks/bench_eval_cluster.py --smoke

The same fit of a label matrix (``--n`` training rows of ``--d1`` Gaussian features,
``--d2`` labels, rank ``--rank``, ``--n-iter`` steps of ``--batch-size`` uniform pairs,
``engine="dask"`` on a ``LocalCluster`` of ``--workers`` single-threaded worker
processes) with ``eval_every=0`` and with ``eval_set=(X_test, Y_test), eval_every=1``,
alternately, ``--repeats`` times, after a warm-up fit. (A planted problem evaluates its
own test set and takes no ``eval_set``.) Training and held-out labels: sparse label
matrices of Zipf-popular labels, about 5 a row, as extreme-classification sets (the
metrics' values do not matter here, their cost does: each label's AUC over its
positives, each row's top 5 through the blocks' label indexes, rebuilt at every
evaluation since ``B`` changed). Reports the seconds of a fit, and what an evaluation
adds to an iteration against a step's seconds two ways: the evaluated fits' own account
(``history_``'s ``eval_s``, the seconds of each iteration's metrics, against its
``fit_s``, the training seconds, of the same fit: no run-to-run noise), and the
difference of the two fits' wall times (which also holds the once-a-fit setup of the
held-out set, and the runs' spread). The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
import scipy.sparse as sp


def labelled(rows: int, d1: int, d2: int, per_row: int = 5, seed: int = 1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, d1))
    labels = np.minimum(rng.zipf(1.3, size=rows * per_row) - 1, d2 - 1)
    Y = sp.csr_matrix((np.ones(labels.size, dtype=np.int8),
                       (np.repeat(np.arange(rows), per_row), labels)), shape=(rows, d2))
    Y.data[:] = 1  # duplicates summed, then set to 1
    return X, Y


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="training rows")
    ap.add_argument("--d1", type=int, default=100)
    ap.add_argument("--d2", type=int, default=1_000_000)
    ap.add_argument("--rank", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=1_000_000)
    ap.add_argument("--n-iter", type=int, default=3)
    ap.add_argument("--test-rows", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.d1, args.d2, args.batch_size, args.test_rows = 2000, 20, 3000, 20_000, 300
        args.n_iter, args.repeats = 2, 1

    from distributed import Client, LocalCluster

    from onebit_dask import OneBitMultiLabel

    X, Y = labelled(args.n, args.d1, args.d2, seed=0)
    X_test, Y_test = labelled(args.test_rows, args.d1, args.d2, seed=1)
    seconds = {"plain": [], "evaluated": []}
    own = []  # the evaluated fits' sum of eval_s over their fit_s
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster):
        OneBitMultiLabel(args.rank, batch_size=args.batch_size, n_iter=0, engine="dask",
                         eval_every=0).fit(X, Y)  # warm-up: the workers' imports
        for _ in range(args.repeats):
            for kind in seconds:
                evaluated = kind == "evaluated"
                est = OneBitMultiLabel(args.rank, batch_size=args.batch_size,
                                       n_iter=args.n_iter, engine="dask", random_state=0,
                                       eval_every=1 if evaluated else 0)
                start = time.perf_counter()
                est.fit(X, Y, **({"eval_set": (X_test, Y_test)} if evaluated else {}))
                seconds[kind].append(time.perf_counter() - start)
                print(f"{kind}: {seconds[kind][-1]:.1f} s", flush=True)
                if kind == "evaluated":
                    p1 = est.history_[-1].get("precision_at_1")
                    own.append(sum(h["eval_s"] for h in est.history_)
                               / est.history_[-1]["fit_s"])
                    print(f"  its evaluations: {100 * own[-1]:.1f} % of its training "
                          "seconds", flush=True)
    plain, evaluated = (statistics.median(seconds[k]) for k in seconds)
    iterations = args.n_iter + 1
    result = {"n": args.n, "d1": args.d1, "d2": args.d2, "rank": args.rank,
              "batch_size": args.batch_size,
              "iterations": iterations, "test_rows": args.test_rows, "workers": args.workers,
              "fit_s_median": round(plain, 2), "fit_evaluated_s_median": round(evaluated, 2),
              "evaluation_s_per_iteration": round((evaluated - plain) / iterations, 2),
              "step_s": round(plain / iterations, 2),
              "evaluation_over_step": round((evaluated - plain) / plain, 3),
              "eval_s_over_fit_s_median": round(statistics.median(own), 3),
              "last_precision_at_1": p1}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
