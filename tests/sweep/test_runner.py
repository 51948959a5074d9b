"""The sweep runner end to end: Dask vs in-process, resume after SIGKILL, failures."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import xarray as xr
import zarr

from onebit_dask.sweep import methods, run_sweep
from onebit_dask.utils.errors import SweepRuntimeError
from onebit_dask.sweep.spec import parse_spec
from onebit_dask.sweep import cube as store
from onebit_dask.sweep.cube import failures_path, open_cube
from onebit_dask.testing import cube_values

from tests.support.helpers import by_noise_setting, CliProcess, run_cli, wait_until

pytestmark = pytest.mark.integration

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


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("sweep") / "a.zarr")
    summary = run_sweep(parse_spec(SPEC_TEXT), path, progress=False)
    assert (summary.ran, summary.skipped, summary.failed) == (8, 0, 0)
    return path


def test_cube_is_complete_and_sensible(in_process):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # consolidated at the end: no RuntimeWarning
        xr.open_zarr(in_process)
    ds = by_noise_setting(open_cube(in_process).load())
    assert ds["done"].all()
    cells = by_noise_setting(store.open_cells(in_process).load())
    assert (cells["engine"] == "local").all() and (cells["worker"] == "").all()
    # fit_s is cumulative; n_active <= the batch; both from the estimator's history
    assert (ds["fit_s"].diff("iteration") >= 0).all()
    assert ((ds["n_active"] > 0) & (ds["n_active"] <= 4000)).all()
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
    xr.testing.assert_identical(cube_values(in_process), cube_values(path))
    cells = by_noise_setting(store.open_cells(path))
    assert (cells["engine"] == "local").all()
    workers = set(client2.scheduler_info()["workers"])
    assert set(cells["worker"].values.ravel()) <= workers


def test_rerun_skips_done_cells(in_process):
    before = open_cube(in_process)["wall_s"].values.copy()
    summary = run_sweep(parse_spec(SPEC_TEXT), in_process, progress=False)
    assert (summary.ran, summary.skipped) == (0, 8)
    np.testing.assert_array_equal(open_cube(in_process)["wall_s"].values, before)


def _sweep_args(spec_path, out):
    return ["sweep", str(spec_path), "--out", str(out), "--workers", "0", "--quiet"]


# ``onebit-dask sweep ARGS`` with the cells' writes flushed after each cell and the 4th
# cell held until the process is killed: the kill lands after exactly 3 written cells,
# whatever the machine's speed
HELD_SWEEP = textwrap.dedent("""
    import dataclasses, sys, time
    from onebit_dask.cli import main
    from onebit_dask.sweep import methods, run_sweep

    run_sweep.__kwdefaults__["flush_cells"] = 1
    onebit, calls = methods.METHODS["onebit"], []

    def held(params, fixed):
        calls.append(params)
        if len(calls) > 3:
            time.sleep(3600)  # until the SIGKILL
        return onebit.run(params, fixed)

    methods.METHODS["onebit"] = dataclasses.replace(onebit, run=held)
    sys.exit(main(sys.argv[1:]))
