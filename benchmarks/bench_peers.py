"""Peers on the same observations: onebit vs one-vs-rest logistic regression vs LEML.

    python benchmarks/bench_peers.py                  # paper setting, noise free and flip=0.05
    python benchmarks/bench_peers.py --noise 0.05 --no-leml --no-streamed --repeat 5
    python benchmarks/bench_peers.py --smoke

Every method sees the same observations: the 11 batches of 100000 single-label bits the
one-bit estimator streams. The streamed one-bit rows include drawing those batches (the
estimator draws them as it goes, in this process); the "in memory" rows and the peers get
them ready in memory. onebit runs on one BLAS thread; the peers with all BLAS threads, and
one-vs-rest also with one (its 200 small fits are faster that way).

"floor" is the least any in-memory method must do: read every batch once, as the product
``X_t @ A`` (float32, ``d1 x 2k``, one thread, in L2-sized row blocks:
``kernels.rows_product``). "read" is one plain pass over the same bytes (``X_t @ 1``).
The in-memory one-bit rows and one-vs-rest (1 thread) are medians of ``--repeat`` runs.
The last columns: each time over the streamed averaged step's (when run) and over the
in-memory averaged step's (``x in-mem``; the goal is one-vs-rest at >= 20x).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

from onebit_dask import OneBitMultiLabel, SyntheticProblem, metrics
from onebit_dask.baselines import LEML, OneVsAll
from onebit_dask.ops.kernels import rows_product


def timed(fit, repeat):
    """``(median seconds, last fitted estimator)`` of ``repeat`` calls of ``fit()``."""
    times, est = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        est = fit()
        times.append(time.perf_counter() - start)
    return statistics.median(times), est


def floors(X, m, width, repeat):
    """Median seconds of one float32 pass ``X_t @ A`` over every batch, and of ``X_t @ 1``."""
    A = np.ones((X.shape[1], width), dtype=X.dtype)
    one = np.ones(X.shape[1], dtype=X.dtype)
    batches = [X[a: a + m] for a in range(0, X.shape[0], m)]
    with threadpool_limits(1, user_api="blas"):
        product = timed(lambda: [rows_product(b, A) for b in batches], repeat)[0]
        read = timed(lambda: [b @ one for b in batches], repeat)[0]
    return product, read


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d1", type=int, default=500)
    p.add_argument("--d2", type=int, default=200)
    p.add_argument("--rank", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=100_000)
    p.add_argument("--n-iter", type=int, default=10)
    p.add_argument("--noise", nargs="*", type=float, default=[0.0, 0.05], help="flip rates")
    p.add_argument("--repeat", type=int, default=5,
                   help="runs of the in-memory one-bit fits, one-vs-rest (1 thread), floors")
    p.add_argument("--no-streamed", action="store_true", help="skip the streamed one-bit rows")
    p.add_argument("--no-leml", action="store_true", help="skip LEML and 2-thread one-vs-rest")
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    if args.smoke:
        args.d1, args.d2, args.batch_size, args.n_iter, args.noise = 30, 15, 3000, 3, [0.05]
        args.repeat = 1
    print(f"# d1={args.d1} d2={args.d2} k={args.rank} m={args.batch_size} T={args.n_iter}, "
          f"in-process, one core for onebit, medians of {args.repeat}")
    print(f"{'flip':>5s} {'method':32s} {'seconds':>8s} {'auc':>8s} {'frob':>7s} "
          f"{'x stream':>9s} {'x in-mem':>9s}")
    for flip in args.noise:
        problem = SyntheticProblem(args.d1, args.d2, args.rank, flip=flip, seed=0,
                                   n_test=10_000 if not args.smoke else 500)
        test, truth = problem.test_set(), problem.truth
        rows = []

        def onebit(step, *data, **kw):
            est = OneBitMultiLabel(args.rank, batch_size=args.batch_size, n_iter=args.n_iter,
                                   step=step, random_state=0, eval_every=0)
            with threadpool_limits(1, user_api="blas"):
                return est.fit(*data, **kw)

        if not args.no_streamed:
            for step in ("paper", "averaged"):
                rows.append((f"onebit ({step}, streamed)", *timed(lambda: onebit(step, problem), 1)))
        X, labels, y = problem.draw_batches(range(args.n_iter + 1), args.batch_size, 4)
        for step in ("paper", "averaged"):  # the same observations, given in memory
            rows.append((f"onebit ({step}, in memory)",
                         *timed(lambda: onebit(step, X, labels, y, n_labels=args.d2),
                                args.repeat)))
        peers = [("one-vs-rest logistic, 1 thread", 1, args.repeat)]
        if not args.no_leml:
            peers += [("one-vs-rest logistic", None, 1), ("LEML (lambda by validation)", None, 1)]
        for name, threads, repeat in peers:
            def fit():
                peer = LEML(args.rank) if name.startswith("LEML") else OneVsAll()
                with threadpool_limits(threads, user_api="blas"):
                    return peer.fit(X, labels, y, n_labels=args.d2)
            rows.append((name, *timed(fit, repeat)))
        product, read = floors(X, args.batch_size, 2 * args.rank, args.repeat)
        times = {name: seconds for name, seconds, _ in rows}
        streamed = times.get("onebit (averaged, streamed)")
        in_memory = times["onebit (averaged, in memory)"]
        for name, seconds, est in rows:
            result = metrics.evaluate(test, truth, est.A_, est.B_)
            ratio = f"{seconds / streamed:8.1f}x" if streamed else f"{'':9s}"
            print(f"{flip:5.2f} {name:32s} {seconds:8.2f} {result['auc']:8.4f} "
                  f"{result['frobenius_error']:7.4f} {ratio} {seconds / in_memory:8.1f}x")
        for name, seconds in (("floor: X_t @ A, every batch", product),
                              ("read: X_t @ 1, every batch", read)):
            print(f"{flip:5.2f} {name:32s} {seconds:8.2f} {'':8s} {'':7s} {'':9s} "
                  f"{seconds / in_memory:8.2f}x")
        ovr = times["one-vs-rest logistic, 1 thread"]
        print(f"{flip:5.2f} one-vs-rest (1 thread) / onebit averaged in memory = "
              f"{ovr / in_memory:.1f}x (goal 20x: {ovr / 20:.2f} s); one-vs-rest / floor = "
              f"{ovr / product:.1f}x")


if __name__ == "__main__":
    sys.exit(main())
