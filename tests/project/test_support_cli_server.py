"""``helpers.run_cli``'s processes (forks of ``tests/support/cli_server.py``) against real
``python -m onebit_dask`` processes."""

import signal
import subprocess
import sys
import time

import pytest

from tests.support.helpers import CliProcess, run_cli

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("args", [["--version"], ["fit", "--scheduler", "http://x:1"],
                                  ["fit", "--d1", "abc"]])
def test_a_command_gives_what_python_m_gives(args):
    """Exit status, stdout and stderr byte for byte (commands that end before any work:
    their output has no timings)."""
    real = subprocess.run([sys.executable, "-m", "onebit_dask", *args], capture_output=True,
                          text=True, timeout=600)
    forked = run_cli(*args)
    assert (forked.returncode, forked.stdout, forked.stderr) == \
        (real.returncode, real.stdout, real.stderr)


def test_a_relative_path_is_found_in_the_callers_directory(tmp_path):
    """(That the environment is the caller's ``env`` is
    ``cli/test_clusters.py::test_slurm_config_without_sbatch_exits_1_with_one_line``'s check: its
    ``PATH`` has no ``sbatch``, which this machine may have.)"""
    (tmp_path / "obs.zarr").mkdir()  # there, not in this process's directory
    found = run_cli("fit", "--data", "obs.zarr", "--rank", "2", cwd=tmp_path)
    assert found.returncode == 2 and "is a directory but not a CSR store" in found.stderr


def test_a_command_past_its_timeout_is_killed():
    """As :func:`subprocess.run`: killed, and :class:`subprocess.TimeoutExpired` raised."""
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_cli("fit", "--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "600",
                timeout=1)
    assert time.monotonic() - start < 60  # not the 600 s of the command


def test_a_started_command_is_polled_and_killed_as_a_popen():
    """:class:`helpers.CliProcess`: running (``poll()`` is ``None``) until killed, then
    the signal's negative number as its status."""
    proc = CliProcess(["fit", "--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "600"])
    assert proc.poll() is None and proc.pid > 0
    proc.kill()
    assert proc.wait(timeout=60) == -signal.SIGKILL and proc.poll() == -signal.SIGKILL
