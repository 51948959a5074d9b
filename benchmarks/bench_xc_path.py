"""The whole path on an XC file: file -> CSR store -> fit on 2 workers -> predict_top_k.

    python benchmarks/bench_xc_path.py --n 100000 --d2 1000000     # the issue's d2 = 10^6 goal
    python benchmarks/bench_xc_path.py --n 1000000 --d2 1000000
    python benchmarks/bench_xc_path.py --local      # scheduler inside the client (LocalCluster)
    python benchmarks/bench_xc_path.py --local --checkpoint-every 1   # lineage cut each step
    python benchmarks/bench_xc_path.py --smoke

Stages, each timed:

1. *generate*: a training file of ``--n`` rows and a test file of ``--predict-rows``
   rows with ``benchmarks/make_xc.py`` (``--d1`` features, ``--d2`` labels, its defaults:
   ~87 features and ~4.9 labels per row; seeds 0 and 1), in a temporary folder.
2. *convert*: :func:`onebit_dask.io.csr_store.convert` of the training file in a fresh
   process (its peak RSS: ``ru_maxrss``).
3. *fit*: in a fresh client process, ``OneBitMultiLabel(engine="dask").fit(STORE)`` on a
   cluster of ``--workers`` single-threaded workers (the workers read their row ranges of
   the store; the label blocks live on the workers). By default the scheduler and the
   workers are subprocesses (``SubprocessCluster``), so the client's peak is its own;
   ``--local`` uses a ``LocalCluster`` (worker processes, the scheduler inside the client
   process, as ``onebit-dask fit --workers 2`` does), and the client's peak includes the
   scheduler's. The client process returns the memory it frees to the system, as the
   ``onebit-dask`` program does (:func:`onebit_dask.cli.main.return_freed_memory`).
4. *predict*: ``predict_top_k`` of the test file's rows (read with ``read_xc`` before
   the stage starts), ``k = 5``; then P@1/3/5 and PSP@5 against the test labels
   (propensities from the store's labels; not timed).

Peak memory is each process's ``VmHWM`` (``/proc/PID/status``), reset (``clear_refs``)
in the client, the scheduler and every worker right before the predict stage, so the
fit column is the peak from the process's start to the end of the fit and the predict
column the peak during the prediction alone. Linux only. The last line is JSON.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).parent

CLIENT = r"""
import json, os, sys, time

def hwm_mib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024

def reset_hwm():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")

from distributed import Client, LocalCluster
from distributed.deploy.subprocess import SubprocessCluster
from onebit_dask import OneBitMultiLabel
from onebit_dask.cli.main import return_freed_memory
from onebit_dask.io.csr_store import open_csr_store
from onebit_dask.io.xc import read_xc
from onebit_dask.metrics.ranking import propensities, top_k_metrics

a = json.loads(sys.argv[1])
return_freed_memory()  # as the onebit-dask program does
start = time.perf_counter()
if a["local"]:
    cluster = LocalCluster(n_workers=a["workers"], threads_per_worker=1, processes=True,
                           host="127.0.0.1", dashboard_address="127.0.0.1:0", memory_limit=0)
else:
    cluster = SubprocessCluster(host="127.0.0.1", n_workers=a["workers"],
                                threads_per_worker=1, dashboard_address="127.0.0.1:0",
                                worker_kwargs={"memory_limit": 0})
client = Client(cluster)
client.wait_for_workers(a["workers"], timeout=120)
out = {"cluster_s": time.perf_counter() - start}
peaks = lambda: {"client": hwm_mib(), "scheduler": client.run_on_scheduler(hwm_mib),
                 "workers": sorted(client.run(hwm_mib).values())}
est = OneBitMultiLabel(a["rank"], batch_size=a["batch_size"], n_iter=a["n_iter"],
                       step="averaged", n_shards=a["shards"], random_state=0, engine="dask",
                       progress=False)
start = time.perf_counter()
every = a["checkpoint_every"]
est.fit(a["store"], **({} if every is None else {"checkpoint": "ckpt.zarr",
                                                 "checkpoint_every": every}))
out["fit_s"] = time.perf_counter() - start
out["fit_peak_mib"] = peaks()
X_test, Y_test = read_xc(a["test"], n_features=est.n_features_in_, n_labels=est.n_labels_)
reset_hwm(); client.run_on_scheduler(reset_hwm); client.run(reset_hwm)
start = time.perf_counter()
top, _ = est.predict_top_k(X_test, k=5)
out["predict_s"] = time.perf_counter() - start
out["predict_peak_mib"] = peaks()
client.close(); cluster.close()
store = open_csr_store(a["store"])
p_l = propensities(store.labels(0, store.n))
metrics = top_k_metrics(Y_test, top, p_l, ks=(1, 3, 5))
out["metrics"] = {key: metrics[key] for key in ("precision_at_1", "precision_at_3",
                                                "precision_at_5", "psp_at_5")}
