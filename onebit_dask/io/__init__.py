"""The formats the package reads and writes, one module each, and :func:`detect`, the one
answer to "what is at this path".

* :mod:`.xc`: XC/svmlight multi-label text files;
* :mod:`.csr_store`: a label matrix in a zarr CSR store (converted from an XC file);
* :mod:`.observations`: single-label observations in a zarr store
  (:func:`write_observations`);
* :mod:`.stores`: what the zarr stores share (format attributes, atomic writes, locks,
  paths). The model store (:mod:`onebit_dask.persist.model_store`) and the sweep cube
  (:mod:`onebit_dask.sweep.cube`) are written by the layers that own their contents; their
  format names are rows of :data:`FORMATS` too.

A new store format is one module here and one row in :data:`FORMATS`. Nothing here
imports zarr until a store is read or written.
"""

from __future__ import annotations

import os

__all__ = ["FORMATS", "detect", "write_observations"]

FORMATS = {
    "onebit-dask/observations": "observations",
    "onebit-dask/csr": "csr",
    "onebit-dask/model": "model",
    "onebit-dask/sweep": "cube",
}
"""The ``format`` attribute of each kind of store -> the kind :func:`detect` names."""

FORMAT_OF = {kind: name for name, kind in FORMATS.items()}
"""The ``format`` attribute a store of each kind carries."""


def detect(path) -> str | None:
    """What is at ``path``: ``"xc"`` for a local file (an XC/svmlight text file), the kind of
    a zarr store whose ``format`` attribute is a row of :data:`FORMATS` (``"observations"``,
    ``"csr"``, ``"model"``, ``"cube"``), or ``None`` (nothing there, or something else: the
    caller says what it expected)."""
    from .stores import paths
    from .stores.zarr_format import group_attrs

    path = os.fspath(path)
    if not paths.is_url(path) and os.path.isfile(path):
        return "xc"
    if not paths.is_url(path) and not os.path.isdir(path):
        return None
    return FORMATS.get((group_attrs(path) or {}).get("format"))


def __getattr__(name):  # write_observations imports zarr: on first use
    if name == "write_observations":
        from .observations import write_observations

        return write_observations
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), "write_observations"])
