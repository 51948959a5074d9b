"""Helpers shared by the tests: the command line in a real process or in this one.

:func:`run_cli` runs ``python -m onebit_dask`` in a process of its own, forked from
``tests/support/cli_server.py`` (an interpreter that has imported the libraries once: a fork
instead of an interpreter start and ~2 s of CPU of imports); :func:`run_main` runs the
same ``main(argv)`` in this process and returns the same kind of result. A test of a
failure class runs at least one case through a process; the other cases of the class go
through :func:`run_main`.
"""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import NamedTuple

ROOT = pathlib.Path(__file__).resolve().parents[2]
"""The repository's top directory."""
FILES = ROOT / "tests" / "files"
"""The tests' data files (tests/files/README.md lists them)."""

SMALL = dict(d1=20, d2=10, rank=2, batch_size=2000, n_iter=2, n_test=200)
"""A synthetic problem and fit small enough for the command line tests."""


TINY_SPEC = """
name: tiny
grid:
  d1: [20]
  d2: [10]
  rank: [2]
  noise: [none, flip=0.05]
  step: [paper]
  batch_size: [2000]
  n_iter: [2]
  seed: [0, 1]
fixed: {n_test: 200, n_shards: 2}
"""
"""A sweep spec of 8 small planted cells (two noises, two seeds; CLI and lock tests)."""


def fit_args(*flags, **options) -> list[str]:
    """``["fit", "--d1", "20", ...]``: the :data:`SMALL` fit with ``options`` changed
    (``batch_size=3000`` gives ``--batch-size 3000``), then ``flags`` as they are."""
    options = {**SMALL, **options}
    return ["fit", *(a for k, v in options.items() for a in (f"--{k.replace('_', '-')}", str(v))),
            *map(str, flags)]


FIT = fit_args("--quiet")


class _CliServer:
    """This test process's ``tests/support/cli_server.py``, started at the first command and
    stopped when the process ends (its stdin, the lifeline, closes)."""

    def __init__(self):
        import atexit
        import tempfile

        self.directory = tempfile.mkdtemp(prefix="onebit-cli-server-")
        self.path = os.path.join(self.directory, "socket")
        server = ROOT / "tests" / "support" / "cli_server.py"
        self.proc = subprocess.Popen([sys.executable, str(server), self.path],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=ROOT)
        if self.proc.stdout.readline() != b"ready\n":
            self.proc.kill()
            raise RuntimeError(f"tests/support/cli_server.py did not start (exit "
                               f"{self.proc.wait()}):\n{self.proc.stderr.read().decode()}")
        atexit.register(self.close)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


_cli_server = None
_cli_server_lock = threading.Lock()


