"""What a worker runs for a small cell: :func:`compute_cell`.

Kept apart from the runner so that a worker imports only the methods (not xarray, the
cube's store and the runner, which only the runner's process uses).
"""

from __future__ import annotations

import socket
import sys
import time

from .methods import METHODS


def compute_cell(params: dict, fixed: dict):
    """Run one cell here (on a worker, or in the runner): ``(result, where, seconds)``.

    Raises what the method raises (so Dask's ``retries`` apply).
    """
    start = time.perf_counter()
    result = METHODS[params["method"]].run(params, fixed)
    worker = ""  # not on a worker (a process without distributed is not one)
    if "distributed" in sys.modules:
        from distributed import get_worker

        try:
            worker = get_worker().address
        except ValueError:
            pass
    return result, {"worker": worker, "host": socket.gethostname(), "engine": "local"}, \
        time.perf_counter() - start
