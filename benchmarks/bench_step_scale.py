"""An ablation of the thresholded residual step's per-label scale on real data.

The thresholded step scales label ``j``'s residual sum by
``c_j / c = (m / d2) / n_j * exp(b_j^2 / 2)`` (:func:`onebit_dask.ops.thresholds.step_factors`,
exact for Gaussian features). This script replaces that factor for the length of one
fit and prints the held-out macro AUC after every iteration (standardised features,
110 000 bits, 11 batches, averaged step, rank 10, one seed), next to the paper's
model::

    python benchmarks/bench_step_scale.py --sets scene yeast emotions enron

Rows: ``paper`` (``threshold="none"``), ``thresholded`` (the factor as derived),
``no exp`` (``(m / d2) / n_j``: the label's own count, no ``exp(b^2 / 2)``; the
balanced scale of ``step="refine"``),
``paper scale`` (1: every label's sum scaled as the paper's). EXPERIMENTS.md, "The
moment step", has the numbers.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from bench_real import read_set, uniform_bits
from onebit_dask import OneBitMultiLabel
from onebit_dask.ops import thresholds

DERIVED = thresholds.step_factors
FACTORS = {"thresholded": DERIVED,
           "no exp": lambda b, n, expected, gaussian=True: DERIVED(b, n, expected,
                                                                 gaussian=False),
           "paper scale": lambda b, n, expected, gaussian=True: np.ones_like(n)}


def trajectories(name, data_dir, seed, n_bits, rank, n_iter):
    X_train, Y, X_test, Y_test = read_set(name, data_dir)
    d2 = Y.shape[1]
    i, j, y = uniform_bits(Y, seed, n_bits)

    def fit(threshold):
        model = OneBitMultiLabel(min(rank, d2), batch_size=n_bits // (n_iter + 1),
                                 n_iter=n_iter, step="averaged", threshold=threshold,
                                 features="standardize", random_state=seed)
        model.fit(X_train[i], j, y, n_labels=d2, eval_set=(X_test, Y_test))
        return [h["auc"] for h in model.history_]

    out = {"paper": fit("none")}
    for label, factor in FACTORS.items():
        thresholds.step_factors = factor
        try:
            out[label] = fit("estimated")
        finally:
            thresholds.step_factors = DERIVED
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.path.join("..", "shared", "data"))
    ap.add_argument("--sets", nargs="+", default=["scene", "yeast", "emotions", "enron"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bits", type=int, default=110_000)
    ap.add_argument("--rank", type=int, default=10)
    ap.add_argument("--n-iter", type=int, default=10)
    args = ap.parse_args(argv)
    for name in args.sets:
        rows = trajectories(name, args.data_dir, args.seed, args.bits, args.rank, args.n_iter)
        for label, aucs in rows.items():
            print(f"{name:9s} {label:12s} " + " ".join(f"{a:.3f}" for a in aucs), flush=True)


if __name__ == "__main__":
    main()
