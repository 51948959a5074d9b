"""onebit-dask: low-rank multi-label models from one-bit, single-label feedback, on Dask.

The public names are imported on first use (PEP 562), so that the command line answers
``--help``, ``--version`` and bad input without importing scikit-learn and Dask (and the
version, from the package's metadata, when first asked for).
"""

__all__ = ["OneBitMultiLabel", "SyntheticProblem", "FullObservationProblem", "__version__"]

_LAZY = {"OneBitMultiLabel": ".estimator", "SyntheticProblem": ".data.synthetic.problem",
         "FullObservationProblem": ".data.synthetic.problem", "__version__": "._version"}

from .utils.lazy import lazy_names

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
