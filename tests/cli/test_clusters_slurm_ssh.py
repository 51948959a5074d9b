"""The shipped SLURM and SSH configs against real back ends on 127.0.0.1.

A single-node SLURM (munged, slurmctld, slurmd) and an sshd are started by the
fixtures in ``tests/support/cluster_daemons.py``; ``onebit-dask sweep`` and ``fit`` run through
them from configs of the shape of ``cluster/slurm.yaml`` and ``cluster/ssh.yaml``,
and their results must equal an in-process (``--workers 0``) run bit for bit.
Skipped, with the way to enable them, where the daemons are not installed.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from onebit_dask import testing
from onebit_dask.cli.clusters import load_cluster_config, parse_cluster_config
from onebit_dask.metrics.names import METRICS
from onebit_dask.sweep.cube import open_cube
from onebit_dask.testing import computed

from tests.support import cluster_daemons
from tests.support.helpers import (ROOT, CliProcess, by_noise_setting, fit_args, run_cli,
                                  small_quickstart, wait_until)

pytestmark = [pytest.mark.integration, pytest.mark.slow]
FIT = fit_args("--json", "--quiet", d1=30, d2=12, batch_size=3000, n_iter=3, n_test=300, seed=3)


def fit_numbers(result):
    """The fit's metrics and history without the measured times."""
    return {**{k: result[k] for k in METRICS}, "n_samples": result["n_samples"],
            "history": computed(result["history"])}


def assert_same_cube(path_a, path_b):
    assert all(by_noise_setting(open_cube(p))["done"].all() for p in (path_a, path_b))
    testing.assert_same_cube(path_a, path_b)  # values and coordinates, bit for bit


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """pipelines/quickstart.yaml with the cells of :data:`helpers.SMALL_CELLS`."""
    return small_quickstart(tmp_path_factory.mktemp("pipeline"))


