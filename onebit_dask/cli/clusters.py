"""Cluster configs (``cluster/*.yaml``) turned into Dask clusters.

A config is a YAML mapping::

    kind: local | ssh | slurm | pbs | kubernetes
    options: {...}            # keyword arguments of the cluster class (checked below)
    scale: 4                  # optional: workers (local, kubernetes) or jobs (slurm, pbs)
    adapt: {minimum: 1, maximum: 20}   # optional, instead of scale
    security:                 # optional TLS (distributed.Security); the scheduler is tls://
      temporary: false        # true: a self-signed certificate made on the fly
      ca_file: ca.pem
      cert: cert.pem
      key: key.pem
      require_encryption: true

:func:`load_cluster_config` checks the whole file and raises one error naming
the key (:class:`ClusterConfigError`): keys and types, for SLURM/PBS the memory
size, the walltime and worker flags dask-jobqueue sets itself, for SSH asyncssh's
connection options, the known-hosts file (host keys are always checked) and the keys its
worker class takes, and the workers' threads and counts and every port as a local
config's; a dashboard is served no wider than the scheduler's address a config names.
:func:`cluster_spec` shows what would be started (a job script, the operator's
cluster spec, keyword arguments) without starting anything; :func:`make_cluster`
starts it (a SLURM job is first offered to ``sbatch --test-only``) and raises
:class:`ClusterStartError`, one line saying what to do, when it does not start.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import signal
import ssl
import subprocess
import tempfile
from dataclasses import dataclass, field

from ..utils.warnings import ignored
from ..utils.yaml import YamlError, load_yaml
from ..utils.errors import ClusterConfigError, ClusterStartError
from ..utils.limits import check_threads, check_workers
from ..utils.signals import sigint_deferred

_SECURITY_KEYS = {"temporary": bool, "ca_file": str, "cert": str, "key": str,
                  "require_encryption": bool}
# dask-jobqueue options shared by SLURM and PBS, with their types
_JOBQUEUE = {"cores": int, "memory": str, "processes": int, "queue": str, "account": str,
             "walltime": str, "interface": str, "job_extra_directives": list,
             "job_script_prologue": list, "local_directory": str, "log_directory": str,
             "python": str, "name": str, "worker_extra_args": list,
             "death_timeout": (int, float), "scheduler_options": dict}
# walltimes the batch system accepts (checked against a real sbatch in
# tests/cli/test_clusters_slurm_ssh.py)
_WALLTIME = {"slurm": (re.compile(r"^(\d+(:\d+){0,2}|\d+-\d+(:\d+){0,2}|-1"
                                  r"|(?i:infinite|unlimited))$"),
                       "minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED"),
             "pbs": (re.compile(r"^\d+(:\d+){0,2}$"), "seconds, MM:SS or HH:MM:SS")}
# kind -> (allowed option keys with their types, required option keys)
_KINDS = {
    "local": ({"n_workers": int, "threads_per_worker": int, "processes": bool,
               "memory_limit": (str, int, float), "host": str, "dashboard_address": str,
               "scheduler_port": int, "local_directory": str}, ()),
    "ssh": ({"hosts": list, "connect_options": dict, "worker_options": dict,
             "scheduler_options": dict, "worker_class": str, "remote_python": (str, list)},
            ("hosts",)),
    "slurm": ({**_JOBQUEUE, "job_cpu": int, "job_mem": str}, ("cores", "memory")),
    "pbs": ({**_JOBQUEUE, "resource_spec": str}, ("cores", "memory")),
    "kubernetes": ({"name": str, "image": str, "n_workers": int, "resources": dict, "env": dict,
                    "namespace": str, "worker_command": str, "scheduler_service_type": str},
                   ("name", "image")),
}
# asyncssh connection options (SSHCluster's connect_options) whose types are checked here;
# the other asyncssh options are allowed unchecked
_SSH_CONNECT_TYPES = {"port": int, "known_hosts": (str, list), "client_keys": (str, list),
                      "username": str, "connect_timeout": (int, float, str),
                      "config": (str, list)}
# SSHCluster's worker_options: SSHCluster takes n_workers (on each worker host) and passes
# the other keys to its worker_class as keyword arguments (distributed.Nanny's, then
# Worker's and Server's: _ssh_worker_keys); a key the class does not take fails only in
# the remote worker's start (exit 1), so it is refused here. A worker_class other than
# distributed's Nanny or Worker (e.g. dask_cuda.CUDAWorker, perhaps not installed here) has
# its keys passed unchecked. These keys are checked with their types, and the ports of
# worker_options and scheduler_options (distributed.Scheduler's)
_SSH_WORKER_TYPES = {"n_workers": int, "nthreads": int, "memory_limit": (str, int, float)}
# names of other Dask APIs for a key of the SSH workers
_SSH_WORKER_ALIASES = {"threads_per_worker": "nthreads", "nworkers": "n_workers",
                       "nprocs": "n_workers", "processes": "n_workers", "worker_port": "port"}
# keyword arguments of the worker classes that a config does not give: the scheduler's
# address (given by SSHCluster), the security section's, and those Worker gives Server
_SSH_WORKER_NOT_OPTIONS = {"self", "scheduler_ip", "security", "worker_kwargs", "kwargs",
                           "handlers", "stream_handlers", "connection_args"}
_SSH_PORTS = {"worker_options": ("port", "worker_port", "scheduler_port"),
              "scheduler_options": ("port",)}
_TOP = {"kind": str, "options": dict, "scale": int, "adapt": dict, "security": dict,
        "allow_insecure": bool}
# keyword arguments of the cluster classes that are not options of a config: set by the
# package or by the config's top level (scale, adapt, security), or deprecated names of
# dask-jobqueue that it refuses
_NOT_OPTIONS = {"self", "scheduler", "loop", "start", "asynchronous", "security", "job_cls",
                "scheduler_cls", "config_name", "n_workers", "job_kwargs", "base_class_kwargs",
                "worker_kwargs", "extra", "job_extra", "env_extra", "header_skip", "project"}
# an option taken from a signature is checked as of its default's type
_DEFAULT_TYPES = {bool: bool, int: int, float: (int, float), str: str, list: list, dict: dict}
# LocalCluster's keyword arguments that set where its scheduler listens or what its
# processes run: a local config says that with options.host (checked: TLS beyond loopback,
# or allow_insecure) and its security section, not with these
_LOCAL_PROTECTED = {"ip", "interface", "protocol", "scheduler_kwargs", "service_kwargs",
                    "services", "worker_services", "worker_class", "blocked_handlers",
                    "worker_dashboard_address", "diagnostics_port"}


@dataclass(frozen=True)
class ClusterConfig:
    kind: str
    options: dict = field(default_factory=dict)
    scale: int | None = None
    adapt: dict | None = None
    security: dict | None = None
    path: str = "<config>"


def _suggest(key, allowed) -> str:
    close = difflib.get_close_matches(str(key), list(allowed), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_type(where: str, key: str, value, expected) -> None:
    if expected is object:
        return
    types = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool) and bool not in types:
        ok = False
    else:
        ok = isinstance(value, types)
    if not ok:
        names = " or ".join(t.__name__ for t in types)
        raise ClusterConfigError(f"{where}: {key}={value!r} has type {type(value).__name__}, "
                                 f"expected {names}")


def _check_keys(where: str, mapping: dict, allowed: dict, prefix: str = "",
                allowed_text: str | None = None) -> None:
    for key, value in mapping.items():
        if key not in allowed:
            listed = allowed_text or ", ".join(sorted(allowed))
            raise ClusterConfigError(f"{where}: unknown key '{prefix}{key}'"
                                     f"{_suggest(key, allowed)}; allowed: {listed}")
        _check_type(where, prefix + str(key), value, allowed[key])


def _check_jobqueue(where: str, kind: str, options: dict) -> None:
    for key in ("job_extra_directives", "job_script_prologue", "worker_extra_args"):
        if not all(isinstance(v, str) for v in options.get(key, [])):
            raise ClusterConfigError(f"{where}: options.{key}={options[key]!r} must be a list "
                                     "of strings")
    for key in ("memory", "job_mem"):
        if key in options:
            _check_size(where, f"options.{key}", options[key])
    # dask-jobqueue gives its scheduler the dashboard ":8787" unless told otherwise
    _check_scheduler_options(where, options.get("scheduler_options") or {},
                             default_dashboard=":8787")
    if options.get("dashboard_address") is not None:  # dask-jobqueue refuses it at start
        raise ClusterConfigError(
            f"{where}: options.dashboard_address={options['dashboard_address']!r} is not "
            f"taken by a {kind} cluster: give it as options.scheduler_options."
            "dashboard_address")
    pattern, forms = _WALLTIME[kind]
    if "walltime" in options and not pattern.match(options["walltime"]):
        raise ClusterConfigError(f"{where}: options.walltime={options['walltime']!r} is not a "
                                 f"{kind} walltime: give {forms}")
    # dask-jobqueue already passes --nthreads cores/processes (and --memory-limit)
    for flag in ("--nthreads", "--nworkers", "--memory-limit"):
        if any(arg == flag or arg.startswith(flag + "=")
               for arg in options.get("worker_extra_args", [])):
            raise ClusterConfigError(
                f"{where}: options.worker_extra_args repeats {flag}, which dask-jobqueue sets "
                "from options.cores, options.processes and options.memory: remove it there")


def _check_scheduler_options(where: str, scheduler: dict, default_dashboard=None) -> None:
    """The scheduler's ``port`` (an int, 1-65535 or 0 for a free one) and
    ``dashboard_address`` in an SSH or job-queue config's ``scheduler_options``, which
    the scheduler would refuse only while starting (``None``: the scheduler's default);
    ``default_dashboard``: the address the cluster gives the dashboard when the config
    gives none (dask-jobqueue's ``":8787"``)."""
    if "port" in scheduler:
        _check_type(where, "options.scheduler_options.port", scheduler["port"], int)
        _check_port(where, "options.scheduler_options.port", scheduler["port"])
    if scheduler.get("dashboard_address") is not None:
        _check_type(where, "options.scheduler_options.dashboard_address",
                    scheduler["dashboard_address"], (str, int))
        _check_dashboard_port(where, "options.scheduler_options.dashboard_address",
                              scheduler["dashboard_address"])
    _check_remote_dashboard(where, scheduler, default_dashboard)


def _check_remote_dashboard(where: str, scheduler: dict, default_dashboard=None) -> None:
    """A remote scheduler's dashboard (SSH, SLURM, PBS) served no wider than the scheduler.

    Without ``scheduler_options.host`` the scheduler listens on every interface of its
    host (the workers and, for SSH, the client reach it from elsewhere), and so may the
    dashboard (``":8787"``, dask-jobqueue's default): cluster/README.md says how to
    restrict it. With a ``host``, a dashboard address naming no host (``":8787"`` or a
    bare port: every interface) or another non-loopback host would open the
    unauthenticated dashboard where the config keeps the scheduler: refused, as for a
    local config (a scheduler on every interface, ``0.0.0.0`` or ``::``, cannot be
    outgrown). A dashboard the config does not give is ``default_dashboard``."""
    host = scheduler.get("host")
    dashboard = scheduler.get("dashboard_address", default_dashboard)
    if not isinstance(host, str) or not isinstance(dashboard, (str, int)) \
            or isinstance(dashboard, bool) or host.strip("[]") in ("0.0.0.0", "::"):
        return
    listen, _, port = str(dashboard).rpartition(":")
    if listen == "" or (not _is_loopback(listen) and listen.strip("[]") != host.strip("[]")):
        where_to = "on every interface" if listen == "" else f"on {listen!r}"
        raise ClusterConfigError(
            f"{where}: options.scheduler_options.dashboard_address={dashboard!r} would serve "
            f"the dashboard (no authentication) {where_to} of the scheduler's machine, beyond "
            f"its options.scheduler_options.host={host!r}: give '{host}:{port or 8787}' (or "
            "127.0.0.1:PORT and an SSH tunnel, see cluster/README.md)")


def _check_size(where: str, name: str, value) -> None:
    """A job queue's memory ``name=value`` must be a size dask can parse."""
    from dask.utils import parse_bytes

    try:
        parse_bytes(value)
    except (ValueError, TypeError):
        raise ClusterConfigError(f"{where}: {name}={value!r} is not a size: give a number "
                                 "with a unit, e.g. 16GiB or 16GB") from None


def _check_configured(where: str, name: str, key: str, value) -> None:
    """A job queue's ``cores`` or ``memory`` taken from Dask's configuration (``name``),
    checked as the config file's would be."""
    if key == "cores" and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ClusterConfigError(f"{where}: Dask's configuration {name}={value!r} is not "
                                 "allowed: cores must be an integer >= 1")
    if key == "memory":
        _check_size(where, f"Dask's configuration {name}", value)


def _ssh_connect_keys(where: str) -> set:
    try:
        import asyncssh
    except ImportError:
        raise ClusterConfigError(f"{where}: kind='ssh' needs asyncssh: pip install "
                                 "'onebit-dask[cluster]'") from None
    import inspect

    names = set(inspect.signature(asyncssh.SSHClientConnectionOptions.prepare).parameters)
    names |= set(inspect.signature(asyncssh.connect).parameters)
    return names - {"self", "loop", "last_config", "reload", "canonical", "final", "host",
                    "options", "kwargs", "sock"}


_NAME_KNOWN_HOSTS = ("give options.connect_options.known_hosts: a file listing each host's "
                     "key (ssh to each host once and compare the fingerprint, or "
                     "ssh-keyscan HOST >> FILE), or leave it out to use ~/.ssh/known_hosts")
# OpenSSH client options that turn host-key checking off, with the values that do
_UNCHECKED = {"userknownhostsfile": ("none", "/dev/null"), "globalknownhostsfile": ("none",),
              "stricthostkeychecking": ("no", "off")}


def _ssh_config_lines(path: str, depth: int = 0):
    """``(file, line number, keyword in lower case, first value)`` of an OpenSSH client
    config file and the files it includes (``Include``, relative to ``~/.ssh``)."""
    import glob

    if depth > 16:
        return
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines()
    for number, line in enumerate(lines, 1):
        words = re.split(r"[\s=]+", line.strip(), maxsplit=1)
        if not words[0] or words[0].startswith("#") or len(words) < 2:
            continue
        keyword, value = words[0].lower(), words[1].strip()
        if keyword == "include":
            for pattern in value.split():
                pattern = os.path.expanduser(pattern)
                if not os.path.isabs(pattern):
                    pattern = os.path.join(os.path.expanduser("~/.ssh"), pattern)
                for included in sorted(glob.glob(pattern)):
                    yield from _ssh_config_lines(included, depth + 1)
            continue
        yield path, number, keyword, value.split()[0].strip("\"'") if value else ""


def _check_ssh_host_keys(where: str, connect: dict, hosts: list) -> None:
    """Refuse every way a config turns SSH host-key checking off (after
    ``known_hosts: null``, refused by :func:`_check_ssh_connect`):
    OpenSSH config files (``connect_options.config``, else ``~/.ssh/config``) that say
    ``UserKnownHostsFile none`` or ``StrictHostKeyChecking no``; then ask asyncssh what
    it would check for each host (``known_hosts`` None means nothing)."""
    files = connect.get("config", ())
    files = [files] if isinstance(files, str) else list(files)
    if "config" not in connect and os.access(os.path.expanduser("~/.ssh/config"), os.R_OK):
        files = [os.path.expanduser("~/.ssh/config")]
    for file in files:
        path = os.path.expanduser(file) if isinstance(file, str) else file
        if not isinstance(path, str) or not os.path.isfile(path):
            raise ClusterConfigError(f"{where}: options.connect_options.config={file!r} is "
                                     "not a file: give OpenSSH client config files")
        for name, number, keyword, value in _ssh_config_lines(path):
            if value.lower() in _UNCHECKED.get(keyword, ()):
                raise ClusterConfigError(
                    f"{where}: the SSH config {name} (line {number}) turns host-key checking "
                    f"off ({keyword}={value}): remove that line, and {_NAME_KNOWN_HOSTS}")
    import asyncssh

    asked = {k: connect[k] for k in ("config", "known_hosts", "port", "username")
             if k in connect}
    for host in hosts:
        try:
            options = asyncssh.SSHClientConnectionOptions(host=host, **asked)
        except (OSError, ValueError, asyncssh.Error) as exc:
            raise ClusterConfigError(f"{where}: options.connect_options for host {host!r} "
                                     f"cannot be used ({exc})") from None
        if options.known_hosts is None:
            raise ClusterConfigError(f"{where}: the SSH configs turn host-key checking off "
                                     f"for host {host!r}: {_NAME_KNOWN_HOSTS}")


def _check_ssh_connect(where: str, connect: dict, hosts: list) -> None:
    if "known_hosts" in connect and connect["known_hosts"] is None:
        raise ClusterConfigError(
            f"{where}: options.connect_options.known_hosts=None turns SSH host-key checking "
            f"off: {_NAME_KNOWN_HOSTS}")
    allowed = _ssh_connect_keys(where)
    _check_keys(where, connect, {k: _SSH_CONNECT_TYPES.get(k, object) for k in allowed},
                prefix="options.connect_options.",
                allowed_text="the options of asyncssh.SSHClientConnectionOptions, e.g. port, "
                             "username, known_hosts, client_keys")
    _check_port(where, "options.connect_options.port", connect.get("port"), free=False)
    files = connect.get("known_hosts", [])
    for file in [files] if isinstance(files, str) else files:
        if not isinstance(file, str) or not os.path.isfile(os.path.expanduser(file)):
            raise ClusterConfigError(
                f"{where}: options.connect_options.known_hosts={file!r} is not a file: give a "
                "known-hosts file listing every host's key (leave the key out to use "
                "~/.ssh/known_hosts)")
    _check_ssh_host_keys(where, connect, hosts)


def _check_threads(where: str, name: str, threads) -> None:
    """Threads per worker ``name=threads`` (when given) must be >= 1."""
    if threads is not None and threads < 1:
        raise ClusterConfigError(f"{where}: {name}={threads} is not allowed: it must be >= 1")


def _check_port(where: str, name: str, port, free: bool = True) -> None:
    """A port ``name=port`` given as a number must be 1-65535, or 0 (a free one) where
    ``free``."""
    if not isinstance(port, int) or isinstance(port, bool):
        return
    if not (0 if free else 1) <= port <= 65535:
        raise ClusterConfigError(f"{where}: {name}={port} is not allowed: give a port 1-65535"
                                 + (", or 0 for a free one" if free else ""))


def _check_dashboard_port(where: str, name: str, address) -> None:
    """The port of a dashboard address ``name=address`` (``HOST:PORT``, ``:PORT`` or a
    port number) must be 1-65535, or 0 for a free one."""
    if isinstance(address, int) and not isinstance(address, bool):
        _check_port(where, name, address)
        return
    if not isinstance(address, str):
        return
    port = address.rpartition(":")[2]
    if not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise ClusterConfigError(f"{where}: {name}={address!r} is not allowed: give HOST:PORT "
                                 "with a port 1-65535, or 0 for a free one")


def _ssh_worker_keys(worker_class: str) -> set | None:
    """The keys an SSH config's ``worker_options`` may give for ``worker_class``:
    ``n_workers`` (SSHCluster's) and the keyword arguments of distributed's ``Nanny``
    (which passes the others on to ``Worker``) or ``Worker`` (which passes the others on
    to ``Server``), less :data:`_SSH_WORKER_NOT_OPTIONS`; ``None`` (unchecked) for
    another class."""
    import inspect

    from distributed import Nanny, Worker
    from distributed.core import Server

    classes = {"distributed.Nanny": (Nanny, Worker, Server),
               "distributed.nanny.Nanny": (Nanny, Worker, Server),
               "distributed.Worker": (Worker, Server),
               "distributed.worker.Worker": (Worker, Server)}
    if worker_class not in classes:
        return None
    names = {"n_workers"}
    for cls in classes[worker_class]:
        names |= set(inspect.signature(cls.__init__).parameters)
    return names - _SSH_WORKER_NOT_OPTIONS


def _check_ssh_worker_keys(where: str, options: dict) -> None:
    """Refuse a ``worker_options`` key the SSH workers' class does not take (it would fail
    only in each remote worker's start), naming the key it is probably meant to be."""
    workers = options.get("worker_options") or {}
    worker_class = options.get("worker_class", "distributed.Nanny")
    allowed = _ssh_worker_keys(worker_class)
    if allowed is None:
        return
    for key in workers:
        if key in allowed:
            continue
        if key == "security":
            raise ClusterConfigError(f"{where}: options.worker_options.security is not "
                                     "allowed: TLS is the config's 'security' section")
        meant = _SSH_WORKER_ALIASES.get(key)
        hint = f" (did you mean {meant!r}?)" if meant in allowed else _suggest(key, allowed)
        raise ClusterConfigError(
            f"{where}: unknown key 'options.worker_options.{key}'{hint}: the SSH workers "
            f"({worker_class}) do not take it; allowed: n_workers (on each worker host), "
            f"nthreads, memory_limit and the other keyword arguments of {worker_class}")


def _check_ssh_options(where: str, options: dict) -> None:
    """The SSH cluster's worker and scheduler options, checked as a local cluster's: the
    keys the workers' class takes, the types of :data:`_SSH_WORKER_TYPES`, threads per
    worker and the ports (the workers' count is checked with the other configs' counts)."""
    _check_ssh_worker_keys(where, options)
    workers = options.get("worker_options") or {}
    for key, expected in _SSH_WORKER_TYPES.items():
        if key in workers:
            _check_type(where, f"options.worker_options.{key}", workers[key], expected)
    _check_threads(where, "options.worker_options.nthreads", workers.get("nthreads"))
    _check_memory_limit(where, "options.worker_options.memory_limit", workers.get("memory_limit"))
    _check_scheduler_options(where, options.get("scheduler_options") or {})
    for section, keys in _SSH_PORTS.items():
        given = options.get(section) or {}
        for key in keys:
            _check_port(where, f"options.{section}.{key}", given.get(key))
        if "dashboard_address" in given:
            _check_dashboard_port(where, f"options.{section}.dashboard_address",
                                  given["dashboard_address"])


def _check_memory_limit(where: str, name: str, memory) -> None:
    """A worker's memory limit ``name=memory`` (when given): bytes >= 0, a size dask can
    parse, 'auto', or a float in (0, 1]: that share of the machine's memory."""
    if isinstance(memory, float) and not 0 < memory <= 1:
        raise ClusterConfigError(f"{where}: {name}={memory} is not allowed: a float is a "
                                 "share of the machine's memory: give one in (0, 1], or bytes, "
                                 "a size such as '4GiB', or 'auto'")
    if isinstance(memory, int) and not isinstance(memory, bool) and memory < 0:
        raise ClusterConfigError(f"{where}: {name}={memory} is not allowed: "
                                 "give bytes >= 0 (0: no limit), a size such as '4GiB', or "
                                 "'auto'")
    if isinstance(memory, str) and memory != "auto":
        from dask.utils import parse_bytes

        try:
            size = parse_bytes(memory)
        except ValueError:
            raise ClusterConfigError(f"{where}: {name}={memory!r} is not a "
                                     "size: give bytes, a size such as '4GiB', or 'auto'") \
                from None
        if size < 0:
            raise ClusterConfigError(f"{where}: {name}={memory!r} is not allowed: "
                                     "give a size >= 0 (0: no limit), such as '4GiB', or 'auto'")


def _check_local(where: str, options: dict) -> None:
    """The local cluster's options that LocalCluster would take and fail on only while
    starting (or never): threads per worker, the memory limit, the ports."""
    _check_threads(where, "options.threads_per_worker", options.get("threads_per_worker"))
    _check_memory_limit(where, "options.memory_limit", options.get("memory_limit"))
    _check_port(where, "options.scheduler_port", options.get("scheduler_port"))
    dashboard = options.get("dashboard_address")
    host = options.get("host", "127.0.0.1")
    if dashboard is not None:
        _check_dashboard_port(where, "options.dashboard_address", dashboard)
        listen, _, port = dashboard.rpartition(":")
        if listen == "":
            raise ClusterConfigError(f"{where}: options.dashboard_address={dashboard!r} names no "
                                     "host, so the dashboard would listen on every interface: "
                                     f"give HOST:PORT, e.g. '{host}:{port or 8787}'")
        if not _is_loopback(listen) and listen.strip("[]") != host.strip("[]"):
            raise ClusterConfigError(
                f"{where}: options.dashboard_address={dashboard!r} would serve the dashboard "
                f"(no authentication) on {listen!r}, beyond this machine and not on the "
                f"cluster's host {host!r}: give '{host}:{port or 8787}'")


def _check_worker_counts(where: str, data: dict, options: dict, allow_large: bool) -> None:
    """The workers (or jobs) a config starts against
    :data:`~onebit_dask.utils.limits.MAX_WORKERS` (an SSH config's ``n_workers`` start on
    each worker host: their total), and the threads of each worker against
    :data:`~onebit_dask.utils.limits.MAX_THREADS_PER_WORKER`, unless ``allow_large``."""
    counts = {f"options.{k}": (options[k], 1) for k in ("n_workers",) if k in options}
    workers = options.get("worker_options")
    if isinstance(workers, dict) and "n_workers" in workers:  # an SSH config's, each worker host's
        hosts = options.get("hosts")
        counts["options.worker_options.n_workers"] = (
            workers["n_workers"], max(1, len(hosts) - 1) if isinstance(hosts, list) else 1)
    if "scale" in data:
        counts["scale"] = (data["scale"], 1)
    if data.get("adapt"):
        counts["adapt.maximum"] = (data["adapt"].get("maximum", 1), 1)
    threads = {f"options.{k}": options[k] for k in ("threads_per_worker",) if k in options}
    if isinstance(workers, dict) and "nthreads" in workers:  # an SSH config's
        threads["options.worker_options.nthreads"] = workers["nthreads"]
    try:
        for name, (value, hosts) in counts.items():
            check_workers(name, value, allow_large, hosts=hosts)
        for name, value in threads.items():
            check_threads(name, value, allow_large)
    except ValueError as exc:
        raise ClusterConfigError(f"{where}: {exc}") from None


def parse_cluster_config(data, where: str = "<config>", *,
                         allow_large: bool = False) -> ClusterConfig:
    """Check a config mapping (already parsed from YAML); ``allow_large``: allow more than
    :data:`~onebit_dask.utils.limits.MAX_WORKERS` workers or jobs, and more than
    :data:`~onebit_dask.utils.limits.MAX_THREADS_PER_WORKER` threads a worker."""
    if not isinstance(data, dict):
        raise ClusterConfigError(f"{where}: a cluster config is a mapping with a 'kind' key")
    if "kind" not in data:
        raise ClusterConfigError(f"{where}: missing key 'kind' (one of {', '.join(_KINDS)})")
    _check_keys(where, data, _TOP)
    kind = data["kind"]
    if kind not in _KINDS:
        raise ClusterConfigError(f"{where}: kind={kind!r} is unknown{_suggest(kind, _KINDS)}; "
                                 f"allowed: {', '.join(_KINDS)}")
    typed, required = _KINDS[kind]
    allowed = {**_class_options(kind), **typed}
    options = data.get("options") or {}
    if kind == "local":
        for key in sorted(_LOCAL_PROTECTED & set(options)):
            raise ClusterConfigError(
                f"{where}: options.{key} is not allowed in a local config: it sets where the "
                "scheduler listens or what the workers run, which options.host (checked: TLS "
                "beyond this machine) and the 'security' section decide")
    _check_keys(where, options, allowed, prefix="options.")
    for key in required:
        if key in options:
            continue
        configured = _jobqueue_default(kind, key)
        if configured is None:
            also = (f"; or set jobqueue.{kind}.{key} in Dask's configuration (jobqueue.yaml)"
                    if kind in ("slurm", "pbs") else "")
            raise ClusterConfigError(f"{where}: missing key 'options.{key}' (required for "
                                     f"kind={kind!r}{also})")
        _check_configured(where, f"jobqueue.{kind}.{key}", key, configured)
    if kind == "ssh" and (len(options["hosts"]) < 2
                          or not all(isinstance(h, str) for h in options["hosts"])):
        raise ClusterConfigError(f"{where}: options.hosts must list the scheduler host, then "
                                 "at least one worker host")
    if kind in ("slurm", "pbs"):
        _check_jobqueue(where, kind, options)
    if kind == "local":
        _check_local(where, options)
    if kind == "ssh":
        _check_ssh_options(where, options)
        _check_ssh_connect(where, options.get("connect_options", {}), options["hosts"])
    counts = {f"options.{k}": options.get(k) for k in ("n_workers", "processes", "cores")}
    if kind == "ssh":
        counts["options.worker_options.n_workers"] = \
            (options.get("worker_options") or {}).get("n_workers")
    for name, value in counts.items():
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise ClusterConfigError(f"{where}: {name}={value} is not allowed: it must "
                                     "be >= 1 (a cluster without workers would wait forever)")
    if "scale" in data and data["scale"] < 1:
        raise ClusterConfigError(f"{where}: scale={data['scale']} is not allowed: it must be "
                                 ">= 1 (a cluster without workers would wait forever)")
    adapt = data.get("adapt")
    if adapt is not None:
        _check_keys(where, adapt, {"minimum": int, "maximum": int}, prefix="adapt.")
        if "scale" in data:
            raise ClusterConfigError(f"{where}: give either 'scale' or 'adapt', not both")
        low, high = adapt.get("minimum", 0), adapt.get("maximum", 1)
        if high < 1 or low < 0 or low > high:
            raise ClusterConfigError(f"{where}: adapt={adapt} is not allowed: it needs "
                                     "0 <= minimum <= maximum and maximum >= 1")
    _check_worker_counts(where, data, options, allow_large)
    security = data.get("security")
    if security is not None:
        _check_keys(where, security, _SECURITY_KEYS, prefix="security.")
        if not security.get("temporary") and not {"ca_file", "cert", "key"} <= set(security):
            raise ClusterConfigError(f"{where}: security needs 'temporary: true' or all of "
                                     "'ca_file', 'cert' and 'key'")
    _check_exposure(where, kind, options, security, data.get("allow_insecure", False))
    return ClusterConfig(kind, dict(options), data.get("scale"), adapt, security, where)


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: reachable from elsewhere


def _check_exposure(where, kind, options, security, allow_insecure) -> None:
    """A local cluster whose scheduler listens beyond this machine needs TLS (anyone who
    reaches an unauthenticated scheduler runs code in its workers), or
    ``allow_insecure: true``, which applies to that case only."""
    host = options.get("host", "127.0.0.1") if kind == "local" else None
    exposed = host is not None and not _is_loopback(host) and not security
    if exposed and not allow_insecure:
        raise ClusterConfigError(
            f"{where}: options.host={host!r} without TLS opens an unauthenticated scheduler "
            "(anyone who reaches it runs code in the workers) beyond this machine: use host "
            "127.0.0.1, or add a 'security' section (see cluster/local-tls.yaml), or set "
            "'allow_insecure: true' on a network you trust")
    if allow_insecure and not exposed:
        raise ClusterConfigError(f"{where}: allow_insecure applies only to a local cluster on "
                                 "a non-loopback host without TLS: remove it")


def load_cluster_config(path, *, allow_large: bool = False) -> ClusterConfig:
    """Read and check a cluster config file (see :func:`parse_cluster_config`)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ClusterConfigError(f"cluster config {path!r} does not exist: give a config "
                                 "file or the name of a shipped one (onebit-dask list shows "
                                 "them)")
    try:
        data = load_yaml(path, nulls=True)  # known_hosts: null gets its own message below
    except YamlError as exc:
        raise ClusterConfigError(str(exc)) from None
    return parse_cluster_config(data, path, allow_large=allow_large)


def check_pem(ca_file: str, cert: str, key: str, names=("ca_file", "cert", "key")) -> None:
    """Load the CA and the certificate/key pair as the TLS connection will (``ValueError``
    naming the file that does not load)."""
    files = dict(zip(names, (ca_file, cert, key)))
    for name, file in files.items():
        if not file or not os.path.isfile(file):
            raise ValueError(f"{name}={file!r} does not exist: TLS needs a CA file, a "
                             "certificate and its key (PEM)")
    try:
        ssl.create_default_context(cafile=ca_file)
    except (ssl.SSLError, ValueError) as exc:
        raise ValueError(f"{names[0]}={ca_file!r} is not a PEM CA certificate "
                         f"({getattr(exc, 'reason', None) or exc})") from None
    try:
        ssl.create_default_context().load_cert_chain(cert, key)
    except (ssl.SSLError, ValueError) as exc:
        raise ValueError(f"{names[1]}={cert!r} and {names[2]}={key!r} are not a PEM certificate "
                         f"and its private key ({getattr(exc, 'reason', None) or exc})") from None


def check_runnable(config: ClusterConfig) -> None:
    """What a config needs of this machine, checked before anything starts (after
    :func:`load_cluster_config`, which checks the file as written): the network
    ``interface`` a SLURM/PBS scheduler listens on, and the TLS files, loaded as the
    connection will load them. Raises :class:`ClusterConfigError` naming the key."""
    where, opts = config.path, config.options
    interface = opts.get("interface")
    if config.kind in ("slurm", "pbs") and interface is not None:
        import psutil

        here = sorted(psutil.net_if_addrs())
        if interface not in here:
            raise ClusterConfigError(f"{where}: options.interface={interface!r} is not a network "
                                     f"interface of this machine (it has {', '.join(here)}): "
                                     "the scheduler listens on it here")
    security = config.security
    if security and not security.get("temporary"):
        files = [os.path.expanduser(security[k]) for k in ("ca_file", "cert", "key")]
        try:
            check_pem(*files, names=("security.ca_file", "security.cert", "security.key"))
        except ValueError as exc:
            raise ClusterConfigError(f"{where}: {exc}") from None


def make_security(security: dict | None):
    """A ``distributed.Security`` from the ``security`` section, or ``None``."""
    if not security:
        return None
    from distributed import Security

    if security.get("temporary"):
        return Security.temporary()
    files = {key: os.path.expanduser(security[key]) for key in ("ca_file", "cert", "key")}
    return Security(tls_ca_file=files["ca_file"],
                    tls_client_cert=files["cert"], tls_client_key=files["key"],
                    tls_scheduler_cert=files["cert"], tls_scheduler_key=files["key"],
                    tls_worker_cert=files["cert"], tls_worker_key=files["key"],
                    require_encryption=security.get("require_encryption", True))


def _dask_jobqueue():
    """``dask_jobqueue``, imported with this process's SIGINT handler kept.

    Importing it runs ``dask_jobqueue.runner``, which replaces the handler with one that
    calls ``sys.exit()``: a Ctrl-C would then end a command with exit status 0, past the
    command's own handling (locks, temporaries, exit status 130). The handler is put back
    after the import (in the main thread: Python sets handlers there only).
    """
    import threading

    main = threading.current_thread() is threading.main_thread()
    handler = signal.getsignal(signal.SIGINT) if main else None
    import dask_jobqueue

    if main and handler is not None:
        signal.signal(signal.SIGINT, handler)
    return dask_jobqueue


def _class_options(kind: str) -> dict:
    """``{key: type}``: the keyword arguments the cluster class of ``kind`` takes, from its
    signature (and, for dask-jobqueue, its job classes'), less :data:`_NOT_OPTIONS` (and
    :data:`_LOCAL_PROTECTED`, refused by name); each typed by its default where that is a
    bool, number, string, list or mapping, else unchecked. Empty where the library is not
    installed (the typed keys of :data:`_KINDS` are then all there is)."""
    import inspect

    try:
        if kind in ("slurm", "pbs"):
            jobqueue = _dask_jobqueue()
            cls = _jobqueue_class(kind)
            takers = [cls.__init__, cls.job_cls.__init__, jobqueue.core.Job.__init__]
        elif kind == "local":
            from distributed import LocalCluster

            takers = [LocalCluster.__init__]
        else:
            return {}
    except ImportError:
        return {}
    found = {}
    for taker in takers:
        for name, parameter in inspect.signature(taker).parameters.items():
            if name in _NOT_OPTIONS or name in _LOCAL_PROTECTED or name in found:
                continue
            found[name] = _DEFAULT_TYPES.get(type(parameter.default), object)
    return found


def _jobqueue_default(kind: str, key: str):
    """dask-jobqueue's value of ``key`` for ``kind`` from Dask's configuration
    (``jobqueue.<kind>.<key>``, e.g. from ``jobqueue.yaml``), or ``None``."""
    if kind not in ("slurm", "pbs"):
        return None
    import dask

    return dask.config.get(f"jobqueue.{kind}.{key}", None)


def _jobqueue_class(kind):
    jobqueue = _dask_jobqueue()
    return jobqueue.SLURMCluster if kind == "slurm" else jobqueue.PBSCluster


def cluster_spec(config: ClusterConfig):
    """What :func:`make_cluster` would start, without starting anything.

    ``slurm``/``pbs``: the job script (``dask_jobqueue``); ``kubernetes``: the
    operator's cluster spec (``dask_kubernetes.operator.make_cluster_spec``);
    ``local``/``ssh``: the checked keyword arguments of the cluster class.
    """
    if config.kind in ("slurm", "pbs"):
        job_cls = _jobqueue_class(config.kind).job_cls
        opts = {k: v for k, v in config.options.items() if k != "scheduler_options"}
        return job_cls(scheduler="tcp://scheduler:8786", **opts).job_script()
    if config.kind == "kubernetes":
        from dask_kubernetes.operator import make_cluster_spec

        opts = {k: v for k, v in config.options.items() if k != "namespace"}
        return make_cluster_spec(**opts)
    import inspect

    if config.kind == "ssh":
        from distributed import SSHCluster as cls
    else:
        from distributed import LocalCluster as cls
    inspect.signature(cls).bind(**config.options)
    return dict(config.options)


def check_slurm_job(config: ClusterConfig) -> None:
    """Ask SLURM whether it would take the config's job (``sbatch --test-only``).

    A job SLURM refuses (unknown partition or account, a walltime or memory beyond the
    partition's limits) otherwise leaves the scheduler waiting for workers that never
    come; this raises :class:`ClusterStartError` with sbatch's reason instead.
    """
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise ClusterStartError(f"{config.path}: sbatch is not on PATH: start a SLURM config "
                                "on a machine that submits jobs (a login node)")
    with tempfile.NamedTemporaryFile("w", suffix=".sh", prefix="onebit-dask-") as script:
        script.write(cluster_spec(config))
        script.flush()
        proc = subprocess.run([sbatch, "--test-only", script.name], capture_output=True,
                              text=True, timeout=120)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"]
        raise ClusterStartError(f"{config.path}: SLURM refuses the job this config submits "
                                f"({lines[-1]}): fix the options it names (sinfo and "
                                "scontrol show partition list what the cluster offers)")


def _start_failure(config: ClusterConfig, exc: BaseException) -> str:
    chain = exc
    while chain is not None:
        if type(chain).__name__ == "HostKeyNotVerifiable":
            known = config.options.get("connect_options", {}).get("known_hosts",
                                                                  "~/.ssh/known_hosts")
            return (f"{config.path}: SSH refused a host whose key is not in {known} "
                    f"({chain}): add each host's key there (ssh to it once and compare "
                    "the fingerprint, or ssh-keyscan), or point "
                    "options.connect_options.known_hosts at a file that lists it")
        chain = chain.__cause__ or chain.__context__
    text = str(exc).strip()
    detail = f"{type(exc).__name__}{': ' + text.splitlines()[0] if text else ''}"
    return f"{config.path}: the {config.kind} cluster did not start ({detail})"


def local_cluster(options: dict, silence_logs=None, **extra):
    """A ``LocalCluster`` of ``options`` with the package's defaults: on 127.0.0.1, one
    thread a worker, the dashboard on a free port of its host. ``silence_logs`` as in
    :func:`make_cluster`; ``extra`` (TLS) goes to LocalCluster as it is.

    The cluster starts with SIGINT held back
    (:func:`~onebit_dask.utils.signals.sigint_deferred`): its event loop's thread
    inherits the mask, and so do the worker processes it spawns, now and when it
    restarts one. A Ctrl-C at the terminal then stops this process, which stops the
    workers, instead of each worker printing a ``KeyboardInterrupt`` traceback.
    :mod:`multiprocessing`'s resource tracker is started before, as starting it unblocks
    SIGINT in the thread that starts it."""
    from multiprocessing import resource_tracker

    from distributed import LocalCluster

    opts = {"host": "127.0.0.1", "threads_per_worker": 1, **options}
    opts.setdefault("dashboard_address", f"{opts['host']}:0")  # a free port
    if silence_logs is not None:
        opts["silence_logs"] = silence_logs
    resource_tracker.ensure_running()
    with sigint_deferred():
        return LocalCluster(**opts, **extra)


def _start(config: ClusterConfig, silence_logs=None):
    security = make_security(config.security)
    extra = {"security": security, "protocol": "tls://"} if security else {}
    opts = dict(config.options)
    if config.kind == "local":
        return local_cluster(opts, silence_logs, **extra)
    if config.kind == "ssh":
        from distributed import SSHCluster

        return SSHCluster(**opts, **({"security": security} if security else {}))
    if config.kind in ("slurm", "pbs"):
        if config.kind == "slurm":
            check_slurm_job(config)
        return _jobqueue_class(config.kind)(**opts, **extra)
    from dask_kubernetes.operator import KubeCluster

    return KubeCluster(**opts)


def make_cluster(config: ClusterConfig, adapt_range=None, silence_logs=None):
    """Start the cluster of a config, scaled or adaptive as it says.

    ``adapt_range=(minimum, maximum)`` (the CLI's ``--adapt``) makes it adaptive
    instead of the config's ``scale``/``adapt``: no job is submitted for the
    config's ``scale`` first. ``silence_logs``: the level below which a local
    cluster's workers drop their log records (LocalCluster's ``silence_logs``; ``None``
    leaves its default, WARNING).

    The config comes from :func:`load_cluster_config` (or :func:`parse_cluster_config`);
    what it needs of this machine is checked first (:func:`check_runnable`).

    Raises :class:`ClusterConfigError` for a missing TLS file and
    :class:`ClusterStartError` (one line: what failed, what to do) when the
    cluster does not start: SLURM refuses the job, an SSH host key is not known,
    a cluster class fails.
    """
    import logging

    check_runnable(config)
    spec_log = logging.getLogger("distributed.deploy.spec")
    level = spec_log.level
    spec_log.setLevel(logging.ERROR)  # "Cluster closed without starting up": said below
    try:
        # a dashboard port in use: another port is taken, and the CLI's "dask dashboard:"
        # line gives it (4 lines of warning otherwise)
        with ignored(dict(message=r"\s*Port \d+ is already in use", category=UserWarning)):
            cluster = _start(config, silence_logs)
    except (ClusterConfigError, ClusterStartError):
        raise
    except Exception as exc:
        raise ClusterStartError(_start_failure(config, exc)) from exc
    finally:
        spec_log.setLevel(level)
    if adapt_range is not None:
        adapt(cluster, *adapt_range)
    elif config.adapt is not None:
        adapt(cluster, config.adapt.get("minimum", 0), config.adapt.get("maximum", 1))
    elif config.scale is not None:
        cluster.scale(config.scale)
    return cluster


def adapt(cluster, minimum: int, maximum: int):
    """Make ``cluster`` adaptive between ``minimum`` and ``maximum``: jobs for a
    dask-jobqueue cluster (``minimum_jobs``/``maximum_jobs``: a job may hold several
    worker processes), workers otherwise. Returns the ``Adaptive`` object."""
    try:
        job_queue_cluster = _dask_jobqueue().JobQueueCluster
    except ImportError:  # pragma: no cover - dask-jobqueue is a dependency
        job_queue_cluster = ()
    if isinstance(cluster, job_queue_cluster):
        return cluster.adapt(minimum_jobs=minimum, maximum_jobs=maximum)
    return cluster.adapt(minimum=minimum, maximum=maximum)
