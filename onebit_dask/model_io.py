"""A fitted (or checkpointed) :class:`~onebit_dask.OneBitMultiLabel` in a zarr (v3) group.

Layout of a model store (no pickle)::

    MODEL.zarr/
        Q_top, V_top      (d1, 2k) float64: the client's share of the state (A_ = Q_top)
        blocks/<s>/       one group per label block s, attrs {"lo", "hi"}:
            Q, V, B       (hi - lo, 2k) float64: the block's rows of Q_bot, V_bot and B_
        attrs:  format, version, params (get_params() without client), n_features_in,
                n_labels, n_steps, n_samples_seen, fit_s, bounds, history (the list of
                dicts), data (what the model was fitted on: a synthetic problem's fields,
                an observations store's path and shape, ...; None after partial_fit),
                rng_state, versions (package, numpy, zarr, python) and, in a checkpoint,
                checkpoint = {"fingerprint": ...}

Each block is written, and read back, by the task that holds it (:func:`write_block`,
:func:`read_block` run through ``engine.map``): on Dask every worker reads and writes its
own rows, so the path must be visible to the workers (a shared file system), and the
label side never passes through the client. The root attrs are written last, so a store
whose writer died is not taken for a model.

A store is written into ``PATH.tmp`` and then moved into place by :func:`replace_store`:
``PATH -> PATH.old``, ``PATH.tmp -> PATH``, remove ``PATH.old``. A process killed at any
point leaves either ``PATH`` or ``PATH.old`` whole; :func:`recover` puts ``PATH.old``
back when ``PATH`` is missing.
"""

from __future__ import annotations

import os
import platform
import shutil

import numpy as np
import zarr

from .engine.blocks import Block

FORMAT = "onebit-dask/model"
VERSION = 1
SLOTS = ("Q", "V", "B")
CHUNK_ROWS = 65_536  # label rows per chunk of a block's arrays


class ModelStoreError(ValueError):
    """A path that is not a (readable) onebit-dask model store."""


# -- paths -----------------------------------------------------------------------------
def store_path(path) -> str:
    """``path`` as an absolute path without a trailing separator (workers may run
    elsewhere in the file system tree)."""
    return os.path.abspath(os.fspath(path)).rstrip(os.sep) or os.sep


def _tmp(path: str) -> str:
    return path + ".tmp"


def _old(path: str) -> str:
    return path + ".old"


def recover(path: str) -> None:
    """Finish an interrupted :func:`replace_store`: ``PATH.old`` back to ``PATH`` when
    ``PATH`` is missing; ``PATH.old`` removed when ``PATH`` is there. ``PATH.tmp`` is
    never trusted (its writer may have died) and is left for the next write to clear."""
    old = _old(path)
    if not os.path.isdir(old):
        return
    if os.path.exists(path):
        shutil.rmtree(old)
    else:
        os.replace(old, path)


def replace_store(tmp: str, path: str) -> None:
    """Move the whole store ``tmp`` to ``path``, replacing what is there, such that a
    kill at any point leaves one whole store at ``path`` or ``PATH.old``."""
    old = _old(path)
    if os.path.exists(path):
        if os.path.exists(old):
            shutil.rmtree(old)
        os.replace(path, old)
    os.replace(tmp, path)
    if os.path.exists(old):
        shutil.rmtree(old)


# -- block functions (run where the block lives) -----------------------------------------
def _block_path(path: str, s: int) -> str:
    return os.path.join(path, "blocks", str(s))


def write_block(block: Block, s: int, path: str) -> Block:
    """Write the block's ``Q``, ``V``, ``B`` rows into ``PATH/blocks/<s>``; the block is
    unchanged, ``out = (lo, hi)``."""
    group = zarr.open_group(_block_path(path, s), mode="w", zarr_format=3,
                            attributes={"lo": block.lo, "hi": block.hi})
    for name in SLOTS:
        rows = block.slots[name]
        group.create_array(name, data=rows,
                           chunks=(max(1, min(CHUNK_ROWS, rows.shape[0])), rows.shape[1]))
    return block.evolve(out=(block.lo, block.hi))


