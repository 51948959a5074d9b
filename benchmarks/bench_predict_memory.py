"""Peak memory of ``onebit-dask predict`` with a many-label model: the client and the workers.

    python benchmarks/bench_predict_memory.py                  # d2 = 300 000 labels, 1500 rows
    python benchmarks/bench_predict_memory.py --smoke
    PYTHONPATH=/other/checkout python benchmarks/bench_predict_memory.py   # another version

Fits a model cheaply (a :class:`~onebit_dask.SyntheticProblem` with ``--d1`` features and
``--d2`` labels, rank 3, one step, 4 label blocks, per-label thresholds), saves it, writes
an observations store of ``--rows`` rows, and runs

    onebit-dask predict MODEL --data OBS --rows N --top-k 5 --json --workers W

in a fresh process for each ``W`` of ``--workers`` (0: in-process; 2: the embedded
LocalCluster of 2 worker processes), for ``N = --rows`` and ``N = 1`` (the floor: Python,
the package, the model's blocks). The client's peak is ``ru_maxrss`` of the CLI process;
the workers' is ``ru_maxrss`` of its children once the cluster has closed (the largest
of the worker and nanny processes, all reaped). The predicted labels' SHA-256 shows that
two versions predict the same. Memory only, no timing. The last line is JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

CHILD = """
import json, resource, sys
from onebit_dask.cli import main
status = main(sys.argv[1:])
peak = lambda who: round(resource.getrusage(who).ru_maxrss / 1024, 1)
print(json.dumps({"status": status, "client_mib": peak(resource.RUSAGE_SELF),
                  "children_mib": peak(resource.RUSAGE_CHILDREN)}))
"""


def build(tmp: str, d1: int, d2: int, rows: int):
    """``(model path, observations path)``: a fitted model saved, and ``rows`` rows."""
    import numpy as np

    from onebit_dask import OneBitMultiLabel, SyntheticProblem
    from onebit_dask.io import write_observations

    problem = SyntheticProblem(d1, d2, 3, seed=0, n_test=100, max_eval_labels=100)
    est = OneBitMultiLabel(3, batch_size=200_000, n_iter=1, n_shards=4, engine="local",
                           random_state=0).fit(problem)
    model = est.save(os.path.join(tmp, "model.zarr"))
    rng = np.random.default_rng(1)
    obs = write_observations(os.path.join(tmp, "obs.zarr"), rng.standard_normal((rows, d1)),
                             rng.integers(0, d2, rows), rng.choice([-1, 1], rows), n_labels=d2)
    return model, obs


def predict(model: str, obs: str, rows: int, workers: int, k: int) -> dict:
    """Peak RSS (MiB) of the client and of its children for one ``predict`` run."""
    argv = ["predict", model, "--data", obs, "--rows", str(rows), "--top-k", str(k), "--json",
            "--workers", str(workers)]
    proc = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or len(lines) != 2:
        raise SystemExit(f"predict failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    peaks = json.loads(lines[1])
    if peaks.pop("status") != 0:
        raise SystemExit(f"predict failed: {proc.stderr[-2000:]}")
    labels = json.loads(lines[0])["labels"]
    peaks["labels_sha256"] = hashlib.sha256(json.dumps(labels).encode()).hexdigest()[:16]
    if workers == 0:
        del peaks["children_mib"]  # no worker processes
    else:
        peaks["worker_mib"] = peaks.pop("children_mib")
    return peaks


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d1", type=int, default=100)
    p.add_argument("--d2", type=int, default=300_000)
    p.add_argument("--rows", type=int, default=1500)
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--workers", default="0,2", help="comma-separated; 0 is in-process")
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    if args.smoke:
        args.d1, args.d2, args.rows, args.workers = 20, 3000, 50, "0"
    import onebit_dask

    results = {"code": os.path.dirname(os.path.dirname(os.path.abspath(onebit_dask.__file__))),
               "d1": args.d1, "d2": args.d2, "rows": args.rows, "top_k": args.top_k, "runs": []}
    with tempfile.TemporaryDirectory(prefix="bench_predict_") as tmp:
        model, obs = build(tmp, args.d1, args.d2, args.rows)
        for workers in (int(w) for w in args.workers.split(",")):
            for rows in (args.rows, 1):
                run = {"workers": workers, "rows": rows,
                       **predict(model, obs, rows, workers, args.top_k)}
                results["runs"].append(run)
                print(f"workers={workers} rows={rows:6d}  client {run['client_mib']:8.1f} MiB"
                      + (f"  largest worker {run['worker_mib']:8.1f} MiB" if workers else "")
                      + f"  labels {run['labels_sha256']}", flush=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
