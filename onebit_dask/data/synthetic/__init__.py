"""The planted problems: the truth and its test set (:mod:`.problem`), the exact samplers
of its batches (:mod:`.sampling`), and the problem as a :class:`~onebit_dask.data.Source`
(:mod:`.source`)."""

from .problem import FullObservationProblem, SyntheticProblem

__all__ = ["FullObservationProblem", "SyntheticProblem"]
