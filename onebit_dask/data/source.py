"""The :class:`Source` protocol: what the fit loop and the engines ask of data.

A fit builds one source from what it was given (:func:`onebit_dask.data.inputs.as_source`)
and from then on only calls the methods below; the engines only look at the shards'
:class:`~onebit_dask.data.shards.ShardKind`.
"""

from __future__ import annotations

import warnings
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Source(Protocol):
    """Batches of one-bit single-label observations ``(x_i, j_i, y_i)``.

    Attributes
    ----------
    d1, d2 : int
        Features and labels.
    n : int or None
        The rows the data hold, read in order (``n_batches`` batches of them), or ``None``
        for data whose every batch is drawn afresh.
    planted : SyntheticProblem, FullObservationProblem or None
        The planted truth and its test set when the data have one (the fit then records
        the recovery metrics), else ``None``.
    row_numbers : float
        The numbers one row of features holds: ``d1`` for dense features, the mean stored
        entries a row for sparse ones (what the size limits count for a batch).
    classes : ndarray of shape (2,) or None
        The two classes of a binary target (``fit(X, y)`` with a 1-D ``y``), whose one
        label is ``y == classes[1]``; ``None`` for labels ``0 .. d2 - 1``.
    uniform_rows : bool
        Whether a batch's bits draw their rows uniformly from the rows ``features()``
        returns (a label matrix's uniform pairs), so that a label's asked rows sum to
        ``n_j`` times their mean in expectation (``docs/ALGORITHM.md`` section 9f).
    """

    d1: int
    d2: int
    n: int | None
    planted: Any
    row_numbers: float
    classes: Any
    uniform_rows: bool

    def n_batches(self, batch_size: int) -> int | None:
        """Distinct batches of ``batch_size`` the data hold (``None``: fresh forever)."""

    def batch(self, t: int, batch_size: int, n_shards: int) -> list:
        """The shards of batch ``t`` (:mod:`onebit_dask.data.shards`); label-block
        shards come as ``min(n_shards, d2)`` blocks ``[s d2 // S, (s + 1) d2 // S)``."""

    def identity(self) -> dict:
        """A JSON description of the data for checkpoint fingerprints."""

    def projection(self, A=None):
        """What a projected sampler needs of the model ``A`` (``None``: nothing)."""

    def place(self, engine, bounds) -> "Source":
        """This source with the data its shards read shared once with ``engine``
        (``engine.share``), for label blocks ``bounds``; sources whose shards carry or
        read their own data return themselves."""

    def features(self):
        """The training features a feature map is estimated from
        (:func:`onebit_dask.features.fit_feature_map`): an ``(n, d1)`` array, a CSR
        matrix or :class:`~onebit_dask.features.RowChunks` (rows read from a store).
        Sources of a planted problem have none (the map is refused for them)."""

    def propensities(self) -> np.ndarray | None:
        """The training labels' propensities (propensity-scored metrics), or ``None``
        when the data are not a label matrix."""


class BaseSource:
    """The :class:`Source` methods most data share: no planted truth, fresh batches
    forever (``n_batches`` ``None``), nothing a projected sampler needs, nothing to share
    with the engine (``place`` returns the source) and no propensities. A source
    overrides what it has."""

    planted = None
    n = None  # a source that holds its rows sets n
    classes = None  # a binary target's two classes (as_source sets them)
    queryable = False  # whether a query policy may choose the pairs (a label matrix)
    uniform_rows = False  # whether the bits draw rows uniformly (the Source docstring)

    @property
    def row_numbers(self) -> float:
        """``d1``: dense rows (a sparse source overrides it)."""
        return float(self.d1)

    def n_batches(self, batch_size: int) -> int | None:
        return None

    def projection(self, A=None):
        return None

    def place(self, engine, bounds) -> "Source":
        return self

    def propensities(self) -> np.ndarray | None:
        return None


def warn_if_cycling(source: Source, batch_size: int, n_batches: int) -> None:
    """Warn when ``n_batches`` batches of ``batch_size`` are asked of a source that holds
    fewer (its ``n`` rows are then reused)."""
    held = source.n_batches(batch_size)
    if held is None or n_batches <= held:
        return
    size = min(batch_size, source.n)
    what = (f"{held} batches of it" if size == batch_size else
            f"{source.n} rows, one batch of {size}")
    warnings.warn(
        f"{n_batches} batches of batch_size={batch_size} were asked for, but the data hold "
        f"{what}: batches are reused. Pass more observations, a smaller batch_size or "
        f"a smaller n_iter for fresh batches.",
        UserWarning, stacklevel=3,
    )
