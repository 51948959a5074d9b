"""Where a store lives: a local path, or a URL that fsspec reaches (``memory://``,
``s3://``, ...).

A ``file://`` URL is a local path. Other URLs are opened through zarr's store API
(``zarr.open_group(url)`` uses :class:`zarr.storage.FsspecStore`); their options
(credentials, an ``endpoint_url``) come from fsspec's configuration, e.g. the
environment variable ``FSSPEC_S3_ENDPOINT_URL`` or ``fsspec.config.conf["s3"]``, or
from the ``storage_options`` a call gives (:func:`options`), which hold in this process
only: they never enter a task graph, so Dask workers in other processes reach a URL with
their own configuration.
"""

from __future__ import annotations

import contextlib
import os
import threading

_OPTIONS: dict[str, list[dict]] = {}  # URL -> the storage_options given for it (a stack)
_LOCK = threading.Lock()
STORE_TYPES = ("FsspecStore", "LocalStore", "FSMap")  # zarr's and fsspec's store objects


def is_store(target) -> bool:
    """Whether ``target`` is a store object :func:`location` reads (not a path)."""
    return type(target).__name__ in STORE_TYPES


def location(target, storage_options=None, name: str = "path"):
    """``(path, storage_options)`` of a store target: a path or URL (``str`` or
    ``os.PathLike``), a :class:`zarr.storage.FsspecStore`, a
    :class:`zarr.storage.LocalStore` or an fsspec ``FSMap``, whose URL and file system's
    options it gives (``storage_options`` must then be ``None``)."""
    if isinstance(target, (str, os.PathLike)):
        return target, storage_options
    fs = getattr(target, "fs", None) if is_store(target) else None
    root = getattr(target, "path", None) if fs is not None else None
    if fs is not None and root is None:
        root = getattr(target, "root", None)  # an FSMap
    if fs is None and type(target).__name__ == "LocalStore":
        return os.fspath(target.root), storage_options
    if fs is None or root is None:
        raise TypeError(f"{name}={target!r} is not allowed: give a path or URL (str or "
                        "os.PathLike), a zarr FsspecStore or LocalStore, or an fsspec FSMap")
    if storage_options is not None:
        raise TypeError(f"storage_options is not allowed with {name}={target!r}: the store "
                        "carries its file system's options")
    url = fs.unstrip_protocol(root)
    if not is_url(normalise(url)):
        return url, None
    # how zarr's FsspecStore drives the file system, not where it is
    return url, {k: v for k, v in fs.storage_options.items() if k not in ("asynchronous", "loop")}


@contextlib.contextmanager
def each_with_options(storage_options, **targets):
    """Within the block, each target (``name=target``, ``None`` for none) opens with its
    own options: a store object's (:func:`location`), or ``storage_options`` for a URL
    given as a string; yields ``{name: path}``. ``storage_options`` without a URL given as
    a string to take them is refused."""
    located = {name: location(t, None, name) if is_store(t) else (t, None)
               for name, t in targets.items()}
    urls = [p for p, _ in located.values()
            if isinstance(p, (str, os.PathLike)) and is_url(normalise(p))]
    with contextlib.ExitStack() as stack:
        for name, (path, own) in located.items():
            if own is not None:
                stack.enter_context(options(own, path))
        if storage_options:
            plain = [p for name, (p, own) in located.items() if own is None and p in urls]
            stack.enter_context(options(storage_options, *plain))
        yield {name: path for name, (path, _) in located.items()}


