"""Real cluster back ends on 127.0.0.1 for the tests: a single-node SLURM and an sshd.

Both need root and Debian's packages (``apt-get install slurm-wlm munge openssh-server``);
:func:`missing_slurm` and :func:`missing_sshd` say what is missing, for a skip reason.
Every daemon runs in the foreground as a child of the test process, with its
configuration, keys, state and logs in a temporary directory, and is stopped by its
pid. Nothing under /etc is read or changed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import psutil

ENABLE = ("to run these tests, install the daemons (apt-get install -y slurm-wlm munge "
          "openssh-server) and the cluster extra (pip install -e '.[test,cluster]'), then run "
          "pytest as root; see cluster/README.md")
SLURM_PROGRAMS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo",
                  "scancel")
SSH_PROGRAMS = ("sshd", "ssh", "ssh-keygen")


def _missing(programs, also=()) -> str | None:
    absent = [p for p in programs if shutil.which(p, path=_PATH) is None]
    problems = [*also, *([f"{', '.join(absent)} not found"] if absent else [])]
    if os.geteuid() != 0:
        problems.insert(0, "not root")
    return f"{'; '.join(problems)}: {ENABLE}" if problems else None


# the daemons live in sbin, which a non-login shell may not have on its PATH
_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def missing_slurm() -> str | None:
    """Why a real SLURM cannot start here (a skip reason), or ``None``."""
    return _missing(SLURM_PROGRAMS)


def missing_sshd() -> str | None:
    """Why a real sshd cannot start here (a skip reason), or ``None``."""
    try:
        import asyncssh  # noqa: F401  (distributed.SSHCluster needs it)
        extra = ()
    except ImportError:
        extra = ("asyncssh is not installed",)
    return _missing(SSH_PROGRAMS, extra)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _which(program) -> str:
    return shutil.which(program, path=_PATH)


class Daemons:
    """Foreground daemons started with :class:`subprocess.Popen`, stopped by pid."""

    def __init__(self, root: Path):
        self.root = root
        self.procs: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, argv: list[str], env=None) -> subprocess.Popen:
        log = open(self.root / f"{name}.out", "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.procs.append((name, proc))
        return proc

    def check_alive(self) -> None:
        for name, proc in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with status {proc.returncode}: "
                                   f"{self.log_tail(name)}")

    def log_tail(self, name: str, n: int = 2000) -> str:
        texts = []
        for path in (self.root / f"{name}.out", self.root / f"{name}.log"):
            if path.exists():
                texts.append(path.read_text(errors="replace")[-n:])
        return "\n".join(texts)

    def stop(self) -> None:
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for _, proc in reversed(self.procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


def _wait(what: str, ready, daemons: Daemons, timeout: float = 60.0, names=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        daemons.check_alive()
        if ready():
            return
        time.sleep(0.2)
    logs = "\n".join(daemons.log_tail(n) for n in names)
    raise TimeoutError(f"{what} within {timeout:g} s; logs:\n{logs}")


class Slurm(Daemons):
    """munged, slurmctld and slurmd for one node on 127.0.0.1, partition ``partition``.

    Clients (``sbatch``, ``squeue``, dask-jobqueue) find it through ``self.env``
    (``SLURM_CONF``); no accounting, ``proctrack/linuxproc``, ``task/none``. A submitted
    job is scheduled at once (``batch_sched_delay=0``: 0.6 s from ``sbatch`` to the
    allocation instead of 1.6 s; nothing else waits to be batched on a one-node test
    cluster). A job's processes are followed by their parent ids (``linuxproc``): with
    ``proctrack/pgid`` a cancelled job's step ended 3 s after ``scancel`` (slurmd's log,
    from the cancel to "done with job"), with ``linuxproc`` 20 ms; the tests still wait
    until the jobs leave ``squeue``.
    """

    def __init__(self, root: Path, partition: str = "compute"):
        super().__init__(root)
        self.partition = partition
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "PATH": _PATH}

    def _node_line(self) -> tuple[str, str]:
        out = subprocess.run([_which("slurmd"), "-C"], capture_output=True, text=True,
                             check=True, timeout=30).stdout
        line = next(ln for ln in out.splitlines() if ln.startswith("NodeName="))
        fields = dict(f.split("=", 1) for f in line.split())
        node = fields.pop("NodeName")
        keep = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore",
                "RealMemory")
        return node, " ".join(f"{k}={fields[k]}" for k in keep if k in fields)

    def write_conf(self) -> str:
        node, hardware = self._node_line()
        r = self.root
        for sub in ("state", "spool", "log"):
            (r / sub).mkdir(exist_ok=True)
        self.conf.write_text(f"""\
