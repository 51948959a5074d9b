"""Parameter sweeps into xarray/zarr result cubes: specs, a resumable runner, reports.

The names below are imported on first use (PEP 562): a worker that unpickles a cell's
task imports :mod:`.cell` and the methods only, not the runner's xarray and zarr.
"""

__all__ = ["SweepSpec", "load_spec", "run_sweep"]

_LAZY = {"run_sweep": ".runner", "SweepSpec": ".spec", "load_spec": ".spec"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_LAZY})
