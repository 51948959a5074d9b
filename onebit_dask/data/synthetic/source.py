"""The synthetic problems of :mod:`onebit_dask.synthetic` as sources."""

from __future__ import annotations

import dataclasses

from .problem import FullObservationProblem, SyntheticProblem
from ..source import BaseSource


PROBLEM_KINDS = ("SyntheticProblem", "FullObservationProblem")
"""The ``kind`` of a planted problem's :meth:`ProblemSource.identity`."""


class ProblemSource(BaseSource):
    """A :class:`~onebit_dask.synthetic.SyntheticProblem` or
    :class:`~onebit_dask.synthetic.FullObservationProblem`: fresh batches of label-block
    shards drawn where they are activated, the planted truth and its test set."""

    def __init__(self, problem: SyntheticProblem | FullObservationProblem):
        self.planted = problem
        self.d1, self.d2 = problem.d1, problem.d2

    def batch(self, t: int, batch_size: int, n_shards: int) -> list:
        return self.planted.batch(t, batch_size, n_shards)

    def identity(self) -> dict:
        """The problem's fields (``kind``: its class name)."""
        p = self.planted
        if isinstance(p, FullObservationProblem):
            return {"kind": PROBLEM_KINDS[1], "problem": dataclasses.asdict(p.problem),
                    "n": p.n}
        return {"kind": PROBLEM_KINDS[0], **dataclasses.asdict(p)}

    def projection(self, A=None):
        return self.planted.projection(A)

    def features(self):
        """None to estimate a feature map from: refused
        (:func:`onebit_dask.features.check_source`)."""
        from ...ops.features import check_source

        check_source("whiten", self.planted)


def problem_from(data: dict | None):
    """The problem whose :meth:`ProblemSource.identity` is ``data`` (as a saved model
    holds it), or ``None`` when ``data`` is not a problem's."""
    if not data or data.get("kind") not in ("SyntheticProblem", "FullObservationProblem"):
        return None
    if data["kind"] == "FullObservationProblem":
        return FullObservationProblem(SyntheticProblem(**data["problem"]), data["n"])
    return SyntheticProblem(**{k: v for k, v in data.items() if k != "kind"})
