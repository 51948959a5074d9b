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
the key; :func:`cluster_spec` shows what would be started (a job script, the
operator's cluster spec, keyword arguments) without starting anything;
:func:`make_cluster` starts it.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field

import yaml

_SECURITY_KEYS = {"temporary": bool, "ca_file": str, "cert": str, "key": str,
                  "require_encryption": bool}
_JOBQUEUE = ["cores", "memory", "processes", "queue", "account", "walltime", "interface",
             "job_extra_directives", "job_script_prologue", "local_directory", "log_directory",
             "python", "name", "worker_extra_args", "death_timeout", "scheduler_options"]
# kind -> (allowed option keys with their types, required option keys)
_KINDS = {
    "local": ({"n_workers": int, "threads_per_worker": int, "processes": bool,
               "memory_limit": (str, int), "host": str, "dashboard_address": str,
               "scheduler_port": int, "local_directory": str}, ()),
    "ssh": ({"hosts": list, "connect_options": dict, "worker_options": dict,
             "scheduler_options": dict, "worker_class": str, "remote_python": (str, list)},
            ("hosts",)),
    "slurm": ({**{k: object for k in _JOBQUEUE}, "cores": int, "memory": str, "processes": int,
               "walltime": str, "job_cpu": int, "job_mem": str}, ("cores", "memory")),
    "pbs": ({**{k: object for k in _JOBQUEUE}, "cores": int, "memory": str, "processes": int,
             "walltime": str, "resource_spec": str}, ("cores", "memory")),
    "kubernetes": ({"name": str, "image": str, "n_workers": int, "resources": dict, "env": dict,
                    "namespace": str, "worker_command": str, "scheduler_service_type": str},
                   ("name", "image")),
}
_TOP = {"kind": str, "options": dict, "scale": int, "adapt": dict, "security": dict}


class ClusterConfigError(ValueError):
    """A cluster config that cannot be used; the message names the key."""


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


def _check_keys(where: str, mapping: dict, allowed: dict, prefix: str = "") -> None:
    for key, value in mapping.items():
        if key not in allowed:
            raise ClusterConfigError(f"{where}: unknown key '{prefix}{key}'{_suggest(key, allowed)};"
                                     f" allowed: {', '.join(sorted(allowed))}")
        _check_type(where, prefix + str(key), value, allowed[key])


def parse_cluster_config(data, where: str = "<config>") -> ClusterConfig:
    """Check a config mapping (already parsed from YAML)."""
    if not isinstance(data, dict):
        raise ClusterConfigError(f"{where}: a cluster config is a mapping with a 'kind' key")
    if "kind" not in data:
        raise ClusterConfigError(f"{where}: missing key 'kind' (one of {', '.join(_KINDS)})")
    _check_keys(where, data, _TOP)
    kind = data["kind"]
    if kind not in _KINDS:
        raise ClusterConfigError(f"{where}: kind={kind!r} is unknown{_suggest(kind, _KINDS)}; "
                                 f"allowed: {', '.join(_KINDS)}")
    allowed, required = _KINDS[kind]
    options = data.get("options") or {}
    _check_keys(where, options, allowed, prefix="options.")
    for key in required:
        if key not in options:
            raise ClusterConfigError(f"{where}: missing key 'options.{key}' (required for "
                                     f"kind={kind!r})")
    if kind == "ssh" and (len(options["hosts"]) < 2
                          or not all(isinstance(h, str) for h in options["hosts"])):
        raise ClusterConfigError(f"{where}: options.hosts must list the scheduler host, then "
                                 "at least one worker host")
    if "scale" in data and data["scale"] < 0:
        raise ClusterConfigError(f"{where}: scale={data['scale']} must be >= 0")
    adapt = data.get("adapt")
    if adapt is not None:
        _check_keys(where, adapt, {"minimum": int, "maximum": int}, prefix="adapt.")
        if "scale" in data:
            raise ClusterConfigError(f"{where}: give either 'scale' or 'adapt', not both")
    security = data.get("security")
    if security is not None:
        _check_keys(where, security, _SECURITY_KEYS, prefix="security.")
        if not security.get("temporary") and not {"ca_file", "cert", "key"} <= set(security):
            raise ClusterConfigError(f"{where}: security needs 'temporary: true' or all of "
                                     "'ca_file', 'cert' and 'key'")
    return ClusterConfig(kind, dict(options), data.get("scale"), adapt, security, where)


def load_cluster_config(path) -> ClusterConfig:
    """Read and check a cluster config file."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ClusterConfigError(f"cluster config {path!r} does not exist (see cluster/README.md)")
    with open(path) as fh:
        try:
            data = yaml.safe_load(fh)
        except yaml.YAMLError as exc:
            raise ClusterConfigError(f"{path}: not valid YAML: {exc}".splitlines()[0]) from None
    return parse_cluster_config(data, path)


def make_security(security: dict | None):
    """A ``distributed.Security`` from the ``security`` section, or ``None``."""
    if not security:
        return None
    from distributed import Security

    if security.get("temporary"):
        return Security.temporary()
    files = {key: os.path.expanduser(security[key]) for key in ("ca_file", "cert", "key")}
    for key, file in files.items():
        if not os.path.isfile(file):
            raise ClusterConfigError(f"security.{key}={file!r} does not exist")
    return Security(tls_ca_file=files["ca_file"],
                    tls_client_cert=files["cert"], tls_client_key=files["key"],
                    tls_scheduler_cert=files["cert"], tls_scheduler_key=files["key"],
                    tls_worker_cert=files["cert"], tls_worker_key=files["key"],
                    require_encryption=security.get("require_encryption", True))


def _jobqueue_class(kind):
    if kind == "slurm":
        from dask_jobqueue import SLURMCluster as cls
    else:
        from dask_jobqueue import PBSCluster as cls
    return cls


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


def make_cluster(config: ClusterConfig):
    """Start the cluster of a config, scaled or adaptive as it says."""
    security = make_security(config.security)
    extra = {"security": security, "protocol": "tls://"} if security else {}
    opts = dict(config.options)
    if config.kind == "local":
        from distributed import LocalCluster

        opts.setdefault("host", "127.0.0.1")
        opts.setdefault("threads_per_worker", 1)
        cluster = LocalCluster(**opts, **extra)
    elif config.kind == "ssh":
        from distributed import SSHCluster

        cluster = SSHCluster(**opts, **({"security": security} if security else {}))
    elif config.kind in ("slurm", "pbs"):
        cluster = _jobqueue_class(config.kind)(**opts, **extra)
    else:
        from dask_kubernetes.operator import KubeCluster

        cluster = KubeCluster(**opts)
    if config.adapt is not None:
        adapt(cluster, config.adapt.get("minimum", 0), config.adapt.get("maximum", 1))
    elif config.scale is not None:
        cluster.scale(config.scale)
    return cluster


def adapt(cluster, minimum: int, maximum: int):
    """Make ``cluster`` adaptive between ``minimum`` and ``maximum``: jobs for a
    dask-jobqueue cluster (``minimum_jobs``/``maximum_jobs``: a job may hold several
    worker processes), workers otherwise. Returns the ``Adaptive`` object."""
    try:
        from dask_jobqueue import JobQueueCluster
    except ImportError:  # pragma: no cover - dask-jobqueue is a dependency
        JobQueueCluster = ()
    if isinstance(cluster, JobQueueCluster):
        return cluster.adapt(minimum_jobs=minimum, maximum_jobs=maximum)
    return cluster.adapt(minimum=minimum, maximum=maximum)
