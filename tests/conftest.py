"""Shared fixtures: real Dask schedulers and workers on 127.0.0.1."""

import contextlib
import datetime
import ipaddress
import json
import os
import subprocess
import sys
import time

import pytest

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


@contextlib.contextmanager
def local_client(n_workers, **kwargs):
    """A client of a fresh ``LocalCluster`` of ``n_workers`` processes on 127.0.0.1, one
    thread each (its HTTP server on a free port: no clash with another cluster). Not the
    default client: code that is not handed it runs in-process."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      host="127.0.0.1", dashboard_address="127.0.0.1:0", **kwargs) as cluster, \
            Client(cluster, set_as_default=False) as client:
        yield client  # engine="auto" stays in-process outside `with client.as_current():`


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


def _wait_for_file(path, proc, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            try:
                with open(path) as fh:
                    return json.load(fh)
            except json.JSONDecodeError:
                pass
        if proc.poll() is not None:
            raise RuntimeError(f"scheduler exited with {proc.returncode}")
        time.sleep(0.1)
    raise TimeoutError(path)


def _dask_command(name):
    """``dask NAME`` (``scheduler``, ``worker``) as ``python -m`` of its module."""
    return [sys.executable, "-m", f"distributed.cli.dask_{name}"]


class DaskProcesses:
    """``dask scheduler`` and ``dask worker`` started as subprocesses (``worker_args``:
    more arguments of ``dask worker``, e.g. ``--preload``). The workers start with the
    scheduler and find it through its scheduler file (they wait for it), so that the
    three processes' imports overlap. Each runs the ``main`` of the command by its
    module (``python -m distributed.cli.dask_worker``, as dask-jobqueue starts workers):
    the ``dask`` command finds the same ``main`` through the installed packages' entry
    points, 0.27 CPU-s more a process (`--help`, medians of 7: 0.94 against 0.66)."""

    def __init__(self, tmp_path, n_workers=2, tls_args=(), worker_args=()):
        self.scheduler_file = str(tmp_path / "scheduler.json")
        if os.path.exists(self.scheduler_file):  # another scheduler's: not ours to find
            os.remove(self.scheduler_file)
        protocol = ["--protocol", "tls"] if tls_args else []
        self.scheduler = subprocess.Popen(
            [*_dask_command("scheduler"), "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", self.scheduler_file, *protocol, *tls_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.workers = [
            subprocess.Popen(
                [*_dask_command("worker"), "--scheduler-file", self.scheduler_file,
                 "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1", "--no-dashboard",
                 "--name", f"w{i}", *tls_args, *worker_args],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for i in range(n_workers)
        ]
        try:
            self.address = _wait_for_file(self.scheduler_file, self.scheduler)["address"]
        except BaseException:
            self.close()
            raise

    def close(self):
        # the workers first, while their scheduler still answers: a worker stopping after
        # it waits for the lost scheduler (its unregistering), and was killed 5 s later
        for group in (self.workers, [self.scheduler]):
            for proc in group:
                if proc.poll() is None:
                    proc.terminate()
            for proc in group:
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def make_certificates(directory):
    """A CA and a certificate for 127.0.0.1 / localhost signed by it (PEM files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    period = dict(not_valid_before=now - datetime.timedelta(days=1),
                  not_valid_after=now + datetime.timedelta(days=2))

    def build(subject, issuer, public_key, signing_key, ca, san=None):
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                   .public_key(public_key).serial_number(x509.random_serial_number())
                   .not_valid_before(period["not_valid_before"])
                   .not_valid_after(period["not_valid_after"])
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return builder.sign(signing_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "onebit-dask test CA")])
    ca_cert = build(ca_name, ca_name, ca_key.public_key(), ca_key, True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    cert = build(name, ca_name, key.public_key(), ca_key, False,
                 [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    files = {"ca_file": directory / "ca.pem", "cert": directory / "cert.pem",
             "key": directory / "key.pem"}
    files["ca_file"].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files["key"].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    return {k: str(v) for k, v in files.items()}
