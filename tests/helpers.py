"""Helpers shared by the tests: the command line in a real process or in this one.

:func:`run_cli` starts ``python -m onebit_dask`` (an interpreter start and the imports,
~2 s of CPU); :func:`run_main` runs the same ``main(argv)`` in this process and returns
the same kind of result. A test of a failure class runs at least one case through a
real process; the other cases of the class go through :func:`run_main`.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import subprocess
import sys
import time
from typing import NamedTuple

ROOT = pathlib.Path(__file__).resolve().parents[1]

SMALL = dict(d1=20, d2=10, rank=2, batch_size=2000, n_iter=2, n_test=200)
"""A synthetic problem and fit small enough for the command line tests."""


def fit_args(*flags, **options) -> list[str]:
    """``["fit", "--d1", "20", ...]``: the :data:`SMALL` fit with ``options`` changed
    (``batch_size=3000`` gives ``--batch-size 3000``), then ``flags`` as they are."""
    options = {**SMALL, **options}
    return ["fit", *(a for k, v in options.items() for a in (f"--{k.replace('_', '-')}", str(v))),
            *map(str, flags)]


FIT = fit_args("--quiet")


def run_cli(*args, timeout=600, **kwargs) -> subprocess.CompletedProcess:
    """``onebit-dask ARGS`` as a real process (text output captured); ``kwargs`` go to
    :func:`subprocess.run` (``env``, ``cwd``)."""
    return subprocess.run([sys.executable, "-m", "onebit_dask", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, **kwargs)


class Finished(NamedTuple):
    """A command run in this process, as a finished process (``status, out, err =``)."""

    returncode: int
    stdout: str
    stderr: str


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