print(json.dumps(out))
"""


def _bench_convert():
    """``benchmarks/bench_convert.py`` as a module (its ``run`` and ``du_mib``)."""
    spec = importlib.util.spec_from_file_location("_bench_convert", HERE / "bench_convert.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_xc(n: int, d1: int, d2: int, seed: int, path: str) -> None:
    subprocess.run([sys.executable, str(HERE / "make_xc.py"), "--n", str(n), "--d1", str(d1),
                    "--d2", str(d2), "--seed", str(seed), "--out", path], check=True,
                   stdout=subprocess.DEVNULL)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000, help="training rows")
    p.add_argument("--d1", type=int, default=100_000)
    p.add_argument("--d2", type=int, default=1_000_000)
    p.add_argument("--predict-rows", type=int, default=10_000)
    p.add_argument("--rank", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=100_000)
    p.add_argument("--n-iter", type=int, default=10)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--local", action="store_true",
                   help="LocalCluster: the scheduler inside the client process")
    p.add_argument("--checkpoint-every", type=int, default=None,
                   help="fit with a checkpoint every N iterations (in the temporary folder)")
    p.add_argument("--tmp", default=None, help="folder for the files (default: the system's)")
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    if args.smoke:
        args.n, args.d1, args.d2, args.predict_rows = 2000, 2000, 5000, 200
        args.batch_size, args.n_iter, args.workers = 5000, 2, 1
    if not os.path.exists("/proc/self/clear_refs"):
        raise SystemExit("bench_xc_path.py needs Linux (/proc/self/clear_refs)")
    bench_convert = _bench_convert()
    result = {key: getattr(args, key) for key in (
        "n", "d1", "d2", "predict_rows", "rank", "batch_size", "n_iter", "shards", "workers",
        "local", "checkpoint_every")}
    with tempfile.TemporaryDirectory(prefix="bench_xc_path_", dir=args.tmp) as tmp:
        train, test = os.path.join(tmp, "train.txt"), os.path.join(tmp, "test.txt")
        start = time.perf_counter()
        make_xc(args.n, args.d1, args.d2, 0, train)
        result["generate_s"] = time.perf_counter() - start
        make_xc(args.predict_rows, args.d1, args.d2, 1, test)
        result["file_mib"] = os.path.getsize(train) / 2**20
        store = os.path.join(tmp, "train.zarr")
        out, peak = bench_convert.run(bench_convert.CONVERT, train, store, "20000")
        seconds, _, _, _, nnz_x, nnz_y = out.split()
        result.update(convert_s=float(seconds), convert_peak_mib=peak,
                      store_mib=bench_convert.du_mib(store), nnz_x_per_row=int(nnz_x) / args.n,
                      nnz_y_per_row=int(nnz_y) / args.n)
        client_args = {"store": store, "test": test, **{key: result[key] for key in (
            "rank", "batch_size", "n_iter", "shards", "workers", "local", "checkpoint_every")}}
        proc = subprocess.run([sys.executable, "-c", CLIENT, json.dumps(client_args)],
                              capture_output=True, text=True, cwd=tmp)
        if proc.returncode != 0:
            raise SystemExit(f"the client process failed (exit {proc.returncode}): "
                             f"{proc.stderr[-3000:]}")
        client = json.loads(proc.stdout.strip().splitlines()[-1])
        result.update(client)
    result["positive_rate"] = result["nnz_y_per_row"] / args.d2
    r = result
    print(f"# n={r['n']}, d1={r['d1']}, d2={r['d2']}: {r['nnz_x_per_row']:.1f} features and "
          f"{r['nnz_y_per_row']:.2f} labels per row; k={r['rank']}, m={r['batch_size']}, "
          f"{r['n_iter']} averaged steps, {r['shards']} shards, {r['workers']} workers "
          f"({'LocalCluster, scheduler in the client' if r['local'] else 'subprocesses'})"
          + ("" if r["checkpoint_every"] is None
             else f", a checkpoint every {r['checkpoint_every']} iterations"))
    print(f"# file {r['file_mib']:.1f} MiB, store {r['store_mib']:.1f} MiB; a uniform bit is "
          f"positive with probability {r['positive_rate']:.2e} "
          f"({r['positive_rate'] * r['batch_size']:.2f} positives a batch)")
    print("| stage | seconds | client peak MiB | scheduler peak MiB | worker peaks MiB |")
    print("|---|---|---|---|---|")
    print(f"| generate ({r['n']} rows) | {r['generate_s']:.1f} | | | |")
    print(f"| convert (own process) | {r['convert_s']:.1f} | {r['convert_peak_mib']:.0f} | | |")
    print(f"| cluster start | {r['cluster_s']:.1f} | | | |")
    for stage, label in (("fit", f"fit ({r['n_iter'] + 1} batches)"),
                         ("predict", f"predict_top_k ({r['predict_rows']} rows, k=5)")):
        peak = r[f"{stage}_peak_mib"]
        print(f"| {label} | {r[f'{stage}_s']:.1f} | {peak['client']:.0f} | "
              f"{peak['scheduler']:.0f} | {', '.join(f'{w:.0f}' for w in peak['workers'])} |")
    m = r["metrics"]
    print(f"# test: P@1 {m['precision_at_1']:.4f}  P@3 {m['precision_at_3']:.4f}  "
          f"P@5 {m['precision_at_5']:.4f}  PSP@5 {m['psp_at_5']:.4f}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