""")


def test_sigkill_then_resume_equals_uninterrupted(tmp_path, in_process, request):
    spec_path = tmp_path / "kill.yaml"
    spec_path.write_text(SPEC_TEXT)
    killed = tmp_path / "killed.zarr"
    proc = subprocess.Popen([sys.executable, "-c", HELD_SWEEP, *_sweep_args(spec_path, killed)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    request.addfinalizer(lambda: proc.poll() is None and proc.kill())
    deadline = time.time() + 600  # only stops a hang
    n_done = 0
    while time.time() < deadline and proc.poll() is None and n_done < 3:
        try:
            n_done = int(zarr.open_group(str(killed), mode="r")["done"][...].sum())
        except Exception:  # the store is being created
            n_done = 0
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read()  # held in its 4th cell
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert os.path.exists(f"{killed}.lock")  # left behind by the killed runner
    partial = open_cube(killed).load()
    done_before = partial["done"].values.copy()
    assert 3 <= done_before.sum() < 8, "the kill came too late to test anything"
    wall_before = partial["wall_s"].values[done_before]

    resumed = run_cli(*_sweep_args(spec_path, killed))
    assert resumed.returncode == 0, resumed.stderr
    assert f"{done_before.sum()} skipped" in resumed.stdout
    assert not os.path.exists(f"{killed}.lock")

    final = open_cube(killed).load()
    assert by_noise_setting(final)["done"].all() and int(final["done"].sum()) == 8
    # cells finished before the kill were not recomputed
    np.testing.assert_array_equal(final["wall_s"].values[done_before], wall_before)
    # the uninterrupted run: the same spec, in this process
    xr.testing.assert_equal(cube_values(killed), cube_values(in_process))  # values, coordinates
    assert (open_cube(killed).attrs["spec_fingerprint"]
            == open_cube(in_process).attrs["spec_fingerprint"])


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
    proc = run_cli(*_sweep_args(bad, tmp_path / "x.zarr"))
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
    assert int(ds["n_samples"].sel({"estimator": "smt"}).isel(iteration=-1).squeeze()) == 400 * 8


def test_retries_and_retry_failed(tmp_path, monkeypatch):
    attempts = {}

    def flaky(params, fixed):  # seed 0 fails once (transient), seed 1 always until fixed
        key = (params["noise"], params["step"], params["seed"])
        attempts[key] = attempts.get(key, 0) + 1
        if params["seed"] == 0 and attempts[key] == 1:
            raise OSError("planted transient failure")
        if params["seed"] == 1 and not fixed_now:
            raise RuntimeError("planted failure for seed 1")
        return methods.run_onebit(params, fixed)

    fixed_now = False
    monkeypatch.setitem(methods.METHODS, "onebit", methods.Method(flaky, True, "test"))
    path = str(tmp_path / "r.zarr")
    summary = run_sweep(parse_spec(SPEC_TEXT), path, progress=False, retries=1)
    assert (summary.ran, summary.failed) == (4, 4)  # seed 0 retried once and done
    assert all(n == 2 for n in attempts.values())
    fixed_now = True
    again = run_sweep(parse_spec(SPEC_TEXT), path, progress=False)
    assert (again.ran, again.skipped, again.skipped_failed) == (0, 4, 4)
    retried = run_sweep(parse_spec(SPEC_TEXT), path, progress=False, retry_failed=True)
    assert (retried.ran, retried.failed, retried.skipped) == (4, 0, 4)
    ds = open_cube(path)
    assert by_noise_setting(ds)["done"].all() and not ds["failed"].any()


LARGE_SPEC = """
name: mixed
grid:
  d1: [20]
  d2: [12]
  rank: [2]
  batch_size: [2000, 8000]
  n_iter: [2]
  seed: [0, 1, 2]
fixed: {n_test: 200, n_shards: 4, distributed: auto, distributed_batch: 100000,
       sampler: explicit}
