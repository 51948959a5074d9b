"""A tiny smoke run of each benchmark command (no timing is asserted), through its
``main(argv)`` in this process (the clusters and commands it starts are real)."""

import json

import pytest

from tests.support.helpers import run_bench

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_engine_benchmark_smoke():
    proc = run_bench("bench_engine.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "speedup dask/in-process" in out and "dask / data floor" in out
    assert "bit-identical results         True" in out
    large = json.loads(out.strip().splitlines()[-1])
    assert large["d2"] == 5000 and large["client_peak_mib"] > 0
    assert len(large["worker_peak_mib"]) == 2


def test_peers_benchmark_smoke():
    proc = run_bench("bench_peers.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if not line.startswith("#")]
    assert len(lines) == 1 + 7 + 3 and "LEML" in proc.stdout and "one-vs-rest" in proc.stdout
    assert "floor: X_t @ A" in proc.stdout and "one-vs-rest (1 thread) / onebit" in proc.stdout


def test_labels_benchmark_smoke():
    proc = run_bench("bench_labels.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["d2"] == 2000 and 0.5 < result["auc"] <= 1


def test_levers_benchmark_smoke():
    # the benchmark checks that every scatter-add alternative gives the kept result
    proc = run_bench("bench_levers.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "ms |" not in line]
    levers = ("normals", "scores", "active rows", "scatter-add", "Cholesky-QR2", "initialisation")
    assert all(any(lever in r for r in rows) for lever in levers), proc.stdout


def test_sampler_benchmark_smoke():
    proc = run_bench("bench_sampler.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    for row in ("explicit", "projected", "conditional", "projected floor", "conditional floor"):
        assert any(line.startswith(row + " ") for line in proc.stdout.splitlines()), row
    assert "conditional / projected floor" in proc.stdout


def test_table1_benchmark_smoke():
    proc = run_bench("bench_table1.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| explicit")
            or line.startswith("| conditional")]
    assert len(rows) == 2 and all(row.split("|")[2].strip() == "4" for row in rows)


def test_bigcell_benchmark_smoke():
    # a one-cell sweep fitted across 2 workers is the same fit as `onebit-dask fit`
    proc = run_bench("bench_bigcell.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| 1 |")]
    assert len(rows) == 1 and len(rows[0].split("|")) == 9, proc.stdout
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["d2"] == 2000 and result["pairs"] == 1 and result["same_fit"] is True
    assert result["wall_ratio"] > 0 and result["fit_s_ratio"] > 0


def test_accuracy_benchmark_smoke(tmp_path):
    out, fig = tmp_path / "traces", tmp_path / "fig.png"
    proc = run_bench("bench_accuracy.py", "--smoke", "--out", str(out), "--figure",
                     str(fig))
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = {p.stem for p in out.glob("*.json")}
    assert names == {f"onebit-{step}-{sampler}" for step in ("paper", "averaged")
                     for sampler in ("projected", "explicit")} | {"leml", "ovr"}
    for name in names:
        run = json.loads((out / f"{name}.json").read_text())
        points = run["points"]
        assert points and all(p["seconds"] >= 0 and 0 <= p["auc"] <= 1
                              and p["frobenius_error"] >= 0 for p in points)
        if run["kind"] == "onebit":
            # one point per iteration of the first fit (0 = initialisation), then later ones
            iterations = [p["iteration"] for p in points]
            assert iterations[:4] == [0, 1, 2, 3] and iterations == sorted(set(iterations))
            assert run["second_fit_matches_first"] in (True, None)
        else:  # the peers' fits: growing numbers of observations, drawing timed apart
            sizes = [p["n_obs"] for p in points]
            assert sizes == sorted(set(sizes)) and all(p["draw_s"] >= 0 for p in points)
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(names) and "within 300 s" in rows[0]
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the table and the figure again from the JSON files alone, with one method rerun alone
    fig.unlink()
    proc = run_bench("bench_accuracy.py", "--smoke", "--out", str(out), "--figure",
                     str(fig), "--methods", "ovr")
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = run_bench("bench_accuracy.py", "--plot-only", "--out", str(out),
                     "--figure", str(fig))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(names)
    assert fig.exists()


def test_accuracy_benchmark_refuses_unknown_sampler(tmp_path):
    proc = run_bench("bench_accuracy.py", "--smoke",
                     "--out", str(tmp_path), "--samplers", "projected", "bogus")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "sampler='bogus'" in proc.stderr
    assert not list(tmp_path.glob("*.json"))


def test_xc_path_benchmark_smoke():
    # file -> CSR store -> fit on a worker -> predict_top_k, each stage timed, every
    # process's peak memory recorded
    proc = run_bench("bench_xc_path.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (result["n"], result["d2"], result["predict_rows"]) == (2000, 5000, 200)
    for stage in ("fit", "predict"):
        peaks = result[f"{stage}_peak_mib"]
        assert result[f"{stage}_s"] > 0 and peaks["client"] > 0 and peaks["scheduler"] > 0
        assert len(peaks["workers"]) == 1 and peaks["workers"][0] > 0
    assert result["convert_peak_mib"] > 0 and result["store_mib"] > 0
    assert all(0 <= value <= 1 for value in result["metrics"].values())
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 5 and "predict_top_k (200 rows" in rows[-1]


def test_sparse_fit_benchmark_smoke():
    proc = run_bench("bench_sparse_fit.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = json.loads(proc.stdout.strip().splitlines()[-1])["runs"]
    assert [(r["nnz"], r["m"]) for r in runs] == [(10, 2000), (30, 2000)]
    for r in runs:
        # float32 values and int32 indices (8 bytes a non-zero), int32 row pointers
        assert r["csr_x_mib"] * 2**20 == r["n"] * r["nnz"] * 8 + (r["n"] + 1) * 4
        assert r["peak_mib"] >= r["rss_before_mib"] > 0
        assert r["step_s"] > 0 and len(r["step_times"]) == r["n_iter"] == 2


def test_xc_peers_benchmark_onebit_row_smoke():
    # the peers need their own virtualenv; onebit-dask's row runs here
    proc = run_bench("bench_xc_peers.py", "--smoke", "--no-peers")
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])["results"]
    assert [r["library"] for r in results] == ["onebit-dask (step='moment', in-process)"]
    row = results[0]
    assert row["given"] == "label matrix: 400000 uniform bits" and row["missing"] == 0
    assert all(0 <= row[key] <= 1 for key in ("precision_at_1", "precision_at_3",
                                               "precision_at_5", "ndcg_at_5", "psp_at_5"))
    assert row["train_s"] > 0 and row["peak_mib"] > 0


def test_xc_peers_benchmark_found_positives_smoke():
    # onebit-dask's learner-chosen queries and the file of the positives they found
    proc = run_bench("bench_xc_peers.py", "--smoke", "--no-peers", "--found", "20000")
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])["results"]
    assert [r["library"] for r in results] == ["onebit-dask (queries='model', in-process)",
                                               "onebit-dask (step='moment', in-process)"]
    assert "20000 bits chosen by the model" in results[0]["given"]
    assert 0 <= results[0]["precision_at_1"] <= 1


def test_topk_index_benchmark_smoke():
    # the benchmark checks that the index, the screen and the tiled path agree bit for bit
    proc = run_bench("bench_topk_index.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + 4 and "tiled/index" in rows[0], proc.stdout
    assert "bit-equal scores" in proc.stdout


def test_by_row_benchmark_smoke():
    proc = run_bench("bench_by_row.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["by_row_s"] > 0 and out["gathered_s"] > 0
    assert out["max_score_difference"] < 1e-9  # the same fit to rounding


def test_eval_benchmark_smoke():
    # the benchmark exits 1 if the pieces differ from the tiled ones (AUCs, labels, scores)
    proc = run_bench("bench_eval.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [row["rank"] for row in out["pieces"]] == [3]


def test_client_memory_benchmark_smoke():
    proc = run_bench("bench_client_memory.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["same_fit"] and list(result["client_mib_median"].values())[0] > 0


def test_predict_topk_benchmark_smoke():
    proc = run_bench("bench_predict_topk.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["same_as_brute_force"] and result["rows"] == 300


def test_dask_fit_benchmark_smoke():
    proc = run_bench("bench_dask_fit.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["same_fit"] and set(result["client_mib"]) == {"dask", "numpy"}


def test_eval_cluster_benchmark_smoke():
    proc = run_bench("bench_eval_cluster.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["iterations"] == 3 and 0 <= result["last_precision_at_1"] <= 1


def test_step_floor_benchmark_smoke():
    proc = run_bench("bench_step_floor.py", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "step / floor" in proc.stdout and "draw: complete_rows" in proc.stdout
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["d2"] == 20_000 and result["steps"] == 2 and result["n_active"] > 0
    assert result["step_s"] > 0 and result["floor_s"] > 0
