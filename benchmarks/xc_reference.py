"""The pooled moment estimate that issue 38 takes as the bar, beside the package, on the
same uniform bits of an XC file's training label matrix.

The reference (not part of the package): with ``m`` uniform bits ``(i, j, y)`` of ``Y``,

    S_j = (1/n_j) sum_{bits of j with y = 1} x_i,   p_j = (positive bits of j) / n_j,
    G = D^{-1} (S - mu p^T),   D = diag(sqrt(var + lambda)),
    U = the top-``rank`` left singular vectors of G (randomized SVD),
    score_j(x) = p_j + z^T U U^T G e_j,   z = D^{-1} (x - mu).

``--lam`` is a number or ``eb``, the empirical-Bayes ridge (method of moments) derived in
docs/EXPERIMENTS.md, "Extreme label counts: where the gap is": with the prior
``beta_jf ~ N(0, kappa p_j (1 - p_j))`` on raw-unit slopes and the noise
``p_j (1 - p_j) var_f / n_j`` of ``C_jf``, ``lambda = mean_j 1 / (n_j kappa)``.
``--package`` also fits ``OneBitMultiLabel`` on the same bits (``fit(X[i], j, y)``,
``--step``, ``--rank`` and ``--features`` given: the package's defaults unless set; the
bits in ``--batches`` batches) and prints both lines.

``--queries model``: issue 38's learner-chosen loop. Batches of ``--batch-size`` pairs;
the first ``--warmup`` uniform, each later one drawn by the package's own law of the
queries (:func:`onebit_dask.data.queries.choose`: rows uniform, ``--explore`` of the
draws a uniform label, the others a uniform one of the row's ``--top-k`` best labels not
yet asked) from the reference's scores after the previous batch; the estimate is the one
above with the positives found so far as the label matrix (``S = X^T tilde Y / n``,
``p_j = f_j / n``, no weights). A row's best labels are ordered as the package's top-``k``
engine orders them: highest score first, ties to the smaller label (every label without
a positive found scores exactly 0, so the order among those labels is their index
order). ``--permute-labels SEED`` permutes the label columns of both files first (a
generator that numbers its labels by popularity, as ``make_xc.py`` does, then no longer
tells the tie order the popularity). One line per batch and seed; with ``--package`` the
package's ``OneBitMultiLabel(queries="model")`` with the same knobs on the same seeds.

    python benchmarks/make_xc.py --n 20000 --d1 20000 --d2 10000 --seed 0 --out train.txt
    python benchmarks/make_xc.py --n 5000 --d1 20000 --d2 10000 --seed 1 --out test.txt
    python benchmarks/xc_reference.py train.txt test.txt --bits 2000000 --lam eb --package
    python benchmarks/xc_reference.py train.txt test.txt --queries model --lam 0.03 \\
        --seeds 0 1 2 --package [--permute-labels 0]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import scipy.sparse as sp

from onebit_dask.data.queries import Asked, QueryPolicy, choose
from onebit_dask.engine.topk import select
from onebit_dask.io.xc import read_xc
from onebit_dask.metrics.ranking import propensities, top_k_metrics


def uniform_bits(Y, m: int, seed: int):
    """``m`` uniform (row, label) pairs of ``Y`` and their bits (booleans)."""
    rng = np.random.default_rng(seed)
    i = rng.integers(0, Y.shape[0], size=m)
    j = rng.integers(0, Y.shape[1], size=m)
    return i, j, np.asarray(Y[i, j]).ravel() > 0


def moments(X):
    mu = np.asarray(X.mean(axis=0)).ravel()
    ex2 = np.asarray(X.multiply(X).mean(axis=0)).ravel()
    return mu, np.maximum(ex2 - mu * mu, 0.0)


def pooled(X, i, j, y, d2: int):
    """``S`` (``d1 x d2``, sparse), ``p`` and ``n_j`` from the bits."""
    n_j = np.bincount(j, minlength=d2).astype(float)
    p = np.divide(np.bincount(j[y], minlength=d2), n_j, out=np.zeros(d2), where=n_j > 0)
    ip, jp = i[y], j[y]
    E = sp.csr_matrix((1.0 / n_j[jp], (np.arange(ip.size), jp)), shape=(ip.size, d2))
    return (X[ip].T @ E).tocsr(), p, n_j


def eb_ridge(S, p, n_j, mu, var) -> float:
    """The empirical-Bayes ridge: ``E sum_jf C_jf^2 = kappa (sum_j a_j)(sum_f var_f^2) +
    (sum_j a_j / n_j)(sum_f var_f)`` with ``a_j = p_j (1 - p_j)`` solved for ``kappa``;
    ``lambda = mean_j 1 / (n_j kappa)`` over the labels with bits."""
    seen = n_j > 0
    a = p * (1 - p)
    total = S.multiply(S).sum() - 2 * p @ (S.T @ mu) + (mu @ mu) * (p @ p)
    noise = (a[seen] / n_j[seen]).sum() * var.sum()
    kappa = max(total - noise, 1e-300) / (a.sum() * (var ** 2).sum())
    return float(np.mean(1.0 / (n_j[seen] * kappa)))


def randomized_svd(matvec, rmatvec, d2: int, k: int, rng, n_power: int = 4, over: int = 10):
    Q, _ = np.linalg.qr(matvec(rng.standard_normal((d2, k + over))))
    for _ in range(n_power):
        Q, _ = np.linalg.qr(rmatvec(Q))
        Q, _ = np.linalg.qr(matvec(Q))
    Ub, _, _ = np.linalg.svd(rmatvec(Q).T, full_matrices=False)
    return Q @ Ub[:, :k]


def fit_reference(X, i, j, y, d2: int, rank: int, lam, seed: int):
    return estimate(X, *pooled(X, i, j, y, d2), d2, rank, lam, seed)


def estimate(X, S, p, n_j, d2: int, rank: int, lam, seed: int):
    """The ridge-standardised, centred ``G`` of the pooled sums ``S`` and shares ``p``,
    and its rank-``rank`` randomized SVD."""
    mu, var = moments(X)
    lam = eb_ridge(S, p, n_j, mu, var) if lam == "eb" else float(lam)
    D = np.sqrt(var + lam)
    Sd, mud = sp.diags(1 / D) @ S, mu / D
    matvec = lambda V: Sd @ V - np.outer(mud, p @ V)  # noqa: E731
    rmatvec = lambda U: Sd.T @ U - np.outer(p, mud @ U)  # noqa: E731
    U = randomized_svd(matvec, rmatvec, d2, rank, np.random.default_rng(seed))
    return dict(mu=mu, D=D, U=U, UtG=rmatvec(U).T, p=p, lam=lam)


def found_estimate(X, rows, labels, n: int, d2: int, rank: int, lam, seed: int):
    """The reference estimate with the positive pairs ``(rows, labels)`` found so far as
    the label matrix (every other pair 0): ``fit_reference`` with ``n_j = n``."""
    E = sp.csr_matrix((np.full(rows.size, 1.0 / n), (np.arange(rows.size), labels)),
                      shape=(rows.size, d2))
    S, p, n_j = (X[rows].T @ E).tocsr(), np.bincount(labels, minlength=d2) / n, np.full(d2, n)
    return estimate(X, S, p, n_j, d2, rank, lam, seed)


def reference_scores(m, Xr):
    """``score(lo, hi)``: the reference's scores of the rows ``Xr[lo:hi]``."""
    Z = (Xr @ sp.diags(1 / m["D"])) @ m["U"] - (m["mu"] / m["D"]) @ m["U"]
    return lambda lo, hi: m["p"] + Z[lo:hi] @ m["UtG"]


