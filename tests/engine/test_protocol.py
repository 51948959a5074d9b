"""The engine protocol (onebit_dask.engine.protocol): both engines implement it, and the
rest of the package asks an engine for nothing else."""

import pathlib
import re

import onebit_dask
from onebit_dask.engine import Engine, LocalEngine
from onebit_dask.engine.dask_engine import DaskEngine

PACKAGE = pathlib.Path(onebit_dask.__file__).parent
MEMBERS = {name for name in dir(Engine) if not name.startswith("_")} | set(
    Engine.__annotations__)
SUBMODULES = {"topk", "placement", "dask_engine", "local", "blocks", "protocol"}


def test_both_engines_implement_the_protocol(client2):
    assert isinstance(LocalEngine(), Engine)
    assert isinstance(DaskEngine(client2), Engine)
    for cls in (LocalEngine, DaskEngine):
        missing = {m for m in MEMBERS if not hasattr(cls, m)
                   and m not in ("client", "bytes_sent", "bytes_received")}
        assert not missing, (cls.__name__, missing)


def test_the_package_asks_an_engine_only_for_the_protocol():
    """Every ``engine.<name>`` in the package (outside the engines themselves) is a
    member of the protocol (or a submodule of ``onebit_dask.engine``)."""
    asked = {}
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name == "engine" and path.stem in ("local", "dask_engine"):
            continue
        for name in re.findall(r"\bengine\.([a-z_]+)", path.read_text()):
            asked.setdefault(name, path.relative_to(PACKAGE).as_posix())
    unknown = {n: where for n, where in asked.items() if n not in MEMBERS | SUBMODULES}
    assert not unknown, unknown
    assert {"map", "blocks", "share", "start"} <= set(asked)  # the check sees the calls
