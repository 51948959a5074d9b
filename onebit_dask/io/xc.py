"""Reader of the Extreme Classification Repository's text format and of multi-label svmlight.

The XC format (the one the Extreme Classification Repository uses for its data
sets) is a header line ``n d1 d2`` followed by one line per instance::

    l1,l2,... f:v f:v ...

with 0-based label and feature indices; an instance with no label has an empty
label field (its line starts with a space). Without the header, the lines are the
multi-label svmlight format; ``d1`` and ``d2`` then come from the arguments or the
largest indices in the data. The lines are parsed by scikit-learn's
:func:`~sklearn.datasets.load_svmlight_file` (``multilabel=True, zero_based=True``),
which skips blank lines and ``#`` comments: a blank line is not an instance.

Every problem with a file is an :class:`XCFormatError` (a :class:`ValueError`) that
names the file and, for a problem on a line, the line number (1-based, the header
being line 1) and the offending value: a malformed line, a label or feature index
outside the header's (or the arguments') range, a repeated or non-integer label, a
non-finite feature value, an empty file, a header whose instance count differs
from the number of lines.
"""

from __future__ import annotations

import io
import itertools
import os
import re
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ..utils.checks import check_int

_HEADER = re.compile(rb"^\s*(\d+)\s+(\d+)\s+(\d+)\s*$")
_HEADER_LIKE = re.compile(rb"^\s*[-+]?\d+(\s+[-+]?\d+)+\s*$")  # numbers alone: a header
_BISECT_LINES = 64  # below this many lines, look for a malformed line one by one


class XCFormatError(ValueError):
    """A data file that is not in the XC (or multi-label svmlight) format; the message
    names the file, the line and the value."""


class XCHeader(NamedTuple):
    """Sizes of a data file: ``n`` instances, ``d1`` features, ``d2`` labels; ``header``
    says whether the file has the XC header line (otherwise the sizes come from the
    arguments or from a pass over the data)."""

    n: int
    d1: int
    d2: int
    header: bool


def _blank(line: bytes) -> bool:
    return not line.split(b"#", 1)[0].strip()


def _parse_lines(path: str, lines: list[bytes], first_line: int):
    """``(X, labels)`` of ``lines`` (line ``first_line`` first) by scikit-learn's reader;
    a malformed line raises :class:`XCFormatError` naming it."""
    # imported here: a worker reading a CSR store imports this module but parses no file
    from sklearn.datasets import load_svmlight_file

    try:
        return load_svmlight_file(io.BytesIO(b"".join(lines)), multilabel=True,
                                  zero_based=True, dtype=np.float64)
    except (ValueError, OverflowError):
        pass
    lo, hi = 0, len(lines)  # the first malformed line is in [lo, hi): bisect to it
    while hi - lo > _BISECT_LINES:
        mid = (lo + hi) // 2
        try:
            load_svmlight_file(io.BytesIO(b"".join(lines[lo:mid])), multilabel=True,
                               zero_based=True)
            lo = mid
        except (ValueError, OverflowError):
            hi = mid
    for i in range(lo, hi):
        try:
            load_svmlight_file(io.BytesIO(lines[i]), multilabel=True, zero_based=True)
        except (ValueError, OverflowError) as exc:
            text = lines[i].decode("utf-8", "replace").strip()
            text = text if len(text) <= 60 else text[:57] + "..."
            raise XCFormatError(f"{path}:{first_line + i}: malformed line {text!r} ({exc}): "
                                "expected 'l1,l2,... f:v f:v ...' with 0-based integer "
                                "labels and sorted, unique 0-based feature indices") from None
    raise XCFormatError(f"{path}: lines {first_line}..{first_line + len(lines) - 1} cannot be "
                        "read as multi-label svmlight")  # only lines together fail: no line to name


