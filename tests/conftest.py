"""Shared fixtures and hooks: real Dask schedulers and workers on 127.0.0.1 (the helpers
that start them: tests/support/clusters.py), the marks and the order of the files."""

import os

import pytest

from tests.support.clusters import local_client

# keep BLAS single-threaded in worker subprocesses, as the Nanny does
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Dask's periodic housekeeping, slowed down in every Dask process of the suite (this one,
# the spawned workers, the CLI's): an idle worker then takes 0.1 s of CPU in 30 s instead
# of 0.95 s, an idle scheduler with its client 0.27 s instead of 1.4 s, and the suite keeps
# clusters alive for minutes. The event-loop watchdog, the sampling profiler and the
# dashboard's system monitor are diagnostics; the memory monitor only acts near the limit.
for _key, _value in {"ADMIN__TICK__INTERVAL": "1s", "ADMIN__SYSTEM_MONITOR__INTERVAL": "2s",
                     "WORKER__PROFILE__ENABLED": "False",
                     "WORKER__MEMORY__MONITOR_INTERVAL": "1s"}.items():
    os.environ.setdefault(f"DASK_DISTRIBUTED__{_key}", _value)


@pytest.fixture(autouse=True)
def _large_arguments_by_reference(monkeypatch):
    """The Dask engine sends an array argument of ``SHARED_BYTES`` or more once a round,
    as a task of its own (64 KiB: a ``d1 x l`` top from ``d1`` ~ 1400); the tests' tops
    are a few kB, so it is lowered to 1 KiB here, for the code this process runs: the
    tests take the path a large ``d1`` takes, the ``l x l`` arrays stay inside the tasks.
    (Command lines started as processes keep the default.)"""
    from onebit_dask.engine import dask_engine

    monkeypatch.setattr(dask_engine, "SHARED_BYTES", 1024)


CLUSTER_FIXTURES = {"client2"}
"""Fixtures that start Dask processes: a test using one is marked ``integration``."""


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects on the marks
def pytest_collection_modifyitems(items):
    """Mark the tests that use a cluster fixture ``integration``."""
    for item in items:
        if CLUSTER_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.integration)


class LongestFilesFirst:
    """Orders the selected tests' files for the two test processes (``--dist loadfile
    --no-loadscope-reorder``, pyproject): files with ``slow`` tests first, then those
    with ``integration`` tests (most first), then the rest (most tests first), so that a
    long file never starts last and leaves the other process idle (longest-first
    scheduling; the order of the tests within a file is kept). A plugin of its own: it
    runs after ``-m`` has deselected, the marking above before."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        _longest_files_first(items)


def pytest_configure(config):
    config.pluginmanager.register(LongestFilesFirst(), "longest-files-first")


def _longest_files_first(items):
    by_file = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::")[0], []).append(item)

    def weight(tests):
        slow = any(t.get_closest_marker("slow") for t in tests)
        integration = sum(1 for t in tests if t.get_closest_marker("integration"))
        return (not slow, integration == 0, -integration, -len(tests))

    items[:] = [t for _, tests in sorted(by_file.items(), key=lambda kv: weight(kv[1]))
                for t in tests]


@pytest.fixture(scope="session")
def client2():
    """One 2-worker cluster for the whole session, for the tests where a fresh cluster is
    not the point (a test that kills a worker or needs another size starts its own).

    Not the default client (``set_as_default=False``): a test uses it where it hands it
    over or inside ``with client2.as_current():`` (``engine="auto"``), and every other
    test, before or after, stays in-process. Tests must leave it as they found it:
    2 live workers; plugins they register are replaced by name.
    """
    with local_client(2) as client:
        yield client
