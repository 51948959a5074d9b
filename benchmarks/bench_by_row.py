"""A label-matrix fit whose batches hold more pairs than the set has rows: each row read
once (by row, the default there) against the pairs' rows gathered, side by side.

    python benchmarks/bench_by_row.py                 # 463 x 1186 dense CSR, 27 labels
    python benchmarks/bench_by_row.py --repeats 7 --n 21519 --d1 500
    python benchmarks/bench_by_row.py --smoke
    python benchmarks/bench_by_row.py --partial-fit --repeats 3 --old-checkout /tmp/pfit-old

``--partial-fit`` (issue 40): a loop of ``partial_fit(X[lo:lo + chunk], Y[lo:lo + chunk])``
over the rows in chunks of ``--chunk`` (``--passes`` times over them), ``batch_size=m``
pairs drawn from each chunk, "new" (this checkout: the fit's label-block shards of the
drawn pairs, a block whose pairs outnumber the chunk's rows reading each row once)
against "old": with ``--old-checkout PATH`` the code of another checkout (e.g. ``git
worktree add /tmp/pfit-old 2c81383``: every pair's row gathered, the batch cut into row
ranges), else this checkout with ``rows_of_bits`` forced to gather. Each side runs in a
fresh process of its own (``PYTHONPATH`` set to its checkout), alternately, ``--repeats``
times; the time is the loop's, measured in that process.

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


def data(args):
    rng = np.random.default_rng(0)
    X = sp.random(args.n, args.d1, density=args.density, format="csr", random_state=1,
                  dtype=np.float64)
    Y = (rng.random((args.n, args.d2)) < args.p).astype(np.int8)
    return X, Y


def partial_fit_loop(args) -> dict:
    """One side of ``--partial-fit``, in this process: the loop's time, and its scores on
    ``X`` written to ``args.scores``."""
    if args.gathered:
        label_matrix.rows_of_bits = lambda X, rows: (X[rows], None)
    X, Y = data(args)
    est = OneBitMultiLabel(args.rank, batch_size=args.batch_size, engine="local",
                           random_state=0)
    start = time.perf_counter()
    for _ in range(args.passes):
        for lo in range(0, args.n, args.chunk):
            est.partial_fit(X[lo:lo + args.chunk], Y[lo:lo + args.chunk],
                            classes=np.arange(args.d2))
    seconds = time.perf_counter() - start
    np.save(args.scores, est.decision_function(X))
    return {"seconds": seconds, "n_calls": est.n_steps_ + 1}


def partial_fit_main(args, argv) -> int:
    import os
    import subprocess
    import sys
    import tempfile

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sides = {"new": (here, False), "old": ((args.old_checkout, False) if args.old_checkout
                                           else (here, True))}
    times = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for name, (path, gathered) in sides.items():
                env = dict(os.environ, PYTHONPATH=path)
                cmd = [sys.executable, os.path.abspath(__file__), *argv, "--side",
                       "--scores", os.path.join(tmp, f"{name}.npy")]
                cmd += ["--gathered"] if gathered else []
                out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
                result = json.loads(out.stdout.strip().splitlines()[-1])
                times[name].append(result["seconds"])
                print(f"repeat {r}: {name} {result['seconds']:.3f} s "
                      f"({result['n_calls']} calls)", flush=True)
        diff = float(np.abs(np.load(os.path.join(tmp, "new.npy"))
                            - np.load(os.path.join(tmp, "old.npy"))).max())
    med = {name: statistics.median(v) for name, v in times.items()}
    print(f"median: new {med['new']:.3f} s, old {med['old']:.3f} s, "
          f"ratio {med['old'] / med['new']:.2f}")
    print(json.dumps({"case": "partial_fit", "n": args.n, "d1": args.d1, "d2": args.d2,
                      "density": args.density, "batch_size": args.batch_size,
                      "chunk": args.chunk, "passes": args.passes,
                      "old": args.old_checkout or "this checkout, rows gathered",
                      "new_s": round(med["new"], 4), "old_s": round(med["old"], 4),
                      "ratio": round(med["old"] / med["new"], 3),
                      "max_score_difference": diff}))
    return 0


def main(argv=None) -> int:
    import sys

    argv = sys.argv[1:] if argv is None else list(argv)
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
    ap.add_argument("--partial-fit", action="store_true",
                    help="a loop of partial_fit over row chunks, new against old")
    ap.add_argument("--chunk", type=int, default=100, help="rows a partial_fit call")
    ap.add_argument("--passes", type=int, default=2, help="loops over the chunks")
    ap.add_argument("--old-checkout", default=None,
                    help="PYTHONPATH of the old side of --partial-fit")
    ap.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--gathered", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--scores", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.d1, args.d2, args.batch_size, args.n_iter, args.repeats = 60, 40, 5, 600, 2, 1
        args.rank, args.chunk = 2, 20
    if args.side:
        print(json.dumps(partial_fit_loop(args)))
        return 0
    if args.partial_fit:
        return partial_fit_main(args, argv)
    X, Y = data(args)
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