"""


def test_large_cells_run_across_the_cluster(tmp_path, client2):
    """Explicit draws, batch_size * d1 = 160000 >= 100000: those 3 cells fit with the Dask engine, their
    shards on both workers; the 3 others are single tasks; the cube is the in-process one."""
    from distributed import get_task_stream

    spec = parse_spec(LARGE_SPEC)
    here, there = str(tmp_path / "here.zarr"), str(tmp_path / "there.zarr")
    run_sweep(spec, here, progress=False)
    with get_task_stream(client2) as stream:
        summary = run_sweep(spec, there, client2, progress=False)
    assert (summary.ran, summary.failed) == (6, 0)
    ds = open_cube(there).load()
    cells = store.open_cells(there).load()
    engine = cells["engine"].squeeze()
    assert (engine.sel(batch_size=8000) == "dask").all()
    assert (engine.sel(batch_size=2000) == "local").all()
    worker = cells["worker"].squeeze()
    assert (worker.sel(batch_size=8000) == client2.scheduler.address).all()
    assert "batch draws >= 100000 numbers" in ds.attrs["placement"]
    assert set(worker.sel(batch_size=2000).values) <= set(client2.scheduler_info()["workers"])
    shard_tasks = [t for t in stream.data if not t["key"].startswith("onebit-cell-")]
    cell_tasks = [t for t in stream.data if t["key"].startswith("onebit-cell-")]
    assert len(cell_tasks) == 3
    assert len({t["worker"] for t in shard_tasks}) == 2, "the large cells used one worker"
    xr.testing.assert_identical(cube_values(here), cube_values(there))


def hold_cells(go):
    """On a worker (``client.run``): its ``onebit`` cells wait until the file ``go`` exists."""
    from onebit_dask.sweep import methods

    onebit = methods.METHODS["onebit"]

    def held(params, fixed):
        while not os.path.exists(go):
            time.sleep(0.05)
        return onebit.run(params, fixed)

    methods.METHODS["onebit"] = dataclasses.replace(onebit, run=held)


def test_worker_killed_while_running_a_cell_is_retried(tmp_path):
    """SIGKILL the worker running a cell: Dask reschedules the task, the cell is done.

    The workers' cells wait for a file that the test writes after the kill, so the kill
    lands while the victim runs a cell, whatever the timing."""
    import threading

    from tests.support.clusters import local_client

    spec = parse_spec(SPEC_TEXT.replace("noise: [none, flip=0.05]", "noise: [none]"))
    path = str(tmp_path / "w.zarr")
    go = tmp_path / "go"
    with local_client(2) as client:
        pids = client.run(os.getpid)
        client.run(hold_cells, str(go))
        box = {}
        runner = threading.Thread(target=lambda: box.update(
            summary=run_sweep(spec, path, client, progress=False)))
        runner.start()
        victim = None
        deadline = time.time() + 600  # only stops a hang
        while victim is None and time.time() < deadline:
            for worker, keys in client.processing().items():
                if any(str(k).startswith("onebit-cell-") for k in keys):
                    victim = worker
                    break
            time.sleep(0.02)
        assert victim is not None
        assert client.processing()[victim], "the cell finished before the kill"
        os.kill(pids[victim], signal.SIGKILL)
        go.touch()
        runner.join(timeout=300)
    summary = box["summary"]
    assert (summary.ran, summary.failed) == (4, 0)
    ds = open_cube(path)
    assert by_noise_setting(ds)["done"].all() and not ds["failed"].any()


def test_two_runners_on_one_store(tmp_path, in_process):
    """A runner refuses at once, naming the holder, while another holds the store's lock;
    two runners started together never run a cell twice, whatever their interleaving.

    The first part is deterministic: this process holds the lock (the runner's own
    :class:`StoreLock`) while a runner is started. The second asserts only invariants
    that hold for every interleaving: each exits 0 (it ran or found the cells done) or 1
    with the one-line refusal, at least one exits 0, and the cube equals an undisturbed
    run's.
    """
    from onebit_dask.io.stores.lock import StoreLock

    spec_path = tmp_path / "two.yaml"
    spec_path.write_text(SPEC_TEXT)
    shared = tmp_path / "shared.zarr"
    with StoreLock(str(shared)):
        held = run_cli(*_sweep_args(spec_path, shared))
    assert held.returncode == 1, held
    assert len(held.stderr.strip().splitlines()) == 1, held.stderr
    assert "in use by another sweep runner" in held.stderr and f"pid {os.getpid()}" in held.stderr
    assert "since" in held.stderr
    assert not shared.exists()  # refused before any work

    procs = [CliProcess(_sweep_args(spec_path, shared)) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    codes = [p.returncode for p in procs]
    assert set(codes) <= {0, 1} and 0 in codes, outs
    for p, (_, err) in zip(procs, outs):
        if p.returncode == 1:
            other = next(q for q in procs if q is not p)
            assert len(err.strip().splitlines()) == 1, err
            assert "in use by another sweep runner" in err and f"pid {other.pid}" in err
    xr.testing.assert_equal(cube_values(shared), cube_values(in_process))


def test_stale_lock_of_a_dead_runner_is_taken_over(tmp_path):
    from onebit_dask.io.stores.lock import StoreLock, StoreLockedError

    out = str(tmp_path / "l.zarr")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with open(f"{out}.lock", "w") as fh:  # what a SIGKILLed runner leaves
        json.dump({"host": __import__("socket").gethostname(), "pid": dead.pid,
                   "started": "then", "token": "x"}, fh)
    with StoreLock(out):
        with pytest.raises(StoreLockedError, match=f"pid {os.getpid()}, since"):
            StoreLock(out).acquire()
        # a lock of a runner on another host: refused while its heartbeat is fresh ...
    with open(f"{out}.lock", "w") as fh:
        json.dump({"host": "elsewhere", "pid": 1, "started": "then", "token": "y"}, fh)
    with pytest.raises(StoreLockedError, match="host elsewhere, pid 1"):
        StoreLock(out).acquire()
    old = time.time() - 3600  # ... and taken over once it is stale
    os.utime(f"{out}.lock", (old, old))
    with StoreLock(out, stale_after=120) as lock:
        assert json.load(open(f"{out}.lock"))["token"] == lock.info["token"]
    assert not os.path.exists(f"{out}.lock")
    # a runner whose lock was taken over (it froze too long) stops before its next write
    with StoreLock(out, heartbeat=0.05) as lock:
        os.utime(f"{out}.lock", (old, old))
        wait_until(lambda: os.stat(f"{out}.lock").st_mtime > old + 1800)  # the heartbeat
        lock.check()
        with open(f"{out}.lock", "w") as fh:
            json.dump({"host": "elsewhere", "pid": 7, "started": "now", "token": "z"}, fh)
        with pytest.raises(StoreLockedError, match="taken over by elsewhere pid 7"):
            lock.check()  # reads the lock itself, whether or not a heartbeat came since
    assert json.load(open(f"{out}.lock"))["token"] == "z"  # not removed: not ours


def test_full_disk_then_rerun_completes(tmp_path, monkeypatch):
    """A tmpfs filled up while the sweep runs: one clear error, cells written before are
    kept; after freeing space the rerun completes the cube, equal to a clean run."""
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                      capture_output=True).returncode != 0:
        pytest.skip("needs to mount a tmpfs (root)")
    try:
        filler = mount / "filler"
        filled = []

        def fill_up(params, fixed):
            if params["seed"] == 1 and params["step"] == "averaged" and not filled:
                filled.append(True)
                with open(filler, "wb") as fh:
                    try:
                        while True:
                            fh.write(b"\0" * 65536)
                    except OSError:
                        pass
            return methods.run_onebit(params, fixed)

        monkeypatch.setitem(methods.METHODS, "onebit", methods.Method(fill_up, True, "test"))
        spec = parse_spec(SPEC_TEXT)
        path = str(mount / "cube.zarr")
        with pytest.raises(SweepRuntimeError) as info:
            run_sweep(spec, path, progress=False, flush_cells=2)
        message = str(info.value)
        assert "No space left on device" in message and path in message
        assert "run the same command again" in message and "\n" not in message
        kept = open_cube(path).load()
        assert 0 < int(kept["done"].sum()) < 8
        filler.unlink()
        summary = run_sweep(spec, path, progress=False)
        assert summary.skipped == int(kept["done"].sum()) and summary.failed == 0
        final = open_cube(path).load()
        done = kept["done"].values
        np.testing.assert_array_equal(final["wall_s"].values[done], kept["wall_s"].values[done])
        clean = str(tmp_path / "clean.zarr")
        monkeypatch.undo()
        run_sweep(spec, clean, progress=False)
        xr.testing.assert_equal(cube_values(path), cube_values(clean))
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_adapt_flag(tmp_path, capsys):
    from distributed import Client, LocalCluster

    from onebit_dask.cli import main
    from onebit_dask.cli.clusters import adapt

    spec_path = tmp_path / "a.yaml"
    spec_path.write_text(SPEC_TEXT.replace("seed: [0, 1]", "seed: [0]"))
    # a cluster with no worker grows with the work (and the sweep completes)
    with LocalCluster(n_workers=0, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        adaptive = adapt(cluster, 0, 2)
        assert (adaptive.minimum, adaptive.maximum) == (0, 2)
        summary = run_sweep(parse_spec(spec_path.read_text()), tmp_path / "y.zarr", client,
                            progress=False)
        assert (summary.ran, summary.failed) == (4, 0)
    base = _sweep_args(spec_path, tmp_path / "x.zarr")[:-3]
    for bad in ("2", "3:1", "0:0", "a:2", "1:2:3", "-1:2"):
        assert main([*base, f"--adapt={bad}"]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and f"--adapt {bad!r} is not allowed" in err
    assert main([*base, "--workers", "0", "--adapt", "1:2"]) == 2
    assert "not with --scheduler or --workers" in capsys.readouterr().err
    assert not (tmp_path / "x.zarr").exists()


def test_damaged_store_one_line_exit_1(tmp_path, in_process, capsys):
    import shutil

    from onebit_dask.cli import main

    spec_path = tmp_path / "d.yaml"
    spec_path.write_text(SPEC_TEXT)
    broken = tmp_path / "broken.zarr"
    shutil.copytree(in_process, broken)
    shutil.rmtree(broken / "done")
    assert main(["sweep", str(spec_path), "--out", str(broken), "--workers", "0",
                 "--quiet"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "is damaged (the array 'done' is missing)" in err and "--overwrite" in err
