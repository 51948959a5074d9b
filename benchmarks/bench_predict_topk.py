"""``predict_top_k`` of many rows against a model of many labels, on a Dask cluster.

    python benchmarks/bench_predict_topk.py          # 10^4 rows, 10^6 labels, rank 3, 2 workers
    python benchmarks/bench_predict_topk.py --smoke

Fits a planted problem (``--d1`` features, ``--d2`` labels, rank ``--rank``, one batch of
``--batch-size`` bits and one step, ``engine="dask"``) on a ``LocalCluster`` of
``--workers`` single-threaded worker processes, so that the label blocks live on the
workers, then times ``predict_top_k`` of ``--rows`` fresh Gaussian rows, ``k = 5``,
``--repeats`` times: the first call builds each block's label index where the block lives,
the later ones reuse it. The planted fit's label rows are distinct (every label has
bits), the hard case for an index (no duplicate rows to collapse). The labels of
``--check`` rows are compared with a brute force (every label's score by
``decision_function``, ``argsort(-S, kind="stable")``: ties to the smaller label), and
their scores to ``1e-13`` (``decision_function`` sums by BLAS, ``predict_top_k`` in
``tile_scores``' fixed order: the exactness against the fixed order is
tests/ops/test_mips.py's). Peak memory: ``ru_maxrss`` of the client (with the
scheduler) and of each worker process. The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time

import numpy as np


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d1", type=int, default=100)
    ap.add_argument("--d2", type=int, default=1_000_000)
    ap.add_argument("--rank", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=1_000_000)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--check", type=int, default=40)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    if args.smoke:
        args.d1, args.d2, args.batch_size, args.rows, args.repeats = 20, 5000, 20_000, 300, 2

    from distributed import Client, LocalCluster

    from onebit_dask import OneBitMultiLabel, SyntheticProblem

    problem = SyntheticProblem(args.d1, args.d2, args.rank, seed=0, n_test=100,
                               max_eval_labels=100)
    X = np.random.default_rng(1).standard_normal((args.rows, args.d1))
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        start = time.perf_counter()
        est = OneBitMultiLabel(args.rank, batch_size=args.batch_size, n_iter=1, eval_every=0,
                               engine="dask", random_state=0).fit(problem)
        fit_s = time.perf_counter() - start
        seconds = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            labels, scores = est.predict_top_k(X, args.k)
            seconds.append(time.perf_counter() - start)
            print(f"predict_top_k of {args.rows} rows x {args.d2} labels: {seconds[-1]:.2f} s",
                  flush=True)
        same = True
        for a in range(0, args.check, 10):
            S = est.decision_function(X[a:a + 10])
            order = np.argsort(-S, axis=1, kind="stable")[:, :args.k]
            same &= bool(np.array_equal(order, labels[a:a + 10])
                         and np.allclose(np.take_along_axis(S, order, axis=1),
                                         scores[a:a + 10], rtol=1e-13, atol=1e-13))
        workers = client.run(_peak_mib)
        del client
    result = {"d1": args.d1, "d2": args.d2, "rank": args.rank, "rows": args.rows, "k": args.k,
              "workers": args.workers, "fit_s": round(fit_s, 2),
              "first_s": round(seconds[0], 3),
              "later_median_s": round(statistics.median(seconds[1:] or seconds), 3),
              "checked_rows": args.check, "same_as_brute_force": same,
              "client_peak_mib": round(_peak_mib()),
              "worker_peak_mib": sorted(round(v) for v in workers.values())}
    print(json.dumps(result))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
