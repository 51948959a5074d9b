"""Calibration of ``predict_proba`` on real data: Brier score and reliability per set.

For each data set (XC text files, train and test) and seed, the estimator with its
defaults learns from ``--bits`` uniform one-bit observations of the training label matrix
(``fit(X, Y)``, ``n_iter + 1`` batches), and its probabilities of the test label matrix
are scored against three others side by side: each label's training share (the
calibrated guess without features), ``Phi(score)`` (the scores read as a probit without
the fitted link) and one-vs-rest logistic regression on the whole training label matrix
(standardised features; it sees every label, not bits: a reference, not a peer).
Reported, means over seeds: the Brier score over all test pairs, the expected calibration
error (10 equal-width bins of the predicted probability; the pairs' weighted
``|mean predicted - share positive|``), the median over labels with a positive of each
label's Brier score divided by its training share's, and the fitted link::

    python benchmarks/bench_proba.py --data-dir ../shared/data --seeds 3
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from scipy.special import ndtr
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.preprocessing import StandardScaler

from onebit_dask import OneBitMultiLabel
from onebit_dask.io.xc import read_xc

SETS = ("emotions", "scene", "yeast", "enron", "bibtex")
BINS = 10


def brier(P, Y) -> float:
    return float(np.mean((P - Y) ** 2))


def ece(P, Y) -> float:
    """Expected calibration error over all pairs, ``BINS`` equal-width bins."""
    bins = np.minimum((P * BINS).astype(int), BINS - 1).ravel()
    P, Y = P.ravel(), Y.ravel()
    weight = np.bincount(bins, minlength=BINS)
    gap = np.abs(np.bincount(bins, P, BINS) - np.bincount(bins, Y, BINS))
    return float(gap.sum() / weight.sum())


def label_ratio(P, base, Y) -> float:
    """Median over labels with a test positive of Brier(P_j) / Brier(base_j)."""
    on = Y.sum(axis=0) > 0
    ratios = np.mean((P - Y) ** 2, axis=0)[on] / np.mean((base - Y) ** 2, axis=0)[on]
    return float(np.median(ratios))


def run(name, data_dir, seed, bits, rank, n_iter):
    X, Y = read_xc(os.path.join(data_dir, f"{name}_train.txt"))
    X_test, Y_test = read_xc(os.path.join(data_dir, f"{name}_test.txt"))
    Y, Y_test = Y.toarray() > 0, (Y_test.toarray() > 0).astype(float)
    model = OneBitMultiLabel(min(rank, Y.shape[1] // 2), batch_size=bits // (n_iter + 1),
                             n_iter=n_iter,
                             random_state=seed, engine="local", progress=False)
    model.fit(X, Y.astype(np.int8))
    base = np.broadcast_to(Y.mean(axis=0), Y_test.shape)
    scaler = StandardScaler(with_mean=False).fit(X)
    labelled = Y.any(axis=0) & ~Y.all(axis=0)
    ovr = OneVsRestClassifier(LogisticRegression(max_iter=1000)).fit(
        scaler.transform(X), Y[:, labelled])
    reference = base.copy()
    reference[:, labelled] = ovr.predict_proba(scaler.transform(X_test))
    rows = {"predict_proba": model.predict_proba(X_test),
            "Phi(score)": ndtr(model.decision_function(X_test)),
            "training share": base, "OvR logistic (full Y)": reference}
    return {k: (brier(P, Y_test), ece(P, Y_test), label_ratio(P, base, Y_test))
            for k, P in rows.items()}, model.calibration_


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.path.join("..", "shared", "data"))
    ap.add_argument("--sets", nargs="+", default=list(SETS))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--bits", type=int, default=110_000)
    ap.add_argument("--rank", type=int, default=10, help="at most half the labels")
    ap.add_argument("--n-iter", type=int, default=10)
    args = ap.parse_args(argv)
    print(f"{'set':9s} {'predictor':22s} {'Brier':>8s} {'ECE':>7s} {'Brier/share':>11s}")
    for name in args.sets:
        runs = [run(name, args.data_dir, s, args.bits, args.rank, args.n_iter)
                for s in range(args.seeds)]
        for key in runs[0][0]:
            b, e, r = np.mean([res[key] for res, _ in runs], axis=0)
            print(f"{name:9s} {key:22s} {b:8.4f} {e:7.4f} {r:11.3f}")
        link = np.mean([link for _, link in runs], axis=0)
        print(f"{name:9s} link (alpha, beta) = ({link[0]:.3f}, {link[1]:.3f})")


if __name__ == "__main__":
    main()