def ordered_top_k(score, n: int, k: int, chunk: int = 1000) -> np.ndarray:
    """Each row's ``k`` best labels in the package's top-``k`` order (highest score
    first, ties to the smaller label: ``argsort(-s, kind="stable")[:, :k]``), found by the
    top-``k`` engine's partition (:func:`onebit_dask.engine.topk.select`, the columns in
    increasing order) and a stable sort of those ``k`` alone: the same labels, without
    sorting all ``d2`` scores of a row."""
    out = []
    for lo in range(0, n, chunk):
        s = score(lo, min(n, lo + chunk))
        cols = np.array(select(s, k))
        order = np.argsort(-np.take_along_axis(s, cols, 1), axis=1, kind="stable")
        out.append(np.take_along_axis(cols, order, 1))
    return np.vstack(out)


def chosen_loop(X, Y, Xt, args, seed: int, report) -> None:
    """Issue 38's learner-chosen loop with the reference estimate (module docstring)."""
    n, d2 = Y.shape
    policy = QueryPolicy("model", args.top_k, args.explore, args.warmup)
    asked, g, m = Asked(d2), np.random.default_rng([seed, 38]), None
    start = time.perf_counter()
    for t in range(args.n_iter + 1):
        if not policy.chooses(t):
            rows = g.integers(0, n, args.batch_size)
            labels = g.integers(0, d2, args.batch_size)
        else:
            def candidates(unique, k, m=m):
                return ordered_top_k(reference_scores(m, X[unique]), unique.size, k)

            rows, labels, _ = choose(policy, seed, t, n, args.batch_size, asked, candidates)
        y = np.asarray(Y[rows, labels]).ravel() > 0
        new = asked.add(rows, labels, np.where(y, 1, -1))
        found_rows, found_labels = asked.found_pairs()
        m = found_estimate(X, found_rows, found_labels, n, d2, args.rank, args.lam, seed + t)
        last = t == args.n_iter
        if last or args.every_batch:
            top = top_k(reference_scores(m, Xt), Xt.shape[0])
            report("reference", top, time.perf_counter() - start, queries="model",
                   seed=seed, batch=t, bits=int(asked.n_asked),
                   positive_bits=int(np.count_nonzero(y & new)), positives=int(found_rows.size),
                   labels_found=int(np.unique(found_labels).size))


