"""``step="select"`` against its two branches, side by side on the same bits.

For each data set and seed, the bits of ``bench_real.py`` (``--bits`` uniform pairs of
the training label matrix, features standardised by the estimator, or whitened with
``--whiten top:Q``) are fitted with ``step="pooled"``, ``"refine"`` and ``"select"``, in
turn, ``--repeats`` times each (the order rotates). Printed per set: the held-out macro
AUC of each (means over seeds), how many seeds ``select`` kept the residual branch, the
range of its score margin (residual minus pooled branch, the mean progressive AUC
difference that decided) and of the test AUC difference of the two branches, and the
median of ``select``'s training time over ``pooled``'s (per seed, then the median over
seeds)::

    python benchmarks/bench_select.py --data-dir ../shared/data --seeds 5
    python benchmarks/bench_select.py --sets scene enron --seeds 1 --whiten top:200
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from bench_real import SETS, _scores_metrics, package_features, read_set, uniform_bits
from onebit_dask import OneBitMultiLabel

STEPS = ("pooled", "refine", "select")


def run(name, data_dir, seed, n_bits, rank, n_iter, whiten, repeats):
    X_train, Y_train, X_test, Y_test = read_set(name, data_dir)
    d2 = Y_train.shape[1]
    i, j, y = uniform_bits(Y_train, seed, n_bits)
    X = X_train[i]
    seconds = {step: [] for step in STEPS}
    models = {}
    for r in range(repeats):
        for step in STEPS[r % 3:] + STEPS[: r % 3]:
            start = time.perf_counter()
            models[step] = OneBitMultiLabel(
                min(rank, d2), batch_size=n_bits // (n_iter + 1), n_iter=n_iter, step=step,
                random_state=seed, **package_features(whiten)).fit(X, j, y, n_labels=d2)
            seconds[step].append(time.perf_counter() - start)
    Yt = Y_test.toarray().astype(np.int8)
    row = {step: _scores_metrics(Yt, np.asarray(models[step].decision_function(X_test)),
                                 None)["auc"] for step in STEPS}
    forked = [h for h in models["select"].history_ if "branch" in h]
    row["residual_kept"] = forked[-1]["branch"] == "refine"
    row["score_margin"] = float(np.mean([h["progressive_auc_refine"]
                                         - h["progressive_auc_pooled"] for h in forked]))
    row["time_ratio"] = float(np.median(seconds["select"]) / np.median(seconds["pooled"]))
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.path.join("..", "shared", "data"))
    ap.add_argument("--sets", nargs="+", default=list(SETS))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--bits", type=int, default=110_000)
    ap.add_argument("--rank", type=int, default=10)
    ap.add_argument("--n-iter", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3, help="timed fits of each step per seed")
    ap.add_argument("--whiten", default="none", help="none (standardised) or top:Q")
    ap.add_argument("--json", help="write every row to this file")
    args = ap.parse_args(argv)
    results = {}
    for name in args.sets:
        rows = [run(name, args.data_dir, s, args.bits, args.rank, args.n_iter, args.whiten,
                    args.repeats) for s in range(args.seeds)]
        results[name] = rows
        gap = [r["refine"] - r["pooled"] for r in rows]
        margin = [r["score_margin"] for r in rows]
        print(f"{name:9s} auc " + " ".join(f"{s} {np.mean([r[s] for r in rows]):.3f}"
                                           for s in STEPS)
              + f" | residual kept {sum(r['residual_kept'] for r in rows)}/{len(rows)}"
              f" | score margin {min(margin):+.3f}..{max(margin):+.3f}"
              f" | test gap {min(gap):+.3f}..{max(gap):+.3f}"
              f" | select/pooled time {np.median([r['time_ratio'] for r in rows]):.2f}x",
              flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
