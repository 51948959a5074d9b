"""onebit-dask: low-rank multi-label models from one-bit, single-label feedback, on Dask.

The public names are imported on first use (PEP 562), so that the command line answers
``--help``, ``--version`` and bad input without importing scikit-learn and Dask.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("onebit-dask")  # the one version source: pyproject.toml
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
__all__ = ["OneBitMultiLabel", "SyntheticProblem", "FullObservationProblem", "__version__"]

_LAZY = {"OneBitMultiLabel": ".estimator", "SyntheticProblem": ".data.synthetic.problem",
         "FullObservationProblem": ".data.synthetic.problem"}

from .utils.lazy import lazy_names

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
