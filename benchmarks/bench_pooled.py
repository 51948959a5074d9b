"""Pooled steps against the moment step and one batch of all the bits, on the same
uniform bits of an XC file's training label matrix (docs/ALGORITHM.md section 9f).

For each seed, ``OneBitMultiLabel(rank).fit(X, Y)`` (a label matrix: uniform pairs of
its ``n x d2`` grid) with ``--bits`` bits in ``--batches`` batches and each ``--steps``
rule (``auto``: the default, ``select``; ``one``: all the bits in one batch,
``n_iter=0``), then the test file's P@1/3/5 and PSP@5. One line per fit, then the means
over the seeds, side by side::

    python benchmarks/make_xc.py --n 20000 --d1 20000 --d2 10000 --seed 0 --out train.txt
    python benchmarks/make_xc.py --n 5000 --d1 20000 --d2 10000 --seed 1 --out test.txt
    python benchmarks/bench_pooled.py train.txt test.txt --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import numpy as np

from onebit_dask import OneBitMultiLabel
from onebit_dask.io.xc import read_xc
from onebit_dask.metrics.ranking import propensities, top_k_metrics

KEYS = ("precision_at_1", "precision_at_3", "precision_at_5", "psp_at_5")


def fit(X, Y, step: str, bits: int, batches: int, rank: int, seed: int):
    one = step == "one"
    return OneBitMultiLabel(rank, batch_size=bits if one else -(-bits // batches),
                            n_iter=0 if one else batches - 1,
                            step="auto" if one else step, engine="local",
                            random_state=seed).fit(X, Y)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("train")
    ap.add_argument("test")
    ap.add_argument("--bits", type=int, default=2_000_000)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--rank", type=int, default=50)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--steps", nargs="+", default=["moment", "pooled", "auto", "one"])
    args = ap.parse_args(argv)
    X, Y = read_xc(args.train)
    Xt, Yt = read_xc(args.test, n_features=X.shape[1], n_labels=Y.shape[1])
    X, Xt, Y, Yt = X.tocsr(), Xt.tocsr(), Y.tocsr(), Yt.tocsr()
    prop = propensities(Y)
    rows = {step: [] for step in args.steps}
    for seed in args.seeds:
        for step in args.steps:
            start = time.perf_counter()
            est = fit(X, Y, step, args.bits, args.batches, args.rank, seed)
            seconds = time.perf_counter() - start
            metrics = top_k_metrics(Yt, est.predict_top_k(Xt, 5)[0], prop, ks=(1, 3, 5))
            row = {k: round(metrics[k], 4) for k in KEYS}
            rows[step].append(row)
            print(json.dumps({"step": step, "seed": seed, "bits": args.bits,
                              "batches": 1 if step == "one" else args.batches,
                              "kept": est.history_[-1].get("branch"),
                              "fit_s": round(seconds, 1), **row}), flush=True)
    print(f"means over seeds {args.seeds} (peak RSS of the process "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MiB):")
    for step, got in rows.items():
        print(f"  {step:8s} " + "  ".join(f"{k} {np.mean([r[k] for r in got]):.3f}"
                                         for k in KEYS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
