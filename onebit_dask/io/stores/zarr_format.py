"""What the package's zarr formats share: format attributes, typed attribute reads,
chunk checks through zarr's store API and the one error for a damaged store.

The formats are the observations store (:mod:`onebit_dask.io.observations`), the model
store and checkpoints (:mod:`onebit_dask.persist.model_store`), the sweep cube
(:mod:`onebit_dask.sweep.cube`) and the CSR store (:mod:`onebit_dask.io.csr_store`).
Each array is written with every chunk (``write_empty_chunks``), so a chunk missing
later means damage, which zarr would otherwise read as the fill value.
An array's own metadata (its ``zarr.json``: byte order, data type, chunk grid, fill
value) are digested as written (:func:`array_digest`, a store's ``arrays_sha256``), since
an edit of them reads as other numbers without an error.
"""

from __future__ import annotations

import itertools
import json
import numbers
import os

import numpy as np

from ...utils.errors import RunError
from ...utils.signals import sigint_deferred
from ...utils.warnings import ignored
from . import paths

ALL_CHUNKS = {"write_empty_chunks": True}  # a chunk that is absent is then a lost chunk


def checked_codecs() -> dict:
    """``create_array`` keywords that make every chunk verifiable: zstd with its frame
    checksum (XXH64 of the content), so a chunk whose bytes changed fails to decode
    instead of reading as other numbers."""
    from zarr.codecs import ZstdCodec

    return {"compressors": ZstdCodec(level=0, checksum=True)}


def attrs_digest(attrs: dict, keys) -> str:
    """SHA-256 of the attributes ``keys`` of ``attrs`` (canonical JSON: sorted keys, no
    spaces): the attributes that change what a store answers."""
    import hashlib

    text = json.dumps({k: attrs.get(k) for k in keys}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def check_attrs_digest(attrs: dict, keys, where: str, what: str | None = None) -> None:
    """:class:`DamagedStoreError` naming ``where`` when ``attrs["attrs_sha256"]`` is not
    the digest of ``attrs``' ``keys`` (an attribute was edited, removed or damaged);
    ``what`` names the attributes in the message (default: the keys)."""
    if attrs.get("attrs_sha256") != attrs_digest(attrs, keys):
        raise DamagedStoreError(f"{where} is damaged: its attributes ({what or ', '.join(keys)}) "
                                "differ from what was written (their SHA-256 does not match "
                                "attrs_sha256)")


ARRAY_FIELDS = ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "codecs",
                "fill_value", "dimension_names", "storage_transformers")  # what reads the numbers


def array_digest(array) -> str:
    """SHA-256 of the metadata of ``array`` that decides how its numbers are read
    (:data:`ARRAY_FIELDS`: its shape, data type, chunk grid, codecs with their byte order,
    fill value, dimension names; not its attributes), as zarr reads them back, in a
    canonical JSON (sorted keys, no spaces)."""
    import hashlib

    meta = array.metadata.to_dict()
    fields = {k: meta.get(k) for k in ARRAY_FIELDS}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=_plain)
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(value):
    """A JSON value for what ``json`` cannot write (numpy scalars and arrays, others as
    their text)."""
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    return str(value)


def arrays_digests(group, names) -> dict:
    """``{name: array_digest}`` of the arrays ``names`` of ``group`` (the attribute
    ``arrays_sha256`` of a store)."""
    return {name: array_digest(group[name]) for name in names}


def metadata_problem(name: str, exc: Exception) -> str | None:
    """What opening the array ``name`` raising ``exc`` says: ``None`` when the array is
    missing (zarr's ``KeyError(name)``), else its metadata (its ``zarr.json``) cannot be
    read (a fill value or data type edited into nonsense, a key of it removed)."""
    if isinstance(exc, KeyError) and exc.args and exc.args[0] in (name, name.strip("/")):
        return None
    first = str(exc).splitlines()[0] if str(exc) else ""
    return (f"the metadata of the array {name} (its zarr.json) cannot be read "
            f"({type(exc).__name__}: {first})")


