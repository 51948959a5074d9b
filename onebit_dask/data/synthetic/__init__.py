"""The planted problems: the truth and its test set (:mod:`.problem`, whose explicit
sampler draws every row), the exact samplers of its batches (:mod:`.projected`,
:mod:`.conditional` and its plane's pieces with thresholds, :mod:`.pieces`; the draws
they share, :mod:`.draws`), and the problem as a :class:`~onebit_dask.data.Source`
(:mod:`.source`)."""

from .problem import FullObservationProblem, SyntheticProblem

__all__ = ["FullObservationProblem", "SyntheticProblem"]
