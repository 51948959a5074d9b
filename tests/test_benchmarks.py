"""A tiny smoke run of the benchmark command (no timing is asserted)."""

import json
import pathlib
import subprocess
import sys

BENCH = pathlib.Path(__file__).parents[1] / "benchmarks" / "bench_engine.py"


def test_engine_benchmark_smoke():
    proc = subprocess.run([sys.executable, str(BENCH), "--smoke"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "speedup dask/in-process" in out and "dask / data floor" in out
    assert "bit-identical results         True" in out
    large = json.loads(out.strip().splitlines()[-1])
    assert large["d2"] == 5000 and large["client_peak_mib"] > 0
    assert len(large["worker_peak_mib"]) == 2


def test_peers_benchmark_smoke():
    proc = subprocess.run([sys.executable, str(BENCH.parent / "bench_peers.py"), "--smoke"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if not line.startswith("#")]
    assert len(lines) == 1 + 7 + 3 and "LEML" in proc.stdout and "one-vs-rest" in proc.stdout
    assert "floor: X_t @ A" in proc.stdout and "one-vs-rest (1 thread) / onebit" in proc.stdout


def test_labels_benchmark_smoke():
    proc = subprocess.run([sys.executable, str(BENCH.parent / "bench_labels.py"), "--smoke"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["d2"] == 2000 and 0.5 < result["auc"] <= 1


def test_levers_benchmark_smoke():
    # the benchmark checks that every scatter-add alternative gives the kept result
    proc = subprocess.run([sys.executable, str(BENCH.parent / "bench_levers.py"), "--smoke"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "ms |" not in line]
    levers = ("normals", "scores", "active rows", "scatter-add", "Cholesky-QR2", "initialisation")
    assert all(any(lever in r for r in rows) for lever in levers), proc.stdout


def test_sampler_benchmark_smoke():
    proc = subprocess.run([sys.executable, str(BENCH.parent / "bench_sampler.py"), "--smoke"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for row in ("explicit", "projected", "conditional", "projected floor", "conditional floor"):
        assert any(line.startswith(row + " ") for line in proc.stdout.splitlines()), row
    assert "conditional / projected floor" in proc.stdout


def test_table1_benchmark_smoke():
    proc = subprocess.run([sys.executable, str(BENCH.parent / "bench_table1.py"), "--smoke"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| explicit")
            or line.startswith("| conditional")]
    assert len(rows) == 2 and all(row.split("|")[2].strip() == "4" for row in rows)


def test_bigcell_benchmark_smoke():
    # a one-cell sweep fitted across 2 workers is the same fit as `onebit-dask fit`
    proc = subprocess.run([sys.executable, str(BENCH.parent / "bench_bigcell.py"), "--smoke"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| 1 |")]
    assert len(rows) == 1 and len(rows[0].split("|")) == 9, proc.stdout
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["d2"] == 2000 and result["pairs"] == 1 and result["same_fit"] is True
    assert result["wall_ratio"] > 0 and result["fit_s_ratio"] > 0
