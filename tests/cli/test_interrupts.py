"""Ctrl-C at a terminal, for real: SIGINT to the process group of a command started in a
session of its own (:class:`helpers.Session`), at a point where it is known to be at
work (a temporary of its output exists, a progress line came, its workers are being
started).

Whatever the command was doing when the signal came, it exits with 130 and the one line
"onebit-dask: interrupted" (no traceback, its own or Dask's or a worker's), leaves no
temporary and no lock next to its output, and the output is absent or whole: a
checkpoint resumes, a model loads, a cube is read and its sweep resumes. The signal may
come before or after the critical part (a temporary is renamed into place in a moment):
every assertion holds for both.
"""

import glob
import os
import sys

import numpy as np
import pytest

from tests.support.helpers import Session, fit_args, run_main, run_python, wait_until

pytestmark = pytest.mark.integration

INTERRUPTED = "onebit-dask: interrupted"
CKPT_FIT = fit_args("--quiet", d1=60, d2=40, batch_size=4000, n_iter=6)
"""A fit with a checkpoint a step: the first is written long before it ends."""


@pytest.fixture(autouse=True)
def python_sigint_handler():
    """The tests that signal their own process start from Python's SIGINT handler, as a
    program does, whatever an earlier test of this process imported (``dask_jobqueue``
    replaces it when imported; tests/cli/test_clusters.py shows the package keeps it)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        yield
        signal.signal(signal.SIGINT, previous)
    else:
        yield


def temporaries_of(path) -> list:
    head, tail = os.path.split(str(path))
    return glob.glob(os.path.join(head, f".{tail}.onebit-tmp-*"))


def wait_for_temporary(session, path) -> None:
    """Return once a temporary of ``path`` exists (the command is writing it)."""
    def seen():
        assert session.proc.poll() is None, session.finish()
        return bool(temporaries_of(path))

    wait_until(seen, f"a temporary of {path}", every=0.001)


def assert_interrupted(done, progress=()) -> None:
    """Exit 130 and one line on stderr (besides the progress lines, whose prefixes are
    ``progress``), no traceback."""
    assert done.returncode == 130, done
    assert "Traceback" not in done.stderr and "Exception" not in done.stderr, done.stderr
    rest = [line for line in done.stderr.splitlines() if not line.startswith(progress)]
    assert rest == [INTERRUPTED], done.stderr


def assert_nothing_beside(directory, *keep) -> None:
    """Only ``keep`` in ``directory``: no temporary, replaced copy or lock."""
    assert sorted(os.listdir(directory)) == sorted(keep), os.listdir(directory)


@pytest.mark.parametrize("workers", ["2", "0"])
def test_ctrl_c_while_a_checkpoint_is_written(tmp_path, workers):
    """Ctrl-C once a checkpoint's temporary exists (its blocks written by the workers,
    or in-process): no checkpoint or a whole one, which the same command resumes to the
    numbers of an uninterrupted fit."""
    import json

    ckpt = tmp_path / "ck.zarr"
    args = (*CKPT_FIT, "--workers", workers, "--checkpoint", ckpt)
    with Session.cli(*args, cwd=tmp_path) as session:
        wait_for_temporary(session, ckpt)
        session.ctrl_c()
        done = session.finish()
    assert_interrupted(done)
    assert_nothing_beside(tmp_path, *(["ck.zarr"] if ckpt.exists() else []))
    if ckpt.exists():
        from onebit_dask import OneBitMultiLabel

        assert OneBitMultiLabel.load(ckpt).n_steps_ >= 1
    resumed = run_main(*CKPT_FIT, "--workers", 0, "--checkpoint", ckpt, "--json")
    fresh = run_main(*CKPT_FIT, "--workers", 0, "--json")
    assert resumed.returncode == 0 and fresh.returncode == 0, resumed.stderr + fresh.stderr
    metrics = ("auc", "hamming_loss", "spectral_error", "frobenius_error", "n_samples")
    assert ({k: json.loads(resumed.stdout)[k] for k in metrics}
            == {k: json.loads(fresh.stdout)[k] for k in metrics})
    assert_nothing_beside(tmp_path, "ck.zarr")


def test_ctrl_c_while_the_model_is_saved(tmp_path):
    """Ctrl-C once the model's temporary exists, on a cluster: no model, or the whole
    model; never a temporary or the lock."""
    from onebit_dask import OneBitMultiLabel

    model = tmp_path / "m.zarr"
    args = (*fit_args("--quiet", d1=60, d2=40, batch_size=4000, n_iter=3), "--workers", 2,
            "--save", model)
    with Session.cli(*args, cwd=tmp_path) as session:
        wait_for_temporary(session, model)
        session.ctrl_c()
        done = session.finish()
    assert_interrupted(done)
    assert_nothing_beside(tmp_path, *(["m.zarr"] if model.exists() else []))
    if model.exists():
        assert OneBitMultiLabel.load(model).n_features_in_ == 60


def test_ctrl_c_while_the_workers_start(tmp_path):
    """Ctrl-C once the first worker process of the embedded cluster exists: the cluster
    is stopped in order, and no worker prints a traceback."""
    import psutil

    ckpt = tmp_path / "ck.zarr"
    with Session.cli(*CKPT_FIT, "--workers", 2, "--checkpoint", ckpt, cwd=tmp_path) as session:
        command = psutil.Process(session.proc.pid)
        wait_until(lambda: any("spawn_main" in " ".join(child.cmdline())
                               for child in command.children()),
                   "a worker process", every=0.001)
        session.ctrl_c()
        done = session.finish()
    assert_interrupted(done)
    assert_nothing_beside(tmp_path, *(["ck.zarr"] if ckpt.exists() else []))


SPEC = """
name: interrupted
grid:
  d1: [30]
  d2: [20]
  rank: [2]
  noise: [none, flip=0.05, gaussian=0.3]
  step: [paper, averaged]
  batch_size: [2000]
  n_iter: [3]
  seed: [0, 1, 2, 3]
