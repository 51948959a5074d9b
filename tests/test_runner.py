"""The sweep runner end to end: Dask vs in-process, resume after SIGKILL, failures."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import xarray as xr
import zarr

from onebit_dask.sweep import methods, run_sweep
from onebit_dask.sweep.spec import parse_spec
from onebit_dask.sweep.store import failures_path, open_cube

SPEC_TEXT = """
name: small
grid:
  d1: [40]
  d2: [20]
  rank: [2]
  noise: [none, flip=0.05]
  step: [paper, averaged]
  batch_size: [4000]
  n_iter: [4]
  seed: [0, 1]
fixed: {n_test: 300, n_shards: 2}
"""
KILL_SPEC = SPEC_TEXT.replace("seed: [0, 1]", "seed: [0, 1, 2, 3, 4, 5]").replace(
    "batch_size: [4000]", "batch_size: [30000]")
TIME_DEPENDENT = ("wall_s",)  # measured seconds differ from run to run


def values(path):
    ds = open_cube(path).load()
    return ds.drop_vars(list(TIME_DEPENDENT))


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("sweep") / "a.zarr")
    summary = run_sweep(parse_spec(SPEC_TEXT), path, progress=False)
    assert (summary.ran, summary.skipped, summary.failed) == (8, 0, 0)
    return path


def test_cube_is_complete_and_sensible(in_process):
    ds = open_cube(in_process).load()
    assert ds["done"].all()
    last = ds.isel(iteration=-1)
    assert (last["auc"] > 0.95).all()
    # noise-free, the averaged step ends below the paper's step (it averages batches)
    free = last["frobenius_error"].sel(noise="none").squeeze()
    assert (free.sel(step="averaged") < free.sel(step="paper")).all()
    np.testing.assert_array_equal(ds["n_samples"].isel(iteration=-1), 5 * 4000)


def test_dask_workers_give_the_same_cube(in_process, tmp_path, client2):
    path = str(tmp_path / "b.zarr")
    summary = run_sweep(parse_spec(SPEC_TEXT), path, client2, progress=False)
    assert summary.ran == 8
    xr.testing.assert_identical(values(in_process), values(path).assign_attrs(
        values(in_process).attrs))


def test_rerun_skips_done_cells(in_process):
    before = open_cube(in_process)["wall_s"].values.copy()
    summary = run_sweep(parse_spec(SPEC_TEXT), in_process, progress=False)
    assert (summary.ran, summary.skipped) == (0, 8)
    np.testing.assert_array_equal(open_cube(in_process)["wall_s"].values, before)


def _sweep_cmd(spec_path, out):
    return [sys.executable, "-m", "onebit_dask", "sweep", str(spec_path), "--out", str(out),
            "--workers", "0", "--quiet"]


def test_sigkill_then_resume_equals_uninterrupted(tmp_path):
    spec_path = tmp_path / "kill.yaml"
    spec_path.write_text(KILL_SPEC)
    killed, clean = tmp_path / "killed.zarr", tmp_path / "clean.zarr"
    proc = subprocess.Popen(_sweep_cmd(spec_path, killed), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    n_done = 0
    while time.time() < deadline and proc.poll() is None:
        try:
            n_done = int(zarr.open_group(str(killed), mode="r")["done"][...].sum())
        except Exception:  # the store is being created
            n_done = 0
        if n_done >= 3:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    partial = open_cube(killed).load()
    done_before = partial["done"].values.copy()
    assert 3 <= done_before.sum() < done_before.size, "the kill came too late to test anything"
    wall_before = partial["wall_s"].values[done_before]

    resumed = subprocess.run(_sweep_cmd(spec_path, killed), capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{done_before.sum()} skipped" in resumed.stdout
    subprocess.run(_sweep_cmd(spec_path, clean), check=True, capture_output=True, timeout=600)

    final = open_cube(killed).load()
    assert final["done"].all()
    # cells finished before the kill were not recomputed
    np.testing.assert_array_equal(final["wall_s"].values[done_before], wall_before)
    a, b = values(killed), values(clean)
    xr.testing.assert_equal(a, b)  # values and coordinates
    assert a.attrs["spec_fingerprint"] == b.attrs["spec_fingerprint"]


def test_failed_cell_is_recorded_and_others_go_on(tmp_path, monkeypatch):
    def broken(params, fixed):
        if params["seed"] == 1:
            raise RuntimeError("planted failure for seed 1")
        return methods.run_onebit(params, fixed)

    monkeypatch.setitem(methods.METHODS, "onebit", methods.Method(broken, True, "test"))
    path = str(tmp_path / "f.zarr")
    summary = run_sweep(parse_spec(SPEC_TEXT), path, progress=False)
    assert (summary.ran, summary.failed) == (4, 4)
    ds = open_cube(path)
    assert int(ds["failed"].sum()) == 4 and int(ds["done"].sum()) == 4
    assert not ds["failed"].sel(seed=0).any()
    lines = [json.loads(line) for line in open(failures_path(path))]
    assert len(lines) == 4 and all("planted failure for seed 1" in x["error"] for x in lines)


def test_cli_failures_exit_1_and_bad_spec_exits_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(SPEC_TEXT.replace("rank: [2]", "rank: [50]"))
    proc = subprocess.run(_sweep_cmd(bad, tmp_path / "x.zarr"), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "grid.rank: rank=50 is not allowed" in proc.stderr
    assert not (tmp_path / "x.zarr").exists()


def test_full_observation_datasets_sweep(tmp_path):
    spec = parse_spec("""
datasets:
  small: {d1: 20, d2: 8, rank: 2, n_train: 400, batch_size: 3000}
grid:
  method: [onebit, smt]
  dataset: [small]
  n_iter: [3]
fixed: {n_test: 300, n_shards: 2}
""")
    summary = run_sweep(spec, str(tmp_path / "full.zarr"), progress=False)
    assert (summary.ran, summary.failed) == (2, 0)
    ds = open_cube(str(tmp_path / "full.zarr")).load()
    assert int(ds["d1"].sel(dataset="small")) == 20 and int(ds["n_train"].sel(dataset="small")) == 400
    last = ds["auc"].isel(iteration=-1).squeeze()
    assert (last > 0.9).all()
    assert int(ds["n_samples"].sel({"method": "smt"}).isel(iteration=-1).squeeze()) == 400 * 8
