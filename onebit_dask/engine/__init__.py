"""Where the data and the label-side state live, and the reductions.

* :mod:`.blocks`: label blocks and the pure NumPy functions run on them;
* :mod:`.local`: :class:`LocalEngine`, blocks in this process;
* :mod:`.dask_engine`: :class:`DaskEngine`, blocks as futures on Dask workers;
* :mod:`.protocol`: :class:`Engine`, what both implement and the rest of the package asks.

An engine runs a block function on every block where the block lives and returns the
small results in block order (``map``); the client-side algorithm
(:mod:`onebit_dask.algorithm`) reduces them in that fixed order, so the numbers do not
depend on the engine or the number of workers.
"""

from .local import LocalEngine
from .protocol import Engine


def make_engine(client=None):
    """:class:`LocalEngine` for ``client=None``, else a :class:`DaskEngine` on ``client``."""
    if client is None:
        return LocalEngine()
    from .dask_engine import DaskEngine

    return DaskEngine(client)


__all__ = ["Engine", "LocalEngine", "make_engine"]
