"""The sweep's exceptions, defined in :mod:`onebit_dask.errors` (imported from here by
modules of ``sweep/`` that predate that module)."""

from ..errors import SpecError, SweepRuntimeError

__all__ = ["SpecError", "SweepRuntimeError"]
