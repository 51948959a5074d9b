"""A diagnosis of the ranking at large label counts: the fitted model's score against a
score that keeps each label's evidence (not a method of the package).

The package scores label ``j`` of a row by ``phi(x)^T w_j + b_j`` with a unit column
``w_j`` (the paper's column normalisation, ``B_``) and ``b_j = Phi^{-1}(p_j)``. A label
seen positive once gets a direction of full norm. The pooled reference of issue 38
scores ``p_j + z^T U U^T G e_j``: its direction term keeps the column's size, which
grows with the label's positive bits. Here, on the same fitted model, the label rows of
``V_`` (the step's ``M_dil Q`` before the normalisation) stand in for the unnormalised
columns, over their mean nonzero norm:

    s_j(x) = Phi(b_j) + c phi(x)^T A V_j / mean ||V_j||,   c in --scales,

printed beside the package's own ranking (P@1/3/5 on the test file's first ``--rows``
rows). One fit, ``fit(X, Y)`` with the defaults, rank ``--rank``, ``--bits`` uniform
bits in ``--batches`` batches::

    python benchmarks/bench_scorer.py train5.txt test5.txt --bits 20000000 --batches 20
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import scipy.special

from onebit_dask import OneBitMultiLabel
from onebit_dask.io.xc import read_xc
from onebit_dask.metrics.ranking import propensities, top_k_metrics


def top5(S: np.ndarray) -> np.ndarray:
    idx = np.argpartition(-S, 5, axis=1)[:, :5]
    order = np.argsort(-np.take_along_axis(S, idx, 1), axis=1, kind="stable")
    return np.take_along_axis(idx, order, 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("train")
    ap.add_argument("test")
    ap.add_argument("--bits", type=int, default=2_000_000)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--rank", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", type=int, default=2000, help="test rows scored")
    ap.add_argument("--scales", type=float, nargs="+", default=[0.01, 0.03, 0.1, 0.3])
    args = ap.parse_args(argv)
    X, Y = read_xc(args.train)
    Xt, Yt = read_xc(args.test, n_features=X.shape[1], n_labels=Y.shape[1])
    X, Y = X.tocsr(), Y.tocsr()
    Xt, Yt = Xt.tocsr()[: args.rows], Yt.tocsr()[: args.rows]
    est = OneBitMultiLabel(args.rank, batch_size=-(-args.bits // args.batches),
                           n_iter=args.batches - 1, engine="local",
                           random_state=args.seed).fit(X, Y)
    prop = propensities(Y)
    XA = est.feature_map_.product(Xt, est.A_) if est.feature_map_ is not None else Xt @ est.A_
    V = est.V_[est.A_.shape[0]:]  # the label rows
    norms = np.linalg.norm(V, axis=1)
    unit = V / np.mean(norms[norms > 0])
    share = scipy.special.ndtr(est.intercept_)

    def report(name, S):
        m = top_k_metrics(Yt, top5(S), prop, ks=(1, 3, 5))
        print(json.dumps({"score": name, "labels_with_a_direction": int((norms > 0).sum()),
                          **{k: round(v, 4) for k, v in m.items()
                             if k.startswith("precision")}}), flush=True)

    report("package: phi(x)^T w_j + b_j", XA @ est.B_.T + est.intercept_)
    for c in args.scales:
        report(f"Phi(b_j) + {c} phi(x)^T A V_j / mean|V_j|", share + c * (XA @ unit.T))
    return 0


if __name__ == "__main__":
    sys.exit(main())
