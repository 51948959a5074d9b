"""A store written whole or not at all, without touching anything the package did not create.

A store at ``PATH`` is written into a temporary directory next to it,
``.NAME.onebit-tmp-TOKEN`` (``NAME`` is ``PATH``'s last part, ``TOKEN`` random), which
holds a marker file :data:`MARKER` with ``{"format": "onebit-dask/temporary",
"token": TOKEN}``. :func:`replace` then moves it into place:

1. an existing ``PATH`` (which the caller has checked is one of this package's
   stores) gets a marker with a new token and is renamed to ``.NAME.onebit-old-TOKEN``;
2. the temporary is renamed to ``PATH`` and its marker removed;
3. the old store is removed.

A process killed at any point leaves ``PATH`` whole, or no ``PATH`` and a marked
``.NAME.onebit-old-TOKEN`` that :func:`recover` renames back. A Ctrl-C is held back
while a temporary is created and marked and while stores are swapped
(:func:`~onebit_dask.utils.signals.sigint_deferred`): the writer's ``except`` then
removes its temporary, and ``PATH`` is the old store or the new one. Only directories whose
name and marker carry the same token are recognised as the package's own
(:func:`leftovers`): a user's ``PATH.tmp`` or ``PATH.old`` is never renamed or removed.
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import shutil
import tempfile
import uuid

from ...utils.signals import sigint_deferred

MARKER = ".onebit-dask-temporary.json"
TEMPORARY = "onebit-dask/temporary"


class ForeignPathError(FileExistsError):
    """A file or directory that the package did not create is where it must write."""


def _sibling(path: str, kind: str, token: str) -> str:
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.onebit-{kind}-{token}")


def _mark(directory: str, token: str) -> None:
    with open(os.path.join(directory, MARKER), "w") as fh:
        json.dump({"format": TEMPORARY, "token": token}, fh)


def _token_of(directory: str) -> str | None:
    """The token of the marker in ``directory`` if it is the one its name carries."""
    try:
        with open(os.path.join(directory, MARKER)) as fh:
            marker = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("format") != TEMPORARY:
        return None
    token = marker.get("token")
    return token if isinstance(token, str) and directory.endswith(f"-{token}") else None


def temporary_name(path: str) -> str:
    """The name of a new temporary next to ``path`` (a local path); nothing is created
    (:func:`make_temporary`).

    A writer takes the name before its ``try`` and creates the temporary inside it, so
    that its ``except`` (:func:`discard`) knows the name whenever the temporary exists::

        tmp = temporary_name(path)
        try:
            make_temporary(tmp)
            ...  # write into tmp
            replace(tmp, path)
        except BaseException:
            discard(tmp)
            raise
    """
    return _sibling(path, "tmp", uuid.uuid4().hex[:16])


def make_temporary(tmp: str) -> None:
    """Create the marked, empty temporary directory ``tmp`` (a :func:`temporary_name`),
    whole or not at all: a Ctrl-C meanwhile is raised once it is marked, a failure (a
    full disk) removes it (an unmarked directory would never be removed)."""
    token = tmp.rsplit("-", 1)[-1]
    made = False
    try:
        with sigint_deferred():
            os.mkdir(tmp)
            made = True
            _mark(tmp, token)
    except BaseException:
        if made and _token_of(tmp) is None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise


def new_temporary(path: str) -> str:
    """A new, marked, empty temporary directory next to ``path`` (a local path); a
    writer that a Ctrl-C may stop takes :func:`temporary_name` first instead."""
    tmp = temporary_name(path)
    make_temporary(tmp)
    return tmp


def leftovers(path: str, kind: str) -> list[str]:
    """The package's own temporaries (``kind="tmp"``) or replaced stores (``"old"``) of
    ``path``: marked, with the token of their name."""
    head, tail = os.path.split(path)
    found = glob.glob(os.path.join(glob.escape(head), f".{glob.escape(tail)}.onebit-{kind}-*"))
    return sorted(d for d in found if os.path.isdir(d) and _token_of(d) is not None)


def settle_writes(timeout: float = 600.0) -> None:
    """Wait until the writes zarr still runs have finished.

    zarr writes an array's chunks concurrently (``asyncio.gather`` in its I/O thread's
    event loop): when one write fails (a full disk), the failure reaches the caller
    while the other chunks' writes go on, and one that lands after a temporary was
    removed would create its directory again. ``timeout`` only guards against a hang.
    """
    from zarr.core.sync import _get_loop, sync

    async def drain():
        me = asyncio.current_task()
        pending = [task for task in asyncio.all_tasks() if task is not me]
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    if _get_loop().is_running():
        sync(drain())


def discard(directory: str) -> None:
    """Remove ``directory`` if it is one of the package's marked temporaries, once the
    writes into it have finished (:func:`settle_writes`)."""
    if os.path.isdir(directory) and _token_of(directory) is not None:
        settle_writes()
        shutil.rmtree(directory, ignore_errors=True)


def replace(tmp: str, path: str) -> None:
    """Move the marked temporary ``tmp`` to ``path``, replacing the store there (the
    caller has checked it is one of the package's), so that a kill at any point leaves
    one whole store at ``path`` or a marked old one (:func:`recover`)."""
    with sigint_deferred():  # a Ctrl-C meanwhile is raised with the new store in place
        old = None
        if os.path.lexists(path):
            token = uuid.uuid4().hex[:16]
            _mark(path, token)
            old = _sibling(path, "old", token)
            os.rename(path, old)
        os.rename(tmp, path)
        os.remove(os.path.join(path, MARKER))
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def publish(tmp: str, path: str) -> None:
    """Move the marked temporary ``tmp`` to ``path``, where nothing is (unlike
    :func:`replace`): a directory with files that appeared there meanwhile makes the
    rename fail and is left as it is."""
    with sigint_deferred():
        os.rename(tmp, path)
        os.remove(os.path.join(path, MARKER))


def recover(path: str, temporaries: bool = False) -> None:
    """Finish an interrupted :func:`replace`: a marked old store goes back to ``path``
    when ``path`` is missing, and is removed when ``path`` is there. With
    ``temporaries`` (the caller holds the store's lock, so no writer is alive) the
    package's temporaries of ``path`` are removed too."""
    for old in leftovers(path, "old"):
        with sigint_deferred():
            if os.path.lexists(path):
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(old, path)
                os.remove(os.path.join(path, MARKER))
    if temporaries:
        for tmp in leftovers(path, "tmp"):
            shutil.rmtree(tmp, ignore_errors=True)


def writable(directory: str) -> bool:
    """Whether a file can be created in ``directory`` (tried for real: ``os.access``
    says yes to root even on a read-only file system)."""
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".onebit-write-probe-")
    except OSError:
        return False
    os.close(fd)
    os.remove(probe)
    return True


def check_parent(path: str, name: str) -> None:
    """Raise ``ValueError`` unless the directory that will hold ``path`` exists and is
    writable (``name`` is the parameter named in the message)."""
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        what = "is not a directory" if os.path.lexists(parent) else "does not exist"
        raise ValueError(f"{name}={path!r} cannot be written: {parent!r} {what}")
    if not writable(parent):
        raise ValueError(f"{name}={path!r} cannot be written: the directory {parent!r} is "
                         "not writable")
