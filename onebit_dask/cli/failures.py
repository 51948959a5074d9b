"""Failures at run time, turned into one line that says what failed and what to do.

:class:`RunError` carries a message already written for the user. Anything else
that escapes a command is described by :func:`describe_failure`: a full disk, a
read-only or missing path, a lost scheduler, a damaged store, or (last resort)
the exception's type and first line.
"""

from __future__ import annotations

import errno

from ..utils.errors import RunError


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def _lost_scheduler(exc: BaseException) -> bool:
    from asyncio import CancelledError

    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"CommClosedError", "FutureCancelledError", "CancelledError"} or isinstance(
            exc, CancelledError):
        return True
    return "scheduler-connection-lost" in str(exc)


def describe_failure(exc: BaseException, writes: str | None = None) -> str:
    """One line for a failure at run time.

    Parameters
    ----------
    exc : BaseException
    writes : str, optional
        The path the command writes to (named when the error does not name one).
    """
    if isinstance(exc, RunError) or (isinstance(exc, RuntimeError) and
                                     type(exc).__module__.startswith("onebit_dask")):
        return str(exc)  # this package's runtime errors are written for the user
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        path = exc.filename or writes or "the output"
        return (f"no space left on the device of {path} (errno {exc.errno}, "
                f"{exc.strerror}): free some space and run the same command again "
                "(nothing written so far is lost)")
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
        path = exc.filename or writes or "the output"
        return f"cannot write {path}: {exc.strerror}; choose a writable path"
    if _lost_scheduler(exc):
        return ("lost the connection to the Dask scheduler (it stopped or the network "
                "failed): restart it and run the same command again (finished work is kept; "
                "a sweep resumes)")
    line = _first_line(exc)
    return (f"{type(exc).__name__}{': ' + line if line else ''} "
            "(run again with --debug for the traceback)")
