"""Two writers of one output, for real, in a fixed order: the first (a process of its own)
is seen holding the output's lock, then held still (SIGSTOP) while the second starts, so
the second meets a live holder whatever the machine's speed; the first then goes on
(SIGCONT).

The second is refused at its start with one line naming the first (its pid), exit 1,
and writes nothing; the first finishes, its output whole. Outputs: a saved model, a
checkpoint, a sweep's cube, a report's figures, a converted CSR store.
"""

import contextlib
import json
import os
import signal
import sys

import pytest

from tests.support.helpers import (TINY_SPEC, Session, by_noise_setting, fit_args, run_cli,
                                  wait_until)

pytestmark = pytest.mark.integration

FIT = fit_args("--quiet", "--workers", "0")


@contextlib.contextmanager
def holding(session, lock):
    """Once the lock file ``lock`` names ``session``'s process, that process held still
    for the block (SIGSTOP), then let go on (SIGCONT)."""
    def held():
        assert session.proc.poll() is None, session.finish()
        try:
            with open(lock) as fh:
                return json.load(fh).get("pid") == session.proc.pid
        except (OSError, ValueError):  # not there yet, or being written
            return False

    wait_until(held, f"{lock} held by pid {session.proc.pid}", every=0.005)
    os.kill(session.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(session.proc.pid, signal.SIGCONT)


def assert_refused(second, first, writer) -> None:
    """``second`` exited 1 with one line naming ``first`` as the holder."""
    lines = second.stderr.strip().splitlines()
    assert second.returncode == 1 and second.stdout == "", second
    assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
    assert f"is in use by another {writer} (host " in lines[0], lines[0]
    assert f"pid {first.proc.pid}, since" in lines[0], lines[0]


def finished(session):
    done = session.finish()
    assert done.returncode == 0, done
    return done


def test_a_second_fit_saving_to_the_same_model_is_refused(tmp_path):
    from onebit_dask import OneBitMultiLabel

    model = tmp_path / "m.zarr"
    with Session.cli(*FIT, "--save", model, cwd=tmp_path) as first:
        with holding(first, f"{model}.lock"):
            second = run_cli(*FIT, "--save", model)
            assert not model.exists()
        finished(first)
    assert_refused(second, first, "fit --save")
    assert OneBitMultiLabel.load(model).n_features_in_ == 20
    assert sorted(os.listdir(tmp_path)) == ["m.zarr"]


def test_a_second_fit_on_the_same_checkpoint_is_refused(tmp_path):
    from onebit_dask import OneBitMultiLabel

    ckpt = tmp_path / "ck.zarr"
    with Session.cli(*FIT, "--checkpoint", ckpt, cwd=tmp_path) as first:
        with holding(first, f"{ckpt}.lock"):
            second = run_cli(*FIT, "--checkpoint", ckpt)
        finished(first)
    assert_refused(second, first, "fit")
    assert OneBitMultiLabel.load(ckpt).n_steps_ == 2  # the whole fit (--n-iter 2)
    assert sorted(os.listdir(tmp_path)) == ["ck.zarr"]




@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(TINY_SPEC)
    return path


def test_a_second_sweep_into_the_same_cube_is_refused(tmp_path, spec):
    from onebit_dask.sweep.cube import open_cube

    cube = tmp_path / "cube.zarr"
    args = ("sweep", spec, "--out", cube, "--workers", 0, "--quiet")
    with Session.cli(*args, cwd=tmp_path) as first:
        with holding(first, f"{cube}.lock"):
            second = run_cli(*args)
        finished(first)
    assert_refused(second, first, "sweep runner")
    assert bool(by_noise_setting(open_cube(cube))["done"].all())  # every cell the spec asks
    assert sorted(os.listdir(tmp_path)) == ["cube.zarr", "spec.yaml"]


def test_a_second_report_into_the_same_figures_directory_is_refused(tmp_path, spec):
    from PIL import Image

    cube = tmp_path / "cube.zarr"
    assert run_cli("sweep", spec, "--out", cube, "--workers", 0, "--quiet").returncode == 0
    plots = tmp_path / "plots"
    args = ("report", cube, "--plots", plots, "--quiet")
    with Session.cli(*args, cwd=tmp_path) as first:
        with holding(first, plots / ".onebit-dask-report.lock"):
            second = run_cli(*args)
        done = finished(first)
    assert_refused(second, first, "report")
    assert "figures' directory" in second.stderr
    written = sorted(line.split(" ", 1)[1] for line in done.stdout.splitlines()
                     if line.startswith("wrote "))
    assert written and sorted(str(p) for p in plots.iterdir()) == written
    for path in written:
        with Image.open(path) as image:
            image.load()


CONVERT = """
import sys
from onebit_dask.io.csr_store import convert
convert(sys.argv[1], sys.argv[2], chunk_rows=500)
"""


def test_a_second_convert_to_the_same_store_is_refused(tmp_path):
    import numpy as np

    from onebit_dask.io.csr_store import convert, open_csr_store
    from onebit_dask.io.stores.lock import StoreLockedError

    rng = np.random.default_rng(0)
    src = tmp_path / "train.txt"
    src.write_text("2000 100 30\n" + "".join(
        f"{rng.integers(30)} {rng.integers(50)}:1.0 {50 + rng.integers(50)}:0.5\n"
        for _ in range(2000)))
    store = tmp_path / "train.zarr"
    with Session([sys.executable, "-c", CONVERT, src, store], cwd=tmp_path) as first:
        with holding(first, f"{store}.lock"):
            with pytest.raises(StoreLockedError, match=rf"in use by another convert \(host "
                                                       rf".*pid {first.proc.pid}, since"):
                convert(src, store)
            assert not store.exists()
        finished(first)
    assert open_csr_store(store).n == 2000
    assert sorted(os.listdir(tmp_path)) == ["train.txt", "train.zarr"]
