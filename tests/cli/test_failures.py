"""Every failure through the command line is one line on stderr: exit 2 for bad input
(before any work), exit 1 for a failure at run time; ``--debug`` shows the traceback.

Real parts: the CLI as a subprocess for at least one case of each failure class (the
other cases through ``main(argv)`` in this process, :func:`helpers.run_main`), real
``dask scheduler`` / ``dask worker`` processes on 127.0.0.1, real zarr stores, a real
full file system (a small tmpfs, when this user may mount one).
"""

import concurrent.futures
import os
import signal
import subprocess

import dask
import numpy as np
import pytest
import yaml

from tests.support.clusters import DaskProcesses, make_certificates
from tests.support.filesystems import read_only_dir, small_disk
from tests.support.helpers import (FIT, TINY_SPEC as SPEC, CliProcess, by_noise_setting, one_line,
                                  run_cli, run_main)

pytestmark = pytest.mark.integration



def write_yaml(path, data):
    path.write_text(yaml.safe_dump(data))
    return path


# --- bad input: exit 2 ---------------------------------------------------------------------

def test_tls_config_without_its_pem_files_exits_2(tmp_path):
    config = write_yaml(tmp_path / "tls.yaml", {
        "kind": "local", "options": {"n_workers": 1},
        "security": {"ca_file": str(tmp_path / "ca.pem"), "cert": str(tmp_path / "cert.pem"),
                     "key": str(tmp_path / "key.pem")}})
    # in-process: test_slurm_interface_that_does_not_exist_exits_2 runs this class for real
    line = one_line(run_main(*FIT, "--cluster", config), 2)
    assert "security.ca_file=" in line and "does not exist" in line


def test_slurm_interface_that_does_not_exist_exits_2(tmp_path):
    config = write_yaml(tmp_path / "slurm.yaml", {
        "kind": "slurm", "options": {"cores": 1, "memory": "1GB", "interface": "nosuch0"}})
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    line = one_line(run_cli("sweep", spec, "--out", tmp_path / "c.zarr", "--cluster", config), 2)
    assert "options.interface='nosuch0' is not a network interface" in line
    assert not (tmp_path / "c.zarr").exists()


@pytest.mark.parametrize("value", ["nan", "-5", "inf", "0"])
def test_connect_timeout_must_be_positive_and_finite(value):
    # in-process: test_invalid_pem_files_say_what_failed runs this class for real
    line = one_line(run_main(*FIT, "--connect-timeout", value), 2)
    assert f"--connect-timeout: {value!r} is not allowed" in line


@pytest.mark.parametrize("workers", [0, -3])
def test_cluster_config_without_workers_exits_2(tmp_path, workers):
    config = write_yaml(tmp_path / "c.yaml", {"kind": "local", "options": {"n_workers": workers}})
    # in-process: test_slurm_interface_that_does_not_exist_exits_2 runs this class for real
    line = one_line(run_main(*FIT, "--cluster", config), 2)
    assert f"options.n_workers={workers} is not allowed: it must be >= 1" in line


def test_invalid_pem_files_say_what_failed(tmp_path):
    for name in ("ca.pem", "cert.pem", "key.pem"):
        (tmp_path / name).write_text("not a certificate\n")
    tls = ["--tls-ca-file", tmp_path / "ca.pem", "--tls-cert", tmp_path / "cert.pem",
           "--tls-key", tmp_path / "key.pem"]
    # refused before connecting: a connection to port 1 would be exit 1 "could not reach"
    line = one_line(run_cli(*FIT, "--scheduler", "tls://127.0.0.1:1", *tls), 2)
    assert "--tls-ca-file=" in line and "is not a PEM CA certificate" in line
    assert "could not reach" not in line
    # valid files with a tcp:// scheduler: the options do not apply
    good = make_certificates(tmp_path)
    tls = ["--tls-ca-file", good["ca_file"], "--tls-cert", good["cert"], "--tls-key", good["key"]]
    line = one_line(run_main(*FIT, "--scheduler", "tcp://127.0.0.1:1", *tls), 2)
    assert "apply to a tls:// scheduler only" in line
    # without a scheduler: said so, not that a file given as None does not exist
    line = one_line(run_main(*FIT, "--workers", 0, "--tls-ca-file", good["ca_file"]), 2)
    assert "apply to a tls:// scheduler only, not to --workers" in line


