"""Every shipped cluster config loads and turns into its cluster, job script or spec."""

import os
import re

import numpy as np
import pytest
from distributed import Client

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.cli.clusters import (ClusterConfigError, cluster_spec, load_cluster_config,
                                 make_cluster, parse_cluster_config)

from tests.support.helpers import ROOT, run_cli, run_main, run_python

CONFIGS = sorted((ROOT / "cluster").glob("*.yaml"))


def test_configs_are_shipped():
    names = {p.name for p in CONFIGS}
    assert {"local.yaml", "ssh.yaml", "slurm.yaml", "pbs.yaml", "kubernetes.yaml",
            "tls.yaml"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_builds_its_spec(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # dask-jobqueue makes the configs' relative log_directory
    config = load_cluster_config(path)
    spec = cluster_spec(config)
    if config.kind in ("slurm", "pbs"):
        # the worker starts with the Python of the environment the prologue activates,
        # one thread per worker (given once), 4GiB each
        prologue, worker = spec.strip().splitlines()[-2:]
        assert prologue == "source /opt/conda/bin/activate onebit"
        assert worker.startswith("python -m distributed.cli.dask_worker ")
        assert worker.count("--nthreads") == 1 and "--nthreads 1 " in worker
        assert "--memory-limit 4.00GiB" in worker and "--nworkers 4" in worker
    if config.kind == "slurm":
        assert "#SBATCH -p compute" in spec and "#SBATCH --mem=16G\n" in spec
        assert "#SBATCH -A my-project" in spec and "#SBATCH -t 02:00:00" in spec
        assert "--interface" not in spec
    elif config.kind == "pbs":
        assert "#PBS -q workq" in spec and "#PBS -l select=1:ncpus=4:mem=16GB" in spec
    elif config.kind == "kubernetes":
        assert spec["kind"] == "DaskCluster"
        assert spec["spec"]["worker"]["replicas"] == 4
        worker = spec["spec"]["worker"]["spec"]["containers"][0]
        assert worker["image"] == "ghcr.io/dask/dask:latest"
        assert worker["resources"]["limits"]["memory"] == "4Gi"
    else:
        assert spec == config.options
    if config.kind == "ssh":  # host keys are checked (asyncssh's default: ~/.ssh/known_hosts)
        assert "known_hosts" not in config.options.get("connect_options", {})


SIGINT_AFTER = """
import signal, sys
from onebit_dask.cli.clusters import cluster_spec, load_cluster_config
{action}
handler = signal.getsignal(signal.SIGINT)
print("default" if handler is signal.default_int_handler else repr(handler))
"""


@pytest.mark.parametrize("action, expected", [
    ("import dask_jobqueue", "replaced"),
    ("cluster_spec(load_cluster_config(sys.argv[1]))", "default"),
])
def test_dask_jobqueue_leaves_the_ctrl_c_handler_alone(tmp_path, action, expected):
    """``import dask_jobqueue`` replaces Python's SIGINT handler with ``sys.exit()``
    (exit status 0 on Ctrl-C, past the command's handling). The package imports it with
    the handler kept. A fresh interpreter each: the import happens once per process. The
    child starts with SIGINT's default action, whatever this process inherited (a shell
    starts a background job with SIGINT ignored, and Python then installs no handler)."""
    done = run_python(SIGINT_AFTER.format(action=action), ROOT / "cluster" / "slurm.yaml",
                      cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = done.stdout.strip()
    assert (shown if shown == "default" else "replaced") == expected, shown


@pytest.mark.integration
@pytest.mark.parametrize("name", ["local.yaml", "local-tls.yaml"])
def test_local_configs_start_and_fit(name):
    config = load_cluster_config(ROOT / "cluster" / name)
    problem = SyntheticProblem(20, 10, 2, seed=1, n_test=100)
    params = dict(batch_size=2000, n_iter=2, random_state=0)
    with make_cluster(config) as cluster, Client(cluster) as client:
        if config.security:
            assert client.scheduler.address.startswith("tls://127.0.0.1:")
        client.wait_for_workers(2, timeout=300)
        est = OneBitMultiLabel(2, engine="dask", **params).fit(problem)  # the default client
    np.testing.assert_array_equal(est.Q_, OneBitMultiLabel(2, **params).fit(problem).Q_)


@pytest.mark.parametrize("text, match", [
    ("kind: slurmm\n", r"kind='slurmm' is unknown \(did you mean 'slurm'\?\)"),
    ("options: {}\n", "missing key 'kind'"),
    ("kind: slurm\noptions: {cores: 4}\n", r"missing key 'options.memory'"),
    ("kind: slurm\noptions: {cores: four, memory: 4GB}\n",
     r"options.cores='four' has type str, expected int"),
    ("kind: local\noptions: {n_worker: 2}\n",
     r"unknown key 'options.n_worker' \(did you mean 'n_workers'\?\)"),
    ("kind: local\nscale: -1\n", r"scale=-1 is not allowed: it must be >= 1"),
    ("kind: local\nscale: 2\nadapt: {maximum: 3}\n", "either 'scale' or 'adapt'"),
    ("kind: local\nsecurity: {cert: a.pem}\n", "'ca_file', 'cert' and 'key'"),
    ("kind: ssh\noptions: {hosts: [one]}\n", "at least one worker host"),
    ("- a list\n", "a mapping with a 'kind' key"),
    ("kind: slurm\noptions: {cores: 4, memory: 4GB, walltime: 2h}\n",
     r"options.walltime='2h' is not a slurm walltime: give minutes, MM:SS, HH:MM:SS"),
    ("kind: pbs\noptions: {cores: 4, memory: 4GB, walltime: 1-02:00}\n",
     r"options.walltime='1-02:00' is not a pbs walltime"),
    ("kind: slurm\noptions: {cores: 4, memory: lots}\n", r"options.memory='lots' is not a size"),
    ("kind: slurm\noptions: {cores: 4, memory: 4GB, worker_extra_args: [--nthreads, '1']}\n",
     r"options.worker_extra_args repeats --nthreads, which dask-jobqueue sets"),
    ("kind: slurm\noptions: {cores: 4, memory: 4GB, worker_extra_args: [--memory-limit=2GB]}\n",
     r"repeats --memory-limit"),
    ("kind: slurm\noptions: {cores: 4, memory: 4GB, job_script_prologue: source a}\n",
     r"options.job_script_prologue='source a' has type str, expected list"),
    ("kind: slurm\noptions: {cores: 4, memory: 4GB, python: 3}\n",
     r"options.python=3 has type int, expected str"),
    ("kind: slurm\noptions: {cores: 4, memory: 4GB, job_extra_directives: [1]}\n",
     r"options.job_extra_directives=\[1\] must be a list of strings"),
    ("kind: ssh\noptions: {hosts: [a, b], connect_options: {known_hosts: null}}\n",
     r"known_hosts=None turns SSH host-key checking off"),
    ("kind: ssh\noptions: {hosts: [a, b], connect_options: {knwon_hosts: f}}\n",
     r"unknown key 'options.connect_options.knwon_hosts' \(did you mean 'known_hosts'\?\)"),
    ("kind: ssh\noptions: {hosts: [a, b], connect_options: {port: '22'}}\n",
     r"options.connect_options.port='22' has type str, expected int"),
    ("kind: ssh\noptions: {hosts: [a, b], connect_options: {known_hosts: /nonexistent/kh}}\n",
     r"known_hosts='/nonexistent/kh' is not a file"),
    ("kind: local\nworkers: 3\n", r"unknown key 'workers'"),
])
def test_bad_configs_name_the_key(tmp_path, text, match):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ClusterConfigError, match=match):
        load_cluster_config(path)


def test_options_the_cluster_classes_take_are_accepted(tmp_path):
    """The options are checked against the cluster classes' own signatures (and Dask's
    configuration), not a hand-kept list: dask-jobqueue's shebang, job_directives_skip and
    worker_command, LocalCluster's silence_logs; the ones the config sets elsewhere
    (n_workers for a job queue: scale) and misspellings stay refused."""
    slurm = parse_cluster_config({"kind": "slurm", "options": {
        "cores": 2, "memory": "2GiB", "shebang": "#!/usr/bin/env zsh",
        "job_directives_skip": ["--mem"], "worker_command": "distributed.cli.dask_worker"}})
    script = cluster_spec(slurm)
    assert script.startswith("#!/usr/bin/env zsh") and "#SBATCH --mem" not in script
    parse_cluster_config({"kind": "local", "options": {"silence_logs": 40}})
    for kind, options, key in (("slurm", {"cores": 2, "memory": "2GiB", "n_workers": 3},
                                "n_workers"),
                               ("local", {"silence_log": 40}, "silence_log")):
        with pytest.raises(ClusterConfigError, match=rf"unknown key 'options.{key}'"):
            parse_cluster_config({"kind": kind, "options": options})
    # a default's type is the option's type
    with pytest.raises(ClusterConfigError, match=r"options.silence_logs='x' has type str"):
        parse_cluster_config({"kind": "local", "options": {"silence_logs": "x"}})


@pytest.mark.parametrize("options", [{"ip": "0.0.0.0"}, {"scheduler_kwargs": {"host": "0.0.0.0"}},
                                     {"interface": "eth0"}, {"protocol": "tcp://"},
                                     {"worker_class": "distributed.Nanny"}])
def test_local_options_that_open_the_cluster_are_refused_by_name(options):
    """LocalCluster takes other ways to choose where its scheduler listens (ip, interface,
    scheduler_kwargs, ...) or what runs (worker_class): a local config says that with
    options.host, whose exposure is checked, so they are refused by name."""
    key = next(iter(options))
    with pytest.raises(ClusterConfigError, match=rf"options.{key} is not allowed in a local "
                                                 r"config"):
        parse_cluster_config({"kind": "local", "options": options})


def test_job_queue_cores_and_memory_may_come_from_dasks_configuration():
    """(Whatever this machine's own jobqueue.yaml says: each case sets both keys.)"""
    import dask

    config = {"kind": "slurm", "options": {"queue": "debug"}}
    with dask.config.set({"jobqueue.slurm.cores": None, "jobqueue.slurm.memory": None}):
        with pytest.raises(ClusterConfigError, match=r"missing key 'options.cores' .*set "
                                                     r"jobqueue.slurm.cores in Dask's "
                                                     r"configuration"):
            parse_cluster_config(config)
    with dask.config.set({"jobqueue.slurm.cores": 3, "jobqueue.slurm.memory": "3GiB"}):
        script = cluster_spec(parse_cluster_config(config))
    assert "--cpus-per-task=3" in script and "#SBATCH -p debug" in script
    for cores, memory, match in ((0, "3GiB", r"jobqueue.slurm.cores=0 is not allowed"),
                                 (3, "lots", r"jobqueue.slurm.memory='lots' is not a size")):
        with dask.config.set({"jobqueue.slurm.cores": cores, "jobqueue.slurm.memory": memory}):
            with pytest.raises(ClusterConfigError, match=match):
                parse_cluster_config(config)


def test_a_dashboard_on_the_clusters_own_host_or_loopback_is_accepted():
    for options in ({"host": "127.0.0.1", "dashboard_address": "localhost:0"},
                    {"host": "127.0.0.1", "dashboard_address": "[::1]:0"},
                    {"host": "0.0.0.0", "dashboard_address": "0.0.0.0:0"}):
        config = {"kind": "local", "options": options}
        if options["host"] == "0.0.0.0":
            config["allow_insecure"] = True
        parse_cluster_config(config)


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ClusterConfigError, match="does not exist"):
        load_cluster_config(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("kind: [local\n")
    with pytest.raises(ClusterConfigError, match="not valid YAML"):
        load_cluster_config(tmp_path / "bad.yaml")


def test_ssh_known_hosts_file_and_other_asyncssh_options(tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text("")
    connect = {"known_hosts": str(known), "port": 2222, "keepalive_interval": 30}
    config = parse_cluster_config({"kind": "ssh",
                                   "options": {"hosts": ["a", "b"], "connect_options": connect}})
    assert config.options["connect_options"]["known_hosts"] == str(known)


def test_tls_files_must_exist():
    config = parse_cluster_config({"kind": "local", "security": {
        "ca_file": "/nonexistent/ca.pem", "cert": "c", "key": "k"}})
    with pytest.raises(ClusterConfigError, match="security.ca_file='/nonexistent/ca.pem'"):
        make_cluster(config)


@pytest.mark.integration
def test_slurm_config_without_sbatch_exits_1_with_one_line(tmp_path):
    """Where SLURM is not installed, the shipped config fails before a scheduler starts."""
    config = ROOT / "cluster" / "slurm.yaml"
    proc = run_cli("fit", "--d1", "20", "--d2", "10", "--rank", "2", "--n-iter", "1", "--quiet",
                   "--cluster", config, env={**os.environ, "PATH": str(tmp_path)})
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "sbatch is not on PATH" in lines[0], proc.stderr


@pytest.mark.parametrize("line", ["UserKnownHostsFile none", "UserKnownHostsFile=/dev/null",
                                  "  StrictHostKeyChecking no", "GlobalKnownHostsFile none"])
def test_ssh_config_files_that_turn_host_key_checking_off_are_refused(tmp_path, line):
    pytest.importorskip("asyncssh")
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(f"Host *\n  User someone\n{line}\n")
    path = tmp_path / "c.yaml"
    path.write_text(f"kind: ssh\noptions: {{hosts: [a, b], connect_options: "
                    f"{{config: [{ssh_config}]}}}}\n")
    with pytest.raises(ClusterConfigError) as info:
        load_cluster_config(path)
    text = str(info.value)
    assert f"the SSH config {ssh_config} (line 3) turns host-key checking off" in text
    assert "connect_options.known_hosts" in text  # how to name a known-hosts file


def test_ssh_config_included_files_are_followed(tmp_path):
    pytest.importorskip("asyncssh")
    inner = tmp_path / "inner"
    inner.write_text("Host b\n  UserKnownHostsFile none\n")
    outer = tmp_path / "outer"
    outer.write_text(f"Include {inner}\n")
    path = tmp_path / "c.yaml"
    path.write_text(f"kind: ssh\noptions: {{hosts: [a, b], connect_options: {{config: {outer}}}}}\n")
    with pytest.raises(ClusterConfigError, match=f"the SSH config {inner} \\(line 2\\)"):
        load_cluster_config(path)
    known = tmp_path / "known_hosts"
    known.write_text("")
    outer.write_text("Host *\n  Port 2222\n")  # a config that keeps the check is fine
    path.write_text(f"kind: ssh\noptions: {{hosts: [a, b], connect_options: {{config: {outer}, "
                    f"known_hosts: {known}}}}}\n")
    assert load_cluster_config(path).options["connect_options"]["config"] == str(outer)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "scheduler.example.org"])
def test_local_cluster_beyond_loopback_without_tls_is_refused(tmp_path, host):
    path = tmp_path / "c.yaml"
    path.write_text(f"kind: local\noptions: {{host: '{host}'}}\n")
    with pytest.raises(ClusterConfigError, match=r"without TLS opens an unauthenticated "
                                                 r"scheduler.*allow_insecure: true"):
        load_cluster_config(path)
    path.write_text(f"kind: local\nallow_insecure: true\noptions: {{host: '{host}'}}\n")
    assert load_cluster_config(path).options["host"] == host
    path.write_text(f"kind: local\noptions: {{host: '{host}'}}\nsecurity: {{temporary: true}}\n")
    assert load_cluster_config(path).security == {"temporary": True}
    for loopback in ("127.0.0.1", "::1", "localhost"):
        path.write_text(f"kind: local\noptions: {{host: '{loopback}'}}\n")
        assert load_cluster_config(path).options["host"] == loopback
    path.write_text("kind: local\nallow_insecure: true\noptions: {host: 127.0.0.1}\n")
    with pytest.raises(ClusterConfigError, match="allow_insecure applies only"):
        load_cluster_config(path)


def test_a_command_loads_its_cluster_config_once(tmp_path, monkeypatch, capsys):
    """Checked and loaded once (session.check_target), then handed on as a ClusterConfig:
    here to the point where SLURM's sbatch is missing (a one-line failure, exit 1)."""
    from onebit_dask.cli import clusters as cluster
    from onebit_dask.cli import client as session
    from onebit_dask.cli import main

    loads = []

    def counted(path, **options):
        loads.append(path)
        return cluster.load_cluster_config(path, **options)

    monkeypatch.setattr(session, "load_cluster_config", counted)
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here
    status = main(["fit", "--d1", "20", "--d2", "10", "--rank", "2", "--n-iter", "1",
                   "--quiet", "--cluster", "slurm"])
    assert status == 1 and "sbatch is not on PATH" in capsys.readouterr().err
    assert len(loads) == 1 and loads[0].endswith("slurm.yaml")


@pytest.mark.parametrize("options, key", [
    ("{n_workers: 100000}", "options.n_workers=100000"),
    ("{threads_per_worker: 0}", "options.threads_per_worker=0"),
    ("{threads_per_worker: -3}", "options.threads_per_worker=-3"),
    ("{memory_limit: lots}", "options.memory_limit='lots'"),
    ("{memory_limit: -1}", "options.memory_limit=-1"),
    ("{scheduler_port: 99999}", "options.scheduler_port=99999"),
    ("{host: 127.0.0.1, dashboard_address: ':8787'}", "options.dashboard_address=':8787'"),
    ("{memory_limit: -4GiB}", "options.memory_limit='-4GiB'"),
    ("{host: 127.0.0.1, dashboard_address: '0.0.0.0:8787'}",
     "options.dashboard_address='0.0.0.0:8787'"),
    ("{host: 127.0.0.1, dashboard_address: '192.0.2.2:0'}",
     "options.dashboard_address='192.0.2.2:0'"),
    ("{host: 127.0.0.1, dashboard_address: '127.0.0.1:abc'}",
     "options.dashboard_address='127.0.0.1:abc' is not allowed: give HOST:PORT with a port "
     "1-65535, or 0 for a free one"),
    ("{host: 127.0.0.1, dashboard_address: '127.0.0.1:99999'}",
     "options.dashboard_address='127.0.0.1:99999' is not allowed: give HOST:PORT with a port "
     "1-65535"),
    ("{host: 127.0.0.1, dashboard_address: ':99999'}",
     "options.dashboard_address=':99999' is not allowed: give HOST:PORT with a port 1-65535"),
    ("{host: 127.0.0.1, dashboard_address: '127.0.0.1:'}",
     "options.dashboard_address='127.0.0.1:' is not allowed: give HOST:PORT with a port"),
])
def test_local_options_that_would_fail_while_starting_exit_2(tmp_path, options, key):
    """Refused with one line naming the key before anything starts (LocalCluster found
    these only while starting, or spawned 100 000 workers)."""
    path = tmp_path / "c.yaml"
    path.write_text(f"kind: local\noptions: {options}\n")
    _refused_exit_2(path, key)


@pytest.mark.parametrize("text, key", [
    ("kind: local\noptions: {n_workers: 257}\n", "options.n_workers=257"),
    ("kind: local\nscale: 1000\n", "scale=1000"),
    ("kind: local\nadapt: {minimum: 0, maximum: 5000}\n", "adapt.maximum=5000"),
    ("kind: slurm\noptions: {cores: 1, memory: 1GiB}\nscale: 300\n", "scale=300"),
    ("kind: pbs\noptions: {cores: 1, memory: 1GiB}\nadapt: {maximum: 300}\n", "adapt.maximum=300"),
    ("kind: kubernetes\noptions: {name: a, image: b, n_workers: 300}\n", "options.n_workers=300"),
])
def test_worker_counts_beyond_the_limit_need_allow_large(tmp_path, text, key):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ClusterConfigError, match=re.escape(key) + ".*--allow-large"):
        load_cluster_config(path)
    assert load_cluster_config(path, allow_large=True).kind == text.split()[1]