UNREADABLE_METADATA = (KeyError, ValueError, TypeError)
"""What zarr raises for an array's metadata it cannot parse (and ``KeyError`` for a
missing array): :func:`metadata_problem` tells them apart."""


def unparsed_array(group, names) -> str | None:
    """The first of the arrays ``names`` of ``group`` whose metadata zarr cannot parse,
    as a problem naming it (:func:`metadata_problem`); ``None`` when each parses or is
    missing (a missing one is another check's)."""
    for name in names:
        try:
            with ignored(dict(message=".*is not recognized as a component of a Zarr "
                                      "hierarchy.*")):
                group[name]
        except UNREADABLE_METADATA as exc:
            problem = metadata_problem(name, exc)
            if problem is not None:
                return problem
    return None


def arrays_problem(group, digests) -> str | None:
    """What is wrong with the arrays of ``group`` whose metadata digests are ``digests``
    (``arrays_sha256``): one missing, whose metadata (its ``zarr.json``) do not parse, or
    differ from what was written; ``None`` when each matches."""
    if not isinstance(digests, dict) or not all(isinstance(v, str) for v in digests.values()):
        return f"the attribute arrays_sha256={digests!r} is not a mapping of digests"
    for name, digest in digests.items():
        try:
            with ignored(dict(message=".*is not recognized as a component of a Zarr "
                                      "hierarchy.*")):
                array = group[name]
        except UNREADABLE_METADATA as exc:  # missing, or its zarr.json does not parse
            return metadata_problem(name, exc) or f"the array {name} is missing"
        if not hasattr(array, "metadata") or not hasattr(array, "dtype"):
            return f"the array {name} is not an array"
        if array_digest(array) != digest:
            return (f"the metadata of the array {name} (its zarr.json: shape, data type, "
                    "chunks, codecs, fill value) differ from what was written (their "
                    "SHA-256 does not match arrays_sha256)")
    return None


def check_arrays_digest(group, digests, where: str) -> None:
    """:class:`DamagedStoreError` naming ``where`` and the array when :func:`arrays_problem`
    finds one."""
    problem = arrays_problem(group, digests)
    if problem is not None:
        raise DamagedStoreError(f"{where} is damaged: {problem}")


def check_added(attrs: dict, name: str, since: int, where: str, key: str = "version") -> bool:
    """Whether the store (format ``attrs[key]``, checked by :func:`check_version`) has the
    attribute ``name``, written from format ``since`` on; an older format carrying it is
    an edited version, refused as damage."""
    found = attrs[key]
    if found >= since:
        return True
    if attrs.get(name) is not None:
        raise DamagedStoreError(f"{where} is damaged: its attribute {key}={found} is older "
                                f"than the attribute {name} it carries (written from format "
                                f"v{since} on): its format version was edited")
    return False


def newer_message(where: str, found: int, version: int) -> str:
    """The one line for a store of format ``found``, newer than the ``version`` this
    package reads (the same for every store kind)."""
    return (f"{where} was written by a newer onebit-dask (format v{found}, this reads up to "
            f"v{version}): upgrade onebit-dask")


def check_version(attrs: dict, version: int, first_checked: int, where: str,
                  key: str = "version", lacks: str = "checksums") -> bool:
    """The store's format version: refused when it is not a positive integer (damaged) or
    newer than ``version`` (:class:`NewerFormatError`, :func:`newer_message`). Returns
    whether the store has the checks of format ``first_checked`` (``lacks`` names them);
    an older store is read as before, with one warning that such damage to it cannot be
    detected. An older version beside an ``attrs_sha256`` (written from ``first_checked``
    on) is an edited version, refused as damage rather than read without its checks."""
    found = attrs.get(key)
    if not isinstance(found, int) or isinstance(found, bool) or found < 1:
        raise DamagedStoreError(f"{where} is damaged: the attribute {key}={found!r} is not a "
                                "format version")
    if found > version:
        raise NewerFormatError(newer_message(where, found, version))
    if found < first_checked:
        if attrs.get("attrs_sha256") is not None:  # what only format first_checked on writes
            raise DamagedStoreError(f"{where} is damaged: its attribute {key}={found} is older "
                                    "than the attributes' digest it carries (attrs_sha256, "
                                    f"written from format v{first_checked} on): its format "
                                    "version was edited")
        import warnings

        warnings.warn(f"{where} was written by an older onebit-dask without {lacks} "
                      f"(format version {found}): such damage to it cannot be detected; "
                      "write it again to add them", UserWarning, stacklevel=3)
        return False
    return True


