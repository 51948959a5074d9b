"""The sweep specs and cluster configs that ship with the package.

In the repository they are ``pipelines/*.yaml`` and ``cluster/*.yaml``; an installed
package holds them as ``onebit_dask._pipelines`` and ``onebit_dask._cluster``
(``pyproject.toml`` maps the directories). A command names one by its file name
without ``.yaml`` (``onebit-dask sweep quickstart``, ``--cluster local``); a path that
exists is always taken as a path.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

KINDS = {"pipelines": "sweep specs", "cluster": "cluster configs"}


def directory(kind: str):
    """The directory of the shipped files of ``kind`` (``"pipelines"`` or ``"cluster"``):
    the installed package's data, else the repository's top-level directory beside the
    package (a source tree on ``PYTHONPATH``)."""
    try:
        spec = importlib.util.find_spec(f"onebit_dask._{kind}")
    except ModuleNotFoundError:
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        if any(name.endswith(".yaml") for name in os.listdir(location)):
            return Path(location)
    return Path(__file__).resolve().parents[2] / kind


def names(kind: str) -> list[str]:
    """The names (file names without ``.yaml``) of the shipped files of ``kind``."""
    where = directory(kind)
    if not where.is_dir():
        return []
    return sorted(p.name[:-len(".yaml")] for p in where.iterdir() if p.name.endswith(".yaml"))


def resolve(kind: str, name) -> str:
    """``name`` itself when it is an existing path, else the shipped file it names
    (``quickstart`` or ``quickstart.yaml``), else ``name`` unchanged (the caller reports
    that it does not exist)."""
    text = os.fspath(name)
    if os.path.exists(text) or os.sep in text or (os.altsep and os.altsep in text):
        return text
    stem = text.removesuffix(".yaml")
    if stem in names(kind):
        return os.fspath(directory(kind) / f"{stem}.yaml")
    return text


def describe(kind: str) -> str:
    """``"NAME  first comment or description"`` lines of the shipped files of ``kind``."""
    lines = []
    for name in names(kind):
        text = (directory(kind) / f"{name}.yaml").read_text(encoding="utf-8")
        about = next((line.lstrip("# ").strip() for line in text.splitlines()
                      if line.startswith("#") and line.lstrip("# ").strip()), "")
        for line in text.splitlines():
            if line.startswith("description:"):
                about = line.split(":", 1)[1].strip()
        lines.append(f"  {name:28s} {about}")
    return "\n".join(lines)
