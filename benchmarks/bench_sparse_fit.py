"""Sparse fit in-process: peak RSS against the CSR arrays' size, and time per step
against the batch's non-zeros.

    python benchmarks/bench_sparse_fit.py              # 10^6 x 10^5, 10/30/100 nnz a row, m = 10^5
    python benchmarks/bench_sparse_fit.py --nnz 100 --batch-sizes 10000 30000 100000
    python benchmarks/bench_sparse_fit.py --smoke

The matrices are built in memory (no file): ``X`` is ``n x d1`` CSR, float32 values in
[0, 1), ``z`` non-zeros a row (one column drawn uniformly in each of ``z`` equal bins of
``[0, d1)``, so the columns are distinct and sorted; int32 indices and pointers), ``Y``
is ``n x d2`` CSR of int8 with ``--labels-per-row`` labels a row drawn the same way.
Each ``(z, m)`` runs in a fresh process: build ``X`` and ``Y``, reset the process's peak
RSS (``/proc/self/clear_refs``), then ``OneBitMultiLabel(k, batch_size=m, n_iter=T,
step="averaged", engine="local").fit(X, Y)``, and read the peak (``VmHWM``): the fit's
peak, ``X`` and ``Y`` included (they are in memory throughout). The CSR size is
``X.data.nbytes + X.indices.nbytes + X.indptr.nbytes``. A step's time is
``(fit_s[T] - fit_s[0]) / T`` from ``history_`` (the initial batch apart); a batch of
``m`` uniform pairs has about ``m z`` non-zeros. Linux only. The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time
import numpy as np
import scipy.sparse as sp

def hwm_mib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024

def rss_mib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024

def binned(rng, n, width, per_row, dtype):
    # per_row distinct sorted columns a row: one uniform column in each of per_row bins
    bin_width = width // per_row
    cols = np.empty((n, per_row), dtype=np.int32)
    for lo in range(0, n, 100_000):
        hi = min(lo + 100_000, n)
        cols[lo:hi] = (np.arange(per_row, dtype=np.int32) * bin_width
                       + rng.integers(0, bin_width, size=(hi - lo, per_row), dtype=np.int32))
    indptr = np.arange(0, n * per_row + 1, per_row, dtype=np.int32
                       if n * per_row < 2**31 else np.int64)
    if dtype == np.int8:
        data = np.ones(n * per_row, dtype=np.int8)
    else:
        data = np.empty(n * per_row, dtype=np.float32)
        for lo in range(0, data.size, 10**7):
            data[lo:lo + 10**7] = rng.random(min(10**7, data.size - lo), dtype=np.float32)
    return sp.csr_matrix((data, cols.ravel(), indptr), shape=(n, width))

a = json.loads(sys.argv[1])
from onebit_dask import OneBitMultiLabel
rng = np.random.default_rng(0)
X = binned(rng, a["n"], a["d1"], a["nnz"], np.float32)
Y = binned(rng, a["n"], a["d2"], a["labels_per_row"], np.int8)
csr_x = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
csr_y = Y.data.nbytes + Y.indices.nbytes + Y.indptr.nbytes
before = rss_mib()
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
est = OneBitMultiLabel(a["rank"], batch_size=a["m"], n_iter=a["n_iter"], step="averaged",
                       engine="local", random_state=0, progress=False)
start = time.perf_counter()
est.fit(X, Y)
wall = time.perf_counter() - start
fit_s = [h["fit_s"] for h in est.history_]
print(json.dumps({"csr_x_mib": csr_x / 2**20, "csr_y_mib": csr_y / 2**20,
                  "rss_before_mib": before, "peak_mib": hwm_mib(), "wall_s": wall,
                  "init_s": fit_s[0], "step_s": (fit_s[-1] - fit_s[0]) / a["n_iter"],
                  "step_times": list(np.diff(fit_s))}))
"""


def run(settings: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(settings)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the fit process failed (exit {proc.returncode}): "
                         f"{proc.stderr[-3000:]}")
    return {**settings, **json.loads(proc.stdout.strip().splitlines()[-1])}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--d1", type=int, default=100_000)
    p.add_argument("--d2", type=int, default=1000)
    p.add_argument("--rank", type=int, default=3)
    p.add_argument("--labels-per-row", type=int, default=5)
    p.add_argument("--nnz", type=int, nargs="+", default=[10, 30, 100],
                   help="non-zeros a row, one matrix each")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[100_000])
    p.add_argument("--n-iter", type=int, default=5)
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    if args.smoke:
        args.n, args.d1, args.d2, args.nnz, args.batch_sizes, args.n_iter = (
            5000, 2000, 100, [10, 30], [2000], 2)
    if not os.path.exists("/proc/self/clear_refs"):
        raise SystemExit("bench_sparse_fit.py needs Linux (/proc/self/clear_refs)")
    for name in ("nnz", "labels_per_row"):
        for value in (getattr(args, name) if name == "nnz" else [args.labels_per_row]):
            width = args.d1 if name == "nnz" else args.d2
            if not 1 <= value <= width:
                p.error(f"--{name.replace('_', '-')}={value} is not allowed: give 1..{width}")
    runs = []
    print(f"# X: {args.n} x {args.d1} CSR float32 (built in memory), Y: {args.d2} labels, "
          f"{args.labels_per_row} a row; k={args.rank}, {args.n_iter} averaged steps, "
          "in-process, one process per row", flush=True)
    print("| nnz a row | m | batch nnz | CSR of X MiB | RSS before fit MiB | fit peak MiB | "
          "peak - before MiB | peak / CSR | init s | s a step | us a step per 10^3 batch nnz |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for nnz in args.nnz:
        for m in args.batch_sizes:
            r = run({"n": args.n, "d1": args.d1, "d2": args.d2, "rank": args.rank,
                     "labels_per_row": args.labels_per_row, "nnz": nnz, "m": m,
                     "n_iter": args.n_iter})
            r["batch_nnz"] = m * nnz
            runs.append(r)
            print(f"| {nnz} | {m} | {r['batch_nnz']:.1e} | {r['csr_x_mib']:.1f} | "
                  f"{r['rss_before_mib']:.0f} | {r['peak_mib']:.0f} | "
                  f"{r['peak_mib'] - r['rss_before_mib']:.0f} | "
                  f"{r['peak_mib'] / r['csr_x_mib']:.2f} | {r['init_s']:.2f} | "
                  f"{r['step_s']:.4f} | {1e9 * r['step_s'] / r['batch_nnz']:.1f} |", flush=True)
    print(json.dumps({"runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