def test_same_setting_twice_and_huge_grids_are_refused(tmp_path):
    spec = tmp_path / "dup.yaml"
    spec.write_text(SPEC.replace("flip=0.05]", "flip=0.05, flip=5e-2]"))
    # in-process: test_slurm_interface_that_does_not_exist_exits_2 runs a sweep's exit 2
    line = one_line(run_main("sweep", spec, "--out", tmp_path / "x.zarr"), 2)
    assert line.count(str(spec)) == 1 and line.count("grid.noise") == 1
    assert "'flip=0.05' and 'flip=5e-2' are the same setting" in line
    spec.write_text(SPEC.replace("noise: [none, flip=0.05]", "noise: [none, flip=0.7]"))
    line = one_line(run_main("sweep", spec, "--out", tmp_path / "x.zarr"), 2)
    assert line.count(str(spec)) == 1 and line.count("grid.noise") == 1
    spec.write_text(SPEC.replace("seed: [0, 1]", f"seed: {list(range(501))}").replace(
        "d1: [20]", f"d1: {list(range(1000, 2000))}"))
    line = one_line(run_main("sweep", spec, "--out", tmp_path / "x.zarr"), 2)
    assert "the grid has 1,002,000 cells, more than 1,000,000: pass --allow-large" in line
    assert not (tmp_path / "x.zarr").exists()


@pytest.mark.parametrize("args, fragment", [
    (["--workers", "-1"], "argument --workers: '-1' is not allowed: give an integer >= 0"),
    (["--d2", "0"], "argument --d2: '0' is not allowed: give an integer >= 1"),
    (["--n-test", "0"], "argument --n-test: '0' is not allowed: give an integer >= 1"),
    (["--max-eval-labels", "0"], "argument --max-eval-labels: '0' is not allowed"),
    (["--checkpoint-every", "0"], "argument --checkpoint-every: '0' is not allowed"),
    (["--threshold", "some"], "argument --threshold: invalid choice: 'some'"),
    (["--flip", "nan"], "argument --flip: 'nan' is not allowed: give a number in [0, 0.5)"),
    (["--checkpoint", ""], "--checkpoint='' is not allowed: give the path of the checkpoint"),
])
def test_bad_flag_values_name_the_flag(args, fragment):
    # in-process: cli/test_main.py::test_bad_input_exits_2_with_one_line runs both paths for real
    line = one_line(run_main(*FIT, *args), 2)
    assert fragment in line


def test_test_data_that_does_not_match_the_training_data_exits_2(tmp_path):
    """``fit --data TRAIN --test-data TEST``: a test file with other sizes, a missing one
    and a directory that is not a store are named with the flags and both files."""
    train = tmp_path / "train.txt"
    train.write_text("3 4 3\n0,1 0:1.0 2:0.5\n1 1:1.0 3:2.0\n2 0:0.5\n")
    wide = tmp_path / "wide.txt"
    wide.write_text("2 5 3\n0 0:1.0 4:0.5\n1 1:1.0\n")
    fewer = tmp_path / "fewer.txt"
    fewer.write_text("2 4 2\n0 0:1.0\n1 1:1.0\n")
    base = ["fit", "--data", train, "--rank", "1", "--n-iter", "1", "--workers", "0", "--quiet"]
    line = one_line(run_cli(*base, "--test-data", wide), 2)  # a real process
    assert (f"--test-data {str(wide)!r} has 5 features and 3 labels (its header), but "
            f"--data {str(train)!r} has 4 features and 3 labels") in line
    assert "n_features" not in line and "n_labels" not in line
    line = one_line(run_main(*base, "--test-data", fewer), 2)
    assert (f"--test-data {str(fewer)!r} has 4 features and 2 labels (its header), but "
            f"--data {str(train)!r} has 4 features and 3 labels") in line
    line = one_line(run_main(*base, "--test-data", tmp_path / "nosuch.txt"), 2)
    assert f"--test-data {str(tmp_path / 'nosuch.txt')!r} does not exist" in line
    line = one_line(run_main(*base, "--test-data", tmp_path), 2)
    assert f"--test-data {str(tmp_path)!r} is a directory but not a CSR store" in line
    line = one_line(run_main("fit", "--data", tmp_path / "nosuch.txt", "--workers", "0"), 2)
    assert f"--data {str(tmp_path / 'nosuch.txt')!r} does not exist" in line
    assert run_main(*base, "--test-data", train).returncode == 0  # the same sizes


