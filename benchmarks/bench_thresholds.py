"""The thresholded model on the planted imbalanced truth (docs/ALGORITHM.md section 9).

Prints, over seeds, the Frobenius error after the initial batch and each step for the
paper's model and the thresholded one (priors log-uniform in [P_MIN, P_MAX]), then the
final error against the batch size ``m`` and its log-log slope, next to the balanced
model's::

    python benchmarks/bench_thresholds.py                  # the issue's setting, 5 seeds
    python benchmarks/bench_thresholds.py --seeds 2 --m 20000 40000 --d1 50 --d2 40
    python benchmarks/bench_thresholds.py --moment --seeds 1   # docs/ALGORITHM.md 9c

``--moment``: the moment step's error after each step (``step="moment"``, imbalanced and
balanced priors) next to the initial estimate on all its batches pooled (``n_iter=0``,
``batch_size = (n_iter + 1) m``), its fixed point up to the truncation.
"""

from __future__ import annotations

import argparse

import numpy as np

from onebit_dask import OneBitMultiLabel, SyntheticProblem


def errors(d1, d2, rank, m, n_iter, rate, threshold, seed, sampler, step="averaged"):
    problem = SyntheticProblem(d1, d2, rank, positive_rate=rate, sampler=sampler, seed=seed,
                               n_test=1000)
    est = OneBitMultiLabel(rank, batch_size=m, n_iter=n_iter, step=step,
                           threshold=threshold, random_state=seed).fit(problem)
    return [h["frobenius_error"] for h in est.history_]


def main_moment(args, shape, m, rate):
    """``--moment``: the moment step against the pooled initial estimate."""
    for label, r in (("imbalanced", rate), ("balanced", None)):
        for seed in range(args.seeds):
            steps = errors(*shape, m, args.n_iter, r, "estimated", seed, args.sampler, "moment")
            pooled = errors(*shape, (args.n_iter + 1) * m, 0, r, "estimated", seed,
                            args.sampler)[0]
            print(f"{label:10s} seed {seed} moment " + " ".join(f"{e:.4f}" for e in steps)
                  + f" | pooled {pooled:.4f} | last / first {steps[-1] / steps[0]:.3f} "
                  f"(1 / sqrt({args.n_iter + 1}) = {(args.n_iter + 1) ** -0.5:.3f})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d1", type=int, default=200)
    ap.add_argument("--d2", type=int, default=100)
    ap.add_argument("--rank", type=int, default=3)
    ap.add_argument("--n-iter", type=int, default=8)
    ap.add_argument("--rate", type=float, nargs=2, default=(0.005, 0.3))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--m", type=int, nargs="+", default=[25_000, 50_000, 100_000, 200_000])
    ap.add_argument("--sampler", default="conditional")
    ap.add_argument("--moment", action="store_true",
                    help="the moment step against the pooled initial estimate (main_moment)")
    args = ap.parse_args(argv)
    shape = (args.d1, args.d2, args.rank)
    m_main = 100_000 if 100_000 in args.m else args.m[-1]
    rate = tuple(args.rate)
    if args.moment:
        return main_moment(args, shape, m_main, rate)
    print(f"d1, d2, k = {shape}, priors {rate[0]:g}-{rate[1]:g}, m = {m_main}, "
          f"{args.n_iter} averaged steps, {args.seeds} seeds, sampler {args.sampler}")
    for threshold in ("none", "estimated"):
        runs = np.array([errors(*shape, m_main, args.n_iter, rate, threshold, s, args.sampler)
                         for s in range(args.seeds)])
        print(f"threshold={threshold:9s} mean " + " ".join(f"{e:.4f}" for e in runs.mean(0)))
        print(f"{'':19s} max  " + " ".join(f"{e:.4f}" for e in runs.max(0)))
    print("final error against m (mean over seeds) and the log-log slope")
    for label, r in (("imbalanced", rate), ("balanced", None)):
        finals = [np.mean([errors(*shape, m, args.n_iter, r, "estimated", s, args.sampler)[-1]
                           for s in range(args.seeds)]) for m in args.m]
        slope = np.polyfit(np.log(args.m), np.log(finals), 1)[0]
        print(f"{label:10s} " + " ".join(f"m={m}: {e:.4f}" for m, e in zip(args.m, finals))
              + f"  slope {slope:.2f}")


if __name__ == "__main__":
    main()
