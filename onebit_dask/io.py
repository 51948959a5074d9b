"""Single-label observations in a zarr (v3) group: the layout, a writer and a source.

Layout of an observations store (a zarr group)::

    STORE.zarr/
        X       (n, d1) float32 or float64, chunked by rows
        labels  (n,)    int64, the observed label of each row, in [0, n_labels)
        y       (n,)    int8, the observed bit, -1 or +1
        attrs:  {"format": "onebit-dask/observations", "version": 1, "n_labels": d2}

Rows are used in order: batch ``b`` is rows ``[b m, (b + 1) m)``, split into
``n_shards`` contiguous row ranges; a worker reads its own range, so the features
never pass through the client. Rows sorted (or grouped) by label keep each
shard's label range short, and so what travels to it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import zarr

from ._validation import check_features, check_int, check_observations
from .sources import row_bounds

FORMAT = "onebit-dask/observations"


def write_observations(path, X, labels, y, *, n_labels: int | None = None,
                       chunk_rows: int = 100_000, overwrite: bool = False) -> str:
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
    """
    path = os.fspath(path)
    chunk_rows = check_int("chunk_rows", chunk_rows, low=1)
    X, labels, y, n_labels = check_observations(X, labels, y, n_labels=n_labels)
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"path={path!r} exists: pass overwrite=True to replace it")
    group = zarr.open_group(path, mode="w")
    n, d1 = X.shape
    group.create_array("X", shape=(n, d1), chunks=(min(chunk_rows, n), d1), dtype=X.dtype)[:] = X
    group.create_array("labels", shape=(n,), chunks=(min(chunk_rows, n),), dtype="int64")[:] = labels
    group.create_array("y", shape=(n,), chunks=(min(chunk_rows, n),), dtype="int8")[:] = y
    group.attrs.update({"format": FORMAT, "version": 1, "n_labels": int(n_labels)})
    return path


@dataclass(frozen=True)
class ZarrShard:
    """Rows ``[lo, hi)`` of an observations store, read where ``load()`` runs."""

    path: str
    lo: int
    hi: int
    label_range: tuple[int, int]

    @property
    def n_obs(self) -> int:
        return self.hi - self.lo

    def load(self):
        group = zarr.open_group(self.path, mode="r")
        X = check_features(group["X"][self.lo: self.hi], row_offset=self.lo)
        return X, group["labels"][self.lo: self.hi], group["y"][self.lo: self.hi].astype(np.float64)


class ZarrSource:
    """An observations store cut into mini-batches of ``batch_size`` rows.

    Opening it checks the layout, the labels and the bits (they are small) but
    not the features, which each shard checks when it reads them.
    """

    def __init__(self, path, batch_size: int):
        self.path = os.fspath(path)
        if not os.path.isdir(self.path):
            raise FileNotFoundError(f"data={self.path!r} does not exist: write one with "
                                    "onebit_dask.io.write_observations")
        try:
            group = zarr.open_group(self.path, mode="r")
        except Exception as exc:  # zarr raises several types for a non-group path
            raise ValueError(f"data={self.path!r} is not a zarr group: {exc}") from None
        if group.attrs.get("format") != FORMAT:
            raise ValueError(f"data={self.path!r} is not an observations store (attrs format="
                             f"{group.attrs.get('format')!r}, expected {FORMAT!r})")
        missing = {"X", "labels", "y"} - set(group.array_keys())
        if missing:
            raise ValueError(f"data={self.path!r} lacks the arrays {sorted(missing)}")
        n, self.d1 = group["X"].shape
        self.d2 = check_int("n_labels", group.attrs.get("n_labels"), low=1)
        self.labels = group["labels"][:]
        check_observations(np.zeros((n, 1)), self.labels, group["y"][:], n_labels=self.d2)
        self.n = n
        self.batch_size = min(batch_size, n)
        self.n_batches = -(-n // self.batch_size)

    def batch(self, t: int, n_shards: int) -> list[ZarrShard]:
        b = t % self.n_batches
        lo = b * self.batch_size
        hi = min(lo + self.batch_size, self.n)
        bounds = [lo + r for r in row_bounds(hi - lo, min(n_shards, hi - lo))]
        shards = []
        for a, z in zip(bounds[:-1], bounds[1:]):
            labels = self.labels[a:z]
            shards.append(ZarrShard(self.path, a, z, (int(labels.min()), int(labels.max()) + 1)))
        return shards