# --- runtime failures: exit 1 --------------------------------------------------------------

@pytest.fixture(scope="module")
def lone_scheduler(tmp_path_factory):
    """A real ``dask scheduler`` that no worker joins (the tests only connect to it)."""
    procs = DaskProcesses(tmp_path_factory.mktemp("lone"), n_workers=0)
    try:
        yield procs
    finally:
        procs.close()


def test_scheduler_without_workers_times_out_with_one_line(lone_scheduler):
    procs = lone_scheduler  # (run_cli's timeout only stops a hang)
    line = one_line(run_cli(*FIT, "--scheduler", procs.address, "--worker-timeout", "1"), 1)
    assert f"no worker joined the scheduler at {procs.address} within 1 s" in line


def test_debug_shows_the_traceback(lone_scheduler):
    proc = run_cli(*FIT, "--scheduler", lone_scheduler.address, "--worker-timeout", "1",
                   "--debug")
    assert proc.returncode == 1 and "Traceback" in proc.stderr and "RunError" in proc.stderr


@pytest.fixture(scope="module")
def cube(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cube")
    spec = directory / "tiny.yaml"
    spec.write_text(SPEC)
    proc = run_main("sweep", spec, "--out", directory / "c.zarr", "--workers", "0", "--quiet")
    assert proc.returncode == 0, proc.stderr
    return directory / "c.zarr", spec


def test_report_plots_onto_a_file_or_read_only_dir_exit_2(cube, tmp_path):
    path, _ = cube
    target = tmp_path / "a-file"
    target.write_text("x")
    # in-process: tests/sweep/test_report.py runs a report's exit 2 for real
    line = one_line(run_main("report", path, "--plots", target), 2)
    assert "is a file, not a directory" in line
    with read_only_dir(tmp_path / "ro") as ro:
        line = one_line(run_main("report", path, "--plots", ro / "plots"), 2)
        assert "--plots" in line and ("cannot be created" in line or "not writable" in line)


def test_report_plots_with_no_cell_done_exits_1_and_writes_nothing(tmp_path):
    from onebit_dask.sweep.spec import parse_spec
    from onebit_dask.sweep.cube import create
    from onebit_dask.sweep.plan import check_output

    spec = parse_spec(SPEC)
    path = tmp_path / "empty.zarr"
    check_output(str(path), spec, False)
    create(str(path), spec)
    # in-process: test_report_on_a_damaged_done_array_exits_1 runs a report's exit 1 for real
    proc = run_main("report", path, "--plots", tmp_path / "plots")
    assert f"no cell of the cube {path} is done" in one_line(proc, 1)
    assert not list((tmp_path / "plots").glob("*.png"))
    tables = run_main("report", path)  # the tables alone are fine: every entry is '-'
    assert tables.returncode == 0 and "0 of 4 cells done" in tables.stdout


@pytest.mark.parametrize("damage", ["missing", "corrupted"])
def test_report_on_a_damaged_done_array_exits_1(cube, tmp_path, damage):
    import shutil

    path, _ = cube
    copy = tmp_path / "c.zarr"
    shutil.copytree(path, copy)
    if damage == "missing":
        shutil.rmtree(copy / "done")
    else:
        for root, _, files in os.walk(copy / "done"):
            for name in files:
                if name != "zarr.json":
                    with open(os.path.join(root, name), "wb") as fh:
                        fh.write(b"\x00garbage")
    run = run_cli if damage == "missing" else run_main  # one real process, one in-process
    line = one_line(run("report", copy), 1)
    assert str(copy) in line and "damaged" in line
    from onebit_dask.io.stores.zarr_format import DamagedStoreError
    from onebit_dask.sweep.report import report

    with pytest.raises(DamagedStoreError, match="damaged"):  # the package's one error for it
        report(copy)


def test_full_disk_exits_1_naming_the_path(cube, tmp_path):
    path, spec = cube
    with small_disk(tmp_path / "disk", "120k") as disk:
        out = disk / "c.zarr"
        proc = run_cli("sweep", spec, "--out", out, "--workers", "0", "--quiet")
        line = one_line(proc, 1)
        assert "no space left on" in line.lower() and str(disk) in line
        for name in os.listdir(disk):  # make room, keep the figures' directory tight
            target = disk / name
            subprocess.run(["rm", "-rf", str(target)], check=True)
        (disk / "filler").write_bytes(b"\0" * 100_000)
        proc = run_main("report", path, "--plots", disk / "plots", "--quiet")
        line = one_line(proc, 1)
        assert "no space left on the device" in line and str(disk / "plots") in line


# --- a scheduler killed mid-sweep ----------------------------------------------------------

# a worker preload: the cells of seed 1 wait until the file GO exists, so the scheduler
# is killed while a cell is done and another is running, whatever the timing
HOLD = """
import dataclasses, os, time
from onebit_dask.sweep import methods

onebit = methods.METHODS["onebit"]

def held(params, fixed, run=onebit.run):  # (dask may run a preload twice: bound here)
    while params["seed"] == 1 and not os.path.exists(GO):
        time.sleep(0.05)
    return run(params, fixed)

methods.METHODS["onebit"] = dataclasses.replace(onebit, run=held)
"""


def test_scheduler_killed_mid_sweep_is_one_line_and_the_rerun_resumes(tmp_path):
    """The scheduler is killed once the runner has a cell's values (its progress line),
    before the runner's first timed write of the cube (every 5 s): the cell is written as
    the runner stops (finished work is kept), the error is one line, the rerun resumes."""
    from onebit_dask.sweep.cube import open_cube

    spec = tmp_path / "tiny.yaml"
    spec.write_text(SPEC)
    out, go = tmp_path / "c.zarr", tmp_path / "go"
    preload = tmp_path / "hold_seed_1.py"
    preload.write_text(f"GO = {str(go)!r}\n{HOLD}")
    procs = DaskProcesses(tmp_path, n_workers=1, worker_args=["--preload", str(preload)])
    try:
        sweep = CliProcess(["sweep", spec, "--out", out, "--scheduler", procs.address])
        before = []  # stderr up to the first cell's progress line "[1/4] ..."
        for line in sweep.stderr:
            before.append(line)
            if line.startswith("[1/"):
                break
        procs.scheduler.send_signal(signal.SIGKILL)
        _, stderr = sweep.communicate(timeout=600)
        stderr = "".join(before) + stderr
    finally:
        go.touch()
        procs.close()
    assert any(line.startswith("[1/") for line in before), stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith("onebit-dask:")]
    assert sweep.returncode == 1, stderr
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert "lost the connection to the Dask scheduler" in lines[0]
    assert "run the same command again" in lines[0]
    done = by_noise_setting(open_cube(out))["done"].values  # the cells the spec asks
    assert 0 < done.sum() < done.size
    again = run_main("sweep", spec, "--out", out, "--workers", "0", "--quiet")
    assert again.returncode == 0, again.stderr
    assert f"{int(done.sum())} skipped" in again.stdout
    assert by_noise_setting(open_cube(out))["done"].values.all()


