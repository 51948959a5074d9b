"""The generator of XC-format files (benchmarks/make_xc.py) on a tiny size."""

import pathlib
import subprocess
import sys

import numpy as np

from onebit_dask.data.xc import read_xc

MAKE_XC = pathlib.Path(__file__).parents[1] / "benchmarks" / "make_xc.py"


def _make(out, *flags):
    return subprocess.run([sys.executable, str(MAKE_XC), "--n", "2000", "--d1", "3000",
                           "--d2", "500", "--out", str(out), *flags],
                          check=False, capture_output=True, text=True, timeout=120)


def test_make_xc_writes_a_readable_power_law_file(tmp_path):
    proc = _make(tmp_path / "a.txt", "--seed", "3")
    assert proc.returncode == 0, proc.stderr[-2000:]
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
    assert _make(tmp_path / "b.txt", "--seed", "3").returncode == 0
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes()
    assert _make(tmp_path / "c.txt", "--seed", "4").returncode == 0
    assert (tmp_path / "a.txt").read_bytes() != (tmp_path / "c.txt").read_bytes()
    before = (tmp_path / "a.txt").read_bytes()
    proc = _make(tmp_path / "a.txt")
    assert proc.returncode == 2 and "exists" in proc.stderr
    assert (tmp_path / "a.txt").read_bytes() == before
