"""The command line, ``onebit-dask VERB``: :mod:`.main` parses and dispatches; one module
per verb (:mod:`.fit`, :mod:`.models` for predict and evaluate, :mod:`.sweeps` for sweep,
report and list); :mod:`.client` and :mod:`.clusters` start the Dask client; :mod:`.failures`
and :mod:`.shipped` serve them."""

from .main import main, run

__all__ = ["main", "run"]
