"""Exact top-k by a label index against scoring every label, side by side in one run.

    OMP_NUM_THREADS=1 python benchmarks/bench_topk_index.py                 # ~1-2 min
    OMP_NUM_THREADS=1 python benchmarks/bench_topk_index.py --d2 1000000    # the issue's size
    python benchmarks/bench_topk_index.py --smoke

One block of ``d2`` labels, one process. Contenders, interleaved in every repeat (same
rows, same moment; medians of ``--repeats``):

* ``tiled``: every label scored in tiles of ``tile_shape(rows, d2, SCORE_BUDGET)``, the
  fixed-order scores and the exact selection (``engine.topk.tiled_top_k``, the path
  ``predict_top_k`` took before the index);
* ``index``: ``ops.mips.top_k`` through the block's index (built once, its time apart);
* ``screen``: ``ops.mips.screen_top_k``, the exact cache-tiled BLAS brute force, on the
  index's deduplicated rows (the index's own fallback);
* ``blas``: a cache-tiled BLAS brute force, ``Z B^T + b`` in tiles of 256 rows x 1024
  labels and ``argpartition`` (not exact: BLAS sums, no tie rule): the floor to compare
  with where the index cannot prune (rank 50).

Cases: rank 3 (``l = 6``) Gaussian label rows and queries (no popularity: the hard case),
skewed popularity (power-law thresholds and row norms, a decaying spectrum), fitted-like
(90 % of the label rows zero with one shared threshold, as a fitted model of a million
labels); rank 50 (``l = 100``) Gaussian. ``index``, ``screen`` and ``tiled`` are checked
to return the same labels and bit-equal scores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from onebit_dask.engine import topk
from onebit_dask.ops import mips

CASES = (("gauss", 3), ("skew", 3), ("fitted", 3), ("gauss", 50))


def model(case: str, d2: int, dim: int, n: int, seed: int = 1):
    """``(B, b, Z)``: label rows, thresholds, query rows ``X A``."""
    rng = np.random.default_rng(seed)
    if case == "gauss":
        return (rng.standard_normal((d2, dim)), 0.3 * rng.standard_normal(d2),
                rng.standard_normal((n, dim)))
    if case == "skew":
        scale = 1.0 / np.arange(1, dim + 1) ** 0.7
        pop = 1.0 / np.arange(1, d2 + 1)
        rng.shuffle(pop)
        norm = (pop / pop.max()) ** 0.15
        B = rng.standard_normal((d2, dim)) * scale * norm[:, None]
        return B, 0.5 * np.log(pop), 3.0 * rng.standard_normal((n, dim)) * scale
    B = rng.standard_normal((d2, dim)) * 0.3
    B[rng.random(d2) < 0.9] = 0.0
    return B, np.full(d2, -0.685), 0.5 * rng.standard_normal((n, dim))


def tiled(Z, B, b, k):
    """Every label scored, as ``predict_top_k`` drove one block before the index."""
    n = Z.shape[0]
    rows, width = topk.tile_shape(n, B.shape[0], topk.SCORE_BUDGET)
    labels, scores = np.empty((n, k), dtype=np.int64), np.empty((n, k))
    for r in range(0, n, rows):
        labels[r: r + rows], scores[r: r + rows] = topk.tiled_top_k(B, b, 0, Z[r: r + rows],
                                                                    k, width)
    return labels, scores


def blas(Z, B, b, k, tile_bytes=2 * 2**20):
    """Cache-tiled ``Z B^T + b`` and ``argpartition`` (not exact)."""
    n, d2 = Z.shape[0], B.shape[0]
    rows_t = min(n, 256)
    width = max(k, tile_bytes // (8 * rows_t))
    labels, scores = np.empty((n, k), dtype=np.int64), np.empty((n, k))
    for r0 in range(0, n, rows_t):
        Zt = Z[r0: r0 + rows_t]
        bl, bs = np.empty((Zt.shape[0], 0), dtype=np.int64), np.empty((Zt.shape[0], 0))
        for a in range(0, d2, width):
            T = Zt @ B[a: a + width].T
            T += b[a: a + width]
            kk = min(k, T.shape[1])
            p = np.argpartition(T, T.shape[1] - kk, axis=1)[:, T.shape[1] - kk:]
            bl = np.hstack([bl, p + a])
            bs = np.hstack([bs, np.take_along_axis(T, p, 1)])
            if bl.shape[1] >= 4 * k:
                q = np.argpartition(bs, bs.shape[1] - k, axis=1)[:, bs.shape[1] - k:]
                bl, bs = np.take_along_axis(bl, q, 1), np.take_along_axis(bs, q, 1)
        o = np.argsort(-bs, axis=1)[:, :k]
        labels[r0: r0 + rows_t] = np.take_along_axis(bl, o, 1)
        scores[r0: r0 + rows_t] = np.take_along_axis(bs, o, 1)
    return labels, scores


def timed(fn, *args, **kwargs):
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - t, out


def same(a, b) -> bool:
    return bool((a[0] == b[0]).all() and (a[1].view(np.int64) == b[1].view(np.int64)).all())


def run_case(case, rank, d2, rows, ks, repeats):
    B, b, Z = model(case, d2, 2 * rank, rows)
    build, index = timed(mips.build_index, B, b)
    out = []
    for k in ks:
        times = {"tiled": [], "index": [], "screen": [], "blas": []}
        for _ in range(repeats):
            t, ref = timed(tiled, Z, B, b, k)
            times["tiled"].append(t)
            stats = {}
            t, got = timed(mips.top_k, index, Z, k, stats=stats)
            times["index"].append(t)
            t, scr = timed(mips.screen_top_k, Z, index.B, index.b, k, rho=index.rho,
                           index=index)
            times["screen"].append(t)
            times["blas"].append(timed(blas, Z, B, b, k)[0])
            if not (same(got, ref) and same(scr, ref)):
                raise AssertionError(f"{case} rank {rank} k={k}: not the exact top-k")
        med = {name: float(np.median(v)) for name, v in times.items()}
        out.append({"case": case, "rank": rank, "d2": d2, "rows": rows, "k": k,
                    "repeats": repeats, "build_s": round(build, 3),
                    "representatives": int(index.B.shape[0]), "leaves": index.n_leaves,
                    "index_mib": round(index.nbytes / 2**20, 1),
                    "scored_share": round(stats["scored"] / (rows * index.B.shape[0]), 4),
                    "fallback_rows": stats["fallback_rows"],
                    **{f"{name}_s": round(v, 4) for name, v in med.items()},
                    "tiled/index": round(med["tiled"] / med["index"], 1),
                    "index/blas": round(med["index"] / med["blas"], 2),
                    "tiled/blas": round(med["tiled"] / med["blas"], 1)})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d2", type=int, default=200_000)
    p.add_argument("--rows", type=int, default=200)
    p.add_argument("--rank50-rows", type=int, default=50,
                   help="rows of the rank-50 case (its tiled contender is slow)")
    p.add_argument("--k", type=int, nargs="+", default=[5, 20])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--smoke", action="store_true", help="d2 = 5000, 20 rows, one repeat")
    args = p.parse_args(argv)
    if args.smoke:
        args.d2, args.rows, args.rank50_rows, args.k, args.repeats = 5000, 20, 10, [5], 1
    results = []
    for case, rank in CASES:
        rows = args.rank50_rows if rank == 50 else args.rows
        results += run_case(case, rank, args.d2, rows, args.k, args.repeats)
    cols = ("case", "rank", "k", "rows", "tiled_s", "index_s", "screen_s", "blas_s",
            "tiled/index", "index/blas", "scored_share", "build_s")
    print(f"# d2 = {args.d2}, one process, medians of {args.repeats}; index, screen and "
          "tiled returned the same labels and bit-equal scores")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in results:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    for r in results:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
