"""Single-label observations in a zarr (v3) group: the layout, its writer and readers
(the source that reads it for a fit: :class:`onebit_dask.data.observations.ZarrSource`).

Layout of an observations store (a zarr group)::

    STORE.zarr/
        X       (n, d1) float32 or float64, chunked by rows
        labels  (n,)    int64, the observed label of each row, in [0, n_labels)
        y       (n,)    int8, the observed bit, -1 or +1
        attrs:  {"format": "onebit-dask/observations", "version": 4, "n_labels": d2,
                 "n_rows": n, "n_features": d1,
                 "arrays_sha256": {name: SHA-256 of the array's metadata},
                 "attrs_sha256": SHA-256 of format, version, n_labels, n_rows, n_features,
                                 arrays_sha256}

Version 2 writes each chunk with zstd's checksum and the attributes with their digest
(:func:`~onebit_dask.io.stores.zarr_format.checked_codecs`,
:func:`~onebit_dask.io.stores.zarr_format.attrs_digest`): a chunk whose bytes changed cannot
be read, and an edited ``n_labels`` is refused, each as a damaged store. Version 3 adds
the arrays' shape under the digest (``n_rows``, ``n_features``): an array's shape edited
in its own ``zarr.json`` (which zarr would read as fewer rows) is refused as damage too.
Version 4 adds the digest of each array's metadata under it (``arrays_sha256``,
:func:`~onebit_dask.io.stores.zarr_format.array_digest`): any other edit of an array's
``zarr.json`` that changes how its numbers are read (the byte order, the data type, the
chunk grid, the fill value) is refused as damage, naming the array. A version-2 or 3
store is read as before (without the checks it lacks, and without a warning); a
version-1 store (no checksums) with one warning; a newer version is refused.

Every chunk of the three arrays is written, even one equal to the fill value, so
a chunk file that is missing later means a damaged store: opening the store, and
each shard reading its rows, check that the chunks exist (zarr itself would read a
missing chunk as zeros) and name the rows of a missing or unreadable chunk
(:class:`~onebit_dask.io.stores.zarr_format.DamagedStoreError`, the one error of every
damaged store). The arrays carry dimension names (``row``, ``feature``): ``xr.open_zarr``
reads a store. A store is written into a marked temporary next to its path and moved
into place (:mod:`onebit_dask.io.stores.atomic`); ``overwrite`` replaces an observations
store, nothing else. ``X`` must be float32 or float64: a store with
integer (or boolean) features is refused rather than cast, so that the layout has
one meaning and memory use is what the dtype says; ``write_observations`` casts
integer features to float64 (keep float32 by passing float32).

Rows are used in order: batch ``b`` is rows ``[b m, (b + 1) m)``, split into
``n_shards`` contiguous row ranges; a worker reads its own range, so the features
never pass through the client. Rows sorted (or grouped) by label keep each
shard's label range short, and so what travels to it.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np
import zarr

from . import FORMAT_OF
from ..utils.checks import check_finite, check_int
from .stores import atomic, paths
from .stores.zarr_format import (ALL_CHUNKS, DamagedStoreError, arrays_digests,
                                 attrs_digest, check_added, check_arrays_digest,
                                 check_attrs_digest, check_version, checked_codecs,
                                 chunk_rows, format_attrs, group_attrs, missing_chunk,
                                 unparsed_array)

FORMAT = FORMAT_OF["observations"]
VERSION = 4
CHECKED_SINCE = 2  # the first version with chunk checksums and the attributes' digest
SHAPED_SINCE = 3  # the first version with the arrays' shape under the digest
ARRAYS_CHECKED_SINCE = 4  # the first version with the arrays' metadata digest (arrays_sha256)
DIGESTED = ("format", "version", "n_labels", "n_rows", "n_features", "arrays_sha256")
DIGESTED_V3 = ("format", "version", "n_labels", "n_rows", "n_features")
DIGESTED_V2 = ("format", "version", "n_labels")
DIMS = {"X": ("row", "feature"), "labels": ("row",), "y": ("row",)}


def check_chunks(path: str, name: str, array, lo: int = 0, hi: int | None = None) -> None:
    """Raise :class:`DamagedStoreError` naming the rows of the first missing chunk of
    ``array`` (the array ``name`` of the store at ``path``) among rows ``[lo, hi)``."""
    gone = missing_chunk(array, lo, hi)
    if gone is not None:
        first, last, key = gone
        raise DamagedStoreError(
            f"data={path!r}: the chunk {name}/{key} holding rows {first}..{last - 1} is "
            f"missing (zarr would read it as {array.metadata.fill_value}): the store is "
            "damaged; restore it or write it again with write_observations")


def read_rows(path: str, name: str, array, lo: int, hi: int):
    """Rows ``[lo, hi)`` of ``array``; a missing or unreadable chunk names its rows."""
    check_chunks(path, name, array, lo, hi)
    try:
        return array[lo:hi]
    except Exception:
        pass
    for first, last, key in chunk_rows(array, lo, hi):  # find the chunk that fails
        try:
            array[first:last]
        except Exception as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise DamagedStoreError(
                f"data={path!r}: the chunk {name}/{key} holding rows {first}..{last - 1} cannot "
                f"be read ({type(exc).__name__}: {detail}): the store is damaged; restore it "
                "or write it again with write_observations") from None
    return array[lo:hi]  # a failure that was not a chunk's: let it raise


def read_feature_rows(path: str, group, lo: int, hi: int):
    """Rows ``[lo, hi)`` of the store's ``X``, refused if one holds NaN or inf (naming
    it). Its dtype (float32 or float64) and shape (2-D) were checked when the store was
    opened (:class:`ZarrSource`), so no conversion is left to do where it is read."""
    X = read_rows(path, "X", group["X"], lo, hi)
    check_finite(X, row_offset=lo)
    return X


def write_observations(path, X, labels, y, *, n_labels: int | None = None,
                       chunk_rows: int = 100_000, overwrite: bool = False,
                       storage_options: dict | None = None) -> str:
    """Validate ``(X, labels, y)`` and write them as an observations store.

    Parameters
    ----------
    path : str or os.PathLike
        Directory of the new zarr group.
    X : array-like of shape (n, d1)
    labels : array-like of int of shape (n,)
    y : array-like of shape (n,), values -1 or +1
    n_labels : int, optional
        ``d2``; defaults to ``labels.max() + 1``.
    chunk_rows : int, default 100000
        Rows per chunk.
    overwrite : bool, default False
        Replace an existing store; otherwise an existing path is an error.
    storage_options : dict, optional
        fsspec's options for a URL ``path`` (credentials, ``endpoint_url``), used in this
        process only. ``path`` may also be a zarr or fsspec store object
        (:func:`onebit_dask.io.stores.paths.location`).
    """
    path, storage_options = paths.location(path, storage_options)
    with paths.options(storage_options, path):
        return _write_observations(os.fspath(path), X, labels, y, n_labels, chunk_rows,
                                   overwrite)


def _write_observations(path: str, X, labels, y, n_labels, chunk_rows, overwrite) -> str:
    from ..utils.validation import check_observations  # scikit-learn's check_array

    rows_per_chunk = check_int("chunk_rows", chunk_rows, low=1)
    X, labels, y, n_labels = check_observations(X, labels, y, n_labels=n_labels)
    where = paths.normalise(path)
    if paths.exists(where):
        if not overwrite:
            raise FileExistsError(f"path={path!r} exists: pass overwrite=True to replace it")
        if (group_attrs(where) or {}).get("format") != FORMAT:
            raise ValueError(f"path={path!r} is not an observations store: overwrite=True "
                             "replaces an observations store only (nothing was changed)")
    if paths.is_url(where):  # no rename: in place, the attributes (the format) last
        if paths.exists(where):
            paths.remove(paths.join(where, "zarr.json"))
            paths.remove(where)
        _write(where, X, labels, y, n_labels, rows_per_chunk)
        return path
    atomic.check_parent(where, "path")
    atomic.recover(where)
    tmp = atomic.temporary_name(where)
    try:
        atomic.make_temporary(tmp)
        _write(tmp, X, labels, y, n_labels, rows_per_chunk)
        atomic.replace(tmp, where)
    except BaseException:
        atomic.discard(tmp)
        raise
    return path


def _write(where: str, X, labels, y, n_labels: int, rows_per_chunk: int) -> None:
    group = zarr.open_group(paths.store(where), mode="a", zarr_format=3)
    n, d1 = X.shape
    rows = min(rows_per_chunk, n)
    for name, data, chunks in (("X", X, (rows, d1)), ("labels", labels, (rows,)),
                               ("y", y, (rows,))):
        dtype = {"X": X.dtype, "labels": "int64", "y": "int8"}[name]
        group.create_array(name, shape=data.shape, chunks=chunks, dtype=dtype,
                           config=ALL_CHUNKS, dimension_names=DIMS[name],
                           **checked_codecs())[:] = data
    attrs = {**format_attrs(FORMAT, VERSION), "n_labels": int(n_labels), "n_rows": int(n),
             "n_features": int(d1), "arrays_sha256": arrays_digests(group, DIMS)}
    group.attrs.update({**attrs, "attrs_sha256": attrs_digest(attrs, DIGESTED)})


class Observations(NamedTuple):
    """An opened observations store: its sizes and its (small) labels and bits."""

    path: str
    n: int
    d1: int
    d2: int
    labels: np.ndarray
    y: np.ndarray


def open_observations(path) -> Observations:
    """Open the observations store at ``path`` and check its layout, its labels and its bits
    (they are small) but not the features, which each reader checks when it reads them."""
    from ..utils.validation import check_observations  # scikit-learn's: on the client only

    path = os.fspath(path)
    if not (paths.exists(path) if paths.is_url(path) else os.path.isdir(path)):
        raise FileNotFoundError(f"data={path!r} does not exist: write one with "
                                "onebit_dask.io.write_observations")
    try:
        group = zarr.open_group(paths.store(path, read_only=True), mode="r")
    except Exception as exc:  # zarr raises several types for a non-group path
        raise ValueError(f"data={path!r} is not a zarr group: {exc}") from None
    if group.attrs.get("format") != FORMAT:
        raise ValueError(f"data={path!r} is not an observations store (attrs format="
                         f"{group.attrs.get('format')!r}, expected {FORMAT!r})")
    where = f"the observations store data={path!r}"
    attrs = group.attrs.asdict()
    checked = check_version(attrs, VERSION, CHECKED_SINCE, where)
    shaped = attrs["version"] >= SHAPED_SINCE
    arrays_checked = check_added(attrs, "arrays_sha256", ARRAYS_CHECKED_SINCE, where)
    if checked:
        check_attrs_digest(attrs, DIGESTED if arrays_checked else DIGESTED_V3 if shaped
                           else DIGESTED_V2, where)
    unread = unparsed_array(group, ("X", "labels", "y"))
    if unread is not None:
        raise DamagedStoreError(f"{where} is damaged: {unread}")
    missing = {"X", "labels", "y"} - set(group.array_keys())
    if missing:
        raise ValueError(f"data={path!r} lacks the arrays {sorted(missing)}")
    if shaped:
        _check_shapes(group, attrs, where)
    if arrays_checked:
        check_arrays_digest(group, attrs.get("arrays_sha256"), where)
    X = group["X"]
    if X.ndim != 2:
        raise ValueError(f"data={path!r}: X has shape {X.shape}: an observations store's "
                         "X must be 2-D (n, d1)")
    if X.dtype not in (np.float32, np.float64):
        raise TypeError(f"data={path!r}: X has dtype {X.dtype}: an observations store "
                        "holds float32 or float64 features (write_observations casts "
                        "other numbers to float64)")
    n, d1 = X.shape
    d2 = check_int("n_labels", group.attrs.get("n_labels"), low=1)
    check_chunks(path, "X", X)
    labels = read_rows(path, "labels", group["labels"], 0, group["labels"].shape[0])
    y = read_rows(path, "y", group["y"], 0, group["y"].shape[0])
    check_observations(np.zeros((n, 1)), labels, y, n_labels=d2)
    return Observations(path, n, d1, d2, labels, y)


def _check_shapes(group, attrs: dict, where: str) -> None:
    """Each array's shape against the digested ``n_rows`` and ``n_features`` (version 3)."""
    n, d1 = attrs["n_rows"], attrs["n_features"]
    for name, expected in (("X", (n, d1)), ("labels", (n,)), ("y", (n,))):
        if tuple(group[name].shape) != expected:
            raise DamagedStoreError(f"{where} is damaged: its array {name} has shape "
                                    f"{tuple(group[name].shape)}, but the store was written "
                                    f"with {expected} (n_rows={n}, n_features={d1})")


def read_observations(path: str, lo: int, hi: int):
    """Rows ``[lo, hi)`` of the store at ``path``: ``(X, labels, y)``, ``y`` as float64,
    each chunk checked as it is read."""
    with paths.reached(path):
        group = zarr.open_group(paths.store(path, read_only=True), mode="r")
        labels, y = (read_rows(path, name, group[name], lo, hi) for name in ("labels", "y"))
        return read_feature_rows(path, group, lo, hi), labels, y.astype(np.float64)


def read_observed_features(path: str, lo: int, hi: int):
    """Rows ``[lo, hi)`` of the store's ``X``, each chunk checked as it is read."""
    with paths.reached(path):
        return read_feature_rows(path, zarr.open_group(paths.store(path, read_only=True),
                                                       mode="r"), lo, hi)
