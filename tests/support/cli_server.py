"""The processes of :func:`helpers.run_cli`: ``python -m onebit_dask ARGS``, each a fork
of this server, an interpreter that has imported the command line's libraries once.

A command's own process then costs a fork instead of an interpreter start and ~2 s of
CPU of imports (scikit-learn, Dask, zarr, xarray). The process is otherwise the real
thing: its own pid, its stdin, stdout and stderr on the caller's pipes, its working
directory and environment (Dask's configuration read again from its ``DASK_*``
variables), ``onebit_dask`` run as ``__main__`` (so the workers that Dask spawns from it
import it as they would), and the interpreter's normal end (``atexit``, flushing) giving
its exit status, or the signal that killed it. What is not the same is what an
interpreter start and the first imports do (and what they read from the environment
then: locale, hash seed, Dask's config files and logging, ``TMPDIR``, ``PYTHON*``
variables, all the test process's); the documentation's commands, the wheel's and the
lazy-import tests start real interpreters for that. The preload must write nothing (a
warning an import gives would then reach no command's stderr): the server refuses to
start if it does.

Protocol (one connection per command, on the UNIX socket named by ``argv[1]``): the
caller sends a length-prefixed JSON ``{"argv", "env", "cwd"}`` with three file
descriptors (stdin, stdout, stderr); the server answers with the child's pid, then,
when the child has ended, with its status as :attr:`subprocess.Popen.returncode` gives
it. The server ends when its stdin (the caller's lifeline) closes.
"""

import contextlib
import json
import os
import select
import signal
import socket
import struct
import sys
import tempfile

PRELOAD = ("onebit_dask.cli", "onebit_dask.estimator", "onebit_dask.sweep.runner",
           "onebit_dask.sweep.report", "sklearn.base", "distributed", "zarr", "xarray",
           "dask.array")
"""What ``fit``, ``sweep`` and ``report`` import (not matplotlib: it reads its backend
from the environment as it is imported), imported once here."""


def preload():
    """Import :data:`PRELOAD`, refusing to go on if that writes anything on stdout or
    stderr."""
    import importlib

    with tempfile.TemporaryFile() as captured:
        saved = [os.dup(1), os.dup(2)]
        os.dup2(captured.fileno(), 1)
        os.dup2(captured.fileno(), 2)
        try:
            for name in PRELOAD:
                importlib.import_module(name)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            for fd, copy in zip((1, 2), saved):
                os.dup2(copy, fd)
                os.close(copy)
        captured.seek(0)
        written = captured.read()
    if written:
        sys.exit("cli_server: importing the command line's libraries wrote this (a real "
                 "process would show it):\n" + written.decode(errors="replace"))


def recv_exactly(conn, size) -> bytes:
    """``size`` bytes from the socket ``conn`` (an error if it closes before)."""
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the other end of a tests/support/cli_server.py socket hung up")
        data += chunk
    return data


def receive(conn):
    """A request: its JSON and its three file descriptors."""
    head, fds, _, _ = socket.recv_fds(conn, 8, 3)
    try:
        if len(fds) != 3:
            raise ValueError(f"a request sends 3 file descriptors, not {len(fds)}")
        (size,) = struct.unpack("!Q", head)
        return json.loads(recv_exactly(conn, size)), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def serve(path):
    """Fork a child per request; the parent never returns, a child returns its request."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the select below
    waiting = {}  # pid -> the caller's connection
    print("ready", flush=True)
    while True:
        ready, _, _ = select.select([listener, wake_r, sys.stdin], [], [])
        if sys.stdin in ready:  # the caller's end of the lifeline closed (or it wrote)
            sys.exit(0)
        if wake_r in ready:
            while True:
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    break
            while waiting:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                conn = waiting.pop(pid, None)
                if conn is not None:
                    with conn, contextlib.suppress(OSError):  # unless the caller hung up
                        conn.sendall(struct.pack("!q", os.waitstatus_to_exitcode(status)))
        if listener in ready:
            conn, _ = listener.accept()
            try:
                request, fds = receive(conn)
            except Exception:  # a caller that hung up, or not a request
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                for sock in (listener, conn, *waiting.values()):
                    sock.close()
                os.close(wake_r)
                os.close(wake_w)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                return request, fds
            for fd in fds:
                os.close(fd)
            waiting[pid] = conn
            with contextlib.suppress(OSError):
                conn.sendall(struct.pack("!q", pid))


def become(request, fds):
    """In the child: the caller's pipes, directory and environment, then the command."""
    import runpy

    import dask

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    sys.path.insert(0, request["cwd"])  # as ``python -m`` puts its directory first
    os.environ.clear()
    os.environ.update(request["env"])
    dask.config.refresh()  # DASK_* variables of this environment, as at a fresh import
    sys.argv = ["onebit_dask", *request["argv"]]
    runpy.run_module("onebit_dask", run_name="__main__", alter_sys=True)


def end(status):
    """The interpreter's end as :c:func:`Py_FinalizeEx` begins it (non-daemon threads
    joined, ``atexit`` functions, stdout and stderr flushed), then the exit, without the
    garbage collection and teardown of the ~2200 modules the server imported (0.7 s of
    CPU a command, which a command that imports what it needs does not spend)."""
    import atexit
    import threading

    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: the interpreter ignores it too
            pass
    os._exit(status)


def exit_status(exc: SystemExit) -> int:
    """The exit status the interpreter gives a :class:`SystemExit` (writing a message
    that is not a number on stderr, as it does)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # not tests/support/
    preload()
    request = serve(sys.argv[1])
    try:
        become(*request)
        status = 0
    except SystemExit as exc:
        status = exit_status(exc)
    except BaseException:  # as the interpreter reports an uncaught exception
        import traceback

        traceback.print_exc()
        status = 1
    end(status)
