"""Warnings ignored for the length of a block, one thread at a time.

``warnings.catch_warnings`` saves the process's filters as a block starts and puts them
back as it ends. The blocks of two threads that overlap put back each other's filters (a
sweep's runner writes its cube while its thread pool fits large cells, each fit sending
its large arguments): a filter of one block can stay in place for good, or one the user
had set be dropped. The package's blocks (:func:`ignored`) take one lock, so they never
overlap one another (a block of code outside the package still can).
"""

from __future__ import annotations

import contextlib
import threading
import warnings

_LOCK = threading.RLock()


@contextlib.contextmanager
def ignored(*filters: dict):
    """Within the block, ``warnings.filterwarnings("ignore", **f)`` for each ``f`` of
    ``filters`` (``message``, ``category``, ``module``); the filters as they were after it.
    Another thread's block waits for this one to end."""
    with _LOCK, warnings.catch_warnings():
        for keywords in filters:
            warnings.filterwarnings("ignore", **keywords)
        yield
