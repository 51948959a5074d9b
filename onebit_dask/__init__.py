"""onebit-dask: low-rank multi-label models from one-bit, single-label feedback, on Dask.

The public names are imported on first use (PEP 562), so that the command line answers
``--help``, ``--version`` and bad input without importing scikit-learn and Dask (about
2 s).
"""

__version__ = "0.1.0"
__all__ = ["OneBitMultiLabel", "SyntheticProblem", "FullObservationProblem", "__version__"]

_LAZY = {"OneBitMultiLabel": ".estimator", "SyntheticProblem": ".synthetic",
         "FullObservationProblem": ".synthetic"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_LAZY])
