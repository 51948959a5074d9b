"""Projected vs explicit sampling: training time side by side, and the projected floor.

    python benchmarks/bench_sampler.py                # paper setting, in-process, medians of 3
    python benchmarks/bench_sampler.py --smoke        # tiny sizes (CI)

Both fits run in this process (``eval_every=0``; one evaluation at the end). The
*projected floor* is the randomness no implementation of projected sampling can avoid:
per step, ``m x r`` normals (``r = 3k``), the labels, and ``d1`` normals for each label
that has an active row (the counts are those of the projected fit itself); it is drawn
with the same generator in the same shards.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import numpy as np

from onebit_dask import OneBitMultiLabel, SyntheticProblem


def timed_fit(problem, **params):
    est = OneBitMultiLabel(problem.rank, random_state=0, eval_every=0, **params)
    est.fit(problem)
    return est, est.history_[-1]["fit_s"]


def projected_floor(problem, est, batch_size, n_iter, n_shards) -> float:
    """Draw what the projected sampler must draw for the fit ``est`` made."""
    r = min(3 * problem.rank, problem.d1)
    start = time.perf_counter()
    for t in range(n_iter + 1):
        active_labels = min(est.history_[t]["n_active"], problem.d2)
        for sh in problem.batch(t, batch_size, n_shards):
            rng = np.random.default_rng(np.random.SeedSequence([problem.seed, t, sh.s]))
            rng.standard_normal((sh.n_obs, r))
            rng.integers(sh.lo, sh.hi, size=sh.n_obs)
            rng.standard_normal((active_labels * sh.n_obs // batch_size, problem.d1))
    return time.perf_counter() - start


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d1", type=int, default=500)
    p.add_argument("--d2", type=int, default=200)
    p.add_argument("--rank", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=100_000)
    p.add_argument("--n-iter", type=int, default=10)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--flip", type=float, default=0.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    if args.smoke:
        args.d1, args.d2, args.batch_size, args.n_iter, args.repeat = 30, 20, 4000, 2, 1
    base = SyntheticProblem(args.d1, args.d2, args.rank, flip=args.flip, seed=0, n_test=10_000)
    params = dict(batch_size=args.batch_size, n_iter=args.n_iter, n_shards=args.shards)
    times = {"explicit": [], "projected": [], "projected floor": []}
    for _ in range(args.repeat):
        fits = {}
        for sampler in ("explicit", "projected"):
            fits[sampler], seconds = timed_fit(dataclasses.replace(base, sampler=sampler),
                                               **params)
            times[sampler].append(seconds)
        times["projected floor"].append(projected_floor(base, fits["projected"], **params))
    med = {k: float(np.median(v)) for k, v in times.items()}
    print(f"# d1={args.d1} d2={args.d2} k={args.rank} m={args.batch_size} T={args.n_iter} "
          f"flip={args.flip} shards={args.shards}, in-process; median of {args.repeat}")
    for name, values in times.items():
        print(f"{name:18s} {med[name]:8.3f} s   {' '.join(f'{v:.3f}' for v in values)}")
    for name, est in fits.items():
        h = est.history_[-1]
        print(f"{name:18s} auc {h['auc']:.4f}  frobenius {h['frobenius_error']:.4f}  "
              f"active rows at the last step {h['n_active']}")
    print(f"explicit / projected training time   {med['explicit'] / med['projected']:7.1f}x "
          "(goal >= 20x)")
    print(f"projected / its floor                {med['projected'] / med['projected floor']:7.2f}x "
          "(goal <= 1.5x)")


if __name__ == "__main__":
    sys.exit(main())
