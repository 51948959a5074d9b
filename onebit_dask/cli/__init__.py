"""The command line, ``onebit-dask VERB``: :mod:`.main` parses and dispatches; one module
per verb (:mod:`.fit`, :mod:`.models` for predict and evaluate, :mod:`.sweeps` for sweep,
report and list); :mod:`.client` and :mod:`.clusters` start the Dask client; :mod:`.failures`
and :mod:`.shipped` serve them.

While this package's modules are imported (the command's first half second), a Ctrl-C
ends the command with the one line and exit status 130 it gives later, instead of a
traceback from the middle of an import: nothing has been written yet. This applies
wherever SIGINT has Python's default handler when the package is imported in the main
thread (the command line, and also a script or a REPL importing it: a Ctrl-C during that
import ends such a process at once, with exit status 130), and the handler is put back
after the import.
"""

import signal as _signal
import threading as _threading


def _interrupted_while_starting(signum, frame):
    import os
    import sys

    sys.stderr.write("onebit-dask: interrupted\n")
    sys.stderr.flush()
    os._exit(130)


_starting = (_threading.current_thread() is _threading.main_thread()
             and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler)
if _starting:
    _signal.signal(_signal.SIGINT, _interrupted_while_starting)
try:
    from .main import main, run
finally:
    if _starting:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)

__all__ = ["main", "run"]