class CliProcess:
    """``onebit-dask ARGS`` started in a process of its own, forked from this test
    process's ``tests/support/cli_server.py``: the part of :class:`subprocess.Popen`'s interface
    (``text=True``, stdout and stderr piped, stdin ``/dev/null``) that the tests use."""

    def __init__(self, args, env=None, cwd=None):
        import json
        import socket
        import struct

        from .cli_server import recv_exactly

        global _cli_server
        with _cli_server_lock:
            if _cli_server is None:
                _cli_server = _CliServer()
        self.args = [*map(str, args)]
        self.returncode = None
        request = json.dumps({"argv": self.args, "cwd": os.path.abspath(cwd or os.getcwd()),
                              "env": dict(os.environ if env is None else env)}).encode()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with open(os.devnull, "rb") as stdin:
                self._conn.connect(_cli_server.path)
                socket.send_fds(self._conn, [struct.pack("!Q", len(request))],
                                [stdin.fileno(), out_w, err_w])
            self._conn.sendall(request)
            (self.pid,) = struct.unpack("!q", recv_exactly(self._conn, 8))
        except BaseException:
            self._conn.close()
            os.close(out_r)
            os.close(err_r)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        # as Popen(text=True): the locale's encoding, universal newlines
        self.stdout, self.stderr = open(out_r), open(err_r)
        self._texts, self._readers = {}, []  # communicate()'s

    def poll(self):
        """The exit status if the process has ended, else ``None``."""
        import socket

        if self.returncode is None:
            self._conn.settimeout(0)
            try:
                status = self._conn.recv(8, socket.MSG_PEEK)
            except BlockingIOError:
                return None
            if len(status) == 8 or not status:  # ended, or the server is gone (wait says)
                return self.wait()
        return self.returncode

    def wait(self, timeout=None) -> int:
        """The exit status, once the process has ended (``TimeoutExpired`` after
        ``timeout`` seconds)."""
        import socket
        import struct

        from .cli_server import recv_exactly

        if self.returncode is None:
            self._conn.settimeout(timeout)
            try:
                status = recv_exactly(self._conn, 8)
            except (socket.timeout, BlockingIOError):  # BlockingIOError: timeout 0
                raise subprocess.TimeoutExpired(self.args, timeout) from None
            (self.returncode,) = struct.unpack("!q", status)
            self._conn.close()
        return self.returncode

    def communicate(self, timeout=None) -> tuple[str, str]:
        """All of stdout and stderr (after what was already read; the same again at a
        second call), then the exit status in :attr:`returncode` (``TimeoutExpired`` after
        ``timeout`` seconds)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        texts = self._texts

        def read(stream):
            texts[stream] = stream.read()
            stream.close()

        if not self._readers:  # once: a call after a timeout waits for the same readers
            self._readers = [threading.Thread(target=read, args=(stream,), daemon=True)
                             for stream in (self.stdout, self.stderr)]
            for reader in self._readers:
                reader.start()
        for reader in self._readers:
            reader.join(None if deadline is None else max(deadline - time.monotonic(), 0))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(None if deadline is None else max(deadline - time.monotonic(), 0))
        return texts[self.stdout], texts[self.stderr]

    def send_signal(self, signum):
        """As :meth:`subprocess.Popen.send_signal`: nothing once the process has ended
        (the server reaps it at once, where a Popen's would wait as a zombie)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def kill(self):
        self.send_signal(signal.SIGKILL)


def run_cli(*args, timeout=600, env=None, cwd=None) -> subprocess.CompletedProcess:
    """``onebit-dask ARGS`` in a process of its own (:class:`CliProcess`), to its end, as
    :func:`subprocess.run` with ``capture_output=True, text=True``: ``env`` and ``cwd``
    are the process's environment and directory (this process's by default); at
    ``timeout`` seconds it is killed and :class:`subprocess.TimeoutExpired` raised."""
    proc = CliProcess(args, env=env, cwd=cwd)
    try:
        out, err = proc.communicate(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


class Finished(NamedTuple):
    """A command run in this process, as a finished process (``status, out, err =``)."""

    returncode: int
    stdout: str
    stderr: str


def run_python(code: str, *args, cwd=None) -> subprocess.CompletedProcess:
    """``python -c CODE ARGS`` in a fresh interpreter that starts with SIGINT's default
    action, whatever this process inherited (a shell starts a background job with SIGINT
    ignored, and Python then installs no handler); output captured as text."""
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def run_main(*args) -> Finished:
    """``onebit-dask ARGS`` through ``main(argv)`` in this process, as a finished
    process: its exit status and what it wrote on stdout and stderr."""
    from onebit_dask.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main([*map(str, args)])
        except SystemExit as exc:  # argparse's --help / --version
            status = exc.code
    return Finished(status, out.getvalue(), err.getvalue())


def wait_until(done, what: str = "the condition", timeout: float = 300.0,
               every: float = 0.02) -> None:
    """Return once ``done()`` is true, asked every ``every`` s; the timeout only stops a
    hang (a failure naming ``what``)."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{what} within {timeout:g} s"
        time.sleep(every)


def run_bench(script, *args) -> Finished:
    """``python benchmarks/SCRIPT ARGS`` run in this process (its ``main(argv)``, the
    environment restored after it), as a finished process: exit status, stdout, stderr."""
    import importlib.util
    import os

    path = ROOT / "benchmarks" / script
    spec = importlib.util.spec_from_file_location(f"_bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out, err, environ = io.StringIO(), io.StringIO(), dict(os.environ)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = module.main([*map(str, args)]) or 0
        except SystemExit as exc:  # argparse's errors, a benchmark's own exit
            status = exc.code if isinstance(exc.code, int) else 1
            if not isinstance(exc.code, (int, type(None))):
                print(exc.code, file=sys.stderr)
        finally:
            os.environ.clear()
            os.environ.update(environ)
    return Finished(status, out.getvalue(), err.getvalue())


def lineage_pickles(dask_scheduler, keys) -> list[bytes]:
    """The pickled spec of every task the scheduler holds behind ``keys`` (the keys and
    their dependencies, recursively: a fit's lineage); run it with
    ``client.run_on_scheduler(lineage_pickles, keys=...)``."""
    import pickle

    seen, stack, out = set(), list(keys), []
    while stack:
        ts = dask_scheduler.tasks.get(stack.pop())
        if ts is None or ts.key in seen:
            continue
        seen.add(ts.key)
        if ts.run_spec is not None:
            out.append(pickle.dumps(ts.run_spec, protocol=5))
        stack.extend(d.key for d in ts.dependencies)
    return out


def one_line(proc, status) -> str:
    """The process exited with ``status`` and wrote one line on stderr, the CLI's error
    line, without a traceback; that line."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == status, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("onebit-dask: error: ")
    return lines[0]


QUICKSTART = ROOT / "pipelines" / "quickstart.yaml"
# its grid (12 cells) on a smaller problem, where the cells' compute is not what a test
# checks (the quickstart's sizes cost ~8 s of CPU per run)
SMALL_CELLS = {"d1: [100]": "d1: [30]", "d2: [60]": "d2: [20]",
               "batch_size: [10000]": "batch_size: [2000]", "n_iter: [8]": "n_iter: [3]",
               "n_test: 2000": "n_test: 300"}


def small_quickstart(directory) -> pathlib.Path:
    """``pipelines/quickstart.yaml`` with the cells of :data:`SMALL_CELLS`, written into
    ``directory``; its path."""
    text = QUICKSTART.read_text()
    for old, new in SMALL_CELLS.items():
        assert old in text, f"{QUICKSTART} no longer has {old!r}: update SMALL_CELLS"
        text = text.replace(old, new)
    path = pathlib.Path(directory) / "quickstart.yaml"
    path.write_text(text)
    return path


class Session:
    """A command started in a session of its own (a new process group, as a terminal's
    foreground job), its stdout and stderr read line by line as they come.

    :meth:`ctrl_c` sends SIGINT to the whole group, as Ctrl-C at a terminal does: the
    command and the processes it started (a local cluster's workers). On leaving a
    ``with`` block, a group still running is killed (SIGKILL to its id).

    Parameters
    ----------
    argv : list
        The program and its arguments (:meth:`cli` for ``python -m onebit_dask ARGS``).
    cwd : path, optional
        Its working directory.
    """

    def __init__(self, argv, cwd=None):
        self.proc = subprocess.Popen([*map(str, argv)], cwd=cwd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.lines = {"out": [], "err": []}
        self._changed = threading.Condition()
        self._readers = [threading.Thread(target=self._read, args=(stream, self.lines[name]),
                                          daemon=True)
                         for name, stream in (("out", self.proc.stdout),
                                              ("err", self.proc.stderr))]
        for reader in self._readers:
            reader.start()

    @classmethod
    def cli(cls, *args, cwd=None) -> Session:
        """``python -m onebit_dask ARGS`` in a session of its own."""
        return cls([sys.executable, "-m", "onebit_dask", *args], cwd=cwd)

    def _read(self, stream, lines):
        for line in stream:
            with self._changed:
                lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for_line(self, pattern: str, timeout: float = 300.0) -> str:
        """The first line on stderr that ``re.search`` finds ``pattern`` in, once it has
        come (a failure if the process ends first, or after ``timeout`` s: a hang)."""
        import re

        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = next((line for line in self.lines["err"] if re.search(pattern, line)),
                             None)
                if found is not None:
                    return found
                ended = not self._readers[1].is_alive()
                assert not ended, (f"the process ended before a line matching {pattern!r}:\n"
                                   + "".join(self.lines["err"]))
                left = deadline - time.monotonic()
                assert left > 0, f"no line matching {pattern!r} within {timeout:g} s"
                self._changed.wait(min(left, 1.0))

    def ctrl_c(self) -> None:
        """SIGINT to the process group, as Ctrl-C at its terminal."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGINT)

    def finish(self, timeout: float = 600.0) -> Finished:
        """Its exit status and all it wrote, once it has ended."""
        self.proc.wait(timeout)
        for reader in self._readers:
            reader.join(timeout)
        return Finished(self.proc.returncode, "".join(self.lines["out"]),
                        "".join(self.lines["err"]))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()


def by_noise_setting(ds):
    """A sweep cube (format 8: ``noise_model`` x ``noise_level``) with only the noise
    combinations its spec asks for, as one ``noise`` dimension of the spec's labels (the
    attribute ``noise_settings``) in the spec's order."""
    import xarray as xr

    from onebit_dask.sweep.noise import parse_noise

    labels = list(ds.attrs["noise_settings"])
    settings = [parse_noise(label) for label in labels]
    return ds.sel(noise_model=xr.DataArray([m for m, _ in settings], dims="noise"),
                  noise_level=xr.DataArray([lv for _, lv in settings], dims="noise")
                  ).assign_coords(noise=("noise", labels))


def places_as_format_8(path) -> dict:
    """Rewrite the per-cell strings (``worker``, ``host``, ``engine``) of the cube at
    ``path`` as formats 4 to 8 stored them: fixed-length UTF-32 variables at the root, not
    in the group ``cells``. Returns their values as written. The cube's attributes are
    the caller's to set (its format, its digests)."""
    import numpy as np
    import zarr

    from onebit_dask.io.stores.zarr_format import ALL_CHUNKS, checked_codecs
    from onebit_dask.sweep import cube as store
    from onebit_dask.utils.warnings import ignored

    group = zarr.open_group(path, mode="r+", use_consolidated=False)
    cells = group[store.CELLS]
    written = {name: np.array(cells[name][...].tolist(), dtype=str) for name in store.STRINGS}
    with ignored(dict(message=".*does not have a Zarr V3 specification.*")):
        for name in store.STRINGS:
            old = cells[name]
            dims, attrs, chunks = old.metadata.dimension_names, dict(old.attrs), old.chunks
            group.create_array(name, data=written[name].astype("<U64"), chunks=chunks,
                               dimension_names=dims, attributes=attrs, config=ALL_CHUNKS,
                               **checked_codecs())
    del group[store.CELLS]
    return written
