"""Peers on the same observations: onebit vs one-vs-rest logistic regression vs LEML.

    python benchmarks/bench_peers.py            # paper setting, noise free and flip=0.05
    python benchmarks/bench_peers.py --smoke

Every method sees the same observations: the 11 batches of 100000 single-label bits the
one-bit estimator streams. The first two one-bit rows include drawing those batches
(the estimator draws them as it goes, in this process); the "in memory" rows and the
peers get them ready in memory. The peers run with all BLAS threads, and one-vs-rest
also with one (its 200 small fits are faster that way). The last column is each time
over the streamed averaged step's.
"""

from __future__ import annotations

import argparse
import sys
import time

from threadpoolctl import threadpool_limits

from onebit_dask import OneBitMultiLabel, SyntheticProblem, metrics
from onebit_dask.baselines import LEML, OneVsAll


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d1", type=int, default=500)
    p.add_argument("--d2", type=int, default=200)
    p.add_argument("--rank", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=100_000)
    p.add_argument("--n-iter", type=int, default=10)
    p.add_argument("--noise", nargs="*", type=float, default=[0.0, 0.05], help="flip rates")
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    if args.smoke:
        args.d1, args.d2, args.batch_size, args.n_iter, args.noise = 30, 15, 3000, 3, [0.05]
    print(f"# d1={args.d1} d2={args.d2} k={args.rank} m={args.batch_size} T={args.n_iter}, "
          "in-process, one core for onebit")
    print(f"{'flip':>5s} {'method':28s} {'seconds':>8s} {'auc':>8s} {'frob':>7s} {'x onebit':>9s}")
    for flip in args.noise:
        problem = SyntheticProblem(args.d1, args.d2, args.rank, flip=flip, seed=0,
                                   n_test=10_000 if not args.smoke else 500)
        test, truth = problem.test_set(), problem.truth
        rows = []
        for step in ("paper", "averaged"):
            est = OneBitMultiLabel(args.rank, batch_size=args.batch_size, n_iter=args.n_iter,
                                   step=step, random_state=0, eval_every=0)
            start = time.perf_counter()
            est.fit(problem)
            rows.append((f"onebit ({step}, projected)", time.perf_counter() - start, est))
        X, labels, y = problem.draw_batches(range(args.n_iter + 1), args.batch_size, 4)
        for step in ("paper", "averaged"):  # the same observations, given in memory
            est = OneBitMultiLabel(args.rank, batch_size=args.batch_size, n_iter=args.n_iter,
                                   step=step, random_state=0, eval_every=0)
            start = time.perf_counter()
            est.fit(X, labels, y, n_labels=args.d2)
            rows.append((f"onebit ({step}, in memory)", time.perf_counter() - start, est))
        peers = (("one-vs-rest logistic, 1 thread", OneVsAll(), 1),
                 ("one-vs-rest logistic", OneVsAll(), None),
                 ("LEML (lambda by validation)", LEML(args.rank), None))
        for name, peer, threads in peers:
            with threadpool_limits(threads, user_api="blas"):
                start = time.perf_counter()
                peer.fit(X, labels, y, n_labels=args.d2)
                rows.append((name, time.perf_counter() - start, peer))
        base = rows[1][1]
        for name, seconds, est in rows:
            result = metrics.evaluate(test, truth, est.A_, est.B_)
            print(f"{flip:5.2f} {name:28s} {seconds:8.1f} {result['auc']:8.4f} "
                  f"{result['frobenius_error']:7.4f} {seconds / base:8.1f}x")


if __name__ == "__main__":
    sys.exit(main())
