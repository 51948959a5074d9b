"""The onebit-dask command line.

Exit status: 0 on success; 2 for bad input (one line on stderr, before any work
starts; with no command at all, the usage line and a hint); 1 for a failure at run time
(a cluster that does not start, a lost scheduler, a full disk, a damaged store): one line
naming what failed and what to do. ``--debug`` shows the traceback instead. Output into a
pipe whose reader left (``onebit-dask list | head -1``) ends the command quietly with
141, as ``SIGPIPE`` ends other programs; a Ctrl-C ends it with 130 and the one line
"onebit-dask: interrupted", once what it was writing is removed or complete.

Each command is a function ``add_NAME(sub)`` in the module of its verb (:mod:`.fit`,
:mod:`.models`, :mod:`.sweeps`) that declares its options and sets ``run`` to the function
that carries it out; add a command by writing one and listing it in :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys

from ..utils.errors import EXIT_RUNTIME, EXIT_USAGE, RunError
from .args import HelpFormatter, Parser, UsageError
from .failures import describe_failure
from .fit import add_fit
from .models import add_evaluate, add_predict
from .sweeps import add_list, add_report, add_sweep


COMMANDS = (add_fit, add_sweep, add_report, add_predict, add_evaluate, add_list)


def _version() -> str:
    from .. import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="onebit-dask", description=__doc__.splitlines()[0],
                     formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"onebit-dask {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for add in COMMANDS:
        add(sub)
    return parser


class _Stderr(logging.StreamHandler):
    """The package's log records as plain lines on the current ``sys.stderr``."""

    def __init__(self):
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):  # StreamHandler sets it; the current sys.stderr is used
        pass


@contextlib.contextmanager
def _package_log():
    """INFO records of the ``onebit_dask`` loggers (progress lines, the dashboard address)
    on stderr while a command runs."""
    logger = logging.getLogger("onebit_dask")
    handler, level, propagate = _Stderr(), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def _in_finalizer(frame) -> bool:
    """Whether ``frame`` runs inside a garbage collector's callback, a ``__del__`` method
    or a ``weakref.finalize`` callback, where Python drops an exception ("Exception
    ignored in ...")."""
    import gc
    import weakref

    codes = {weakref.finalize.__call__.__code__}
    for callback in gc.callbacks:
        code = getattr(getattr(callback, "__func__", callback), "__code__", None)
        if code is not None:
            codes.add(code)
    while frame is not None:
        if frame.f_code in codes or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


RETRY_S = 0.05
"""Seconds after which an interrupt that came inside a finalizer comes again."""


def _on_sigint(signum, frame) -> None:
    """Python's SIGINT handler (``KeyboardInterrupt``), but never inside a finalizer
    (:func:`_in_finalizer`: Dask's scheduler runs a garbage collector's callback, often),
    where the interrupt would be dropped with a traceback and the command go on: there
    the interrupt comes again a moment later (``_thread.interrupt_main``, from a timer's
    thread), once the finalizer has returned."""
    import _thread
    import threading

    if _in_finalizer(frame):
        again = threading.Timer(RETRY_S, _thread.interrupt_main, args=(signal.SIGINT,))
        again.daemon = True
        again.start()
        return
    raise KeyboardInterrupt


@contextlib.contextmanager
def _sigint_handled(after=signal.default_int_handler):
    """:func:`_on_sigint` for SIGINT while a command runs, where Python's own handler is
    installed (in the main thread); ``after`` it (Python's own handler again, or, for
    the program whose command is over, ``SIG_IGN``: its exit is not cut short)."""
    import threading

    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, after)


def main(argv=None) -> int:
    with _package_log(), _sigint_handled():
        return _main(argv)


def return_freed_memory() -> None:
    """Have glibc's ``malloc`` give freed memory back to the system in this process: a
    fixed 1 MiB ``mmap`` threshold and trim threshold (``mallopt``). The process that runs
    a fit (and, with a ``LocalCluster``, its scheduler) allocates and frees arrays of
    megabytes at every step; with glibc's default, dynamic threshold they come from the
    heap, which keeps them (at ``d2 = 10^6``, ~100 MiB freed but still resident after a
    fit; docs/PERFORMANCE.md). Dask's Nanny sets the trim threshold for its workers
    (``MALLOC_TRIM_THRESHOLD_``). Nothing where the C library is not glibc."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's malloc.h
    mallopt(m_mmap_threshold, 2**20)
    mallopt(m_trim_threshold, 2**20)


def run() -> None:
    """The ``onebit-dask`` program: :func:`main` on ``sys.argv`` in a process of its own,
    which returns the memory it frees to the system (:func:`return_freed_memory`). Once
    the command is over, SIGINT is ignored: a Ctrl-C then does not cut the process's exit
    short (killed by the signal, without the one line a Ctrl-C gets)."""
    return_freed_memory()
    with _package_log(), _sigint_handled(after=signal.SIG_IGN):
        status = _main(None)
    sys.exit(status)


EXIT_BROKEN_PIPE = 128 + 13  # as a program that SIGPIPE ended
EXIT_INTERRUPTED = 128 + 2  # as a program that SIGINT (Ctrl-C) ended


def _free_quietly(exc: KeyboardInterrupt) -> None:
    """Free what the interrupted command left half done, without a word.

    The frames of ``exc``'s traceback hold what the interrupt cut short: a coroutine
    created but never awaited (a store read or write), an event loop half built. Freed
    later, each would print a warning or an "Exception ignored" traceback; they are
    freed here (the frames' variables cleared, then a garbage collection) with
    warnings and unraisable exceptions silenced.
    """
    import gc
    import traceback
    import warnings

    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traceback.clear_frames(exc.__traceback__)
            gc.collect()
    finally:
        sys.unraisablehook = hook


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush of a pipe whose reader
    left prints nothing (Python's documented way, "Note on SIGPIPE")."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a StringIO in tests)
        pass


def _main(argv=None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    args = None
    if not argv:
        print(parser.format_usage().rstrip(), file=sys.stderr)
        print("onebit-dask: error: give a command: onebit-dask --help lists them, "
              "onebit-dask COMMAND --help explains one", file=sys.stderr)
        return EXIT_USAGE
    try:
        args = parser.parse_args(argv)
        return args.run(args)
    except UsageError as exc:
        print(f"onebit-dask: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        _free_quietly(exc)
        print("onebit-dask: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        if debug:
            raise
        writes = getattr(args, "writes", None)
        print(f"onebit-dask: error: {describe_failure(exc, writes)}", file=sys.stderr)
        return EXIT_RUNTIME


__all__ = ["main", "run", "return_freed_memory", "build_parser", "UsageError", "RunError"]

if __name__ == "__main__":  # pragma: no cover
    run()
