"""Ctrl-C held back for the length of a block: what must happen whole, or not at all.

A ``KeyboardInterrupt`` is raised wherever the main thread is when SIGINT comes. Two
places must not be cut in the middle: the submission of a round of block tasks (a task
sent to the scheduler but not yet recorded would go on writing after the command has
removed what it writes into) and the start of a local cluster (its worker processes
must be born with SIGINT blocked, so that a Ctrl-C at the terminal, which signals the
whole process group, reaches the command alone, which stops them in order).
"""

from __future__ import annotations

import contextlib
import signal
import threading


@contextlib.contextmanager
def sigint_deferred():
    """A SIGINT that comes while the block runs is acted on as the block ends (the
    ``KeyboardInterrupt`` is then raised after it).

    Python's SIGINT handler is replaced by one that notes the signal, and SIGINT is
    blocked in this thread: the threads started inside the block inherit the mask, and
    so do the processes they start. Both are put back after the block; then the handler
    is called for a SIGINT that came, here and now (Python's own raises
    ``KeyboardInterrupt``; a signal sent again could be raised inside a garbage
    collector's callback, which drops it). Nothing outside the main thread (Python
    handles signals there only).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came = []
    handler = signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    mask = hasattr(signal, "pthread_sigmask")
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if mask else None
    try:
        yield
    finally:
        if mask:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)
        signal.signal(signal.SIGINT, signal.SIG_DFL if handler is None else handler)
        if came and callable(handler):
            handler(signal.SIGINT, None)
        elif came and handler in (None, signal.SIG_DFL):
            signal.raise_signal(signal.SIGINT)
