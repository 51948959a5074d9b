"""A big cell in a sweep against the same fit run alone (issue 13's second goal).

    python benchmarks/bench_bigcell.py              # d2 = 10^6, 2 workers, 2 pairs of runs
    python benchmarks/bench_bigcell.py --smoke      # d2 = 2000, a few seconds

Runs, in turn and as whole processes (cluster start-up included in both):

(a) ``onebit-dask fit --workers 2 --json ...`` on ``d1=100, d2, k=3``, and
(b) ``onebit-dask sweep SPEC --workers 2`` of a one-cell spec with the same settings and
    ``fixed: {distributed: always}`` (the cell fitted with the Dask engine across the two
    workers from the runner),

``--repeat`` times (a b a b ...), and prints each run's wall time, training seconds
(``fit_s`` of the last iteration: the JSON's for (a), the cube's for (b)) and the
ratios (b)/(a) pair by pair. It also checks that both fits are the same fit: equal final
metrics, the cell stored with ``engine == "dask"``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from onebit_dask.metrics.names import METRICS

SPEC = """
name: bigcell
grid:
  d1: [{d1}]
  d2: [{d2}]
  rank: [{rank}]
  batch_size: [{batch_size}]
  n_iter: [{n_iter}]
  step: [{step}]
  seed: [{seed}]
fixed: {{n_test: {n_test}, n_shards: {shards}, max_eval_labels: {max_eval_labels},
        distributed: always}}
"""


def run(argv: list, timeout: float) -> tuple:
    """``(wall seconds, stdout)`` of ``python -m onebit_dask ARGV``; raises if it failed."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "onebit_dask", *map(str, argv)],
                          capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"onebit-dask {argv[0]} failed (exit {proc.returncode}): "
                         f"{proc.stderr.strip()[-2000:]}")
    return wall, proc.stdout


def fit_alone(args) -> dict:
    wall, out = run(["fit", "--workers", args.workers, "--json", "--quiet",
                     "--d1", args.d1, "--d2", args.d2, "--rank", args.rank,
                     "--batch-size", args.batch_size, "--n-iter", args.n_iter,
                     "--step", args.step, "--threshold", "none", "--seed", args.seed,
                     "--shards", args.shards,
                     "--n-test", args.n_test, "--max-eval-labels", args.max_eval_labels],
                    args.timeout)
    result = json.loads(out.strip().splitlines()[-1])
    return {"wall": wall, "fit_s": result["fit_s"], "sampler": result["sampler"],
            **{key: result[key] for key in METRICS}}


def cell_in_sweep(args, tmp: str) -> dict:
    from onebit_dask.sweep.cube import open_cells, open_cube

    spec = os.path.join(tmp, "bigcell.yaml")
    with open(spec, "w") as fh:
        fh.write(SPEC.format(**vars(args)))
    out = os.path.join(tmp, "bigcell.zarr")
    shutil.rmtree(out, ignore_errors=True)
    wall, _ = run(["sweep", spec, "--out", out, "--workers", args.workers, "--quiet"],
                  args.timeout)
    cube = open_cube(out).squeeze()
    last = cube.sel(iteration=args.n_iter)
    cell = {"wall": wall, "fit_s": float(last["fit_s"]), "sampler": cube.attrs["sampler"],
            "engine": str(open_cells(out).squeeze()["engine"].values),
            "done": bool(cube["done"].values),
            **{key: float(last[key]) for key in METRICS}}
    shutil.rmtree(out, ignore_errors=True)
    return cell


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny problem, one pair")
    parser.add_argument("--d1", type=int, default=100)
    parser.add_argument("--d2", type=int, default=1_000_000)
    parser.add_argument("--rank", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=4_000_000)
    parser.add_argument("--n-iter", type=int, default=18)
    parser.add_argument("--step", default="averaged")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--n-test", type=int, default=5000)
    parser.add_argument("--max-eval-labels", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2, help="pairs of runs (a b a b ...)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    args = parser.parse_args(argv)
    if args.smoke:
        args.d2, args.batch_size, args.n_iter, args.n_test, args.repeat = 2000, 20_000, 2, 500, 1
    tmp = tempfile.mkdtemp(prefix="bench-bigcell-")
    print(f"# d1={args.d1} d2={args.d2} k={args.rank} m={args.batch_size} T={args.n_iter} "
          f"step={args.step} shards={args.shards} n_test={args.n_test} "
          f"workers={args.workers}; whole processes, cluster start-up included")
    print("| pair | fit alone wall (s) | cell in sweep wall (s) | wall ratio | fit alone "
          "fit_s | cell fit_s | fit_s ratio |")
    print("|---|---|---|---|---|---|---|")
    walls, fits, same = [], [], True
    try:
        for pair in range(1, args.repeat + 1):
            a = fit_alone(args)
            b = cell_in_sweep(args, tmp)
            walls.append(b["wall"] / a["wall"])
            fits.append(b["fit_s"] / a["fit_s"])
            same = same and b["engine"] == "dask" and b["done"] and a["sampler"] == b["sampler"] \
                and all(a[key] == b[key] for key in METRICS)
            print(f"| {pair} | {a['wall']:.1f} | {b['wall']:.1f} | {walls[-1]:.3f} | "
                  f"{a['fit_s']:.1f} | {b['fit_s']:.1f} | {fits[-1]:.3f} |", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nmedian ratio cell in sweep / fit alone: wall {statistics.median(walls):.3f}, "
          f"fit_s {statistics.median(fits):.3f} (goal: <= 1.2)")
    print(f"same fit (engine 'dask', same sampler, equal final metrics): {same}")
    print(json.dumps({"d2": args.d2, "pairs": len(walls), "wall_ratio": statistics.median(walls),
                      "fit_s_ratio": statistics.median(fits), "same_fit": same}))


if __name__ == "__main__":
    main()
