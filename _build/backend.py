"""The build backend: setuptools' own, which also writes the commit being built into the
package (``onebit_dask/_revision.json``), so that an installed wheel names its revision
(:func:`onebit_dask.utils.provenance.revision`).

``build_wheel`` and ``build_sdist`` run ``git rev-parse HEAD`` and ``git status`` in the
source directory; where that is no git work tree (an unpacked sdist), the file the sdist
carries is kept, and without one the wheel has none (its revision is then pip's record
of a VCS install, or ``"unknown"``; a copy an earlier build left in ``build/lib`` is
removed). A file this backend wrote is removed after the build. The sdist carries this
file (``MANIFEST.in``). Editable installs are setuptools' unchanged (the
package then reads the work tree's ``HEAD`` itself).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F401,F403  (every hook setuptools has)

REVISION_FILE = os.path.join("onebit_dask", "_revision.json")


def _git(*args) -> str | None:
    try:
        proc = subprocess.run(["git", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


@contextlib.contextmanager
def _revision_file():
    head = _git("rev-parse", "HEAD")
    top = _git("rev-parse", "--show-toplevel")
    ours = head and top and os.path.realpath(top) == os.path.realpath(os.getcwd())
    if not ours:  # not a work tree of its own: keep what an sdist carries, nothing else
        if not os.path.exists(REVISION_FILE):
            with contextlib.suppress(FileNotFoundError):  # an earlier build's copy
                os.remove(os.path.join("build", "lib", REVISION_FILE))
        yield
        return
    status = _git("--no-optional-locks", "status", "--porcelain", "--untracked-files=no")
    with open(REVISION_FILE, "w") as fh:
        json.dump({"git_revision": head,
                   "source_tree_modified": "unknown" if status is None else
                   str(bool(status)).lower()}, fh)
    try:
        yield
    finally:
        os.remove(REVISION_FILE)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with _revision_file():
        return build_meta.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    with _revision_file():
        return build_meta.build_sdist(sdist_directory, config_settings)
