"""The XC-file benchmarks on a tiny size: the generator (make_xc.py) and bench_convert.py."""

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

from onebit_dask.io.xc import read_xc

from tests.support.helpers import ROOT

MAKE_XC = ROOT / "benchmarks" / "make_xc.py"


_spec = importlib.util.spec_from_file_location("make_xc", MAKE_XC)
make_xc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_xc)


def _make(out, *flags):
    return make_xc.main(["--n", "2000", "--d1", "3000", "--d2", "500", "--out", str(out),
                         *flags])


def test_make_xc_writes_a_readable_power_law_file(tmp_path, capsys):
    assert _make(tmp_path / "a.txt", "--seed", "3") == 0
    X, Y = read_xc(tmp_path / "a.txt")  # the reader checks the header and every line
    assert X.shape == (2000, 3000) and Y.shape == (2000, 500)
    labels_per_row = Y.sum(axis=1).mean()
    features_per_row = X.getnnz(axis=1).mean()
    assert 4.0 < labels_per_row <= 5.2  # 1 + Poisson(4) draws, repeats dropped
    assert 70 < features_per_row <= 105  # Poisson(100), repeats dropped
    freq = np.asarray(Y.sum(axis=0)).ravel()
    # power law: each draw is label l with probability p_l = (l + 1)^-1 / H_500, so a row
    # has label l with probability 1 - E[(1 - p_l)^(1 + N)] = 1 - (1 - p_l) exp(-4 p_l),
    # N ~ Poisson(4); at 2000 rows the standard error is < 0.012, the bound is 4 of them
    p = 1 / np.arange(1, 501) / np.sum(1 / np.arange(1, 501))
    expected = 1 - (1 - p) * np.exp(-4 * p)
    for label in (0, 1, 9):
        assert abs(freq[label] / 2000 - expected[label]) < 0.05, (label, freq[label])
    assert expected[0] > 20 * expected[99]  # a uniform draw (1%) would fail the check above
    assert ((X.data > 0) & (X.data <= 1)).all()
    # same seed, same bytes; another seed, another file; an existing file is refused
    assert _make(tmp_path / "b.txt", "--seed", "3") == 0
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes()
    assert _make(tmp_path / "c.txt", "--seed", "4") == 0
    assert (tmp_path / "a.txt").read_bytes() != (tmp_path / "c.txt").read_bytes()
    before = (tmp_path / "a.txt").read_bytes()
    with pytest.raises(SystemExit) as exit_info:
        _make(tmp_path / "a.txt")
    assert exit_info.value.code == 2 and "--out=" in capsys.readouterr().err
    assert (tmp_path / "a.txt").read_bytes() == before


@pytest.mark.integration
def test_bench_convert_smoke():
    bench = MAKE_XC.parent / "bench_convert.py"
    proc = subprocess.run([sys.executable, str(bench), "--smoke"], check=False,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["n"] == 3000 and (result["d1"], result["d2"]) == (2000, 5000)
    assert result["convert_peak_mib"] >= result["import_floor_mib"] > 0


def test_bench_pooled_and_bench_scorer_smoke(tmp_path):
    """The pooled-step and scorer benchmarks on two tiny generated files: every rule's
    line and the means, and the scorer's lines, each with precisions in [0, 1]."""
    from tests.support.helpers import run_bench

    _make(tmp_path / "train.txt", "--seed", "0")
    _make(tmp_path / "test.txt", "--seed", "1")
    files = (str(tmp_path / "train.txt"), str(tmp_path / "test.txt"))
    proc = run_bench("bench_pooled.py", *files, "--bits", "20000", "--batches", "4",
                     "--rank", "3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [r["step"] for r in lines] == ["moment", "pooled", "auto", "one"]
    assert all(0 <= r["precision_at_1"] <= 1 for r in lines)
    assert lines[2]["kept"] in ("pooled", "refine") and "means over seeds" in proc.stdout
    proc = run_bench("bench_scorer.py", *files, "--bits", "20000", "--batches", "4",
                     "--rank", "3", "--rows", "300", "--scales", "0.1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 2 and all(0 <= r["precision_at_5"] <= 1 for r in lines)
