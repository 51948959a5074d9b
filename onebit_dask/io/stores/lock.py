"""One writer per store: a lock file next to the store, with a heartbeat.

Used by the sweep runner (its cube) and by fits and saves (a checkpoint, a model).
``STORE.lock`` is created with ``O_CREAT | O_EXCL`` (atomic on local file systems
and on NFS v3+, Lustre, GPFS) and holds :data:`FORMAT`, the writer's host, pid,
start time and a random token. While the writer works a thread refreshes its mtime
every :data:`HEARTBEAT_S` seconds and checks the token is still its own. A second
writer refuses at once, naming the holder, unless the lock is stale:

- same host and the pid is gone (a SIGKILLed runner: taken over at once), or
- the heartbeat is older than :data:`STALE_AFTER_S` (a runner on another host that
  died, or whose host died; the time allows for NFS attribute caching and clock skew).

A stale lock is renamed away (only one of two racing writers can rename it), then
the new lock is created with ``O_EXCL`` again. A writer whose lock was taken over
(it froze for longer than the stale time) stops before its next write. A file at
``STORE.lock`` that is not such a lock (the user's) is never renamed or removed:
:class:`~onebit_dask.io.stores.atomic.ForeignPathError`.

Only local (and network) file systems have ``O_EXCL``: for a store on an object
store (``s3://``, ``memory://``, ...) no lock is taken; one writer at a time is the
user's duty there (``docs/STORES.md``).
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import threading
import time
import uuid

from ...utils.errors import RunError
from ...utils.signals import sigint_deferred
from .atomic import ForeignPathError

HEARTBEAT_S = 10.0
STALE_AFTER_S = 120.0


FORMAT = "onebit-dask/lock"


class StoreLockedError(RunError):
    """The store is in use by another writer."""


def lock_path(store: str) -> str:
    return os.fspath(store).rstrip("/") + ".lock"


def _read(path: str) -> dict | None:
    try:
        with open(path) as fh:
            holder = json.load(fh)
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def _ours(holder: dict | None) -> bool:
    """Whether ``holder`` (a lock file's content) is one of this package's locks (those
    written before :data:`FORMAT` was recorded have the same keys)."""
    return holder is not None and (holder.get("format") == FORMAT or
                                   {"host", "pid", "started", "token"} <= set(holder))


def _foreign(path: str, holder: dict | None, age: float) -> bool:
    """Whether the file at ``path`` is not one of this package's locks: a directory, or
    content that is not a lock (an empty file younger than 2 s is a lock being written)."""
    if os.path.isdir(path) or _ours(holder):
        return os.path.isdir(path)
    try:
        empty = os.path.getsize(path) == 0
    except OSError:
        return False
    return not empty or age >= 2.0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class StoreLock:
    """Context manager holding ``STORE.lock`` for one writer of ``store``.

    Parameters
    ----------
    store : str
        Path of the store (the lock is ``STORE.lock``).
    writer : str, default "sweep runner"
        What the holder is, in the messages ("in use by another sweep runner").
    heartbeat, stale_after : float
        Seconds between heartbeats; seconds without one after which a lock is stale.
    kind : str, default "store"
        What ``store`` is, in the messages ("the store ... is in use").
    path : str, optional
        The lock file, where ``STORE.lock`` does not suit (a directory of figures that
        may be the working directory, whose parent is not ours to write: a file in it).
    """

    def __init__(self, store: str, *, writer: str = "sweep runner",
                 heartbeat: float = HEARTBEAT_S, stale_after: float = STALE_AFTER_S,
                 kind: str = "store", path: str | None = None):
        self.store = os.fspath(store)
        self.writer, self.kind = writer, kind
        self.path = lock_path(self.store) if path is None else os.fspath(path)
        self.heartbeat, self.stale_after = heartbeat, stale_after
        self.info = None
        self.lost = None
        self._stop = threading.Event()
        self._thread = None

    # -- holder -------------------------------------------------------------------
    def _stale(self, holder: dict | None, age: float) -> str | None:
        """Why the lock is stale, or ``None`` if its holder may be alive."""
        if holder is not None and holder.get("host") == socket.gethostname() \
                and not _pid_alive(int(holder.get("pid", -1))):
            return f"pid {holder.get('pid')} is gone"
        if age > self.stale_after:
            return f"no heartbeat for {age:.0f} s"
        return None

    def _refuse(self, holder: dict | None, age: float):
        writer = (holder or {}).get("writer", self.writer)
        who = (f"host {holder.get('host')}, pid {holder.get('pid')}, since "
               f"{holder.get('started')}" if holder else f"a {writer} still writing the lock")
        raise StoreLockedError(
            f"the {self.kind} {self.store!r} is in use by another {writer} ({who}; last "
            f"heartbeat {age:.0f} s ago): wait for it to finish, or stop it; a lock whose "
            f"{writer} died is taken over after {self.stale_after:.0f} s without "
            f"heartbeat ({self.path})")

    def _foreign(self):
        raise ForeignPathError(
            f"{self.path!r} is in the way of the lock of {self.store!r} and is not an "
            f"onebit-dask lock: move or delete it (onebit-dask never removes what it did "
            "not create)")

    def acquire(self) -> None:
        info = {"format": FORMAT, "writer": self.writer, "host": socket.gethostname(),
                "pid": os.getpid(),
                "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                "token": uuid.uuid4().hex}
        for _ in range(5):
            try:
                with sigint_deferred():  # taken whole (written, beating) or not at all
                    self._create(info)
            except FileExistsError:
                self._take_over_if_stale()
                continue
            except KeyboardInterrupt:  # a Ctrl-C while it was taken: given back
                self.release()
                raise
            return
        raise StoreLockedError(f"the {self.kind} {self.store!r}: could not take its lock "
                               f"{self.path} (other runners keep taking it)")

    def _create(self, info: dict) -> None:
        """Create the lock file holding ``info`` (``FileExistsError`` if there is one),
        then start the heartbeat; a lock file that could not be written is removed (an
        empty one would be nobody's lock, refused for good)."""
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        try:
            os.write(fd, json.dumps(info).encode())
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.remove(self.path)
            raise
        os.close(fd)
        self.info = info
        self._thread = threading.Thread(target=self._beat, name="onebit-store-lock",
                                        daemon=True)
        self._thread.start()

    def _take_over_if_stale(self) -> None:
        holder = _read(self.path)
        try:
            age = time.time() - os.stat(self.path).st_mtime
        except FileNotFoundError:
            return  # released meanwhile: try again
        if holder is None and age < 2.0 and not os.path.isdir(self.path):
            time.sleep(0.2)  # being written: read it again
            holder = _read(self.path)
        if _foreign(self.path, holder, age):
            self._foreign()
        if self._stale(holder, age) is None:
            self._refuse(holder, age)
        grave = f"{self.path}.stale-{uuid.uuid4().hex[:12]}"
        with sigint_deferred():  # the stale lock moved aside and removed, or left as it is
            try:
                os.rename(self.path, grave)
            except FileNotFoundError:
                return  # another runner took it over first
            moved = _read(grave)
            if (holder is not None and moved is not None
                    and moved.get("token") != holder.get("token")):
                # a fresh lock replaced the stale one between our read and the rename: put
                # it back
                try:
                    os.link(grave, self.path)
                finally:
                    os.remove(grave)
                self._refuse(moved, 0.0)
            os.remove(grave)

    def probe(self) -> None:
        """Raise :class:`StoreLockedError` now if a live runner holds the lock (a check
        before starting a cluster; :meth:`acquire` is what decides)."""
        holder = _read(self.path)
        try:
            age = time.time() - os.stat(self.path).st_mtime
        except FileNotFoundError:
            return
        if _foreign(self.path, holder, age):
            self._foreign()
        if self._stale(holder, age) is None:
            self._refuse(holder, age)

    # -- heartbeat ----------------------------------------------------------------
    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            holder = _read(self.path)
            if holder is None:
                continue  # gone, or being written by a writer taking over: check() decides
            if holder.get("token") != self.info["token"]:
                self.lost = (f"its lock {self.path} was taken over by {holder.get('host')} "
                             f"pid {holder.get('pid')}")
                return
            try:
                os.utime(self.path)
            except OSError:
                pass  # a full or flaky file system: try again at the next beat

    def check(self) -> None:
        """Raise if the lock is no longer ours (checked before each write)."""
        holder = _read(self.path)
        if self.lost is None and holder is None:
            self.lost = f"its lock {self.path} is gone"
        elif self.lost is None and holder.get("token") != self.info["token"]:
            self.lost = (f"its lock {self.path} was taken over by {holder.get('host')} pid "
                         f"{holder.get('pid')}")
        if self.lost:
            raise StoreLockedError(f"the {self.writer} stopped writing {self.store!r}: "
                                   f"{self.lost}; what it wrote so far is kept")

    def release(self) -> None:
        """Stop the heartbeat and remove the lock file if it is still ours (also when a
        Ctrl-C cuts the wait for the heartbeat's thread short)."""
        self._stop.set()
        try:
            if self._thread is not None:
                self._thread.join()
        finally:
            holder = _read(self.path)
            if self.info and holder and holder.get("token") == self.info["token"]:
                os.remove(self.path)

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