def _label_csr(labels: list[tuple], d2: int | None, line_of, path: str):
    """``(indices, indptr)`` of the label sets (sorted tuples of floats, one per row),
    checked: integers in ``[0, d2)``, none repeated."""
    counts = np.fromiter(map(len, labels), dtype=np.int64, count=len(labels))
    indptr = np.zeros(len(labels) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    flat = np.fromiter(itertools.chain.from_iterable(labels), dtype=np.float64,
                       count=int(indptr[-1]))
    row_of = np.repeat(np.arange(len(labels)), counts)
    bad = np.flatnonzero((flat != np.floor(flat)) | (flat < 0) | ~np.isfinite(flat)
                         | ((flat >= d2) if d2 is not None else False))
    if bad.size:
        j = bad[0]
        allowed = f"0..{d2 - 1}" if d2 is not None else "integers >= 0"
        raise XCFormatError(f"{path}:{line_of(row_of[j])}: label {flat[j]:g} is out of range: "
                            f"labels are 0-based integers in {allowed}")
    repeated = np.flatnonzero((flat[1:] == flat[:-1]) & (row_of[1:] == row_of[:-1]))
    if repeated.size:
        j = repeated[0]
        raise XCFormatError(f"{path}:{line_of(row_of[j])}: label {flat[j]:g} is repeated: "
                            "list each label of an instance once")
    return flat.astype(np.int64), indptr


def _parse_chunk(path: str, lines: list[bytes], first_line: int, d1: int | None,
                 d2: int | None):
    """``(data, indices, indptr, y_indices, y_indptr)`` of the rows in ``lines``."""
    X, labels = _parse_lines(path, lines, first_line)
    rows = None

    def line_of(row: int) -> int:
        nonlocal rows
        if rows is None:
            rows = [i for i, line in enumerate(lines) if not _blank(line)]
        return first_line + rows[row]

    data, indices = X.data, X.indices.astype(np.int64, copy=False)
    indptr = X.indptr.astype(np.int64, copy=False)
    if d1 is not None and indices.size and indices.max() >= d1:
        j = int(np.argmax(indices >= d1))
        row = int(np.searchsorted(indptr, j, side="right") - 1)
        raise XCFormatError(f"{path}:{line_of(row)}: feature index {indices[j]} is out of "
                            f"range: features are 0-based indices in 0..{d1 - 1}")
    if not np.isfinite(data).all():
        j = int(np.argmax(~np.isfinite(data)))
        row = int(np.searchsorted(indptr, j, side="right") - 1)
        raise XCFormatError(f"{path}:{line_of(row)}: feature {indices[j]} has the value "
                            f"{data[j]}: feature values must be finite")
    y_indices, y_indptr = _label_csr(labels, d2, line_of, path)
    return data, indices, indptr, y_indices, y_indptr


def read_header(path: str):
    """``(n, d1, d2)`` of the header line, or ``None`` for a file without one."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"data={path!r} does not exist or is not a file")
    with open(path, "rb") as f:
        first = f.readline()
    match = _HEADER.match(first)
    if match is None:
        if _HEADER_LIKE.match(first):  # no instance line is whitespace-separated numbers
            raise XCFormatError(f"{path}:1: the header {first.decode().strip()!r} is not "
                                "three non-negative integers 'n d1 d2' (instances, features, "
                                "labels): fix the first line")
        return None
    n, d1, d2 = (int(g) for g in match.groups())
    if d1 < 1 or d2 < 1:
        raise XCFormatError(f"{path}:1: the header {first.decode().strip()!r} declares "
                            f"{d1} features and {d2} labels: both must be >= 1")
    return n, d1, d2


class _Chunks:
    """Chunks of ``chunk_rows`` rows of a data file, as CSR parts, checked against ``d1``,
    ``d2`` (when known) and the header's ``n`` (at the end)."""

    def __init__(self, path: str, chunk_rows: int, d1: int | None, d2: int | None):
        self.path, self.chunk_rows, self.d1, self.d2 = path, chunk_rows, d1, d2

    def __iter__(self):
        header = read_header(self.path)
        line_no = 1 if header is None else 2
        with open(self.path, "rb") as lines:
            if header is not None:
                lines.readline()
            n_rows, max_feature, max_label = 0, -1, -1
            pending = []  # parsed parts of the chunk being filled
            pending_rows = 0
            while True:
                want = self.chunk_rows - pending_rows
                block = list(itertools.islice(lines, want))
                if block:
                    part = _parse_chunk(self.path, block, line_no, self.d1, self.d2)
                    line_no += len(block)
                    rows = part[2].size - 1
                    if header is not None and n_rows + pending_rows + rows > header[0]:
                        raise XCFormatError(
                            f"{self.path}: the header declares {header[0]} instances but the "
                            f"file has more (line {line_no - 1} is past them): fix the header's "
                            "first number")
                    if rows:
                        pending.append(part)
                        pending_rows += rows
                        max_feature = max(max_feature, int(part[1].max(initial=-1)))
                        max_label = max(max_label, int(part[3].max(initial=-1)))
                if pending and (pending_rows == self.chunk_rows or not block):
                    yield _concat(pending)
                    n_rows += pending_rows
                    pending, pending_rows = [], 0
                if not block:
                    break
        if n_rows == 0:
            raise XCFormatError(f"{self.path}: the file is empty (no instances): expected a "
                                "header 'n d1 d2' and one line 'l1,l2 f:v f:v' per instance")
        if header is not None and n_rows != header[0]:
            raise XCFormatError(f"{self.path}: the header declares {header[0]} instances but "
                                f"the file has {n_rows}: fix the header's first number")
        self.sizes = (n_rows, max_feature + 1, max_label + 1)


def _concat(parts):
    if len(parts) == 1:
        return parts[0]
    data = np.concatenate([p[0] for p in parts])
    indices = np.concatenate([p[1] for p in parts])
    indptr = np.concatenate([parts[0][2]] + [p[2][1:] + off for p, off in zip(
        parts[1:], np.cumsum([p[2][-1] for p in parts[:-1]]))])
    y_indices = np.concatenate([p[3] for p in parts])
    y_indptr = np.concatenate([parts[0][4]] + [p[4][1:] + off for p, off in zip(
        parts[1:], np.cumsum([p[4][-1] for p in parts[:-1]]))])
    return data, indices, indptr, y_indices, y_indptr


def _dims(path: str, n_features, n_labels):
    """``(header sizes or None, d1 or None, d2 or None)`` from the header and arguments."""
    if n_features is not None:
        n_features = check_int("n_features", n_features, low=1)
    if n_labels is not None:
        n_labels = check_int("n_labels", n_labels, low=1)
    header = read_header(path)
    if header is None:
        return None, n_features, n_labels
    for name, given, declared in (("n_features", n_features, header[1]),
                                  ("n_labels", n_labels, header[2])):
        if given is not None and given != declared:
            raise ValueError(f"{name}={given} is not allowed: the header of {path} declares "
                             f"{declared}; leave {name} out (or give {declared})")
    return header, header[1], header[2]


def _csr(data, indices, indptr, shape, dtype):
    index = np.int32 if max(shape[1], indices.size) < 2**31 else np.int64
    return sp.csr_matrix((data.astype(dtype, copy=False), indices.astype(index),
                          indptr.astype(index)), shape=shape)


def _matrices(part, d1: int, d2: int):
    data, indices, indptr, y_indices, y_indptr = part
    n = indptr.size - 1
    return (_csr(data, indices, indptr, (n, d1), np.float64),
            _csr(np.ones(y_indices.size, np.int8), y_indices, y_indptr, (n, d2), np.int8))


def read_xc(path, *, n_features: int | None = None, n_labels: int | None = None,
            chunk_rows: int = 100_000):
    """Read a data file in the XC format (or multi-label svmlight).

    Parameters
    ----------
    path : str or os.PathLike
    n_features, n_labels : int, optional
        ``d1`` and ``d2`` of a file without the header line (for example a test file
        read with the training set's sizes); default: the largest index + 1. With a
        header, they must equal the header's numbers if given.
    chunk_rows : int, default 100000
        Lines parsed at a time (the peak memory is the result plus one chunk's text).

    Returns
    -------
    X : scipy.sparse.csr_matrix of float64, shape (n, d1)
    Y : scipy.sparse.csr_matrix of int8, shape (n, d2)
        ``Y[i, l] = 1`` when label ``l`` is one of instance ``i``'s labels.

    Raises
    ------
    XCFormatError
        A malformed file (the message names the file, the line and the value).
    """
    path = os.fspath(path)
    chunk_rows = check_int("chunk_rows", chunk_rows, low=1)
    _, d1, d2 = _dims(path, n_features, n_labels)
    chunks = _Chunks(path, chunk_rows, d1, d2)
    parts = list(chunks)
    _, seen_d1, seen_d2 = chunks.sizes
    return _matrices(_concat(parts), d1 or max(seen_d1, 1), d2 or max(seen_d2, 1))


def xc_sizes(path, *, n_features: int | None = None, n_labels: int | None = None,
             chunk_rows: int = 100_000) -> XCHeader:
    """``(n, d1, d2)`` of a data file: from its header, or (without one) from a pass
    over the file in chunks of ``chunk_rows`` lines that checks every line."""
    path = os.fspath(path)
    chunk_rows = check_int("chunk_rows", chunk_rows, low=1)
    header, d1, d2 = _dims(path, n_features, n_labels)
    if header is not None:
        return XCHeader(*header, True)
    chunks = _Chunks(path, chunk_rows, d1, d2)
    for _ in chunks:
        pass
    n, seen_d1, seen_d2 = chunks.sizes
    return XCHeader(n, d1 or max(seen_d1, 1), d2 or max(seen_d2, 1), header=False)


def iter_xc(path, chunk_rows: int, *, n_features: int | None = None,
            n_labels: int | None = None):
    """A data file's rows ``chunk_rows`` at a time, in bounded memory.

    The arguments and the header are checked when called; the iterator then parses
    one chunk per step.

    Every chunk but the last has exactly ``chunk_rows`` rows. A file without the
    header and without ``n_features``/``n_labels`` is read twice (the first pass finds
    ``d1`` and ``d2``). A problem found late in the file (say the header's count) is
    raised after the chunks before it were yielded: a consumer that writes them must
    discard what it wrote (as :func:`onebit_dask.io.csr_store.convert` does).

    Parameters
    ----------
    path : str or os.PathLike
    chunk_rows : int
    n_features, n_labels : int, optional
        As in :func:`read_xc`.

    Returns
    -------
    iterator of (X, Y)
    X : scipy.sparse.csr_matrix of float64, shape (rows, d1)
    Y : scipy.sparse.csr_matrix of int8, shape (rows, d2)
    """
    path = os.fspath(path)
    chunk_rows = check_int("chunk_rows", chunk_rows, low=1)
    sizes = xc_sizes(path, n_features=n_features, n_labels=n_labels, chunk_rows=chunk_rows)
    return (_matrices(part, sizes.d1, sizes.d2)
            for part in _Chunks(path, chunk_rows, sizes.d1, sizes.d2))