@pytest.mark.parametrize("options, key", [
    ("worker_options: {nthreads: 0}",
     "options.worker_options.nthreads=0 is not allowed: it must be >= 1"),
    ("worker_options: {nthreads: -2}",
     "options.worker_options.nthreads=-2 is not allowed: it must be >= 1"),
    ("worker_options: {nthreads: '2'}",
     "options.worker_options.nthreads='2' has type str, expected int"),
    ("worker_options: {n_workers: 0}",
     "options.worker_options.n_workers=0 is not allowed: it must be >= 1"),
    ("worker_options: {n_workers: 100000}",
     "options.worker_options.n_workers=100000 is not allowed: a command starts at most 256 "
     "workers"),
    ("worker_options: {port: 99999}",
     "options.worker_options.port=99999 is not allowed: give a port 1-65535, or 0 for a "
     "free one"),
    ("worker_options: {worker_port: 70000}", "options.worker_options.worker_port=70000"),
    ("worker_options: {dashboard_address: ':99999'}",
     "options.worker_options.dashboard_address=':99999' is not allowed: give HOST:PORT with "
     "a port 1-65535"),
    ("scheduler_options: {port: 99999}",
     "options.scheduler_options.port=99999 is not allowed: give a port 1-65535"),
    ("scheduler_options: {port: 8786, dashboard_address: ':99999'}",
     "options.scheduler_options.dashboard_address=':99999' is not allowed"),
    ("scheduler_options: {dashboard_address: 'localhost:abc'}",
     "options.scheduler_options.dashboard_address='localhost:abc' is not allowed"),
    ("worker_options: {memory_limit: lots}",
     "options.worker_options.memory_limit='lots' is not a size: give bytes, a size such as "
     "'4GiB', or 'auto'"),
    ("worker_options: {memory_limit: -5}",
     "options.worker_options.memory_limit=-5 is not allowed: give bytes >= 0"),
    ("worker_options: {memory_limit: [4GiB]}",
     "options.worker_options.memory_limit=['4GiB'] has type list, expected str or int"),
    ("scheduler_options: {port: x}",
     "options.scheduler_options.port='x' has type str, expected int"),
    ("connect_options: {port: 99999}",
     "options.connect_options.port=99999 is not allowed: give a port 1-65535"),
    ("connect_options: {port: 0}",
     "options.connect_options.port=0 is not allowed: give a port 1-65535"),
])
def test_ssh_options_are_checked_as_a_local_clusters_exit_2(tmp_path, options, key):
    """An SSH config's threads, worker count and ports are refused as a local config's,
    with one line naming the key, before anything starts."""
    pytest.importorskip("asyncssh")
    known = tmp_path / "known_hosts"
    known.write_text("")
    path = tmp_path / "c.yaml"
    path.write_text(f"kind: ssh\noptions:\n  hosts: [a, b]\n  {options}\n")
    if not options.startswith("connect_options"):
        path.write_text(path.read_text() + f"  connect_options: {{known_hosts: {known}}}\n")
    _refused_exit_2(path, key)


