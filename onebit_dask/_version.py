"""The installed package's version, read from its metadata (the one source: pyproject.toml)
when first asked for: ``importlib.metadata`` takes a fifth of a second to import."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("onebit-dask")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
