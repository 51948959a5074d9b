"""Where a store lives: a local path, or a URL that fsspec reaches (``memory://``,
``s3://``, ...).

A ``file://`` URL is a local path. Other URLs are opened through zarr's store API
(``zarr.open_group(url)`` uses :class:`zarr.storage.FsspecStore`); their options
(credentials, an ``endpoint_url``) come from fsspec's configuration, e.g. the
environment variable ``FSSPEC_S3_ENDPOINT_URL`` or ``fsspec.config.conf["s3"]``.
"""

from __future__ import annotations

import os


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

    return fsspec.core.url_to_fs(url)


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
