"""Parameter sweeps into xarray/zarr result cubes: specs, a resumable runner, reports.

The names below are imported on first use (PEP 562): a worker that unpickles a cell's
task imports :mod:`.cell` and the methods (and the estimator they fit), not the runner,
the cube's store nor xarray.
"""

__all__ = ["SweepSpec", "load_spec", "run_sweep"]

_LAZY = {"run_sweep": ".runner", "SweepSpec": ".spec", "load_spec": ".spec"}

from ..utils.lazy import lazy_names

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
