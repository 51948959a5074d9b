"""The performance levers of the one-bit estimator, each against its alternative.

    python benchmarks/bench_levers.py            # paper-setting shards (25000 x 500 float32)
    python benchmarks/bench_levers.py --smoke    # tiny sizes (CI)

Every row times the kept choice and its alternative side by side in one process (best
of ``--repeat`` runs, one BLAS thread, as on a worker) and prints the ratio. The shard
is one of the paper setting's 4 shards: 25000 observations of a 50-label block.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import scipy.linalg
from threadpoolctl import threadpool_limits

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.fit import algorithm
from onebit_dask.engine import LocalEngine
from onebit_dask.engine import blocks
from onebit_dask.ops.kernels import residuals, scatter_rows, weighted_label_sums


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def row(name, kept, alternative, note=""):
    print(f"| {name} | {kept * 1e3:9.2f} | {alternative * 1e3:9.2f} | "
          f"{alternative / kept:6.1f}x | {note} |", flush=True)


def scatter_add(labels, rows, weights, repeat):
    """Weighted rows summed by label: scipy.sparse one-hot product vs np.add.at,
    np.bincount per column, sort + np.add.reduceat, and the same product with its matrix
    built from COO pairs."""
    u = labels.max() + 1

    def add_at():
        out = np.zeros((u, rows.shape[1]))
        np.add.at(out, labels, weights[:, None] * rows)
        return out

    def bincount():
        w = weights[:, None] * rows
        return np.stack([np.bincount(labels, w[:, c], minlength=u)
                         for c in range(rows.shape[1])], axis=1)

    def through_coo():  # the same product, its matrix built from (row, column) pairs
        uniq, inverse = np.unique(labels, return_inverse=True)
        E = scipy.sparse.csr_matrix((weights, (inverse, np.arange(labels.size))),
                                    shape=(uniq.size, labels.size))
        out = np.zeros((u, rows.shape[1]))
        out[uniq] = E @ rows
        return out

    def reduceat():
        order = np.argsort(labels, kind="stable")
        sorted_labels = labels[order]
        starts = np.flatnonzero(np.r_[True, sorted_labels[1:] != sorted_labels[:-1]])
        return np.add.reduceat((weights[order, None] * rows[order]), starts, axis=0)

    uniq, sparse = scatter_rows(labels, rows, weights)
    dense = np.zeros((u, rows.shape[1]))
    dense[uniq] = sparse
    for alt in (add_at, bincount):
        np.testing.assert_allclose(alt(), dense, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(through_coo(), dense)  # the same sums, to the bit
    kept = best(lambda: scatter_rows(labels, rows, weights), repeat)
    shape = f"{rows.shape[0]} x {rows.shape[1]} rows"
    row(f"scatter-add, {shape}: sparse product vs `np.add.at`", kept, best(add_at, repeat))
    row(f"scatter-add, {shape}: sparse product vs `np.bincount` per column", kept,
        best(bincount, repeat))
    row(f"scatter-add, {shape}: sparse product vs sort + `np.add.reduceat`", kept,
        best(reduceat, repeat))
    row(f"scatter-add, {shape}: CSC one-hot given directly vs built from COO pairs", kept,
        best(through_coo, repeat))


def cholqr2(Y, d1):
    """The package's Cholesky-QR2 (:func:`onebit_dask.fit.algorithm.cholqr2`) of ``Y``: the
    top ``d1`` rows on the client, the others in one label block."""
    engine = LocalEngine([blocks.Block(0, Y.shape[0] - d1, {"Y": Y[d1:]})])
    top = algorithm.cholqr2(engine, Y[:d1], "Y", "Q", engine.map(blocks.cross, "Y", "Y"),
                            Y.shape[0])
    return np.vstack([top, engine.handles[0].slots["Q"]])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    d1, d2, k, m, shards = 500, 200, 3, 100_000, 4
    big_d2 = (10**5, 10**6)
    if args.smoke:
        d1, d2, m, big_d2, args.repeat = 40, 20, 4000, (2000,), 1
    problem = SyntheticProblem(d1, d2, k, seed=0, n_test=200, sampler="explicit")
    est = OneBitMultiLabel(k, batch_size=m, n_iter=10, random_state=0, eval_every=0,
                           n_shards=shards).fit(problem)  # the factors after 10 steps
    A, B = est.A_, est.B_
    shard = problem.batch(11, m, shards)[0]
    X, labels, y = shard.load()
    lo, hi = shard.label_range
    print(f"# shard of {X.shape[0]} x {d1} float32, labels [{lo}, {hi}); best of {args.repeat}")
    print("| lever | kept ms | alternative ms | ratio | note |")
    print("|---|---|---|---|---|")
    with threadpool_limits(1, user_api="blas"):
        # 1. the bit generator of the features
        n = X.size
        gens = {name: np.random.Generator(getattr(np.random, name)(0))
                for name in ("PCG64", "Philox", "SFC64", "MT19937")}
        draw = {name: best(lambda g=g: g.standard_normal(n, dtype=np.float32), args.repeat)
                for name, g in gens.items()}
        for name in ("Philox", "SFC64", "MT19937"):
            row(f"float32 normals: PCG64 (kept) vs {name}", draw["PCG64"], draw[name])
        float64 = best(lambda: gens["PCG64"].standard_normal(n), args.repeat)
        row("normals: float32 (kept) vs float64", draw["PCG64"], float64)

        # 2. scores in float32 vs float64, and how many residuals change
        B_rows = B[lo:hi]
        r = residuals(X, labels, y, A, B_rows, lo)
        X64 = X.astype(np.float64)
        flips = int(np.sum(r != residuals(X64, labels, y, A, B_rows, lo)))
        row("scores: float32 (kept) vs float64 features", best(
            lambda: residuals(X, labels, y, A, B_rows, lo), args.repeat),
            best(lambda: residuals(X.astype(np.float64), labels, y, A, B_rows, lo),
                 args.repeat),
            f"{flips} of {X.shape[0]} signs differ")

        # 3. only the rows with a non-zero residual in the per-label sums of a step
        active = np.flatnonzero(r)
        kept = best(lambda: weighted_label_sums(X, labels, r, active), args.repeat)
        full = best(lambda: weighted_label_sums(X, labels, r), args.repeat)
        row("a step's per-label sums: active rows only (kept) vs all rows", kept, full,
            f"{active.size} of {X.shape[0]} rows active")

        # 4. the scatter-add, in the product (active rows) and the dense initialisation
        P_top = np.linalg.qr(np.random.default_rng(0).standard_normal((d1, 2 * k)))[0]
        scatter_add(labels[active] - lo, X64[active] @ P_top, r[active], args.repeat)
        scatter_add(labels - lo, X, y, max(1, args.repeat // 2))

        # 5. Cholesky-QR2 vs Householder QR of the tall (d1 + d2) x 2k block
        for rows_ in (d1 + d2, *(d1 + b for b in big_d2)):
            Y = np.random.default_rng(1).standard_normal((rows_, 2 * k))
            Q = cholqr2(Y, d1)
            np.testing.assert_allclose(Q.T @ Q, np.eye(2 * k), atol=1e-10)
            row(f"orthonormalise {rows_} x {2 * k}: Cholesky-QR2 vs Householder QR",
                best(lambda: cholqr2(Y, d1), args.repeat),
                best(lambda: scipy.linalg.qr(Y, mode="economic"), args.repeat))

        # 6. initialisation: exact SVD of the dense H0 vs matrix-free randomised SVD
        def init(kind):
            est = OneBitMultiLabel(k, batch_size=m, n_iter=0, n_shards=shards, init_svd=kind,
                                   eval_every=0, random_state=0)
            return lambda: est.fit(problem)

        row(f"initialisation d2={d2}: dense H0 + SVD (kept) vs randomised",
            best(init("dense"), 1), best(init("randomized"), 1),
            "drawing batch 0 included in both")
    return 0


if __name__ == "__main__":
    sys.exit(main())
