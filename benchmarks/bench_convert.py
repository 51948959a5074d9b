"""Peak memory of converting an XC-format file into a CSR store, against the file's size.

    python benchmarks/bench_convert.py --n 1100000          # a ~1 GB generated file
    python benchmarks/bench_convert.py --file big.txt       # an existing file
    python benchmarks/bench_convert.py --smoke

Generates a file with ``benchmarks/make_xc.py`` (``--d1 100000 --d2 1000000``, ~100
features and ~5 labels per row) in a temporary folder unless ``--file`` is given,
then runs :func:`onebit_dask.io.csr_store.convert` in a fresh process and reports
its peak RSS (``ru_maxrss`` of that process), the peak of a process that only imports
the package (the floor every process pays), the time, and the sizes. The goal: the
peak stays far below the file's size and does not grow with it (<= 1 GiB whatever the
size). The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).parent

CONVERT = """
import sys, time
from onebit_dask.io.csr_store import convert, open_csr_store
start = time.perf_counter()
convert(sys.argv[1], sys.argv[2], chunk_rows=int(sys.argv[3]))
seconds = time.perf_counter() - start
s = open_csr_store(sys.argv[2])
print(seconds, s.n, s.d1, s.d2, s.nnz_x, s.nnz_y)
"""
FLOOR = "import onebit_dask.io.csr_store"


def run(code: str, *args: str):
    """``(stdout, peak RSS in MiB)`` of a fresh Python process running ``code``."""
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"the child process failed (exit {proc.returncode})")
    return out, usage.ru_maxrss / 1024


def du_mib(path: str) -> float:
    return sum(f.stat().st_size for f in pathlib.Path(path).rglob("*") if f.is_file()) / 2**20


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1_100_000, help="rows of the generated file")
    p.add_argument("--d1", type=int, default=100_000)
    p.add_argument("--d2", type=int, default=1_000_000)
    p.add_argument("--file", help="convert this file instead of generating one")
    p.add_argument("--chunk-rows", type=int, default=20_000)
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    if args.smoke:
        args.n, args.d1, args.d2, args.chunk_rows = 3000, 2000, 5000, 1000
    with tempfile.TemporaryDirectory(prefix="bench_convert_") as tmp:
        src = args.file
        generate_s = 0.0
        if src is None:
            src = os.path.join(tmp, "data.txt")
            start = time.perf_counter()
            subprocess.run([sys.executable, str(HERE / "make_xc.py"), "--n", str(args.n),
                            "--d1", str(args.d1), "--d2", str(args.d2), "--out", src],
                           check=True, stdout=subprocess.DEVNULL)
            generate_s = time.perf_counter() - start
        store = os.path.join(tmp, "data.zarr")
        out, peak = run(CONVERT, src, store, str(args.chunk_rows))
        seconds, n, d1, d2, nnz_x, nnz_y = out.split()
        _, floor = run(FLOOR)
        result = {
            "file_mib": round(os.path.getsize(src) / 2**20, 1), "store_mib": round(du_mib(store), 1),
            "n": int(n), "d1": int(d1), "d2": int(d2), "nnz_x": int(nnz_x), "nnz_y": int(nnz_y),
            "chunk_rows": args.chunk_rows, "generate_s": round(generate_s, 1),
            "convert_s": round(float(seconds), 1), "convert_peak_mib": round(peak, 1),
            "import_floor_mib": round(floor, 1),
        }
    print(f"file                 {result['file_mib']:10.1f} MiB ({result['n']} rows, "
          f"{result['nnz_x'] / result['n']:.1f} features and {result['nnz_y'] / result['n']:.2f} "
          "labels per row)")
    print(f"store                {result['store_mib']:10.1f} MiB")
    print(f"convert              {result['convert_s']:10.1f} s")
    print(f"convert peak RSS     {result['convert_peak_mib']:10.1f} MiB")
    print(f"import-only peak RSS {result['import_floor_mib']:10.1f} MiB")
    print(f"peak / file size     {result['convert_peak_mib'] / result['file_mib']:10.3f}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
