"""A label-matrix fit whose batches hold more pairs than the set has rows: each row read
once (by row, the default there) against the pairs' rows gathered, side by side.

    python benchmarks/bench_by_row.py                 # 463 x 1186 dense CSR, 27 labels
    python benchmarks/bench_by_row.py --repeats 7 --n 21519 --d1 500
    python benchmarks/bench_by_row.py --smoke

The stand-in of the performance issue: ``X`` is ``scipy.sparse.random(n, d1, density)``
as CSR (``--density 1``: every entry stored), ``Y`` a random 0/1 matrix of ``d2`` labels
(each entry 1 with probability ``--p``); ``OneBitMultiLabel(rank, batch_size=m,
n_iter=T, engine="local").fit(X, Y)`` with the defaults otherwise. "gathered" forces the
pairs' rows to be gathered (``rows_of_bits`` replaced by ``X[rows]``), as every block did
before. Both run in this process, alternately, ``--repeats`` times each; the line per
repeat and the medians, then the ratio of the medians (gathered / by row). The last line
is JSON, with the largest difference of the two fits' scores on ``X``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import scipy.sparse as sp

import onebit_dask.data.label_matrix as label_matrix
from onebit_dask import OneBitMultiLabel


def fit(X, Y, args, gathered: bool):
    real = label_matrix.rows_of_bits
    if gathered:
        label_matrix.rows_of_bits = lambda X, rows: (X[rows], None)
    try:
        est = OneBitMultiLabel(args.rank, batch_size=args.batch_size, n_iter=args.n_iter,
                               engine="local", random_state=0)
        start = time.perf_counter()
        est.fit(X, Y)
        return time.perf_counter() - start, est
    finally:
        label_matrix.rows_of_bits = real


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=463)
    ap.add_argument("--d1", type=int, default=1186)
    ap.add_argument("--d2", type=int, default=27)
    ap.add_argument("--density", type=float, default=1.0)
    ap.add_argument("--p", type=float, default=0.1)
    ap.add_argument("--rank", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=10_000)
    ap.add_argument("--n-iter", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.d1, args.d2, args.batch_size, args.n_iter, args.repeats = 60, 40, 5, 600, 2, 1
        args.rank = 2
    rng = np.random.default_rng(0)
    X = sp.random(args.n, args.d1, density=args.density, format="csr", random_state=1,
                  dtype=np.float64)
    Y = (rng.random((args.n, args.d2)) < args.p).astype(np.int8)
    times = {"by_row": [], "gathered": []}
    fits = {}
    for r in range(args.repeats):
        for name in times:
            seconds, fits[name] = fit(X, Y, args, gathered=name == "gathered")
            times[name].append(seconds)
            print(f"repeat {r}: {name} {seconds:.3f} s", flush=True)
    med = {name: statistics.median(v) for name, v in times.items()}
    diff = float(np.abs(fits["by_row"].decision_function(X)
                        - fits["gathered"].decision_function(X)).max())
    print(f"median: by row {med['by_row']:.3f} s, gathered {med['gathered']:.3f} s, "
          f"ratio {med['gathered'] / med['by_row']:.2f}")
    print(json.dumps({"n": args.n, "d1": args.d1, "d2": args.d2, "density": args.density,
                      "batch_size": args.batch_size, "n_iter": args.n_iter,
                      "by_row_s": round(med["by_row"], 4),
                      "gathered_s": round(med["gathered"], 4),
                      "ratio": round(med["gathered"] / med["by_row"], 3),
                      "max_score_difference": diff}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
