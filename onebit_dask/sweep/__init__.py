"""Parameter sweeps into xarray/zarr result cubes: specs, a resumable runner, reports."""

from .runner import run_sweep
from .spec import SweepSpec, load_spec

__all__ = ["SweepSpec", "load_spec", "run_sweep"]