# --- observations stores from the command line ---------------------------------------------

@pytest.fixture
def obs_store(tmp_path):
    from onebit_dask import SyntheticProblem
    from onebit_dask.io import write_observations

    problem = SyntheticProblem(20, 10, 2, seed=3)
    X, labels, y = problem.draw_batches(range(3), 2000, 1)
    return write_observations(tmp_path / "obs.zarr", X, labels, y, n_labels=10,
                              chunk_rows=2000)


def test_fit_data_prints_the_training_summary(obs_store):
    import json

    proc = run_main("fit", "--data", obs_store, "--rank", "2", "--batch-size", "2000",
                    "--n-iter", "2", "--workers", "0", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["d1"], result["d2"], result["n_samples"]) == (20, 10, 6000)
    assert "auc" not in result and result["data"] == obs_store
    text = run_main("fit", "--data", obs_store, "--rank", "2", "--batch-size", "2000",
                    "--n-iter", "2", "--workers", "0", "--quiet")
    assert text.returncode == 0 and "observations" in text.stdout and "6,000" in text.stdout


def test_fit_data_refuses_synthetic_options(obs_store):
    line = one_line(run_main("fit", "--data", obs_store, "--d1", "500", "--rank", "2"), 2)
    assert "--d1 set the synthetic problem: they do not apply with --data" in line


def test_fit_data_with_a_missing_chunk_names_the_rows(obs_store):
    os.remove(os.path.join(obs_store, "X", "c", "1", "0"))
    # in-process: test_scheduler_without_workers_times_out_with_one_line runs fit's exit 1
    line = one_line(run_main("fit", "--data", obs_store, "--rank", "2", "--batch-size", "2000",
                             "--n-iter", "2", "--workers", "0"), 1)
    assert "X/c/1/0 holding rows 2000..3999 is missing" in line


