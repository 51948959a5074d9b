"""One runner per store: a lock file next to the store, with a heartbeat.

``STORE.lock`` is created with ``O_CREAT | O_EXCL`` (atomic on local file systems
and on NFS v3+, Lustre, GPFS) and holds the runner's host, pid, start time and a
random token. While the runner works a thread refreshes its mtime every
:data:`HEARTBEAT_S` seconds and checks the token is still its own. A second runner
refuses at once, naming the holder, unless the lock is stale:

- same host and the pid is gone (a SIGKILLed runner: taken over at once), or
- the heartbeat is older than :data:`STALE_AFTER_S` (a runner on another host that
  died, or whose host died; the time allows for NFS attribute caching and clock skew).

A stale lock is renamed away (only one of two racing runners can rename it), then
the new lock is created with ``O_EXCL`` again. A runner whose lock was taken over
(it froze for longer than the stale time) stops before its next write.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import threading
import time
import uuid

from .errors import SweepRuntimeError

HEARTBEAT_S = 10.0
STALE_AFTER_S = 120.0


class StoreLockedError(SweepRuntimeError):
    """The store is in use by another runner."""


def lock_path(store: str) -> str:
    return os.fspath(store).rstrip("/") + ".lock"


def _read(path: str) -> dict | None:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class StoreLock:
    """Context manager holding ``STORE.lock`` for a sweep runner."""

    def __init__(self, store: str, *, heartbeat: float = HEARTBEAT_S,
                 stale_after: float = STALE_AFTER_S):
        self.store = os.fspath(store)
        self.path = lock_path(self.store)
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
        who = (f"host {holder.get('host')}, pid {holder.get('pid')}, since "
               f"{holder.get('started')}" if holder else "a runner still writing the lock")
        raise StoreLockedError(
            f"the store {self.store!r} is in use by another sweep runner ({who}; last "
            f"heartbeat {age:.0f} s ago): wait for it to finish, or stop it; a lock whose "
            f"runner died is taken over after {self.stale_after:.0f} s without heartbeat "
            f"({self.path})")

    def acquire(self) -> None:
        info = {"host": socket.gethostname(), "pid": os.getpid(),
                "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                "token": uuid.uuid4().hex}
        for _ in range(5):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._take_over_if_stale()
                continue
            try:
                os.write(fd, json.dumps(info).encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            self.info = info
            self._thread = threading.Thread(target=self._beat, name="onebit-sweep-lock",
                                            daemon=True)
            self._thread.start()
            return
        raise StoreLockedError(f"the store {self.store!r}: could not take its lock "
                               f"{self.path} (other runners keep taking it)")

    def _take_over_if_stale(self) -> None:
        holder = _read(self.path)
        try:
            age = time.time() - os.stat(self.path).st_mtime
        except FileNotFoundError:
            return  # released meanwhile: try again
        if holder is None and age < 2.0:
            time.sleep(0.2)  # being written: read it again
            holder = _read(self.path)
        if self._stale(holder, age) is None:
            self._refuse(holder, age)
        grave = f"{self.path}.stale-{uuid.uuid4().hex[:12]}"
        try:
            os.rename(self.path, grave)
        except FileNotFoundError:
            return  # another runner took it over first
        moved = _read(grave)
        if holder is not None and moved is not None and moved.get("token") != holder.get("token"):
            # a fresh lock replaced the stale one between our read and the rename: put it back
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
        if self._stale(holder, age) is None:
            self._refuse(holder, age)

    # -- heartbeat ----------------------------------------------------------------
    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            holder = _read(self.path)
            if holder is None or holder.get("token") != self.info["token"]:
                self.lost = (f"its lock {self.path} was taken over by "
                             f"{(holder or {}).get('host')} pid {(holder or {}).get('pid')}")
                return
            try:
                os.utime(self.path)
            except OSError:
                pass  # a full or flaky file system: try again at the next beat

    def check(self) -> None:
        """Raise if the lock is no longer ours (checked before each write)."""
        holder = _read(self.path)
        if self.lost is None and (holder is None or holder.get("token") != self.info["token"]):
            self.lost = f"its lock {self.path} is gone or was taken over"
        if self.lost:
            raise StoreLockedError(f"the runner stopped writing {self.store!r}: {self.lost}; "
                                   "the cells written so far are kept")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        holder = _read(self.path)
        if self.info and holder and holder.get("token") == self.info["token"]:
            os.remove(self.path)

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
