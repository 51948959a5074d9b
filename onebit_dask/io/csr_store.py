"""Rows of sparse features and label sets in a zarr (v3) group: converter and reader.

Layout of a CSR store (a zarr group; ``X`` and ``Y`` as scipy's CSR arrays, ``Y``'s
values all 1 and not stored)::

    STORE.zarr/
        X/indptr   (n + 1,)  int64    row i's entries are [indptr[i], indptr[i + 1])
        X/indices  (nnz_x,)  int32    feature of each entry, in [0, d1) (int64 if d1 >= 2^31)
        X/data     (nnz_x,)  float64  value of each entry
        Y/indptr   (n + 1,)  int64
        Y/indices  (nnz_y,)  int32    label of each entry, in [0, d2)
        attrs: {"format": "onebit-dask/csr", "version": 3, "n": n, "d1": d1, "d2": d2,
                "nnz_x": nnz_x, "nnz_y": nnz_y,
                "arrays_sha256": {name: SHA-256 of the array's metadata},
                "attrs_sha256": SHA-256 of those}

``indptr`` is chunked by ``chunk_rows`` rows and the entries by ``chunk_nnz``, so
reading rows ``[lo, hi)`` (:meth:`CsrStore.rows`, what a worker calls) reads the
``indptr`` chunks of those rows and the entry chunks between ``indptr[lo]`` and
``indptr[hi]``, nothing else. Every array has ``dimension_names``.

:func:`convert` streams a data file (:mod:`onebit_dask.data.xc`) into a store
``chunk_rows`` lines at a time: its memory does not grow with the file. It writes a
marked temporary sibling directory (:func:`onebit_dask.io.stores.atomic.new_temporary`)
and moves it to ``store_path`` once the whole file was read and checked; on any error it
removes that directory (and nothing else), so a bad file leaves nothing behind. It holds
the store's lock (``STORE.lock``, :class:`~onebit_dask.io.stores.lock.StoreLock`) while it
works: a second convert to the same path is refused at its start, naming the first.

Every chunk is written, even one equal to the fill value, so a chunk that is missing
later means a damaged store: reading checks that the chunks it needs exist (zarr
itself would read a missing chunk as zeros) and that the row pointers it reads are
consistent, and raises :class:`~onebit_dask.io.stores.zarr_format.DamagedStoreError`
naming the store and the part otherwise. Version 2 writes each chunk with zstd's
checksum and the attributes with their digest, so changed bytes and edited sizes are
refused the same way. Version 3 adds the digest of each array's metadata under it
(``arrays_sha256``, :func:`~onebit_dask.io.stores.zarr_format.array_digest`): an edit of an
array's ``zarr.json`` that changes how its numbers are read (the byte order, the data
type, the chunk grid, the fill value) is refused too, naming the array. A version-2 store
is read as before (without that check, and without a warning), a version-1 store with one
warning. A value that is not finite names the store and its row.
"""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp
import zarr

from . import FORMAT_OF
from ..utils.checks import check_int
from .stores import atomic, paths
from .stores.lock import StoreLock
from .stores.zarr_format import (ALL_CHUNKS, UNREADABLE_METADATA, DamagedStoreError,
                                  arrays_digests, attrs_digest, check_added,
                                  check_arrays_digest, check_attrs_digest, check_version,
                                  checked_codecs, format_attrs, group_attrs,
                                  metadata_problem, missing_chunk)
from .xc import iter_xc, read_xc, xc_sizes

FORMAT = FORMAT_OF["csr"]
VERSION = 3
CHECKED_SINCE = 2  # the first version with chunk checksums and the attributes' digest
ARRAYS_CHECKED_SINCE = 3  # the first version with the arrays' metadata digest (arrays_sha256)
DIGESTED = ("format", "version", "n", "d1", "d2", "nnz_x", "nnz_y", "arrays_sha256")
DIGESTED_V2 = ("format", "version", "n", "d1", "d2", "nnz_x", "nnz_y")
_ARRAYS = {  # name: (dtype kind, dimension name, length key)
    "X/indptr": ("i", "row_pointer", "n"), "X/indices": ("i", "x_entry", "nnz_x"),
    "X/data": ("f", "x_entry", "nnz_x"), "Y/indptr": ("i", "row_pointer", "n"),
    "Y/indices": ("i", "y_entry", "nnz_y"),
}


