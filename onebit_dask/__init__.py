"""onebit-dask: low-rank multi-label models from one-bit, single-label feedback, on Dask."""

from .estimator import OneBitMultiLabel
from .synthetic import FullObservationProblem, SyntheticProblem

__version__ = "0.1.0"
__all__ = ["OneBitMultiLabel", "SyntheticProblem", "FullObservationProblem", "__version__"]