class DamagedStoreError(RunError):
    """One of the package's stores whose parts are missing, unreadable or inconsistent;
    the message names the store and the part."""


class NewerFormatError(DamagedStoreError):
    """A store of a format newer than this package reads (:func:`newer_message`): not
    damaged, but refused as one (exit status 1); nothing is to be deleted."""


def consolidate(path) -> None:
    """Consolidate the metadata of the zarr (v3) group at ``path`` into its root
    ``zarr.json`` (``xarray.open_zarr`` then opens it without a warning), without zarr's
    warnings that consolidated metadata are not yet part of the Zarr v3 specification and
    that a file of the package's (a temporary's marker) is not part of the hierarchy.

    A Ctrl-C is held back meanwhile (:func:`~onebit_dask.utils.signals.sigint_deferred`;
    a moment: one read of each array's metadata, one write): zarr runs the consolidation
    in its I/O thread, which a ``KeyboardInterrupt`` in this one does not stop, so the
    block of ignored warnings would end first and zarr's warning come after it, on stderr
    below the command's "interrupted" line (issue 36), and the root's ``zarr.json`` be
    rewritten after the writer thought it done."""
    import zarr

    with sigint_deferred(), ignored(
            dict(message=".*[Cc]onsolidated metadata.*"),
            dict(message=".*is not recognized as a component of a Zarr hierarchy.*")):
        zarr.consolidate_metadata(paths.store(os.fspath(path)), zarr_format=3)


def format_attrs(fmt: str, version: int) -> dict:
    """The attributes that mark a group as a store of format ``fmt``."""
    return {"format": fmt, "version": version}


def group_attrs(path) -> dict | None:
    """The attributes of the zarr (v3) group at ``path``, a local path or a URL, as they
    are (unchecked: which format it is, for a dispatch or a refusal), or ``None`` where
    there is no group. A local group's are read from its ``zarr.json``, without importing
    zarr."""
    path = os.fspath(path)
    local = path.removeprefix("file://")
    if paths.is_url(local):
        import zarr

        try:
            return dict(zarr.open_group(paths.store(path.rstrip("/"), read_only=True), mode="r",
                                        zarr_format=3).attrs)
        except Exception:  # zarr raises several types for a path that is not a group
            return None
    try:
        with open(os.path.join(local, "zarr.json")) as fh:
            meta = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("node_type") != "group":
        return None
    attrs = meta.get("attributes", {})
    return dict(attrs) if isinstance(attrs, dict) else None


