"""The synthetic problems of :mod:`onebit_dask.synthetic` as sources."""

from __future__ import annotations

import dataclasses

from ..synthetic import FullObservationProblem, SyntheticProblem


class ProblemSource:
    """A :class:`~onebit_dask.synthetic.SyntheticProblem` or
    :class:`~onebit_dask.synthetic.FullObservationProblem`: fresh batches of label-block
    shards drawn where they are activated, the planted truth and its test set."""

    def __init__(self, problem: SyntheticProblem | FullObservationProblem):
        self.planted = problem
        self.d1, self.d2 = problem.d1, problem.d2

    def n_batches(self, batch_size: int) -> None:
        return None

    def batch(self, t: int, batch_size: int, n_shards: int) -> list:
        return self.planted.batch(t, batch_size, n_shards)

    def identity(self) -> dict:
        """The problem's fields (``kind``: its class name)."""
        p = self.planted
        if isinstance(p, FullObservationProblem):
            return {"kind": "FullObservationProblem", "problem": dataclasses.asdict(p.problem),
                    "n": p.n}
        return {"kind": "SyntheticProblem", **dataclasses.asdict(p)}

    def projection(self, A=None):
        return self.planted.projection(A)

    def features(self):
        """None to estimate a feature map from: refused
        (:func:`onebit_dask.features.check_source`)."""
        from ..features import check_source

        check_source("whiten", self.planted)

    def place(self, engine, bounds):
        return self

    def propensities(self):
        return None