def _index_dtype(d: int):
    return np.int32 if d < 2**31 else np.int64


def _damaged(path: str, what: str) -> DamagedStoreError:
    return DamagedStoreError(f"data={path!r}: {what}: the store is damaged; restore it or "
                             "convert the data file again (onebit_dask.io.csr_store.convert)")


def _read(path: str, name: str, array, lo: int, hi: int) -> np.ndarray:
    """Elements ``[lo, hi)`` of the array ``name``, after checking (through zarr's store
    API) that their chunks exist."""
    gone = missing_chunk(array, lo, hi)
    if gone is not None:
        first, last, key = gone
        raise _damaged(path, f"the chunk {name}/{key} (elements {first}..{last - 1}) is "
                       "missing")
    try:
        return array[lo:hi]
    except Exception as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise _damaged(path, f"{name}[{lo}:{hi}] cannot be read ({type(exc).__name__}: "
                       f"{detail})") from None


class CsrStore:
    """An open CSR store: its sizes, :meth:`rows` and :meth:`labels`. Picklable (it
    holds the path and the sizes; each call opens the arrays), so workers can read
    their own rows.

    Attributes
    ----------
    path : str
    n, d1, d2 : int
        Rows, features and labels.
    nnz_x, nnz_y : int
        Stored entries of ``X`` and ``Y``.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        if not os.path.isdir(self.path):
            raise FileNotFoundError(f"data={self.path!r} does not exist: convert a data file "
                                    "with onebit_dask.io.csr_store.convert")
        try:
            group = zarr.open_group(self.path, mode="r")
        except Exception as exc:
            raise ValueError(f"data={self.path!r} is not a zarr group: {exc}") from None
        attrs = group.attrs.asdict()
        if attrs.get("format") != FORMAT:
            raise ValueError(f"data={self.path!r} is not a CSR store (attrs format="
                             f"{attrs.get('format')!r}; expected {FORMAT!r})")
        where = f"the CSR store data={self.path!r}"
        checked = check_version(attrs, VERSION, CHECKED_SINCE, where)
        arrays_checked = check_added(attrs, "arrays_sha256", ARRAYS_CHECKED_SINCE, where)
        if checked:
            check_attrs_digest(attrs, DIGESTED if arrays_checked else DIGESTED_V2, where)
        try:
            self.n, self.d1, self.d2, self.nnz_x, self.nnz_y = (
                int(attrs[key]) for key in ("n", "d1", "d2", "nnz_x", "nnz_y"))
        except (KeyError, TypeError, ValueError):
            raise _damaged(self.path, f"the attrs {attrs} lack n, d1, d2, nnz_x or nnz_y")
        lengths = {"n": self.n + 1, "nnz_x": self.nnz_x, "nnz_y": self.nnz_y}
        for name, (kind, _, length) in _ARRAYS.items():
            try:
                array = group[name]
            except UNREADABLE_METADATA as exc:  # missing, or its zarr.json does not parse
                raise _damaged(self.path, metadata_problem(name, exc)
                               or f"the array {name} is missing") from None
            if (not isinstance(array, zarr.Array) or array.dtype.kind != kind
                    or array.shape != (lengths[length],)):
                shown = (array.dtype, array.shape) if isinstance(array, zarr.Array) else "group"
                raise _damaged(self.path, f"the array {name} has (dtype, shape) {shown}; "
                               f"expected kind {kind!r} and shape ({lengths[length]},)")
        if arrays_checked:
            check_arrays_digest(group, attrs.get("arrays_sha256"), where)

    def __repr__(self) -> str:
        return f"CsrStore({self.path!r}, n={self.n}, d1={self.d1}, d2={self.d2})"

    def __reduce__(self):
        return CsrStore, (self.path,)

    def _part(self, group, part: str, lo: int, hi: int, d: int, nnz: int, values: bool):
        ptr = _read(self.path, f"{part}/indptr", group[f"{part}/indptr"], lo, hi + 1)
        if (ptr.size and (ptr[0] < 0 or ptr[-1] > nnz)) or np.any(np.diff(ptr) < 0) or (
                lo == 0 and ptr[0] != 0) or (hi == self.n and ptr[-1] != nnz):
            raise _damaged(self.path, f"{part}/indptr[{lo}:{hi + 1}] is not a row pointer "
                           f"(it must rise from 0 to {nnz})")
        a, b = int(ptr[0]), int(ptr[-1])
        indices = _read(self.path, f"{part}/indices", group[f"{part}/indices"], a, b)
        if indices.size and (indices.min() < 0 or indices.max() >= d):
            raise _damaged(self.path, f"{part}/indices[{a}:{b}] holds {indices.max()} or "
                           f"{indices.min()}, outside 0..{d - 1}")
        data = (_read(self.path, f"{part}/data", group[f"{part}/data"], a, b) if values
                else np.ones(b - a, dtype=np.int8))
        if values and not np.all(np.isfinite(data)):
            k = int(np.argmin(np.isfinite(data)))
            row = lo + int(np.searchsorted(ptr - a, k, side="right")) - 1
            raise _damaged(self.path, f"row {row} holds {data[k]} at feature {indices[k]}, "
                           "which is not a finite number")
        return sp.csr_matrix((data, indices, ptr - a), shape=(hi - lo, d))

    def rows(self, lo: int, hi: int):
        """Rows ``[lo, hi)``, reading only the chunks that hold them.

        Returns
        -------
        X : scipy.sparse.csr_matrix of float64, shape (hi - lo, d1)
        Y : scipy.sparse.csr_matrix of int8, shape (hi - lo, d2)
        """
        lo, hi = self._bounds(lo, hi)
        group = zarr.open_group(self.path, mode="r")
        return (self._part(group, "X", lo, hi, self.d1, self.nnz_x, True),
                self._part(group, "Y", lo, hi, self.d2, self.nnz_y, False))

    def labels(self, lo: int, hi: int) -> sp.csr_matrix:
        """The label sets of rows ``[lo, hi)`` alone (the features are not read):
        ``Y`` of :meth:`rows`, a CSR matrix of int8 of shape (hi - lo, d2)."""
        lo, hi = self._bounds(lo, hi)
        return self._part(zarr.open_group(self.path, mode="r"), "Y", lo, hi, self.d2,
                          self.nnz_y, False)

    def _bounds(self, lo, hi) -> tuple[int, int]:
        lo = check_int("lo", lo, low=0, high=self.n)
        return lo, check_int("hi", hi, low=lo, high=self.n)


def open_csr_store(path) -> CsrStore:
    """Open a CSR store (checks its attrs and its arrays' dtypes and shapes)."""
    return CsrStore(path)


def is_csr_store(path) -> bool:
    """Whether ``path`` is a local zarr group whose attrs say it is a CSR store (a CSR
    store is read from local paths only)."""
    path = os.fspath(path)
    return not paths.is_url(path) and (group_attrs(path) or {}).get("format") == FORMAT


def _create(group, name: str, dtype, chunk: int):
    return group.create_array(name, shape=(0,), chunks=(chunk,), dtype=dtype,
                              dimension_names=(_ARRAYS[name][1],), config=ALL_CHUNKS,
                              **checked_codecs())


def _write(tmp: str, src: str, sizes, chunk_rows: int, chunk_nnz: int) -> None:
    group = zarr.open_group(tmp, mode="a", zarr_format=3)  # the marked temporary
    arrays = {
        "X/indptr": _create(group, "X/indptr", np.int64, chunk_rows),
        "X/indices": _create(group, "X/indices", _index_dtype(sizes.d1), chunk_nnz),
        "X/data": _create(group, "X/data", np.float64, chunk_nnz),
        "Y/indptr": _create(group, "Y/indptr", np.int64, chunk_rows),
        "Y/indices": _create(group, "Y/indices", _index_dtype(sizes.d2), chunk_nnz),
    }
    arrays["X/indptr"].append(np.zeros(1, np.int64))
    arrays["Y/indptr"].append(np.zeros(1, np.int64))
    n = nnz_x = nnz_y = 0
    for X, Y in iter_xc(src, chunk_rows, n_features=sizes.d1, n_labels=sizes.d2):
        arrays["X/indptr"].append(X.indptr[1:].astype(np.int64) + nnz_x)
        arrays["X/indices"].append(X.indices.astype(arrays["X/indices"].dtype))
        arrays["X/data"].append(X.data)
        arrays["Y/indptr"].append(Y.indptr[1:].astype(np.int64) + nnz_y)
        arrays["Y/indices"].append(Y.indices.astype(arrays["Y/indices"].dtype))
        n, nnz_x, nnz_y = n + X.shape[0], nnz_x + X.nnz, nnz_y + Y.nnz
    attrs = {**format_attrs(FORMAT, VERSION), "n": n, "d1": sizes.d1, "d2": sizes.d2,
             "nnz_x": nnz_x, "nnz_y": nnz_y, "arrays_sha256": arrays_digests(group, _ARRAYS)}
    group.attrs.update({**attrs, "attrs_sha256": attrs_digest(attrs, DIGESTED)})


def convert(src_path, store_path, *, chunk_rows: int = 20_000, chunk_nnz: int = 2**20,
            n_features: int | None = None, n_labels: int | None = None) -> str:
    """Convert a data file (XC format or multi-label svmlight) into a CSR store, in
    memory bounded by one chunk of ``chunk_rows`` lines.

    Parameters
    ----------
    src_path : str or os.PathLike
        The data file (see :func:`onebit_dask.data.xc.read_xc`).
    store_path : str or os.PathLike
        The new store; it must not exist.
    chunk_rows : int, default 20000
        Lines parsed at a time, and rows per chunk of ``indptr``.
    chunk_nnz : int, default 2**20
        Entries per chunk of ``indices`` and ``data``.
    n_features, n_labels : int, optional
        ``d1`` and ``d2`` of a file without the header line (as in ``read_xc``).

    Returns
    -------
    str
        ``store_path``.

    Raises
    ------
    XCFormatError
        A malformed file; nothing is left at ``store_path`` or beside it.
    StoreLockedError
        Another convert writes ``store_path`` (its lock, ``STORE_PATH.lock``, names it).
    """
    src = os.fspath(src_path)
    target = os.path.abspath(os.fspath(store_path))
    chunk_rows = check_int("chunk_rows", chunk_rows, low=1)
    chunk_nnz = check_int("chunk_nnz", chunk_nnz, low=1)
    if os.path.lexists(target):
        raise ValueError(f"store_path={os.fspath(store_path)!r} exists: give a new path, or "
                         "delete it first")
    if not os.path.isdir(os.path.dirname(target)):
        raise FileNotFoundError(f"store_path={os.fspath(store_path)!r}: its folder does not "
                                "exist")
    with StoreLock(target, writer="convert"):  # another convert to it: refused at once
        if os.path.lexists(target):  # published meanwhile
            raise ValueError(f"store_path={os.fspath(store_path)!r} exists: give a new path, "
                             "or delete it first")
        sizes = xc_sizes(src, n_features=n_features, n_labels=n_labels,
                         chunk_rows=chunk_rows)
        tmp = atomic.temporary_name(target)
        try:
            atomic.make_temporary(tmp)
            _write(tmp, src, sizes, chunk_rows, chunk_nnz)
            if os.path.lexists(target):
                raise ValueError(f"store_path={os.fspath(store_path)!r} appeared while "
                                 "converting: give a new path, or delete it first")
            atomic.publish(tmp, target)
        except BaseException:
            atomic.discard(tmp)
            raise
    return os.fspath(store_path)


def load(path, *, n_features: int | None = None, n_labels: int | None = None):
    """``(X, Y)`` of a data file or of a CSR store, whole.

    Parameters
    ----------
    path : str or os.PathLike
        A data file (XC format or multi-label svmlight) or a CSR store.
    n_features, n_labels : int, optional
        As in :func:`~onebit_dask.data.xc.read_xc`; for a store they must equal its
        ``d1`` and ``d2`` if given.

    Returns
    -------
    X : scipy.sparse.csr_matrix of float64, shape (n, d1)
    Y : scipy.sparse.csr_matrix of int8, shape (n, d2)
    """
    if not os.path.isdir(os.fspath(path)):
        return read_xc(path, n_features=n_features, n_labels=n_labels)
    store = open_csr_store(path)
    for name, given, stored in (("n_features", n_features, store.d1),
                                ("n_labels", n_labels, store.d2)):
        if given is not None and given != stored:
            raise ValueError(f"{name}={given} is not allowed: the store {store.path!r} has "
                             f"{stored}; leave {name} out (or give {stored})")
    return store.rows(0, store.n)