# --- the command line as people expect it --------------------------------------------------

def test_version_and_help():
    from onebit_dask import __version__

    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"onebit-dask {__version__}"
    helps = {command: run_cli(command, "--help") for command in ("fit", "sweep", "report")}
    for command, proc in helps.items():
        assert proc.returncode == 0, proc.stderr
        text = proc.stdout
        assert "``" not in text and ":class:" not in text and ":func:" not in text
        assert text.startswith(f"usage: onebit-dask {command}")
        if command != "report":  # report's options have no default to show
            assert "(default: " in text
    fit = helps["fit"].stdout
    assert "(default: 500)" in fit and "{auto,paper,averaged,harmonic,moment,refine,select,pooled}" in fit and "(default: 10.0)" in fit


def test_batch_reuse_warning_reports_the_requested_size():
    from onebit_dask import OneBitMultiLabel, SyntheticProblem

    X, labels, y = SyntheticProblem(20, 10, 2, seed=3).draw_batches(range(2), 1000, 1)
    with pytest.warns(UserWarning, match=r"batch_size=5000 were asked for, but the data hold "
                                         r"2000 rows"):
        OneBitMultiLabel(2, batch_size=5000, n_iter=1).fit(X, labels, y, n_labels=10)
    assert np.all(np.isfinite(X))


def test_fit_data_with_a_checkpoint_runs_and_resumes(obs_store, tmp_path):
    import json

    args = ["fit", "--data", obs_store, "--rank", "2", "--batch-size", "2000", "--n-iter", "2",
            "--workers", "0", "--json", "--checkpoint", tmp_path / "ck.zarr"]
    first = run_main(*args)
    assert first.returncode == 0, first.stderr
    again = run_main(*args)  # resumes the finished fit: the same numbers
    assert again.returncode == 0, again.stderr
    assert json.loads(first.stdout)["history"][-1]["n_samples"] == json.loads(
        again.stdout)["history"][-1]["n_samples"] == 6000
    import zarr

    X = zarr.open_group(obs_store, mode="r+")["X"]
    X[1:3] = -50 * X[1:3]  # the store rewritten in place: not the data of the checkpoint
    line = one_line(run_main(*args), 2)
    assert "data.files_sha256=" in line


def test_sizes_beyond_the_fixed_limits_exit_2_before_any_work(obs_store, tmp_path):
    import zarr

    line = one_line(run_main(*FIT, "--workers", "0", "--n-iter", str(10**12)), 2)
    assert "--n-iter=1000000000000 is not allowed: --n-iter must be <= 1,000,000" in line
    line = one_line(run_main(*FIT, "--workers", "0", "--n-test", str(10**23)), 2)
    assert f"--n-test={10**23} is not allowed" in line
    line = one_line(run_main(*FIT, "--workers", "0", "--d1", str(10**6), "--n-test",
                             str(10**4)), 2)
    assert "would hold 10,000,000,000 numbers" in line and "--allow-large" in line
    assert "--d1=1000000 " in line or "--d1=1000000," in line
    from onebit_dask.io.observations import DIGESTED
    from onebit_dask.io.stores.zarr_format import attrs_digest

    group = zarr.open_group(obs_store, mode="r+")  # a store that says so, digest and all
    attrs = {**group.attrs.asdict(), "n_labels": 10**15}
    group.attrs.update({**attrs, "attrs_sha256": attrs_digest(attrs, DIGESTED)})
    line = one_line(run_main("fit", "--data", obs_store, "--rank", "2", "--batch-size",
                             "2000", "--n-iter", "2", "--workers", "0", "--save",
                             tmp_path / "m.zarr"), 2)
    assert (f"the labels of --data {str(obs_store)!r}={10**15} is not allowed: the labels of "
            f"--data {str(obs_store)!r} must be <= 2,147,483,647") in line
    assert not (tmp_path / "m.zarr").exists()


def test_a_spec_with_a_duplicate_key_exits_2_naming_file_and_line(tmp_path):
    spec = tmp_path / "dup.yaml"
    spec.write_text("grid:\n  d1: [20]\n  d2: [10]\n  rank: [2]\n  batch_size: [100]\n"
                    "  d1: [30]\n")
    line = one_line(run_main("sweep", spec, "--out", tmp_path / "c.zarr", "--workers", "0"), 2)
    assert f"{spec}: line 6: key 'd1' is given twice (first on line 2)" in line
    assert not (tmp_path / "c.zarr").exists()


