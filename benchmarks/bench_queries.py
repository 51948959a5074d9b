"""Query policies side by side (``OneBitMultiLabel(queries=...)``, docs/ALGORITHM.md
section 11): at equal bits, each policy's test P@1/3/5 and PSP@5, the positive bits it
found, and the share of the tail's positives it found (labels ranked past ``--tail`` by
training frequency), beside popularity (the 5 most frequent training labels for every
row). One JSON line per policy and seed, then the means over the seeds.

    python benchmarks/make_xc.py --n 20000 --d1 20000 --d2 10000 --seed 0 --out train.txt
    python benchmarks/make_xc.py --n 5000 --d1 20000 --d2 10000 --seed 1 --out test.txt
    python benchmarks/bench_queries.py train.txt test.txt --batch-size 50000 --n-iter 9 \\
        --warmup 2 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from onebit_dask import OneBitMultiLabel
from onebit_dask.cli.args import count_or_share
from onebit_dask.io.xc import read_xc
from onebit_dask.metrics.ranking import propensities, top_k_metrics

KEEP = ("precision_at_1", "precision_at_3", "precision_at_5", "psp_at_5")


def tail_found(est, Y, tail: int) -> float:
    """Share of the positives of the labels ranked past ``tail`` (by training frequency)
    that the fit's queries found."""
    counts = np.asarray(Y.sum(axis=0)).ravel()
    in_tail = np.zeros(Y.shape[1], dtype=bool)
    in_tail[np.argsort(-counts, kind="stable")[tail:]] = True
    rows, labels = est.queries_asked_
    found = np.asarray(Y[rows, labels]).ravel() > 0
    return float(np.count_nonzero(found & in_tail[labels]) / max(counts[in_tail].sum(), 1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("train")
    ap.add_argument("test")
    ap.add_argument("--rank", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=50_000)
    ap.add_argument("--n-iter", type=int, default=9)
    ap.add_argument("--warmup", type=count_or_share, default=2,
                    help="uniform batches first: a count, or a share in (0, 1) of the "
                         "n_iter + 1 batches (the estimator's query_warmup)")
    ap.add_argument("--top-k", type=int, default=20)
    ap.add_argument("--explore", type=float, default=0.1)
    ap.add_argument("--tail", type=int, default=1000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--policies", nargs="+", default=["uniform", "popularity", "model"])
    ap.add_argument("--permute-labels", type=int, default=None, metavar="SEED",
                    help="permute the label columns of both files first (a generator that "
                         "numbers its labels by popularity then no longer tells ties it)")
    args = ap.parse_args(argv)
    X, Y = read_xc(args.train)
    Xt, Yt = read_xc(args.test, n_features=X.shape[1], n_labels=Y.shape[1])
    X, Xt, Y = X.tocsr().astype(np.float64), Xt.tocsr().astype(np.float64), Y.tocsr()
    if args.permute_labels is not None:
        perm = np.random.default_rng(args.permute_labels).permutation(Y.shape[1])
        Y, Yt = Y[:, perm].tocsr(), Yt.tocsr()[:, perm].tocsr()
    prop = propensities(Y)
    popular = np.argsort(-np.asarray(Y.sum(axis=0)).ravel(), kind="stable")[:5]
    base = top_k_metrics(Yt, np.tile(popular, (Xt.shape[0], 1)), prop, ks=(1, 3, 5))
    print(json.dumps({"who": "popularity", **{k: round(base[k], 4) for k in KEEP}}), flush=True)
    rows = {}
    for policy in args.policies:
        for seed in args.seeds:
            est = OneBitMultiLabel(args.rank, batch_size=args.batch_size, n_iter=args.n_iter,
                                   queries=policy, query_top_k=args.top_k,
                                   query_explore=args.explore, query_warmup=args.warmup,
                                   engine="local", random_state=seed)
            start = time.perf_counter()
            est.fit(X, Y)
            seconds = time.perf_counter() - start
            metrics = top_k_metrics(Yt, est.predict_top_k(Xt, 5)[0], prop, ks=(1, 3, 5))
            row = {k: metrics[k] for k in KEEP}
            if policy != "uniform":
                row["positive_bits"] = float(est.positives_found_.sum())
                row["tail_found"] = tail_found(est, Y, args.tail)
            rows.setdefault(policy, []).append(row)
            print(json.dumps({"who": policy, "seed": seed,
                              "bits": args.batch_size * (args.n_iter + 1),
                              "fit_s": round(seconds, 1),
                              **{k: round(v, 4) for k, v in row.items()}}), flush=True)
    for policy, runs in rows.items():
        mean = {k: round(float(np.mean([r[k] for r in runs])), 4) for k in runs[0]}
        print(json.dumps({"who": policy, "mean_of_seeds": len(runs), **mean}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