def chunk_rows(array, lo: int = 0, hi: int | None = None):
    """``(first row, last row + 1, key)`` of every stored object (chunk or shard) of
    ``array`` holding rows ``[lo, hi)``."""
    hi = array.shape[0] if hi is None else hi
    grid = array.shards or array.chunks
    if array.ndim == 0:
        yield 0, 1, array.metadata.encode_chunk_key(())
        return
    rows, cols = grid[0], grid[1:]
    col_grid = [range(-(-n // c)) for n, c in zip(array.shape[1:], cols)]
    for i in range(lo // rows, -(-hi // rows)):
        for rest in itertools.product(*col_grid):
            yield (i * rows, min((i + 1) * rows, array.shape[0]),
                   array.metadata.encode_chunk_key((i, *rest)))


def missing_chunk(array, lo: int = 0, hi: int | None = None):
    """``(first, last, key)`` of the first stored object of rows ``[lo, hi)`` that is
    missing from ``array``'s store, or ``None`` (asked through zarr's store API, so it
    works for any store: a directory, memory, an object store)."""
    from zarr.core.sync import sync

    store, prefix = array.store_path.store, array.store_path.path
    for first, last, key in chunk_rows(array, lo, hi):
        if not sync(store.exists(f"{prefix}/{key}" if prefix else key)):
            return first, last, key
    return None


def unreadable_chunk(array) -> tuple[str, str] | None:
    """``(key, reason)`` of the first chunk of ``array`` that cannot be decoded (its
    checksum does not match, it is truncated or empty), or ``None``. The array is read
    a slab of chunk rows at a time; only a slab that fails is read chunk by chunk."""
    if array.ndim == 0:
        try:
            array[...]
        except Exception as exc:  # zarr and its codecs raise several types
            return array.metadata.encode_chunk_key(()), _reason(exc)
        return None
    chunks = array.chunks
    grid = [range(-(-n // c)) for n, c in zip(array.shape, chunks)]
    for i in grid[0]:
        try:
            array[i * chunks[0]:(i + 1) * chunks[0]]
            continue
        except Exception:  # find the chunk of the slab that fails
            pass
        for rest in itertools.product(*grid[1:]):
            try:
                array.get_block_selection((i, *rest))
            except Exception as exc:
                return array.metadata.encode_chunk_key((i, *rest)), _reason(exc)
    return None


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def attr(attrs: dict, key: str, kind, where: str, *, low=None, optional: bool = False):
    """``attrs[key]`` checked to be of ``kind`` (``int``, ``float``, ``str``, ``list``,
    ``dict``; a bool is not a number) and at least ``low``; a :class:`DamagedStoreError`
    naming ``where`` (the store) and the attribute otherwise."""
    if key not in attrs or attrs[key] is None:
        if optional:
            return None
        raise DamagedStoreError(f"{where} is damaged: the attribute {key!r} is missing")
    value = attrs[key]
    ok = {int: isinstance(value, numbers.Integral),
          float: isinstance(value, numbers.Real)}.get(kind, isinstance(value, kind))
    if isinstance(value, bool) and kind in (int, float):
        ok = False
    if not ok:
        raise DamagedStoreError(f"{where} is damaged: the attribute {key}={value!r} is not "
                                f"{'an' if kind is int else 'a'} {kind.__name__}")
    if low is not None and value < low:
        raise DamagedStoreError(f"{where} is damaged: the attribute {key}={value!r} is below "
                                f"{low}")
    return value


def check_array(array, where: str, part: str, *, dtype=None, shape=None) -> None:
    """Raise :class:`DamagedStoreError` naming ``where`` and ``part`` if ``array`` has
    another dtype or shape than expected, or misses a chunk."""
    if dtype is not None and array.dtype != np.dtype(dtype):
        raise DamagedStoreError(f"{where} is damaged: {part} has dtype {array.dtype}, "
                                f"expected {np.dtype(dtype)}")
    if shape is not None and tuple(array.shape) != tuple(shape):
        raise DamagedStoreError(f"{where} is damaged: {part} has shape {tuple(array.shape)}, "
                                f"expected {tuple(shape)}")
    gone = missing_chunk(array)
    if gone is not None:
        raise DamagedStoreError(f"{where} is damaged: the chunk {part}/{gone[2]} (rows "
                                f"{gone[0]}..{gone[1] - 1}) is missing")


def check_stored_finite(values: np.ndarray, where: str, part: str) -> np.ndarray:
    """``values``, or a :class:`DamagedStoreError` naming the first non-finite entry."""
    bad = ~np.isfinite(values)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise DamagedStoreError(f"{where} is damaged: {part}{list(index)} is "
                                f"{float(values[index])}, not a finite number")
    return values
