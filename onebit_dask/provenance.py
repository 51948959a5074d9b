"""What computed a result: the package's own version and revision, and the libraries'.

The revision is the package's own, never that of whatever repository happens to contain
the install directory (a virtual environment inside another project's clone):

- when the package directory is ``onebit_dask/`` at the top of a git work tree (a clone,
  an editable install), that tree's ``HEAD``, and whether its tracked files have local
  changes;
- otherwise the commit recorded by pip at install time (``direct_url.json``'s
  ``vcs_info``, for ``pip install git+https://...``);
- otherwise ``"unknown"``.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import subprocess
from importlib import metadata

DISTRIBUTION = "onebit-dask"
LIBRARIES = ("numpy", "scipy", "scikit-learn", "dask", "distributed", "zarr", "xarray")


def _git(directory: str, *args) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", directory, *args], capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _recorded_revision() -> str | None:
    """The commit pip recorded when it installed the package from a VCS URL."""
    try:
        text = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    try:
        return (json.loads(text or "{}").get("vcs_info") or {}).get("commit_id")
    except ValueError:
        return None


@functools.cache
def revision() -> dict:
    """``{"git_revision": ..., "source_tree_modified": "true" | "false" | "unknown"}``."""
    package = os.path.dirname(os.path.abspath(__file__))
    top = _git(package, "rev-parse", "--show-toplevel")
    if top is not None and os.path.realpath(top) == os.path.realpath(os.path.dirname(package)):
        head = _git(package, "rev-parse", "HEAD")
        status = _git(top, "status", "--porcelain", "--untracked-files=no")
        if head:
            return {"git_revision": head,
                    "source_tree_modified": "unknown" if status is None else
                    str(bool(status)).lower()}
    return {"git_revision": _recorded_revision() or "unknown", "source_tree_modified": "unknown"}


def provenance() -> dict:
    """Flat attributes for a result: ``onebit_dask_version``, ``git_revision``,
    ``source_tree_modified``, ``python_version`` and ``<library>_version`` for each of
    :data:`LIBRARIES` (``scikit_learn_version``)."""
    from . import __version__

    out = {"onebit_dask_version": __version__, **revision(),
           "python_version": platform.python_version()}
    for name in LIBRARIES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "not installed"
        out[f"{name.replace('-', '_')}_version"] = version
    return out