class References:
    """The in-process (``--workers 0``) runs the back ends must equal: the sweep of
    :func:`pipeline` and the fit :data:`FIT`, two command lines started in the background
    when a test first asks, so that they run while the daemons start and the jobs wait;
    :meth:`cube` and :meth:`fit` wait for theirs."""

    def __init__(self, pipeline, directory):
        self.cube_path = directory / "quickstart.zarr"
        self.procs = {
            name: CliProcess(argv)
            for name, argv in [
                ("cube", ["sweep", pipeline, "--out", self.cube_path, "--workers", "0",
                          "--quiet"]),
                ("fit", [*FIT, "--workers", "0"])]}
        self.outputs = {}

    def _output(self, name) -> str:
        if name not in self.outputs:
            out, err = self.procs[name].communicate(timeout=600)
            assert self.procs[name].returncode == 0, err
            self.outputs[name] = out
        return self.outputs[name]

    def cube(self) -> Path:
        self._output("cube")
        return self.cube_path

    def fit(self) -> dict:
        return fit_numbers(json.loads(self._output("fit")))

    def close(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@pytest.fixture(scope="module")
def references(tmp_path_factory, pipeline):
    """:class:`References`; a test asks for it before the daemons' fixture."""
    runs = References(pipeline, tmp_path_factory.mktemp("reference"))
    try:
        yield runs
    finally:
        runs.close()


def _private_dir(tmp_path_factory, name):
    path = tmp_path_factory.mktemp(name)
    path.chmod(0o700)  # munged and sshd refuse keys and sockets others can reach
    return path


# -- SLURM ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    reason = cluster_daemons.missing_slurm()
    if reason:
        pytest.skip(f"no SLURM: {reason}")
    daemons = cluster_daemons.Slurm(_private_dir(tmp_path_factory, "slurm"), partition="compute")
    try:
        daemons.start_all()
        yield daemons
    finally:
        daemons.stop()


def slurm_config(tmp_path, n_jobs=2, **changes):
    """cluster/slurm.yaml with this machine's sizes and paths (the same keys otherwise).

    The prologue puts a ``python`` first on PATH that logs ``$SLURM_JOB_ID`` to
    ``python-used`` and runs this interpreter: the worker must start with the
    prologue's Python, as the shipped config's comment says.
    """
    shipped = yaml.safe_load((ROOT / "cluster" / "slurm.yaml").read_text())
    env_bin = tmp_path / "env-bin"
    env_bin.mkdir(exist_ok=True)
    shim = env_bin / "python"
    shim.write_text(f'#!/bin/sh\necho "$SLURM_JOB_ID" >> {tmp_path / "python-used"}\n'
                    f'exec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    options = {**shipped["options"], "cores": 1, "processes": 1, "memory": "1GiB",
               "walltime": "00:10:00", "job_script_prologue": [f"export PATH={env_bin}:$PATH"],
               "interface": "lo", "log_directory": str(tmp_path / "logs"),
               "scheduler_options": {"dashboard_address": "127.0.0.1:0"}, **changes}
    assert set(shipped["options"]) <= set(options)
    path = tmp_path / "slurm.yaml"
    path.write_text(yaml.safe_dump({**shipped, "options": options, "scale": n_jobs}))
    load_cluster_config(path)  # a valid config
    return path


def run_watching_jobs(slurm, argv):
    """Run the CLI while polling squeue; returns (process, {job id: set of states}).

    ``process.most_jobs`` is the largest number of jobs squeue listed at one poll.
    """
    env = {**slurm.env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    proc = CliProcess(argv, env=env)
    seen, most = {}, 0
    try:
        while proc.poll() is None:
            lines = slurm.run("squeue", "-h", "-o", "%i %T").splitlines()
            most = max(most, len(lines))
            for line in lines:
                job, state = line.split()
                seen.setdefault(job, set()).add(state)
            time.sleep(0.5)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    proc.stdout_text, proc.stderr_text, proc.most_jobs = out, err, most
    return proc, seen


def check_jobs_ran_and_ended(slurm, seen, tmp_path, n_jobs):
    # the jobs that ran are those whose worker started with the prologue's python (the
    # shim logs each job's id), not those a poll of squeue caught RUNNING (a short job
    # can run between two polls); every job squeue listed ran
    used = set((tmp_path / "python-used").read_text().split())
    assert len(used) == n_jobs and set(seen) <= used, (used, seen)
    wait_until(lambda: not slurm.jobs(), "the jobs leave squeue", every=0.5)


def test_slurm_sweep_equals_in_process(references, slurm, pipeline, tmp_path):
    config, out = slurm_config(tmp_path), tmp_path / "cube.zarr"
    proc, seen = run_watching_jobs(
        slurm, ["sweep", pipeline, "--out", out, "--cluster", config, "--quiet"])
    assert proc.returncode == 0, proc.stderr_text[-3000:]
    check_jobs_ran_and_ended(slurm, seen, tmp_path, 2)
    assert_same_cube(references.cube(), out)


def test_slurm_adaptive_sweep_equals_in_process(references, slurm, pipeline, tmp_path):
    """``--adapt 0:2`` with the shipped config's shape (``scale: 4``): no job before the
    work comes, then jobs submitted by the adaptive cluster, never more than 2 at a time
    (not the config's 4), all gone from squeue afterwards; the cube is the same."""
    config, out = slurm_config(tmp_path, n_jobs=4), tmp_path / "cube.zarr"
    proc, seen = run_watching_jobs(
        slurm, ["sweep", pipeline, "--out", out, "--cluster", config, "--adapt", "0:2",
                "--quiet"])
    assert proc.returncode == 0, proc.stderr_text[-3000:]
    used = set((tmp_path / "python-used").read_text().split())
    assert used and proc.most_jobs <= 2, (used, seen)  # jobs ran, never more than 2 listed
    wait_until(lambda: not slurm.jobs(), "the jobs leave squeue", every=0.5)
    assert_same_cube(references.cube(), out)


def test_slurm_fit_equals_in_process(references, slurm, tmp_path):
    proc, seen = run_watching_jobs(slurm, [*FIT, "--cluster", slurm_config(tmp_path, n_jobs=1)])
    assert proc.returncode == 0, proc.stderr_text[-3000:]
    check_jobs_ran_and_ended(slurm, seen, tmp_path, 1)
    assert fit_numbers(json.loads(proc.stdout_text)) == references.fit()


@pytest.mark.parametrize("change, reason", [
    ({"queue": "nosuchpartition"}, "Invalid partition name"),
    ({"memory": "4096GiB"}, "Requested node configuration is not available"),
])
def test_slurm_refused_job_is_one_line(slurm, tmp_path, change, reason):
    config = slurm_config(tmp_path, **change)
    # sbatch's reason in the line: the refusal was seen, not waited out (cli's timeout
    # only stops a hang)
    proc = run_cli(*FIT, "--cluster", config, env=slurm.env)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(config) in lines[0] and reason in lines[0], proc.stderr
    assert not slurm.jobs()


@pytest.mark.parametrize("walltime", [
    "90", "90:00", "02:00:00", "1-02", "1-2:3", "1-2:3:4", "UNLIMITED",  # both accept
    "2h", "1.5", "2:00:00:00", "1-2:3:4:5", "02:00:"])  # both refuse
def test_walltime_check_agrees_with_sbatch(slurm, walltime):
    config = {"kind": "slurm", "options": {"cores": 1, "memory": "1GiB", "walltime": walltime}}
    try:
        parse_cluster_config(config)
        ours = True
    except ValueError:
        ours = False
    proc = subprocess.run(["sbatch", "--test-only", "-t", walltime, "--wrap", "true"],
                          env=slurm.env, capture_output=True, text=True, timeout=30)
    assert ours == (proc.returncode == 0), proc.stderr


# -- SSH ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    reason = cluster_daemons.missing_sshd()
    if reason:
        pytest.skip(f"no sshd: {reason}")
    setenv = {**cluster_daemons.blas_environment(), "OMP_NUM_THREADS": "1"}
    if os.environ.get("PYTHONPATH"):  # e.g. a source checkout on the path
        setenv["PYTHONPATH"] = os.environ["PYTHONPATH"]
    daemon = cluster_daemons.Sshd(_private_dir(tmp_path_factory, "sshd"), setenv=setenv)
    try:
        daemon.start_all()
        yield daemon
    finally:
        daemon.stop()


def ssh_config(sshd, tmp_path, **connect):
    """cluster/ssh.yaml for two processes on 127.0.0.1 through the test's sshd."""
    shipped = yaml.safe_load((ROOT / "cluster" / "ssh.yaml").read_text())
    options = shipped["options"]
    connect = {**options["connect_options"], "port": sshd.port,
               "known_hosts": str(sshd.known_hosts), "client_keys": [str(sshd.user_key)],
               **connect}
    connect = {k: v for k, v in connect.items() if v is not ...}  # ... leaves a key out
    options = {**options, "hosts": ["127.0.0.1", "127.0.0.1"], "connect_options": connect,
               "worker_options": {**options["worker_options"], "n_workers": 2,
                                  "host": "127.0.0.1"},
               "scheduler_options": {"port": 0, "dashboard_address": "127.0.0.1:0",
                                     "host": "127.0.0.1"},
               "remote_python": sys.executable}
    path = tmp_path / "ssh.yaml"
    path.write_text(yaml.safe_dump({**shipped, "options": options}))
    load_cluster_config(path)  # a valid config
    return path


def check_sessions_ended(sshd):
    sshd_proc = psutil.Process(next(p.pid for name, p in sshd.procs if name == "sshd"))
    wait_until(lambda: not sshd_proc.children(recursive=True), "the SSH sessions' processes end",
               every=0.5)


def test_ssh_sweep_equals_in_process(references, sshd, pipeline, tmp_path):
    out = tmp_path / "cube.zarr"
    proc = run_cli("sweep", pipeline, "--out", out, "--cluster", ssh_config(sshd, tmp_path),
               "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "another BLAS" not in proc.stderr  # the workers run the test process's kernel
    check_sessions_ended(sshd)
    assert_same_cube(references.cube(), out)


def test_ssh_fit_equals_in_process(references, sshd, tmp_path):
    proc = run_cli(*FIT, "--cluster", ssh_config(sshd, tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "another BLAS" not in proc.stderr  # the workers run the test process's kernel
    check_sessions_ended(sshd)
    assert fit_numbers(json.loads(proc.stdout)) == references.fit()


@pytest.mark.parametrize("known_hosts", ["another key", "default file, absent"])
def test_ssh_unknown_host_key_is_refused(sshd, tmp_path, known_hosts):
    home = tmp_path / "home"
    home.mkdir()
    if known_hosts == "another key":
        other = tmp_path / "other_key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)],
                       check=True, capture_output=True)
        file = tmp_path / "known_hosts"
        file.write_text(f"[127.0.0.1]:{sshd.port} {other.with_suffix('.pub').read_text()}")
        config = ssh_config(sshd, tmp_path, known_hosts=str(file))
    else:  # the shipped config's way: no known_hosts key, ~/.ssh/known_hosts is absent
        config = ssh_config(sshd, tmp_path, known_hosts=...)
    proc = run_cli(*FIT, "--cluster", config, env={**os.environ, "HOME": str(home)}, timeout=600)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "known_hosts" in lines[0] and "not trusted" in lines[0], proc.stderr
    check_sessions_ended(sshd)