def _refused_exit_2(path, key, match=None):
    """The config at ``path`` is refused naming ``key`` (``match``: the error's pattern),
    and ``fit --cluster`` with it exits 2 with one line naming it, before anything
    starts."""
    with pytest.raises(ClusterConfigError, match=match or re.escape(key)):
        load_cluster_config(path)
    proc = run_main("fit", "--d1", 10, "--d2", 10, "--rank", 2, "--cluster", path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and key in proc.stderr, proc


def _ssh_config(tmp_path, options):
    known = tmp_path / "known_hosts"
    known.write_text("")
    path = tmp_path / "c.yaml"
    path.write_text(f"kind: ssh\noptions:\n  hosts: [a, b]\n  {options}\n"
                    f"  connect_options: {{known_hosts: {known}}}\n")
    return path


@pytest.mark.parametrize("options, key", [
    ("worker_options: {threads_per_worker: 2}",
     "unknown key 'options.worker_options.threads_per_worker' (did you mean 'nthreads'?): "
     "the SSH workers (distributed.Nanny) do not take it"),
    ("worker_options: {nthreads: 1, nthread: 2}",
     "unknown key 'options.worker_options.nthread' (did you mean 'nthreads'?)"),
    ("worker_options: {nworkers: 2}",
     "unknown key 'options.worker_options.nworkers' (did you mean 'n_workers'?)"),
    ("worker_options: {security: {}}",
     "options.worker_options.security is not allowed: TLS is the config's 'security' section"),
    ("worker_class: distributed.Worker\n  worker_options: {worker_port: 0}",
     "unknown key 'options.worker_options.worker_port' (did you mean 'port'?): the SSH "
     "workers (distributed.Worker) do not take it"),
])
def test_ssh_worker_options_the_workers_do_not_take_are_refused_exit_2(tmp_path, options, key):
    """SSHCluster passes worker_options (but n_workers) to its worker class as keyword
    arguments: a key the class does not take passed the check and failed in each remote
    worker's start (exit 1, "Worker failed to start"). Refused before anything starts,
    naming the key meant (a LocalCluster's threads_per_worker is the workers' nthreads)."""
    pytest.importorskip("asyncssh")
    path = _ssh_config(tmp_path, options)
    _refused_exit_2(path, key)


@pytest.mark.parametrize("options", [
    "worker_options: {nthreads: 1, n_workers: 4}",  # the shipped ssh.yaml's
    "worker_options: {nthreads: 1, host: 127.0.0.1, worker_port: '40000:40100', "
    "port: 0, local_directory: /tmp, lifetime: 1h, resources: {GPU: 1}, preload: [],"
    " memory_limit: 4GiB, death_timeout: 60, connection_limit: 64}",
    "worker_class: distributed.Worker\n  worker_options: {nthreads: 1, port: 0, "
    "dashboard_address: '127.0.0.1:0'}",
    "worker_class: dask_cuda.CUDAWorker\n  worker_options: {rmm_pool_size: 1GB}",
])
def test_ssh_worker_options_the_workers_take_are_accepted(tmp_path, options):
    """Keys of distributed's Nanny (and of the Worker and Server it passes the others to)
    stay accepted; another worker class's keys are passed on unchecked."""
    pytest.importorskip("asyncssh")
    assert load_cluster_config(_ssh_config(tmp_path, options)).kind == "ssh"


@pytest.mark.parametrize("kind", ["ssh", "slurm"])
@pytest.mark.parametrize("scheduler, key", [
    ("{host: 10.0.0.1, dashboard_address: ':8787'}",
     "options.scheduler_options.dashboard_address=':8787' would serve the dashboard (no "
     "authentication) on every interface of the scheduler's machine, beyond its "
     "options.scheduler_options.host='10.0.0.1': give '10.0.0.1:8787'"),
    ("{host: 127.0.0.1, dashboard_address: 8787}",
     "options.scheduler_options.dashboard_address=8787 would serve the dashboard"),
    ("{host: 10.0.0.1, dashboard_address: '10.0.0.2:8787'}",
     "options.scheduler_options.dashboard_address='10.0.0.2:8787' would serve the dashboard "
     "(no authentication) on '10.0.0.2'"),
    ("{dashboard_address: ':8787'}", None),  # the shipped ssh.yaml's, dask-jobqueue's default
    ("{host: 10.0.0.1, dashboard_address: '127.0.0.1:8787'}", None),
    ("{host: 10.0.0.1, dashboard_address: '10.0.0.1:0'}", None),
    ("{host: 0.0.0.0, dashboard_address: ':8787'}", None),  # every interface either way
    ("{dashboard_address: null}", None),  # the scheduler's default
])
def test_remote_dashboard_is_served_no_wider_than_the_scheduler_exit_2(tmp_path, kind,
                                                                        scheduler, key):
    """A remote scheduler without scheduler_options.host listens on every interface of its
    host, and ':8787' serves the dashboard there too (kept, cluster/README.md says so and how
    to restrict it). A config that names the scheduler's host but gives the dashboard no
    host (every interface) or another non-loopback one is refused, as a local config is."""
    pytest.importorskip("asyncssh" if kind == "ssh" else "dask_jobqueue")
    if kind == "ssh":
        path = _ssh_config(tmp_path, f"scheduler_options: {scheduler}")
    else:
        path = tmp_path / "c.yaml"
        path.write_text(f"kind: slurm\noptions:\n  cores: 1\n  memory: 1GiB\n"
                        f"  scheduler_options: {scheduler}\n")
    if key is None:
        assert load_cluster_config(path).kind == kind
        return
    _refused_exit_2(path, key)


@pytest.mark.parametrize("kind", ["slurm", "pbs"])
@pytest.mark.parametrize("options, key", [
    ("scheduler_options: {port: 99999}",
     "options.scheduler_options.port=99999 is not allowed: give a port 1-65535, or 0 for a "
     "free one"),
    ("scheduler_options: {port: x}",
     "options.scheduler_options.port='x' has type str, expected int"),
    ("scheduler_options: {dashboard_address: '127.0.0.1:99999'}",
     "options.scheduler_options.dashboard_address='127.0.0.1:99999' is not allowed: give "
     "HOST:PORT with a port 1-65535"),
    ("scheduler_options: {dashboard_address: 'localhost:abc'}",
     "options.scheduler_options.dashboard_address='localhost:abc' is not allowed"),
    ("dashboard_address: '127.0.0.1:8787'",  # dask-jobqueue refused it only when starting
     "options.dashboard_address='127.0.0.1:8787' is not taken by a"),
])
def test_job_queue_scheduler_ports_are_checked_exit_2(tmp_path, kind, options, key):
    """A job queue's scheduler port and dashboard address are refused as a local or SSH
    config's, with one line naming the key, before anything is submitted (they were found
    only by the scheduler while starting, or by sbatch)."""
    pytest.importorskip("dask_jobqueue")
    path = tmp_path / "c.yaml"
    path.write_text(f"kind: {kind}\noptions:\n  cores: 1\n  memory: 1GiB\n  {options}\n")
    _refused_exit_2(path, key)


def test_ssh_worker_count_beyond_the_limit_needs_allow_large(tmp_path):
    pytest.importorskip("asyncssh")
    known = tmp_path / "known_hosts"
    known.write_text("")
    path = tmp_path / "c.yaml"
    path.write_text(f"kind: ssh\noptions: {{hosts: [a, b], worker_options: {{n_workers: 257}}, "
                    f"connect_options: {{known_hosts: {known}}}}}\n")
    with pytest.raises(ClusterConfigError, match=r"options.worker_options.n_workers=257 .*"
                                                 r"--allow-large"):
        load_cluster_config(path)
    config = load_cluster_config(path, allow_large=True)
    assert config.options["worker_options"] == {"n_workers": 257}


@pytest.mark.parametrize("text, key", [
    ("kind: local\noptions: {threads_per_worker: 100000}\n",
     "options.threads_per_worker=100000 is not allowed: a worker runs at most 256 threads"),
    ("kind: local\noptions: {n_workers: 2, threads_per_worker: 257}\n",
     "options.threads_per_worker=257 is not allowed: a worker runs at most 256 threads"),
])
def test_local_threads_beyond_the_limit_need_allow_large_exit_2(tmp_path, text, key):
    """A local config's threads per worker have a fixed limit (any number was taken, and
    started): refused with one line naming the key, the value and the limit, before
    anything starts; ``--allow-large`` passes it."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ClusterConfigError, match=re.escape(key) + ".*--allow-large"):
        load_cluster_config(path)
    assert load_cluster_config(path, allow_large=True).options["threads_per_worker"] > 256
    proc = run_main("fit", "--d1", 10, "--d2", 10, "--rank", 2, "--cluster", path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and key in proc.stderr, proc


@pytest.mark.parametrize("options, key", [
    ("hosts: [a, b], worker_options: {nthreads: 100000}",
     "options.worker_options.nthreads=100000 is not allowed: a worker runs at most 256 "
     "threads"),
    ("hosts: [s, a, b, c], worker_options: {n_workers: 100}",
     "options.worker_options.n_workers=100 on 3 worker hosts (300 workers) is not allowed: a "
     "command starts at most 256 workers"),
    ("hosts: [s, a, b], worker_options: {n_workers: 129}",
     "options.worker_options.n_workers=129 on 2 worker hosts (258 workers) is not allowed"),
])
def test_ssh_threads_and_total_workers_beyond_the_limits_need_allow_large_exit_2(tmp_path,
                                                                                   options, key):
    """An SSH config's threads per worker have the local config's limit, and its
    ``worker_options.n_workers`` start on every worker host: their total is checked
    against the workers' limit (each host's count was)."""
    pytest.importorskip("asyncssh")
    known = tmp_path / "known_hosts"
    known.write_text("")
    path = tmp_path / "c.yaml"
    path.write_text(f"kind: ssh\noptions: {{{options}, connect_options: {{known_hosts: {known}}}}}\n")
    assert load_cluster_config(path, allow_large=True).kind == "ssh"
    _refused_exit_2(path, key, re.escape(key) + ".*--allow-large")


def test_threads_within_the_limits_are_taken(tmp_path):
    pytest.importorskip("asyncssh")
    known = tmp_path / "known_hosts"
    known.write_text("")
    path = tmp_path / "c.yaml"
    path.write_text("kind: local\noptions: {n_workers: 1, threads_per_worker: 256}\n")
    assert load_cluster_config(path).options["threads_per_worker"] == 256
    path.write_text(f"kind: ssh\noptions: {{hosts: [s, a, b], worker_options: {{n_workers: 128, "
                    f"nthreads: 256}}, connect_options: {{known_hosts: {known}}}}}\n")
    assert load_cluster_config(path).options["worker_options"]["n_workers"] == 128


def test_workers_flag_and_adapt_beyond_the_limit_exit_2():
    for args, key in ((("fit", "--workers", 100000), "--workers=100000"),
                      (("sweep", "quickstart", "--out", "x.zarr", "--adapt", "1:100000"),
                       "--adapt MAX=100000")):
        proc = run_main(*args)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and key in proc.stderr, proc
    proc = run_cli("fit", "--workers", 100000)  # a real process: exit 2, one line
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr


def test_dask_scheduler_address_is_honoured_after_the_flags(client2, tmp_path):
    """``DASK_SCHEDULER_ADDRESS`` (Dask's configuration, as ``Client()`` reads it) sends a
    command to that scheduler; a flag still wins; a bad address exits 2 naming it."""
    import json

    env = {**os.environ, "DASK_SCHEDULER_ADDRESS": client2.scheduler.address}
    fit = ("fit", "--d1", "20", "--d2", "10", "--rank", "2", "--n-iter", "1", "--quiet",
           "--json")
    proc = run_cli(*fit, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["n_workers"] == 2
    proc = run_cli(*fit, "--workers", "0", env=env)
    assert proc.returncode == 0 and json.loads(proc.stdout)["n_workers"] == 0
    proc = run_cli(*fit, env={**os.environ, "DASK_SCHEDULER_ADDRESS": "nowhere"})
    assert proc.returncode == 2 and "scheduler-address='nowhere'" in proc.stderr


def test_a_job_queues_default_dashboard_is_served_no_wider_than_its_scheduler(tmp_path):
    """dask-jobqueue gives its scheduler the dashboard ':8787' unless the config gives
    one: with a scheduler host named, that is every interface, refused as the same
    address given by hand; an SSH scheduler's default dashboard follows its host (kept).
    A top-level ``dashboard_address: null`` is dask-jobqueue's own default (kept)."""
    pytest.importorskip("dask_jobqueue")
    path = tmp_path / "c.yaml"
    path.write_text("kind: slurm\noptions:\n  cores: 1\n  memory: 1GiB\n"
                    "  scheduler_options: {host: 10.0.0.1}\n")
    with pytest.raises(ClusterConfigError, match=r"dashboard_address=':8787' would serve"):
        load_cluster_config(path)
    path.write_text("kind: slurm\noptions:\n  cores: 1\n  memory: 1GiB\n"
                    "  dashboard_address: null\n")
    assert load_cluster_config(path).kind == "slurm"
    pytest.importorskip("asyncssh")
    assert load_cluster_config(_ssh_config(tmp_path, "scheduler_options: {host: 10.0.0.1}")
                               ).kind == "ssh"


@pytest.mark.parametrize("kind", ["local", "ssh"])
def test_a_memory_limit_may_be_a_share_of_the_machines_memory(tmp_path, kind):
    """A float memory limit is distributed's share of the machine's memory: one in (0, 1]
    is taken (it was refused as 'has type float'), another refused in one line."""
    pytest.importorskip("asyncssh" if kind == "ssh" else "distributed")
    for share, taken in ((0.5, True), (1.0, True), (1.5, False), (-0.2, False)):
        if kind == "ssh":
            path = _ssh_config(tmp_path, f"worker_options: {{memory_limit: {share}}}")
        else:
            path = tmp_path / "c.yaml"
            path.write_text(f"kind: local\noptions: {{n_workers: 1, memory_limit: {share}}}\n")
        if taken:
            assert load_cluster_config(path).kind == kind
            continue
        with pytest.raises(ClusterConfigError, match=rf"memory_limit={share} is not allowed: "
                                                     r"a float is a share"):
            load_cluster_config(path)