fixed: {n_test: 300, n_shards: 2}
"""


def test_ctrl_c_during_a_sweep_then_the_rerun_finishes_it(tmp_path):
    """Ctrl-C after the first cell's progress line: the cube holds the cells finished
    (``report`` reads it) and the same command finishes it."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    cube = tmp_path / "cube.zarr"
    args = ("sweep", spec, "--out", cube, "--workers", 2)
    with Session.cli(*args, cwd=tmp_path) as session:
        session.wait_for_line(r"^\[1/24\]")
        session.ctrl_c()
        done = session.finish()
    assert_interrupted(done, progress=("[", "dask dashboard: "))
    assert_nothing_beside(tmp_path, "spec.yaml", "cube.zarr")
    assert run_main("report", cube, "--quiet").returncode == 0
    again = run_main(*args[:-2], "--workers", 0, "--quiet")
    assert again.returncode == 0 and "0 failed" in again.stdout, again.stderr


def test_ctrl_c_while_report_writes_its_figures(tmp_path):
    """Ctrl-C once ``report`` has read the cube and draws: the figures written are whole
    PNGs, no temporary file is left."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    cube = tmp_path / "cube.zarr"
    assert run_main("sweep", spec, "--out", cube, "--workers", 0, "--quiet").returncode == 0
    plots = tmp_path / "plots"
    with Session.cli("report", cube, "--plots", plots, cwd=tmp_path) as session:
        session.wait_for_line(r"^report: read ")
        session.ctrl_c()
        done = session.finish()
    assert done.returncode in (0, 130), done  # 0: every figure was written before it came
    if done.returncode == 130:
        assert_interrupted(done, progress=("report: ",))
    from PIL import Image

    for name in os.listdir(plots) if plots.exists() else []:
        assert name.endswith(".png") and not name.startswith("."), name
        with Image.open(plots / name) as image:
            image.load()


def test_an_interrupted_report_leaves_no_empty_plot_directory_of_its_own(tmp_path, monkeypatch,
                                                                        capsys):
    """A Ctrl-C before ``report --plots DIR`` wrote a figure removes DIR when the command
    created it (it held nothing), and keeps a directory that was there before."""
    from onebit_dask.cli.main import main
    from onebit_dask.sweep import report as report_module

    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    cube = tmp_path / "cube.zarr"
    assert main(["sweep", str(spec), "--out", str(cube), "--workers", "0", "--quiet"]) == 0

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report_module, "report", interrupted)
    new, mine = tmp_path / "new-plots", tmp_path / "my-plots"
    mine.mkdir()
    for plots in (new, mine):
        assert main(["report", str(cube), "--plots", str(plots), "--quiet"]) == 130
        assert capsys.readouterr().err == "onebit-dask: interrupted\n"
    assert not new.exists() and mine.is_dir()


@pytest.mark.parametrize("verb", ["predict", "evaluate"])
def test_ctrl_c_while_predict_waits_for_a_worker(tmp_path, verb):
    """Ctrl-C while ``predict`` (or ``evaluate``) waits for a worker to join its scheduler
    (known from the scheduler: its client is there): one line, no traceback."""
    from distributed import Client

    from tests.support.clusters import DaskProcesses
    from onebit_dask import OneBitMultiLabel, SyntheticProblem

    model = tmp_path / "m.zarr"
    problem = SyntheticProblem(20, 10, 2, seed=0)
    OneBitMultiLabel(2, batch_size=1000, n_iter=1, engine="local").fit(problem).save(model)
    data = tmp_path / "x.txt"
    data.write_text("1 0:1.0 5:0.5\n3 1:1.0 11:2\n")
    scheduler = DaskProcesses(tmp_path, n_workers=0)
    try:
        with Client(scheduler.address) as watcher, Session.cli(
                verb, model, *(["--data", data] if verb == "predict" else []), "--scheduler",
                scheduler.address, cwd=tmp_path) as session:
            wait_until(lambda: len(watcher.run_on_scheduler(
                lambda dask_scheduler: list(dask_scheduler.clients))) >= 3,
                "predict's client at the scheduler")  # the scheduler's own, this one's
            session.ctrl_c()
            done = session.finish()
    finally:
        scheduler.close()
    assert_interrupted(done)
    assert done.stdout == ""


CONVERT = """
import sys
from onebit_dask.io.csr_store import convert
try:
    convert(sys.argv[1], sys.argv[2], chunk_rows=200)
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_ctrl_c_while_a_data_file_is_converted(tmp_path):
    """``onebit_dask.io.csr_store.convert`` (a function, not a command) stopped once its
    temporary exists: no store or the whole store, no temporary."""
    import numpy as np

    from onebit_dask.io.csr_store import open_csr_store

    rng = np.random.default_rng(0)
    lines = [f"{rng.integers(50)} " + " ".join(f"{j}:{rng.random():.3f}" for j in
                                                 sorted(rng.choice(200, 8, replace=False)))
             for _ in range(20_000)]
    src = tmp_path / "train.txt"
    src.write_text("20000 200 50\n" + "\n".join(lines) + "\n")
    store = tmp_path / "train.zarr"
    with Session([sys.executable, "-c", CONVERT, src, store], cwd=tmp_path) as session:
        wait_for_temporary(session, store)
        session.ctrl_c()
        done = session.finish()
    assert done.returncode in (0, 130), done  # (zarr may say what the interrupt cut short)
    assert_nothing_beside(tmp_path, "train.txt", *(["train.zarr"] if store.exists() else []))
    if store.exists():
        assert open_csr_store(store).n == 20_000


