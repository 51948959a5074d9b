"""Where the work runs: in this process, an embedded LocalCluster, a scheduler address,
or a cluster config; shared by the ``fit`` and ``sweep`` commands."""

from __future__ import annotations

import contextlib
import os
import re
import sys

from ._validation import check_int

ADDRESS = re.compile(r"^(tcp|tls)://[^\s:/]+:\d+$")


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


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
        for key in ("ca_file", "cert", "key"):
            if not tls.get(key) or not os.path.isfile(tls[key]):
                raise ValueError(f"--tls-{key.replace('_', '-')}={tls.get(key)!r} does not exist: "
                                 "a tls:// scheduler needs --tls-ca-file, --tls-cert and --tls-key")
    elif scheduler is not None and scheduler.startswith("tls://"):
        raise ValueError(f"scheduler={scheduler!r} uses TLS: pass --tls-ca-file, --tls-cert "
                         "and --tls-key")
    if cluster is not None:
        from .cluster import load_cluster_config

        load_cluster_config(cluster)


@contextlib.contextmanager
def open_client(workers=None, scheduler=None, cluster=None, tls=None, timeout: float = 10.0,
                quiet: bool = False, adapt=None):
    """Yield a ``distributed.Client``, or ``None`` for ``workers=0`` (in-process).

    ``workers=None`` with no scheduler or cluster starts the embedded default: a
    LocalCluster of ``default_workers()`` single-threaded processes on 127.0.0.1.
    ``adapt=(minimum, maximum)`` makes the started cluster adaptive
    (:func:`onebit_dask.cluster.adapt`).
    An unreachable scheduler raises ``OSError`` after ``timeout`` seconds.
    """
    check_target(workers, scheduler, cluster, tls)
    if workers == 0:
        yield None
        return
    from distributed import Client, LocalCluster

    with contextlib.ExitStack() as stack:
        if scheduler is not None:
            security = None
            if tls:
                from .cluster import make_security

                security = make_security({**tls, "require_encryption": True})
            try:
                client = Client(scheduler, timeout=timeout, security=security)
            except (OSError, TimeoutError) as exc:
                raise OSError(f"could not reach the scheduler at {scheduler} within {timeout:g} s "
                              f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
                              ) from None
            stack.enter_context(client)
        else:
            if cluster is not None:
                from .cluster import load_cluster_config, make_cluster

                dask_cluster = make_cluster(load_cluster_config(cluster))
            else:
                dask_cluster = LocalCluster(n_workers=workers or default_workers(),
                                            threads_per_worker=1, processes=True,
                                            host="127.0.0.1", dashboard_address="127.0.0.1:0")
            stack.enter_context(dask_cluster)
            if adapt is not None:
                from .cluster import adapt as make_adaptive

                make_adaptive(dask_cluster, *adapt)
            client = stack.enter_context(Client(dask_cluster, timeout=timeout))
            if not quiet:
                print(f"dask dashboard: {client.dashboard_link}", file=sys.stderr)
        yield client
