import subprocess
import sys

import matplotlib.image
import pytest

from onebit_dask.sweep import run_sweep
from onebit_dask.sweep.report import report
from onebit_dask.sweep.spec import parse_spec

SPEC = parse_spec("""
grid:
  d1: [30]
  d2: [15]
  rank: [2]
  noise: [none, gaussian=0.2]
  step: [paper, averaged]
  batch_size: [3000]
  n_iter: [3]
  seed: [0, 1]
fixed: {n_test: 200, n_shards: 2}
""")


@pytest.fixture(scope="module")
def cube(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("rep") / "cube.zarr")
    run_sweep(SPEC, path, progress=False)
    return path


def test_tables_and_pngs(cube, tmp_path):
    text, paths = report(cube, tmp_path / "plots")
    assert "auc (%), mean +- std over 2 seeds" in text
    assert "onebit / averaged" in text and "gaussian=0.2" in text
    assert "8 of 8 cells done, 0 failed" in text
    assert sorted(p.rsplit("/", 1)[1] for p in paths) == [
        "auc_per_method.png", "error_vs_iteration.png", "error_vs_observations.png"]
    for path in paths:
        with open(path, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
        image = matplotlib.image.imread(path)
        assert image.shape[0] > 200 and image.shape[1] > 300
        assert image.std() > 0.01  # not blank


def test_report_cli(cube, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "onebit_dask", "report", cube, "--plots",
                           str(tmp_path / "p")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "frobenius_error" in proc.stdout and proc.stdout.count("wrote ") == 3
    bad = subprocess.run([sys.executable, "-m", "onebit_dask", "report", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "is not an onebit-dask sweep store" in bad.stderr


def test_methods_without_a_step_rule_get_one_row():
    import xarray as xr

    from onebit_dask.sweep.report import _rows

    ds = xr.Dataset(coords={"method": ["onebit", "colwise_1bit"], "step": ["paper", "averaged"]})
    assert [name for _, _, name in _rows(ds)] == [
        "onebit / paper", "onebit / averaged", "colwise_1bit"]