# --- what stderr holds when nothing failed ------------------------------------------------

def test_local_config_with_a_dashboard_port_in_use_writes_no_warning(tmp_path):
    """A local cluster config whose ``dashboard_address`` is taken (a port this test
    holds): distributed's 4-line warning is not shown; the only line about the dashboard
    is the documented ``dask dashboard: URL`` (cluster/README.md), on another port."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = write_yaml(tmp_path / "local.yaml", {
            "kind": "local", "options": {"n_workers": 1,
                                         "dashboard_address": f"127.0.0.1:{port}"}})
        with concurrent.futures.ThreadPoolExecutor(2) as pool:  # two processes at once
            quiet, loud = pool.map(lambda args: run_cli(*args, "--cluster", config),
                                   [FIT, [a for a in FIT if a != "--quiet"]])  # FIT: --quiet
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    assert loud.returncode == 0, loud.stderr
    lines = [ln for ln in loud.stderr.splitlines()
             if ln.strip() and not ln.startswith("step ")]  # the progress lines (a pipe)
    assert len(lines) == 1 and lines[0].startswith("dask dashboard: http://127.0.0.1:"), lines
    assert f":{port}/" not in lines[0]


def test_a_local_configs_workers_are_as_quiet_as_the_embedded_clusters(tmp_path, capfd):
    """A local cluster config's workers drop their log records as the embedded
    cluster's do (``--debug`` shows them): a worker's heartbeat cut short by the
    cluster's closing is an ERROR record with a traceback, which would otherwise reach
    the stderr of a command that succeeded. Here a worker preload logs an error and a
    warning, and leaves a file (it ran); the workers are processes and write to this
    process's file descriptor 2."""
    ran = tmp_path / "ran"
    preload = tmp_path / "log_at_start.py"
    preload.write_text(
        "import logging, pathlib\n\n"
        "def dask_setup(worker):\n"
        "    logging.getLogger('distributed.worker').error('an error record of a worker')\n"
        "    logging.getLogger('distributed.worker').warning('a warning record of a worker')\n"
        f"    pathlib.Path({str(ran)!r}).touch()\n")
    config = write_yaml(tmp_path / "local.yaml", {"kind": "local", "options": {"n_workers": 1}})
    with dask.config.set({"distributed.worker.preload": [str(preload)]}):  # sent to workers
        proc = run_main(*FIT, "--cluster", config)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert ran.exists()
    assert "record of a worker" not in capfd.readouterr().err


def test_data_directory_that_is_not_a_store_is_named_as_the_flag(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("x")
    line = one_line(run_main(*FIT, "--workers", "0", "--data", tmp_path / "notes"), 2)
    assert f"--data {str(tmp_path / 'notes')!r} is a directory but not a CSR store" in line
    assert list((tmp_path / "notes").iterdir()) == [tmp_path / "notes" / "a.txt"]


def test_a_second_fit_saving_to_the_same_path_is_refused_at_its_start(tmp_path):
    """``--save`` takes its store's lock before the fit: while another writer holds it, a
    fit to the same path exits 1 at once with one line naming the holder (it trained
    fully, then failed with "pass overwrite=True"); once it is free, the fit saves there."""
    from onebit_dask.io.stores.lock import StoreLock

    target = tmp_path / "m.zarr"
    args = (*FIT, "--workers", "0", "--n-iter", "2", "--save", target)
    with StoreLock(str(target), writer="fit --save"):  # another writer, alive
        line = one_line(run_main(*args), 1)
        assert f"the store {str(target)!r} is in use by another fit --save" in line
        assert f"pid {os.getpid()}" in line
        proc = run_cli(*args)  # a real process
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
        assert not target.exists()
    assert run_main(*args).returncode == 0 and target.is_dir()
    assert not (tmp_path / "m.zarr.lock").exists()


@pytest.mark.parametrize("flag", ["--save", "--checkpoint"])
def test_memory_stores_are_refused_by_the_command_line(flag):
    line = one_line(run_main(*FIT, "--workers", "0", flag, "memory://m.zarr"), 2)
    assert f"{flag} 'memory://m.zarr': a memory:// store ends with this command" in line