def test_what_an_interrupt_cut_short_is_freed_without_a_word(monkeypatch):
    """A Ctrl-C may come while a store read is being set up: a coroutine created but not
    awaited, an event loop half built (whose ``__del__`` raises). Freed later, each said
    so (a RuntimeWarning, an "Exception ignored" traceback) after the command's line."""
    import warnings

    from onebit_dask.cli import sweeps

    class HalfBuilt:
        def __del__(self):
            raise AttributeError("'HalfBuilt' object has no attribute '_signal_handlers'")

    async def read():
        pass

    def cut_short(args):
        pending, half = read(), HalfBuilt()  # noqa: F841 (what the frame holds)
        raise KeyboardInterrupt

    unraisable = []
    monkeypatch.setattr(sweeps, "_run_list", cut_short)
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = run_main("list")
    assert (done.returncode, done.stdout, done.stderr) == (130, "", INTERRUPTED + "\n")
    assert caught == [] and unraisable == []


@pytest.mark.parametrize("how", ["raised", "signalled"])
def test_a_ctrl_c_while_a_lock_is_taken_leaves_no_lock(tmp_path, monkeypatch, how):
    """A Ctrl-C between the lock file's creation and its content: an empty lock file
    would be nobody's (refused as not a lock, for good), a whole one a stale lock next
    to the store. Raised there (as Python raises it at a call's return), or signalled
    there (held back until the lock is taken, then given back): no lock file."""

    from onebit_dask.io.stores import lock as lock_module
    from onebit_dask.io.stores.lock import StoreLock

    fsync = os.fsync

    def interrupted(fd):
        fsync(fd)
        if how == "raised":
            raise KeyboardInterrupt
        sigint_to_the_main_thread()

    monkeypatch.setattr(lock_module.os, "fsync", interrupted)
    store = tmp_path / "s.zarr"
    with pytest.raises(KeyboardInterrupt):
        StoreLock(str(store)).acquire()
    assert os.listdir(tmp_path) == []
    monkeypatch.setattr(lock_module.os, "fsync", fsync)
    with StoreLock(str(store)):  # nothing in the way
        assert os.listdir(tmp_path) == ["s.zarr.lock"]


