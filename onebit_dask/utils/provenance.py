"""What computed a result: the package's own version and revision, and the libraries'.

The revision is the package's own, never that of whatever repository happens to contain
the install directory (a virtual environment inside another project's clone):

- when the package directory is ``onebit_dask/`` at the top of a git work tree (a clone,
  an editable install), that tree's ``HEAD``, and whether its tracked files have local
  changes;
- otherwise the commit written into the package when its wheel was built
  (``onebit_dask/_revision.json``, by the build backend ``_build/backend.py``);
- otherwise the commit recorded by pip at install time (``direct_url.json``'s
  ``vcs_info``, for ``pip install git+https://...``);
- otherwise ``"unknown"``.

The BLAS a process computes with (:func:`blas`) is part of what computed a result: the same
seed gives the same bits only where every process runs the same BLAS library and kernel
(``OPENBLAS_CORETYPE`` picks OpenBLAS's), since another kernel rounds sums in another
order, one bit's sign can change, and the fit then takes another path.
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
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # above utils/
    top = _git(package, "rev-parse", "--show-toplevel")
    if top is not None and os.path.realpath(top) == os.path.realpath(os.path.dirname(package)):
        head = _git(package, "rev-parse", "HEAD")
        status = _git(top, "status", "--porcelain", "--untracked-files=no")
        if head:
            return {"git_revision": head,
                    "source_tree_modified": "unknown" if status is None else
                    str(bool(status)).lower()}
    built = _built_revision(package)
    if built is not None:
        return built
    return {"git_revision": _recorded_revision() or "unknown", "source_tree_modified": "unknown"}


def _built_revision(package: str) -> dict | None:
    """The revision the build backend wrote into the package, if it did."""
    try:
        with open(os.path.join(package, "_revision.json")) as fh:
            found = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or not isinstance(found.get("git_revision"), str):
        return None
    return {"git_revision": found["git_revision"],
            "source_tree_modified": str(found.get("source_tree_modified", "unknown"))}


@functools.cache
def blas() -> str:
    """This process's BLAS libraries as threadpoolctl reports them, one
    ``"<library> <version> <kernel> (<file prefix>)"`` each, joined by ``"; "`` (e.g.
    ``"openblas 0.3.31 Haswell (libscipy_openblas64_)"``); ``"none found"`` if none is
    loaded."""
    import numpy  # noqa: F401  (the libraries whose BLAS the fit uses, loaded)
    import scipy.linalg  # noqa: F401
    from threadpoolctl import threadpool_info

    found = {f"{i.get('internal_api')} {i.get('version')} {i.get('architecture', '-')} "
             f"({i.get('prefix')})" for i in threadpool_info() if i.get("user_api") == "blas"}
    return "; ".join(sorted(found)) or "none found"


def workers_blas(client) -> dict:
    """``{worker address: blas()}`` for the workers of a ``distributed.Client``."""
    return dict(sorted(client.run(blas).items()))


def blas_summary(client_blas: str, by_worker: dict) -> str:
    """One line for a result's provenance: the client's BLAS, and the workers' where they
    run another (``"client: X; workers: the same (2)"`` or ``"client: X; workers: Y (1),
    X (1)"``)."""
    kinds: dict = {}
    for sig in by_worker.values():
        kinds[sig] = kinds.get(sig, 0) + 1
    if not kinds:
        return f"client: {client_blas}; workers: none"
    if set(kinds) == {client_blas}:
        return f"client: {client_blas}; workers: the same ({kinds[client_blas]})"
    return f"client: {client_blas}; workers: " + ", ".join(f"{k} ({n})" for k, n in
                                                           sorted(kinds.items()))


def warn_if_blas_differs(client_blas: str, by_worker: dict) -> None:
    """One ``UserWarning`` when a worker reports another BLAS than this process."""
    other = sorted(a for a, sig in by_worker.items() if sig != client_blas)
    if other:
        import warnings

        warnings.warn(
            f"{len(other)} of {len(by_worker)} Dask workers ({other[0]}"
            f"{', ...' if len(other) > 1 else ''}) run another BLAS than this process "
            f"({by_worker[other[0]]!r} against {client_blas!r}): the fit's numbers equal an "
            "in-process run only to rounding, and may take another path; give every process "
            "the same BLAS and OPENBLAS_CORETYPE for identical numbers",
            UserWarning, stacklevel=3)


def processes_blas(client=None) -> str:
    """The BLAS of this process and, with a ``distributed.Client``, of its workers, as one
    line (:func:`blas_summary`; ``"...; workers: none (in-process)"`` without a client),
    with one warning where a worker runs another BLAS than this process."""
    mine = blas()
    if client is None:
        return f"client: {mine}; workers: none (in-process)"
    theirs = workers_blas(client)
    warn_if_blas_differs(mine, theirs)
    return blas_summary(mine, theirs)


def provenance() -> dict:
    """Flat attributes for a result: ``onebit_dask_version``, ``git_revision``,
    ``source_tree_modified``, ``python_version``, ``blas`` (this process's, :func:`blas`)
    and ``<library>_version`` for each of :data:`LIBRARIES` (``scikit_learn_version``)."""
    from .. import __version__

    out = {"onebit_dask_version": __version__, **revision(),
           "python_version": platform.python_version(), "blas": blas()}
    for name in LIBRARIES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "not installed"
        out[f"{name.replace('-', '_')}_version"] = version
    return out