def top_k(score, n: int, k: int = 5, chunk: int = 1000) -> np.ndarray:
    out = []
    for lo in range(0, n, chunk):
        s = score(lo, min(n, lo + chunk))
        idx = np.argpartition(-s, k, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(s, idx, 1), axis=1, kind="stable")
        out.append(np.take_along_axis(idx, order, 1))
    return np.vstack(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("train")
    ap.add_argument("test")
    ap.add_argument("--bits", type=int, default=500_000)
    ap.add_argument("--rank", type=int, default=50)
    ap.add_argument("--lam", default="eb", help="a number, or eb (empirical Bayes)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--package", action="store_true",
                    help="also fit OneBitMultiLabel on the same bits")
    ap.add_argument("--step", default="auto")
    ap.add_argument("--features", default="auto")
    ap.add_argument("--batches", type=int, default=10, help="the package's batches")
    ap.add_argument("--queries", choices=("uniform", "model"), default="uniform",
                    help="model: the learner-chosen loop (module docstring)")
    ap.add_argument("--batch-size", type=int, default=50_000, help="--queries model")
    ap.add_argument("--n-iter", type=int, default=9, help="--queries model: batches - 1")
    ap.add_argument("--warmup", type=int, default=2, help="--queries model: uniform batches")
    ap.add_argument("--top-k", type=int, default=20)
    ap.add_argument("--explore", type=float, default=0.1)
    ap.add_argument("--seeds", type=int, nargs="+", help="--queries model (default: --seed)")
    ap.add_argument("--every-batch", action="store_true", help="a line after every batch")
    ap.add_argument("--permute-labels", type=int, default=None, metavar="SEED",
                    help="permute the label columns of both files first")
    args = ap.parse_args(argv)
    X, Y = read_xc(args.train)
    Xt, Yt = read_xc(args.test, n_features=X.shape[1], n_labels=Y.shape[1])
    X, Xt = X.tocsr().astype(np.float64), Xt.tocsr().astype(np.float64)
    Y, Yt = Y.tocsr(), Yt.tocsr()
    if args.permute_labels is not None:
        perm = np.random.default_rng(args.permute_labels).permutation(Y.shape[1])
        Y, Yt = Y[:, perm].tocsr(), Yt[:, perm].tocsr()
    prop = propensities(Y)

    def report(who, top, seconds, **extra):
        metrics = top_k_metrics(Yt, top, prop, ks=(1, 3, 5))
        keep = {k: round(v, 4) for k, v in metrics.items() if k.startswith(("precision", "psp"))}
        print(json.dumps({"who": who, "bits": args.bits, "rank": args.rank, "fit_s":
                          round(seconds, 1), **extra, **keep}), flush=True)

    if args.queries == "model":
        from onebit_dask import OneBitMultiLabel

        args.bits = args.batch_size * (args.n_iter + 1)
        for seed in args.seeds or [args.seed]:
            chosen_loop(X, Y, Xt, args, seed, report)
            if args.package:
                est = OneBitMultiLabel(args.rank, batch_size=args.batch_size,
                                       n_iter=args.n_iter, queries="model",
                                       query_top_k=args.top_k, query_explore=args.explore,
                                       query_warmup=args.warmup, engine="local",
                                       random_state=seed)
                start = time.perf_counter()
                est.fit(X, Y)
                rows, labels = est.queries_asked_
                found = np.asarray(Y[rows, labels]).ravel() > 0
                report("onebit", est.predict_top_k(Xt, 5)[0], time.perf_counter() - start,
                       queries="model", seed=seed, positives=int(est.positives_found_.sum()),
                       labels_found=int(np.unique(labels[found]).size))
        return 0
    i, j, y = uniform_bits(Y, args.bits, args.seed)

    start = time.perf_counter()
    m = fit_reference(X, i, j, y, Y.shape[1], args.rank, args.lam, args.seed)
    seconds = time.perf_counter() - start
    Z = (Xt @ sp.diags(1 / m["D"])) @ m["U"] - (m["mu"] / m["D"]) @ m["U"]
    report("reference", top_k(lambda lo, hi: m["p"] + Z[lo:hi] @ m["UtG"], Xt.shape[0]),
           seconds, lam=round(m["lam"], 5))
    if args.package:
        from onebit_dask import OneBitMultiLabel

        batch = -(-args.bits // args.batches)
        est = OneBitMultiLabel(args.rank, batch_size=batch, n_iter=args.batches - 1,
                               step=args.step, features=args.features, engine="local",
                               random_state=args.seed)
        start = time.perf_counter()
        est.fit(X[i], j, 2 * y.astype(np.int8) - 1, n_labels=Y.shape[1])
        report("onebit", est.predict_top_k(Xt, 5)[0], time.perf_counter() - start,
               step=args.step, features=args.features)
    return 0


if __name__ == "__main__":
    sys.exit(main())