def test_a_ctrl_c_while_a_lock_is_released_leaves_no_lock(tmp_path, monkeypatch):
    """A Ctrl-C while the lock waits for its heartbeat's thread to stop (the command's
    last moment, after its work): the lock file is removed all the same."""
    from onebit_dask.io.stores.lock import StoreLock

    lock = StoreLock(str(tmp_path / "s.zarr"))
    lock.acquire()
    assert os.listdir(tmp_path) == ["s.zarr.lock"]

    def interrupted(timeout=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(lock._thread, "join", interrupted)
    with pytest.raises(KeyboardInterrupt):
        lock.release()
    assert os.listdir(tmp_path) == []


CTRL_C_AFTER_THE_COMMAND = """
import importlib, os, signal, sys

cli = importlib.import_module("onebit_dask.cli.main")
cli._main = lambda argv: 0  # a command that is over
leave = sys.exit

def exit_after_a_ctrl_c(status):
    os.kill(os.getpid(), signal.SIGINT)  # while the process exits
    sum(range(1000))  # Python code: a handler runs here
    leave(status)

sys.exit = exit_after_a_ctrl_c
cli.run()
"""


def test_a_ctrl_c_once_the_command_is_over_does_not_kill_its_exit(tmp_path):
    """The program (``onebit-dask``, :func:`~onebit_dask.cli.main.run`) ignores SIGINT
    once its command is over: the exit status is the command's, not a death by the
    signal without a word."""
    done = run_python(CTRL_C_AFTER_THE_COMMAND, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done


def test_a_ctrl_c_inside_a_garbage_collectors_callback_still_stops_the_command(monkeypatch):
    """Dask's scheduler (in a command's process, with the embedded cluster) runs Python
    at every garbage collection: a KeyboardInterrupt raised there is dropped ("Exception
    ignored in ... _gc_callback") and the command went on to its end. The interrupt comes
    again once the callback has returned."""
    import gc
    import time

    from onebit_dask.cli import sweeps

    sent = []

    def callback(phase, info):
        if phase == "start" and not sent:
            sent.append(os.getpid())
            sigint_to_the_main_thread()
            sum(i for i in range(1000))  # Python code of the callback: the signal is seen here

    def busy(args):
        gc.callbacks.append(callback)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(callback)
        deadline = time.monotonic() + 30  # the interrupt comes long before (a hang: 0)
        while time.monotonic() < deadline:
            pass
        return 0

    monkeypatch.setattr(sweeps, "_run_list", busy)
    done = run_main("list")
    assert sent and (done.returncode, done.stderr) == (130, INTERRUPTED + "\n"), done


CTRL_C_DURING_IMPORT = """
import os, runpy, signal, sys

class CtrlC:
    # sends SIGINT to this process when the command line's module is about to be imported
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlC())
sys.argv = ["onebit-dask", "fit", "--d1", "20", "--d2", "10", "--rank", "2"]
runpy.run_module("onebit_dask", run_name="__main__")
"""


@pytest.mark.parametrize("module", ["onebit_dask.cli.main", "onebit_dask.cli.fit"])
def test_ctrl_c_while_the_command_line_is_imported(tmp_path, module):
    """A Ctrl-C in the command's first half second, while its modules are imported (the
    signal is sent at the import of ``module``, so the moment is exact): exit 130 with the
    one line, not a traceback from the middle of an import. The child starts with
    SIGINT's default action, whatever this process inherited."""
    done = run_python(CTRL_C_DURING_IMPORT.format(module=module), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (130, "onebit-dask: interrupted\n"), done


def ctrl_c_inside_zarrs_io_thread(monkeypatch, module, name, gone_on):
    """Have zarr's coroutine ``module.name`` (run in zarr's I/O thread while this thread
    waits for it) send SIGINT to this (the main) thread as it starts, as a Ctrl-C at that
    moment does; the coroutine then goes on once ``gone_on`` is set (this thread went past
    the interrupted call), or after a second (this thread held the interrupt back)."""
    import asyncio
    import signal
    import threading

    original = getattr(module, name)
    main = threading.main_thread().ident

    async def interrupted(*args, **kwargs):
        signal.pthread_kill(main, signal.SIGINT)
        for _ in range(100):
            if gone_on.is_set():
                break
            await asyncio.sleep(0.01)
        return await original(*args, **kwargs)

    monkeypatch.setattr(module, name, interrupted)


@pytest.mark.parametrize("existing", [False, True])
def test_ctrl_c_while_the_saved_models_metadata_are_consolidated(tmp_path, monkeypatch,
                                                                 existing):
    """A Ctrl-C while the model store's metadata are consolidated, the last write of a
    save (zarr does it in its I/O thread, which the interrupt does not stop): 1 run in 14
    printed zarr's "Consolidated metadata is currently not part in the Zarr format 3
    specification" warning under the "interrupted" line. The signal comes at that very
    point, and the consolidation ends only once the writer has gone on (or after a
    second): exit 130, the one line, no warning, no temporary, and the model that was at
    the target (``save(..., overwrite=True)``) whole and unchanged, or the new model."""
    import threading
    import warnings

    import zarr.api.asynchronous as zarr_async

    from onebit_dask import OneBitMultiLabel, SyntheticProblem
    from onebit_dask.io.stores import atomic

    model = tmp_path / "m.zarr"
    gone_on = threading.Event()
    discard = atomic.discard

    def discarding(directory):
        gone_on.set()
        discard(directory)

    monkeypatch.setattr(atomic, "discard", discarding)
    if existing:
        before = OneBitMultiLabel(2, batch_size=1000, n_iter=1, engine="local").fit(
            SyntheticProblem(20, 10, 2, seed=1))
        before.save(model)
        ctrl_c_inside_zarrs_io_thread(monkeypatch, zarr_async, "consolidate_metadata", gone_on)
        est = OneBitMultiLabel(2, batch_size=1000, n_iter=1, engine="local").fit(
            SyntheticProblem(20, 10, 2, seed=0))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(KeyboardInterrupt):
                est.save(model, overwrite=True)
        assert [str(w.message) for w in caught] == []
        assert_nothing_beside(tmp_path, "m.zarr")
        kept = OneBitMultiLabel.load(model)
        assert kept.n_labels_ == 10 and kept.n_steps_ == before.n_steps_
        np.testing.assert_array_equal(kept.A_, before.A_)
        return
    ctrl_c_inside_zarrs_io_thread(monkeypatch, zarr_async, "consolidate_metadata", gone_on)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = run_main(*fit_args("--quiet", d1=20, d2=10, batch_size=1000, n_iter=1),
                        "--workers", 0, "--save", model)
    assert [str(w.message) for w in caught] == []
    assert_interrupted(done)
    assert_nothing_beside(tmp_path, *(["m.zarr"] if model.exists() else []))
    if model.exists():
        assert OneBitMultiLabel.load(model).n_features_in_ == 20


def sigint_to_the_main_thread():
    """SIGINT sent to this process's main thread, where Python runs its handler. Sent to
    the process (``os.kill``), a signal the main thread blocks (``sigint_deferred``) goes
    to another thread (pytest-xdist's, a client's), and under load that thread may take it
    after the command is over: the ``KeyboardInterrupt`` then ends the test process."""
    import signal
    import threading

    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


class CtrlCOnWrite:
    """A redirected stdout (a file, not a terminal) that sends SIGINT to this process's
    main thread as its first write returns: a Ctrl-C while the command's output is being
    written."""

    def __init__(self):
        import io

        self.buffer, self.writes = io.StringIO(), 0

    def write(self, text):
        self.buffer.write(text)
        self.writes += 1
        if self.writes == 1:
            sigint_to_the_main_thread()
            sum(range(1000))  # Python code: the handler runs here
        return len(text)

    def flush(self):
        pass

    def isatty(self):
        return False

    def getvalue(self):
        return self.buffer.getvalue()


@pytest.fixture(scope="module")
def predicted(tmp_path_factory):
    """A saved model, a data file of 40 rows and ``predict``'s whole output of them (text
    and JSON)."""
    from onebit_dask import OneBitMultiLabel, SyntheticProblem

    tmp = tmp_path_factory.mktemp("predict")
    model = tmp / "m.zarr"
    OneBitMultiLabel(2, batch_size=1000, n_iter=1, engine="local").fit(
        SyntheticProblem(20, 10, 2, seed=0)).save(model)
    rng = np.random.default_rng(0)
    data = tmp / "x.txt"
    data.write_text("".join(f"1 {j}:{rng.random():.3f} {j + 1}:{rng.random():.3f}\n"
                            for j in rng.integers(0, 19, 40)))
    whole = {}
    for form in ("text", "json"):
        args = ("predict", model, "--data", data, "--rows", 40,
                *(["--json"] if form == "json" else []))
        done = run_main(*args)
        assert done.returncode == 0 and done.stdout.count("\n") == (40 if form == "text" else 1)
        whole[form] = (args, done.stdout)
    return whole


@pytest.mark.parametrize("form", ["text", "json"])
@pytest.mark.parametrize("when", ["scoring", "writing"])
def test_ctrl_c_while_predict_scores_or_writes(predicted, monkeypatch, form, when):
    """A Ctrl-C while ``predict`` scores the rows, or while it writes them to a redirected
    stdout (the signal sent at that very point): exit 130 and the one line, and the output
    is nothing or the whole of it (it was written row by row: a Ctrl-C there left the
    first rows, as if they were all)."""
    import contextlib
    import io

    from onebit_dask import OneBitMultiLabel
    from onebit_dask.cli.main import main

    args, whole = predicted[form]
    if when == "scoring":
        top_k = OneBitMultiLabel.predict_top_k

        def interrupted(self, *a, **k):
            sigint_to_the_main_thread()
            return top_k(self, *a, **k)

        monkeypatch.setattr(OneBitMultiLabel, "predict_top_k", interrupted)
    out, err = CtrlCOnWrite(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([*map(str, args)])
    assert (status, err.getvalue()) == (130, INTERRUPTED + "\n")
    assert out.getvalue() in ("", whole), out.getvalue()[:200]
    if when == "writing":
        assert out.getvalue() == whole  # the signal came during the write: it is whole


def test_a_ctrl_c_inside_a_figures_png_write_keeps_the_old_figure_whole(tmp_path, monkeypatch,
                                                                       capsys):
    """A Ctrl-C that lands while ``report --plots`` writes a PNG (half of its bytes
    written), deterministically: the command ends with 130 and one line, the figures
    written before it are whole, the interrupted one is the previous run's file, whole,
    and no temporary file is left."""
    import hashlib

    from matplotlib.figure import Figure
    from PIL import Image

    from onebit_dask.cli.main import main

    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    cube = tmp_path / "cube.zarr"
    plots = tmp_path / "plots"
    assert main(["sweep", str(spec), "--out", str(cube), "--workers", "0", "--quiet"]) == 0
    assert main(["report", str(cube), "--plots", str(plots), "--quiet"]) == 0
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in plots.iterdir()}
    assert len(before) >= 2, before
    capsys.readouterr()
    savefig, calls = Figure.savefig, []

    def cut_in_the_second(self, fh, **kwargs):
        calls.append(1)
        if len(calls) < 2:
            return savefig(self, fh, **kwargs)
        import io
        whole = io.BytesIO()
        savefig(self, whole, **kwargs)
        fh.write(whole.getvalue()[: len(whole.getvalue()) // 2])
        raise KeyboardInterrupt
    monkeypatch.setattr(Figure, "savefig", cut_in_the_second)
    assert main(["report", str(cube), "--plots", str(plots), "--quiet"]) == 130
    assert capsys.readouterr().err == "onebit-dask: interrupted\n"
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in plots.iterdir()}
    assert after == before  # every name there before, each file whole (the first rewritten
    #                         with the same bytes, the second untouched), nothing else
    for name in after:
        with Image.open(plots / name) as image:
            image.load()
