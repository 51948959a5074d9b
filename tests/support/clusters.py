"""Dask clusters for the tests: a ``LocalCluster`` on 127.0.0.1, ``dask scheduler`` and
``dask worker`` as subprocesses, and TLS certificates for them."""

import contextlib
import datetime
import ipaddress
import json
import os
import pickle
import subprocess
import sys
import time

from distributed.diagnostics.plugin import SchedulerPlugin


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


class TaskSpecSizes(SchedulerPlugin):
    """Records the pickled size of every task the client submits."""

    name = "task-spec-sizes"

    def __init__(self):
        self.sizes = {}

    def update_graph(self, scheduler, *, keys=(), **kwargs):
        for key in keys:
            ts = scheduler.tasks.get(key)
            if ts is not None and ts.run_spec is not None:
                self.sizes[str(key)] = len(pickle.dumps(ts.run_spec, protocol=5))


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