@contextlib.contextmanager
def options(storage_options, *targets):
    """Within the block, the URLs under each of ``targets`` open with ``storage_options``
    in this process (fsspec's; ``None`` or ``{}``: fsspec's configuration alone)."""
    if not storage_options:
        yield
        return
    if not isinstance(storage_options, dict):
        raise TypeError(f"storage_options={storage_options!r} is not allowed: give a dict of "
                        "fsspec options (e.g. {'endpoint_url': ..., 'key': ...})")
    urls = [normalise(t) for t in targets if t is not None]
    urls = [u for u in urls if is_url(u)]
    if not urls:
        raise ValueError("storage_options is not allowed without a URL: local paths take "
                         "none; give an s3://, gs://, ... URL, or drop storage_options")
    entry = dict(storage_options)  # this call's: removed by identity, whoever came since
    with _LOCK:
        for url in urls:
            stack = _OPTIONS.setdefault(url, [])
            if any(other != entry for other in stack):
                raise ValueError(f"storage_options for {url!r} are in use with other options "
                                 "by another call in this process: one set of options a URL "
                                 "at a time (give the same options, or one call after the "
                                 "other)")
            stack.append(entry)
    try:
        yield
    finally:
        with _LOCK:
            for url in urls:
                stack = _OPTIONS[url]
                del stack[next(i for i, e in enumerate(stack) if e is entry)]
                if not stack:
                    del _OPTIONS[url]


def options_for(url: str) -> dict:
    """The ``storage_options`` :func:`options` gives ``url`` (or a URL it is under)."""
    with _LOCK:
        under = [p for p in _OPTIONS if url == p or url.startswith(p + "/")]
        return dict(_OPTIONS[max(under, key=len)][-1]) if under else {}


@contextlib.contextmanager
def reached(url: str):
    """Within the block, a failure to reach ``url`` (botocore's errors: no credentials,
    no endpoint; access denied) is one :class:`~onebit_dask.utils.errors.StoreAccessError`
    naming this process (a Dask worker's own, where the block runs on one) and what it
    lacks."""
    try:
        yield
    except Exception as exc:
        if not is_url(normalise(url)) or not (
                isinstance(exc, PermissionError) or type(exc).__module__.startswith("botocore")):
            raise
        import socket

        from ...utils.errors import StoreAccessError

        raise StoreAccessError(
            f"the process {os.getpid()} on {socket.gethostname()} cannot reach {url!r} "
            f"({type(exc).__name__}: {exc}): give it credentials and the endpoint in its own "
            "environment or fsspec configuration (storage_options reach this package's "
            "calls in the client only, never a Dask worker)") from None


def store(path: str, *, read_only: bool = False):
    """What zarr opens ``path`` (a local path or a URL) with: the path itself,
    or, for a URL given ``storage_options``, a :class:`zarr.storage.FsspecStore` with
    them."""
    url = normalise(path)
    given = options_for(url) if is_url(url) else {}
    if not given:
        return path
    from zarr.storage import FsspecStore

    return FsspecStore.from_url(url, storage_options=given, read_only=read_only)


def is_url(path: str) -> bool:
    """Whether ``path`` (as :func:`normalise` returns it) is a URL, not a local path."""
    return "://" in path


def normalise(path) -> str:
    """``path`` as a local absolute path without a trailing separator (workers may run
    elsewhere in the file system tree), or a URL without a trailing ``/``."""
    path = os.fspath(path)
    path = path.removeprefix("file://")
    if is_url(path):
        return path.rstrip("/")
    return os.path.abspath(path).rstrip(os.sep) or os.sep


def join(base: str, *parts: str) -> str:
    """``base/part/...`` for a local path or a URL."""
    return "/".join([base, *parts]) if is_url(base) else os.path.join(base, *parts)


def _fs(url: str):
    import fsspec

    return fsspec.core.url_to_fs(url, **options_for(url))


def exists(path: str) -> bool:
    """Whether anything is at ``path`` (a URL: an object, or objects under the prefix)."""
    if not is_url(path):
        return os.path.lexists(path)
    fs, where = _fs(path)
    return fs.exists(where)


def remove(path: str) -> None:
    """Remove the store at the URL ``path`` (every object under the prefix)."""
    fs, where = _fs(path)
    if fs.exists(where):
        fs.rm(where, recursive=True)
