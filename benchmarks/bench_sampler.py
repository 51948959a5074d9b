"""Conditional vs projected vs explicit sampling: training time side by side, and floors.

    python benchmarks/bench_sampler.py                # paper setting, in-process, medians of 3
    python benchmarks/bench_sampler.py --smoke        # tiny sizes (CI)

All fits run in this process (``eval_every=0``; one evaluation at the end, not timed).
A *floor* is the randomness a sampler cannot avoid drawing, replayed with the same
generator and the sizes the fit itself drew (recorded while it ran):

* projected floor (issue 11's): per shard, ``n_obs x r`` normals (``r = 3k``), the
  ``n_obs`` labels, and ``d1`` float32 normals per label with an active row;
* conditional floor: per shard, the ``hi - lo`` label counts (a multinomial), an angle
  and a radius per active row (a uniform and an exponential) and ``d1`` float32 normals
  per label with an active row (the initial batch: one normal per observation instead).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import numpy as np

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.data.synthetic import problem as synthetic

DRAWS = ("draw_projected_init", "draw_projected_step", "draw_conditional_init",
         "draw_conditional_step")


def timed_fit(problem, **params):
    """Fit, recording ``(function, n_obs, n_labels_in_shard, n_active_rows,
    n_active_labels)`` for every shard the sampler drew."""
    record = []
    originals = {name: getattr(synthetic, name) for name in DRAWS}

    def recorder(name):
        def draw(rng, n_obs, lo, hi, *args, **kwargs):
            out = originals[name](rng, n_obs, lo, hi, *args, **kwargs)
            active, n_active = (out, n_obs) if name.endswith("init") else out
            record.append((name, n_obs, hi - lo, n_active, active.labels.size))
            return out
        return draw

    for name in DRAWS:
        setattr(synthetic, name, recorder(name))
    try:
        est = OneBitMultiLabel(problem.rank, random_state=0, eval_every=0, **params)
        est.fit(problem)
    finally:
        for name, f in originals.items():
            setattr(synthetic, name, f)
    return est, est.history_[-1]["fit_s"], record


def floor(problem, record) -> float:
    """Replay the draws a sampler cannot avoid, with the sizes in ``record``."""
    r = min(3 * problem.rank, problem.d1)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for name, n_obs, n_labels, n_active, n_active_labels in record:
        if "projected" in name:
            width = problem.rank if name.endswith("init") else r
            rng.standard_normal((n_obs, width))
            rng.integers(0, n_labels, size=n_obs)
        else:
            rng.multinomial(n_obs, np.full(n_labels, 1.0 / n_labels))
            if name.endswith("init"):
                rng.standard_normal(n_obs)
            else:
                rng.random(n_active)
                rng.standard_exponential(n_active)
        rng.standard_normal((n_active_labels, problem.d1), dtype=np.float32)
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
    samplers = ("explicit", "projected", "conditional")
    times = {k: [] for k in samplers + ("projected floor", "conditional floor")}
    for _ in range(args.repeat):
        fits = {}
        for sampler in samplers:
            est, seconds, record = timed_fit(dataclasses.replace(base, sampler=sampler),
                                             **params)
            fits[sampler] = est
            times[sampler].append(seconds)
            if sampler != "explicit":
                times[f"{sampler} floor"].append(floor(base, record))
    med = {k: float(np.median(v)) for k, v in times.items()}
    print(f"# d1={args.d1} d2={args.d2} k={args.rank} m={args.batch_size} T={args.n_iter} "
          f"flip={args.flip} shards={args.shards}, in-process; median of {args.repeat}")
    for name, values in times.items():
        print(f"{name:18s} {med[name]:8.3f} s   {' '.join(f'{v:.3f}' for v in values)}")
    for name, est in fits.items():
        h = est.history_[-1]
        print(f"{name:18s} auc {h['auc']:.4f}  frobenius {h['frobenius_error']:.4f}  "
              f"active rows at the last step {h['n_active']}")
    for sampler in ("projected", "conditional"):
        print(f"explicit / {sampler:12s} training time {med['explicit'] / med[sampler]:7.1f}x "
              "(goal >= 20x)")
    print(f"projected / projected floor          {med['projected'] / med['projected floor']:7.2f}x "
          "(goal <= 1.5x)")
    print(f"conditional / projected floor        "
          f"{med['conditional'] / med['projected floor']:7.2f}x (goal <= 1.5x)")
    print(f"conditional / conditional floor      "
          f"{med['conditional'] / med['conditional floor']:7.2f}x")


if __name__ == "__main__":
    sys.exit(main())
