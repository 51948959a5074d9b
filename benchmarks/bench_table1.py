"""The onebit cells of pipelines/paper_table1.yaml end to end, explicit vs conditional.

    python benchmarks/bench_table1.py             # 16 cells (8 noises x 2 steps), seed 0
    python benchmarks/bench_table1.py --smoke     # tiny sizes (CI)

Runs the spec's onebit cells (``method: [onebit]``, one seed) as two in-process sweeps
into fresh zarr stores, ``fixed.sampler: explicit`` and ``conditional``, one after the
other in this process, and prints each sweep's wall time (store, fits, evaluation at
every iteration, writes), the time inside the cells, the ratio, and the mean final AUC
and frobenius error of each.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

import yaml

SPEC = pathlib.Path(__file__).parents[1] / "pipelines" / "paper_table1.yaml"


def onebit_spec(sampler: str, seeds, smoke: bool):
    from onebit_dask.sweep.spec import parse_spec

    raw = yaml.safe_load(SPEC.read_text())
    raw["grid"].update(method=["onebit"], seed=list(seeds))
    raw["fixed"]["sampler"] = sampler
    if smoke:
        raw["grid"].update(d1=[30], d2=[20], batch_size=[3000], n_iter=[2],
                           noise=["none", "flip=0.05"])
        raw["fixed"]["n_test"] = 500
    return parse_spec(yaml.safe_dump(raw))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import xarray as xr

    from onebit_dask.sweep import run_sweep

    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench-table1-") as tmp:
        for sampler in ("explicit", "conditional"):
            spec = onebit_spec(sampler, range(args.seeds), args.smoke)
            out = os.path.join(tmp, f"{sampler}.zarr")
            start = time.perf_counter()
            summary = run_sweep(spec, out, None, progress=False)
            wall = time.perf_counter() - start
            assert summary.failed == 0, summary
            last = xr.open_zarr(out).isel(iteration=-1)
            rows[sampler] = (summary.ran, wall, summary.cell_s,
                             float(last["auc"].mean()), float(last["frobenius_error"].mean()))
    print("| sampler | cells | wall (s) | in cells (s) | mean final AUC | mean final frob |")
    print("|---|---|---|---|---|---|")
    for sampler, (n, wall, cells, auc, frob) in rows.items():
        print(f"| {sampler} | {n} | {wall:.1f} | {cells:.1f} | {auc:.4f} | {frob:.4f} |")
    ratio = rows["explicit"][1] / rows["conditional"][1]
    print(f"explicit / conditional, end to end: {ratio:.1f}x (goal >= 10x)")


if __name__ == "__main__":
    sys.exit(main())
