"""Names of a package imported on first use (PEP 562), shared by the package and ``sweep``."""

from __future__ import annotations

import importlib
import sys


def lazy_names(package: str, table: dict):
    """``(__getattr__, __dir__)`` for ``package``: ``table`` maps a public name to the
    relative module that defines it; a name is imported when first asked for and then
    kept in the package's namespace."""
    def __getattr__(name):
        if name in table:
            value = getattr(importlib.import_module(table[name], package), name)
            setattr(sys.modules[package], name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted({*vars(sys.modules[package]), *table})

    return __getattr__, __dir__
