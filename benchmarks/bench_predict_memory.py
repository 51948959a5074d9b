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
the package, the model's blocks). The client's peak is ``ru_maxrss`` of the CLI process
(the model is built in another process, and this one imports neither NumPy nor the
package: a process spawned by a large one starts its ``ru_maxrss`` at its parent's RSS).
The workers' peaks are sampled every 20 ms (psutil, each worker process's RSS). The
predicted labels' SHA-256 shows that two versions predict the same. The children run in
the temporary folder, so ``PYTHONPATH`` picks the version (not a checkout in the current
folder). Memory only, no timing. The last line is JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = """
import json, resource, sys
from onebit_dask.cli import main
status = main(sys.argv[1:])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"status": status, "client_mib": round(peak, 1)}))
"""

BUILD = """
import os, sys
import numpy as np
import onebit_dask
from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.io import write_observations

tmp, d1, d2, rows = sys.argv[1], *map(int, sys.argv[2:])
problem = SyntheticProblem(d1, d2, 3, seed=0, n_test=100, max_eval_labels=100)
est = OneBitMultiLabel(3, batch_size=200_000, n_iter=1, n_shards=4, engine="local",
                       random_state=0).fit(problem)
est.save(os.path.join(tmp, "model.zarr"))
rng = np.random.default_rng(1)
write_observations(os.path.join(tmp, "obs.zarr"), rng.standard_normal((rows, d1)),
                   rng.integers(0, d2, rows), rng.choice([-1, 1], rows), n_labels=d2)
print(os.path.dirname(os.path.dirname(onebit_dask.__file__)))
"""


def build(tmp: str, d1: int, d2: int, rows: int) -> str:
    """Write ``tmp/model.zarr`` (a fitted model) and ``tmp/obs.zarr`` (``rows`` rows) in
    another process; return the folder the package was imported from."""
    proc = subprocess.run([sys.executable, "-c", BUILD, tmp, str(d1), str(d2), str(rows)],
                          capture_output=True, text=True, cwd=tmp)
    if proc.returncode != 0:
        raise SystemExit(f"building the model failed: {proc.stderr[-2000:]}")
    return proc.stdout.strip()


def worker_peaks(proc: subprocess.Popen) -> list:
    """Sample, until ``proc`` ends, the RSS of its worker processes (multiprocessing
    children); each one's peak in MiB."""
    import psutil

    root, peaks = psutil.Process(proc.pid), {}
    while proc.poll() is None:
        try:
            children = root.children(recursive=True)
        except psutil.NoSuchProcess:
            break
        for child in children:
            try:
                if "spawn_main" in " ".join(child.cmdline()):
                    peaks[child.pid] = max(peaks.get(child.pid, 0), child.memory_info().rss)
            except psutil.NoSuchProcess:
                pass
        time.sleep(0.02)
    return sorted(round(v / 2**20, 1) for v in peaks.values())


def predict(model: str, obs: str, rows: int, workers: int, k: int) -> dict:
    """Peak RSS (MiB) of the client and of its workers for one ``predict`` run."""
    argv = ["predict", model, "--data", obs, "--rows", str(rows), "--top-k", str(k), "--json",
            "--workers", str(workers)]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, *argv], stdout=out, stderr=err,
                                text=True, cwd=os.path.dirname(model))
        workers_mib = worker_peaks(proc)
        proc.wait()
        out.seek(0)
        err.seek(0)
        lines, stderr = out.read().strip().splitlines(), err.read()
    if proc.returncode != 0 or len(lines) != 2 or json.loads(lines[1])["status"] != 0:
        raise SystemExit(f"predict failed (exit {proc.returncode}): {stderr[-2000:]}")
    labels = json.loads(lines[0])["labels"]
    run = {"client_mib": json.loads(lines[1])["client_mib"],
           "labels_sha256": hashlib.sha256(json.dumps(labels).encode()).hexdigest()[:16]}
    if workers:
        run["worker_mib"] = workers_mib
    return run


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
    results = {"d1": args.d1, "d2": args.d2, "rows": args.rows, "top_k": args.top_k,
               "runs": []}
    with tempfile.TemporaryDirectory(prefix="bench_predict_") as tmp:
        results["code"] = build(tmp, args.d1, args.d2, args.rows)
        model, obs = os.path.join(tmp, "model.zarr"), os.path.join(tmp, "obs.zarr")
        print(f"onebit_dask from {results['code']}", flush=True)
        for workers in (int(w) for w in args.workers.split(",")):
            for rows in (args.rows, 1):
                run = {"workers": workers, "rows": rows,
                       **predict(model, obs, rows, workers, args.top_k)}
                results["runs"].append(run)
                print(f"workers={workers} rows={rows:6d}  client {run['client_mib']:8.1f} MiB"
                      + (f"  workers {run['worker_mib']} MiB" if workers else "")
                      + f"  labels {run['labels_sha256']}", flush=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