ClusterName=onebit-test
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r / 'munge.socket'}
StateSaveLocation={r / 'state'}
SlurmdSpoolDir={r / 'spool'}
SlurmctldPidFile={r / 'slurmctld.pid'}
SlurmdPidFile={r / 'slurmd.pid'}
SlurmctldLogFile={r / 'log' / 'slurmctld.log'}
SlurmdLogFile={r / 'log' / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
KillWait=5
MinJobAge=5
InactiveLimit=0
NodeName={node} NodeAddr=127.0.0.1 {hardware} State=UNKNOWN
PartitionName={self.partition} Nodes={node} Default=YES MaxTime=INFINITE State=UP
""")
        return node

    def start_all(self, timeout: float = 60.0) -> None:
        r = self.root
        key = r / "munge.key"
        key.unlink(missing_ok=True)
        subprocess.run([_which("mungekey"), "--create", f"--keyfile={key}"], check=True,
                       capture_output=True, timeout=30)
        key.chmod(0o600)
        self.start("munged", [_which("munged"), "--foreground", "--force",
                              f"--key-file={key}", f"--socket={r / 'munge.socket'}",
                              f"--pid-file={r / 'munged.pid'}", f"--log-file={r / 'munged.log'}",
                              f"--seed-file={r / 'munged.seed'}"])
        _wait("munged did not open its socket", (r / "munge.socket").exists, self, timeout,
              ["munged"])
        node = self.write_conf()
        self.start("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(self.conf)],
                   env=self.env)
        self.start("slurmd", [_which("slurmd"), "-D", "-f", str(self.conf), "-N", node],
                   env=self.env)
        _wait("the SLURM node did not become idle", self.node_idle, self, timeout,
              ["slurmctld", "slurmd", "log/slurmctld", "log/slurmd"])

    def run(self, *argv: str) -> str:
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env,
                              check=True, timeout=30).stdout

    def node_idle(self) -> bool:
        try:
            out = self.run("sinfo", "-h", "-N", "-o", "%t")
        except subprocess.CalledProcessError:
            return False
        return out.split() == ["idle"]

    def jobs(self) -> list[str]:
        """The ids of the jobs squeue shows (pending, running or completing)."""
        return self.run("squeue", "-h", "-o", "%i").split()

    def stop(self) -> None:
        try:  # leave no job behind: cancel, wait until they are gone, then stop the daemons
            subprocess.run(["scancel", "-p", self.partition], env=self.env,
                           capture_output=True, timeout=30)
            deadline = time.monotonic() + 30
            while self.jobs() and time.monotonic() < deadline:
                time.sleep(0.5)
        except (OSError, subprocess.SubprocessError):
            pass
        super().stop()
        # a job step's slurmstepd outlives slurmd (and ignores SIGTERM): end any that
        # still writes into this directory
        for proc in psutil.process_iter(["name"]):
            if proc.info["name"] != "slurmstepd":
                continue
            try:
                if any(f.path.startswith(str(self.root)) for f in proc.open_files()):
                    proc.kill()
            except psutil.Error:
                pass


BLAS_VARIABLES = ("OPENBLAS_", "GOTO_", "GOTOBLAS_", "MKL_", "BLIS_", "OMP_")


def blas_environment() -> dict:
    """The test process's BLAS and threading variables (``OPENBLAS_CORETYPE``,
    ``OPENBLAS_L2_SIZE``, ``OMP_NUM_THREADS``, ...), for processes started elsewhere: an
    sshd session starts from an empty environment, and its workers would otherwise run
    another BLAS kernel than the test process (the same seed gives the same bits only
    with the same kernel)."""
    return {k: v for k, v in os.environ.items() if k.startswith(BLAS_VARIABLES)}


class Sshd(Daemons):
    """An sshd on a free port of 127.0.0.1: a generated host key, one user key for root.

    ``self.known_hosts`` lists the host key for ``[127.0.0.1]:port``, ``self.user_key``
    is the client's private key; password logins are off. ``setenv`` is set in each
    session (e.g. the tests' ``PYTHONPATH``).
    """

    def __init__(self, root: Path, setenv: dict | None = None):
        super().__init__(root)
        self.port = free_port()
        self.host_key = root / "ssh_host_ed25519_key"
        self.user_key = root / "id_ed25519"
        self.known_hosts = root / "known_hosts"
        self.setenv = setenv or {}

    def _keygen(self, path: Path) -> str:
        subprocess.run([_which("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-C", "onebit-test",
                        "-f", str(path)], check=True, capture_output=True, timeout=30)
        return path.with_suffix(".pub").read_text().strip()

    def start_all(self, timeout: float = 30.0) -> None:
        r = self.root
        host_pub = self._keygen(self.host_key)
        (r / "authorized_keys").write_text(self._keygen(self.user_key) + "\n")
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_pub}\n")
        setenv = " ".join(f'{k}="{v}"' for k, v in self.setenv.items())
        (r / "sshd_config").write_text(f"""\
ListenAddress 127.0.0.1:{self.port}
HostKey {self.host_key}
PidFile {r / 'sshd.pid'}
AuthorizedKeysFile {r / 'authorized_keys'}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
{'SetEnv ' + setenv if setenv else ''}
""")
        # sshd's privilege separation directory (made by the package's service script)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.start("sshd", [_which("sshd"), "-D", "-e", "-f", str(r / "sshd_config")])
        _wait("sshd did not accept logins", self.can_login, self, timeout, ["sshd"])

    def ssh_args(self) -> list[str]:
        return [_which("ssh"), "-p", str(self.port), "-i", str(self.user_key),
                "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "StrictHostKeyChecking=yes",
                "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "root@127.0.0.1"]

    def can_login(self) -> bool:
        proc = subprocess.run([*self.ssh_args(), "true"], capture_output=True, timeout=30)
        return proc.returncode == 0