def read_block(block: Block, s: int, path: str) -> Block:
    """The block ``[lo, hi)`` with its state read from ``PATH/blocks/<s>``; ``out = None``."""
    where = _block_path(path, s)
    try:
        group = zarr.open_group(where, mode="r", zarr_format=3)
        stored = (group.attrs.get("lo"), group.attrs.get("hi"))
        slots = {name: group[name][...] for name in SLOTS}
    except (OSError, KeyError, ValueError) as exc:  # missing or damaged group
        raise ModelStoreError(f"model store {path!r} is damaged: block {s} ({where}) cannot be "
                              f"read ({type(exc).__name__}: {exc}); save or fit it again"
                              ) from None
    n = block.hi - block.lo
    if stored != (block.lo, block.hi) or any(a.shape[0] != n for a in slots.values()):
        raise ModelStoreError(f"model store {path!r} is damaged: block {s} holds labels "
                              f"{stored}, expected [{block.lo}, {block.hi})")
    return Block(block.lo, block.hi, slots)


# -- whole stores --------------------------------------------------------------------------
def versions() -> dict:
    from . import __version__

    return {"onebit_dask": __version__, "numpy": np.__version__, "zarr": zarr.__version__,
            "python": platform.python_version()}


def write_store(path: str, top, engine, attrs: dict) -> None:
    """Write a whole store at ``path`` (a new directory): the tops from this process,
    each block from the task that holds it on ``engine``, then ``attrs`` (and the
    format), which mark the store complete."""
    root = zarr.open_group(path, mode="w", zarr_format=3)
    for name, array in (("Q_top", top.Q), ("V_top", top.V)):
        root.create_array(name, data=array)
    root.create_group("blocks")
    written = engine.map(write_block, path, per_block=list(range(len(attrs["bounds"]) - 1)))
    bounds = attrs["bounds"]
    if [w[0] for w in written] != bounds[:-1] or [w[1] for w in written] != bounds[1:]:
        raise RuntimeError(f"the label blocks written to {path!r} do not match the bounds "
                           f"{bounds}: {written}")
    root.update_attributes({**attrs, "format": FORMAT, "version": VERSION,
                            "versions": versions()})


def write_store_atomic(path: str, top, engine, attrs: dict) -> None:
    """:func:`write_store` into ``PATH.tmp``, then :func:`replace_store`."""
    recover(path)
    tmp = _tmp(path)
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    write_store(tmp, top, engine, attrs)
    replace_store(tmp, path)


def read_attrs(path: str, name: str = "model") -> dict:
    """The attrs of the model store at ``path``, checked (``name`` is the parameter
    named in the errors)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        if os.path.isdir(_old(path)):
            raise FileNotFoundError(
                f"{name}={path!r} does not exist, but {_old(path)!r} does: a write was "
                f"interrupted between two renames; rerun the fit with checkpoint={path!r} "
                f"(it resumes from there), or rename {_old(path)!r} to {path!r}")
        raise FileNotFoundError(f"{name}={path!r} does not exist: give the path of a model "
                                "written by OneBitMultiLabel.save or onebit-dask fit --save")
    try:
        attrs = dict(zarr.open_group(path, mode="r", zarr_format=3).attrs)
    except Exception as exc:  # zarr raises several types for a path that is not a group
        raise ModelStoreError(f"{name}={path!r} is not an onebit-dask model store (not a zarr "
                              f"v3 group: {type(exc).__name__})") from None
    if attrs.get("format") != FORMAT:
        raise ModelStoreError(f"{name}={path!r} is not an onebit-dask model store (attrs format="
                              f"{attrs.get('format')!r}, expected {FORMAT!r}; a store whose "
                              "writer was interrupted has none)")
    if not isinstance(attrs.get("version"), int) or attrs["version"] > VERSION:
        raise ModelStoreError(f"{name}={path!r} has model format version "
                              f"{attrs.get('version')!r}; this onebit-dask reads versions <= "
                              f"{VERSION}: upgrade onebit-dask")
    return attrs


def read_top(path: str):
    """``(Q_top, V_top)`` of the store at ``path``."""
    root = zarr.open_group(path, mode="r", zarr_format=3)
    return root["Q_top"][...], root["V_top"][...]


def read_blocks(path: str, engine, bounds) -> None:
    """Start ``engine``'s blocks at ``bounds``; each block reads its own rows."""
    engine.start(bounds)
    engine.map(read_block, path, per_block=list(range(len(bounds) - 1)))


def remove_store(path: str) -> None:
    """Remove a model store (only one: anything else at ``path`` is refused)."""
    read_attrs(path, "path")
    shutil.rmtree(path)
