"""Held-out ranking metrics (``eval_set``): scoring every label against the label index
and exact counting, side by side in one run.

    OMP_NUM_THREADS=1 python benchmarks/bench_eval.py                      # ~2 min
    OMP_NUM_THREADS=1 python benchmarks/bench_eval.py --data train.txt --test-data test.txt
    python benchmarks/bench_eval.py --smoke

**Pieces** (one label block, one process, medians of ``--repeats``, interleaved): a
block's held-out pieces (each label's AUC, each row's top 5), by

* ``tiled``: every label's fixed-order scores in tiles (``ops.mips.tile_scores``), each
  label's AUC from two sorts (``metrics.auc_rows``), the top 5 from the same tiles: what
  ``engine.blocks.ranking_pieces`` did before;
* ``now``: ``engine.blocks.ranking_pieces``: the AUCs of the labels with both classes by
  ``ops.label_auc.label_aucs``, the top 5 through the block's label index (its build
  included: a fit's every evaluation has a new ``B``).

Both are checked to give the same AUCs and scores bit for bit and the same labels.
Labels: ``d2`` labels of Zipf popularity, about 5 positives a test row (as the
extreme-label files); label rows Gaussian, rank 3 and 50.

**Fits** (with ``--data``/``--test-data``): the same fit (rank 50, ``--n-iter`` steps of
``--batch-size`` uniform bits, in-process) with ``eval_every=0`` and ``1``; the seconds
an evaluation adds per iteration, against a step's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import scipy.sparse as sp

from onebit_dask.engine import blocks, topk
from onebit_dask.metrics import auc_rows


def pieces_tiled(block, Y_test, XA, k):
    """The former ``ranking_pieces``: every label scored, in tiles."""
    Bm, b = block.slots["B"], block.slots.get("b")
    n = XA.shape[0]
    width = max(1, topk.SCORE_BUDGET // (4 * 8 * max(n, 1)))
    best = topk.no_candidates(n)
    aucs = []
    for a in range(0, Bm.shape[0], width):
        sc = topk.tile_scores(XA, Bm[a: a + width], None if b is None else b[a: a + width])
        truth = np.ascontiguousarray(Y_test[:, a: a + width].T.toarray() > 0)
        aucs.append(auc_rows(truth, np.ascontiguousarray(sc.T)))
        best = topk.add_tile(best, sc, block.lo + a, k)
    return np.concatenate(aucs), *best


def labels(rng, n, d2, per_row=5):
    """A 0/1 ``(n, d2)`` matrix: ``per_row`` labels a row, drawn by Zipf popularity."""
    pop = 1.0 / np.arange(1, d2 + 1)
    rng.shuffle(pop)
    cols = rng.choice(d2, size=(n, per_row), p=pop / pop.sum())
    Y = sp.csr_matrix((np.ones(n * per_row, dtype=np.int8),
                       (np.repeat(np.arange(n), per_row), cols.ravel())), shape=(n, d2))
    Y.data[:] = 1
    return Y


def run_pieces(args) -> list[dict]:
    rows = []
    for rank in args.ranks:
        rng = np.random.default_rng(rank)
        dim = 2 * rank
        B = rng.standard_normal((args.d2, dim)) / np.sqrt(dim)
        b = -2.0 + 0.3 * rng.standard_normal(args.d2)
        XA = rng.standard_normal((args.n, dim))
        Y = labels(rng, args.n, args.d2)
        times = {"tiled": [], "now": []}
        for _ in range(args.repeats):
            for name in times:
                block = blocks.Block(0, args.d2, {"B": B.copy(), "b": b.copy()})
                t = time.perf_counter()
                out = (pieces_tiled(block, Y, XA, 5) if name == "tiled"
                       else blocks.ranking_pieces(block, Y, XA, 5).out)
                times[name].append(time.perf_counter() - t)
                if name == "tiled":
                    want = out
                else:
                    same = (np.array_equal(out[0], want[0], equal_nan=True)
                            and np.array_equal(out[1], want[1])
                            and np.array_equal(out[2], want[2]))
                    if not same:
                        sys.exit(f"rank {rank}: the pieces differ from the tiled ones")
        med = {name: float(np.median(v)) for name, v in times.items()}
        rows.append({"rank": rank, "d2": args.d2, "n": args.n, "tiled_s": med["tiled"],
                     "now_s": med["now"], "ratio": med["tiled"] / med["now"]})
    return rows


def run_fits(args) -> dict:
    from onebit_dask import OneBitMultiLabel
    from onebit_dask.io.xc import read_xc

    X, Y = read_xc(args.data)
    X_test, Y_test = read_xc(args.test_data, n_features=X.shape[1], n_labels=Y.shape[1])
    out = {}
    for every in (0, 1):
        times = []
        for _ in range(args.repeats):
            est = OneBitMultiLabel(args.rank, batch_size=args.batch_size, n_iter=args.n_iter,
                                   engine="local", random_state=0, eval_every=every)
            t = time.perf_counter()
            est.fit(X, Y, eval_set=(X_test, Y_test) if every else None)
            times.append(time.perf_counter() - t)
        out[f"eval_every={every}"] = float(np.median(times))
    steps = args.n_iter + 1
    out["step_s"] = out["eval_every=0"] / steps
    out["evaluation_s"] = (out["eval_every=1"] - out["eval_every=0"]) / steps
    out["evaluation_per_step"] = out["evaluation_s"] / out["step_s"]
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--d2", type=int, default=10_000)
    p.add_argument("--n", type=int, default=5000, help="test rows")
    p.add_argument("--ranks", type=int, nargs="+", default=[3, 50])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--data", help="a training file (XC or svmlight): also time fits")
    p.add_argument("--test-data")
    p.add_argument("--rank", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=50_000)
    p.add_argument("--n-iter", type=int, default=3)
    p.add_argument("--smoke", action="store_true", help="a few seconds")
    args = p.parse_args(argv)
    if args.smoke:
        args.d2, args.n, args.repeats, args.ranks = 300, 200, 1, [3]
    print(json.dumps({"pieces": run_pieces(args)}))
    if args.data:
        print(json.dumps({"fits": run_fits(args)}))


if __name__ == "__main__":
    main()
