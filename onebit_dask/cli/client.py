"""Where the work runs: in this process, an embedded LocalCluster, a scheduler address,
or a cluster config; shared by the ``fit`` and ``sweep`` commands.

:func:`check_cluster_target` checks everything that can be checked before anything starts
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

from ..utils.checks import check_int
from .clusters import check_pem, check_runnable, load_cluster_config
from ..utils.errors import RunError
from ..utils.limits import check_workers

log = logging.getLogger(__name__)
ADDRESS = re.compile(r"^(tcp|tls)://[^\s:/]+:\d+$")


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def check_cluster_target(workers=None, scheduler=None, cluster=None, tls=None,
                         allow_large: bool = False) -> dict:
    """Check the choice of cluster before anything starts; the keyword arguments of
    :func:`open_client`, with ``cluster`` (a config file) loaded and checked once
    (:func:`onebit_dask.cluster.load_cluster_config`,
    :func:`~onebit_dask.cluster.check_runnable`). ``allow_large``: more than
    :data:`~onebit_dask.utils.limits.MAX_WORKERS` workers may start, and a cluster config's
    workers may run more than :data:`~onebit_dask.utils.limits.MAX_THREADS_PER_WORKER` threads.

    Precedence: the flags, then Dask's own configuration (``scheduler-address``, e.g.
    ``DASK_SCHEDULER_ADDRESS``, and ``distributed.comm.tls.*`` for a ``tls://`` one, as
    ``distributed.Client()`` reads them), then the embedded cluster."""
    if sum(x is not None for x in (workers, scheduler, cluster)) > 1:
        raise ValueError("give at most one of --workers, --scheduler and --cluster")
    if workers is None and scheduler is None and cluster is None:
        scheduler = _configured_scheduler()
    if workers is not None:
        check_int("workers", workers, low=0)
        check_workers("--workers", workers, allow_large)
    if scheduler is not None and not ADDRESS.match(scheduler):
        raise ValueError(f"scheduler={scheduler!r} is not allowed: give an address like "
                         "tcp://HOST:PORT or tls://HOST:PORT")
    if tls:
        if scheduler is None or not scheduler.startswith("tls://"):
            given = "--workers" if workers is not None else (
                "--cluster" if cluster is not None else "the embedded cluster")
            shown = f"--scheduler {scheduler}" if scheduler is not None else given
            raise ValueError(f"--tls-ca-file, --tls-cert and --tls-key apply to a tls:// "
                             f"scheduler only, not to {shown}")
        check_pem(tls.get("ca_file"), tls.get("cert"), tls.get("key"),
                  names=("--tls-ca-file", "--tls-cert", "--tls-key"))
    elif (scheduler is not None and scheduler.startswith("tls://")
          and not _configured_tls()):
        raise ValueError(f"scheduler={scheduler!r} uses TLS: pass --tls-ca-file, --tls-cert "
                         "and --tls-key, or set them in Dask's configuration "
                         "(DASK_DISTRIBUTED__COMM__TLS__CA_FILE, ..._CLIENT__CERT, "
                         "..._CLIENT__KEY)")
    config = None
    if cluster is not None:
        config = load_cluster_config(cluster, allow_large=allow_large)
        check_runnable(config)
    return dict(workers=workers, scheduler=scheduler, cluster=config, tls=tls)


def _configured_scheduler():
    """The scheduler address in Dask's configuration (``DASK_SCHEDULER_ADDRESS``, a
    config file's ``scheduler-address``), checked, or ``None``."""
    import dask.config

    address = dask.config.get("scheduler-address", None)
    if address is None:
        return None
    if not isinstance(address, str) or not ADDRESS.match(address):
        raise ValueError(f"Dask's configuration sets scheduler-address={address!r} "
                         "(DASK_SCHEDULER_ADDRESS): give an address like tcp://HOST:PORT or "
                         "tls://HOST:PORT, or unset it")
    return address


def _configured_tls() -> bool:
    """Whether Dask's configuration names a CA and a client certificate and key (what
    ``distributed.Security()`` reads when no ``--tls-*`` flag is given)."""
    import dask.config

    return all(dask.config.get(key, None) for key in (
        "distributed.comm.tls.ca-file", "distributed.comm.tls.client.cert",
        "distributed.comm.tls.client.key"))


def _connect(scheduler, tls, timeout):
    from distributed import Client

    security = None
    if tls:
        from .clusters import make_security

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
    # the workers' log records: all of them with --debug, else none (a worker's
    # heartbeat cut short by the cluster's closing is an ERROR record of distributed's)
    silence_logs = logging.DEBUG if debug else logging.CRITICAL
    if cluster is not None:  # a failure to start is a one-line ClusterStartError
        from .clusters import make_cluster

        return make_cluster(cluster, adapt, silence_logs)
    from .clusters import adapt as make_adaptive
    from .clusters import local_cluster

    n_workers = 0 if adapt is not None else workers or default_workers()
    local = local_cluster({"n_workers": n_workers, "processes": True}, silence_logs)
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
                worker_timeout: float = 120.0, quiet: bool = False, debug: bool = False,
                adapt=None):
    """Yield a ``distributed.Client`` with at least one worker, or ``None`` for
    ``workers=0`` (in-process); the target comes from :func:`check_cluster_target` (``cluster``
    a checked :class:`~onebit_dask.cluster.ClusterConfig`).

    ``workers=None`` with no scheduler or cluster starts the embedded default: a
    LocalCluster of ``default_workers()`` single-threaded processes on 127.0.0.1.
    An unreachable scheduler raises :class:`RunError` after ``timeout`` seconds, a
    scheduler without workers after ``worker_timeout`` seconds (not waited for with an
    adaptive cluster, which starts its workers when tasks arrive).
    ``adapt=(minimum, maximum)`` makes the started cluster adaptive
    (:func:`onebit_dask.cluster.adapt`).
    """
    if workers == 0:
        yield None
        return
    from distributed import Client

    with contextlib.ExitStack() as stack:
        if scheduler is not None:
            client = stack.enter_context(_connect(scheduler, tls, timeout))
        else:
            dask_cluster = stack.enter_context(_start_cluster(cluster, workers, debug, adapt))
            client = stack.enter_context(Client(dask_cluster, timeout=timeout))
            if not quiet:
                log.info("dask dashboard: %s", client.dashboard_link)
        adaptive = adapt is not None or (cluster is not None and cluster.adapt is not None)
        if not adaptive:  # an adaptive cluster starts its workers when the work comes
            wait_for_a_worker(client, worker_timeout, scheduler or client.scheduler.address)
        yield client
