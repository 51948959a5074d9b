"""Where the work runs: in this process, an embedded LocalCluster, a scheduler address,
or a cluster config; shared by the ``fit`` and ``sweep`` commands.

:func:`check_target` checks everything that can be checked before anything starts
(bad input: ``ValueError``); :func:`open_client` raises :class:`RunError` with one
line for what fails once it starts (a cluster that does not start, an unreachable
scheduler, no worker joining).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import ssl

from ._validation import check_int
from .failures import RunError

log = logging.getLogger(__name__)
ADDRESS = re.compile(r"^(tcp|tls)://[^\s:/]+:\d+$")


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


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


def _check_cluster_config(path: str) -> None:
    from .cluster import ClusterConfigError, load_cluster_config

    config = load_cluster_config(path)
    where = config.path
    opts = config.options
    for key in ("n_workers", "processes", "cores"):
        value = opts.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise ClusterConfigError(f"{where}: options.{key}={value} is not allowed: it must "
                                     "be >= 1 (a cluster without workers would wait forever)")
    if config.scale is not None and config.scale < 1:
        raise ClusterConfigError(f"{where}: scale={config.scale} is not allowed: it must be >= 1 "
                                 "(a cluster without workers would wait forever)")
    if config.adapt is not None:
        low, high = config.adapt.get("minimum", 0), config.adapt.get("maximum", 1)
        if high < 1 or low < 0 or low > high:
            raise ClusterConfigError(f"{where}: adapt={config.adapt} is not allowed: it needs "
                                     "0 <= minimum <= maximum and maximum >= 1")
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


def check_target(workers=None, scheduler=None, cluster=None, tls=None) -> None:
    """Check the choice of cluster before anything starts."""
    if sum(x is not None for x in (workers, scheduler, cluster)) > 1:
        raise ValueError("give at most one of --workers, --scheduler and --cluster")
    if workers is not None:
        check_int("workers", workers, low=0)
    if scheduler is not None and not ADDRESS.match(scheduler):
        raise ValueError(f"scheduler={scheduler!r} is not allowed: give an address like "
                         "tcp://HOST:PORT or tls://HOST:PORT")
    if tls:
        check_pem(tls.get("ca_file"), tls.get("cert"), tls.get("key"),
                  names=("--tls-ca-file", "--tls-cert", "--tls-key"))
        if scheduler is None or not scheduler.startswith("tls://"):
            raise ValueError(f"--tls-ca-file, --tls-cert and --tls-key apply to a tls:// "
                             f"scheduler only, not to scheduler={scheduler!r}")
    elif scheduler is not None and scheduler.startswith("tls://"):
        raise ValueError(f"scheduler={scheduler!r} uses TLS: pass --tls-ca-file, --tls-cert "
                         "and --tls-key")
    if cluster is not None:
        _check_cluster_config(cluster)


def _connect(scheduler, tls, timeout):
    from distributed import Client

    security = None
    if tls:
        from .cluster import make_security

        security = make_security({**tls, "require_encryption": True})
    try:
        return Client(scheduler, timeout=timeout, security=security)
    except ssl.SSLError as exc:
        raise RunError(f"the TLS handshake with the scheduler at {scheduler} failed "
                       f"({exc.reason or exc}): check that --tls-ca-file signed the "
                       "scheduler's certificate and that the scheduler uses TLS") from None
    except (OSError, TimeoutError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else ""
        raise RunError(f"could not reach the scheduler at {scheduler} within {timeout:g} s "
                       f"({type(exc).__name__}{': ' + detail if detail else ''}): check the "
                       "address and that the scheduler runs, or raise --connect-timeout"
                       ) from None


def _start_cluster(cluster, workers, debug, adapt=None):
    """The cluster of a config or the embedded LocalCluster; with ``adapt=(min, max)``
    adaptive from the start (no workers or jobs started for a fixed size first)."""
    if cluster is not None:  # a failure to start is a one-line ClusterStartError
        from .cluster import load_cluster_config, make_cluster

        return make_cluster(load_cluster_config(cluster), adapt)
    from distributed import LocalCluster

    from .cluster import adapt as make_adaptive

    local = LocalCluster(n_workers=0 if adapt is not None else workers or default_workers(),
                         threads_per_worker=1, processes=True, host="127.0.0.1",
                         dashboard_address="127.0.0.1:0",
                         silence_logs=logging.DEBUG if debug else logging.CRITICAL)
    if adapt is not None:
        make_adaptive(local, *adapt)
    return local


def wait_for_a_worker(client, timeout: float, where: str) -> None:
    """Wait until a worker has joined; :class:`RunError` after ``timeout`` seconds."""
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        raise RunError(f"no worker joined the scheduler at {where} within {timeout:g} s: "
                       "start workers (dask worker ADDRESS) or check the cluster's jobs, "
                       "or raise --worker-timeout") from None


@contextlib.contextmanager
def open_client(workers=None, scheduler=None, cluster=None, tls=None, timeout: float = 10.0,
                worker_timeout: float = 120.0, quiet: bool = False, debug: bool = False, adapt=None):
    """Yield a ``distributed.Client`` with at least one worker, or ``None`` for
    ``workers=0`` (in-process).

    ``workers=None`` with no scheduler or cluster starts the embedded default: a
    LocalCluster of ``default_workers()`` single-threaded processes on 127.0.0.1.
    An unreachable scheduler raises :class:`RunError` after ``timeout`` seconds, a
    scheduler without workers after ``worker_timeout`` seconds (not waited for with an
    adaptive cluster, which starts its workers when tasks arrive).
    ``adapt=(minimum, maximum)`` makes the started cluster adaptive
    (:func:`onebit_dask.cluster.adapt`).
    """
    check_target(workers, scheduler, cluster, tls)
    if workers == 0:
        yield None
        return
    from distributed import Client

    from .cluster import load_cluster_config

    with contextlib.ExitStack() as stack:
        if scheduler is not None:
            client = stack.enter_context(_connect(scheduler, tls, timeout))
        else:
            dask_cluster = stack.enter_context(_start_cluster(cluster, workers, debug, adapt))
            client = stack.enter_context(Client(dask_cluster, timeout=timeout))
            if not quiet:
                log.info("dask dashboard: %s", client.dashboard_link)
        adaptive = adapt is not None or (cluster is not None and
                                         load_cluster_config(cluster).adapt is not None)
        if not adaptive:  # an adaptive cluster starts its workers when the work comes
            wait_for_a_worker(client, worker_timeout, scheduler or client.scheduler.address)
        yield client
