"""The layer picture of docs/ARCHITECTURE.md is true: every module of the package is in
it, by its subpackage (every subpackage is named as a folder, so that a module added to
one needs no edit of the picture), and no module imports one of a layer above its own
(an import inside a function counts too)."""

import ast
import pathlib
import re

import onebit_dask

from tests.support.helpers import ROOT

PACKAGE = ROOT / "onebit_dask"
ROOT_NAMES = onebit_dask._LAZY
"""The package root's names, each the module it is imported from on first use."""


def modules() -> dict:
    """``{dotted name: path}`` of every module of the package but its root."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if len(parts) > 1:
            found[".".join(parts)] = path
    return found


def subpackages() -> set:
    """The package's subpackages (each folder with an ``__init__.py``), dotted."""
    return {".".join(p.parent.relative_to(ROOT).parts)
            for p in PACKAGE.rglob("__init__.py")} - {"onebit_dask"}


def picture() -> tuple:
    """``({module: layer}, {subpackage: layer})``: what the picture names (0 at the top).
    In a layer, ``pkg/`` is a subpackage: ``onebit_dask.pkg``, or one inside the latest
    ``pkg/`` before it (``data/ ... synthetic/``); ``pkg/name.py`` and ``name.py`` of the
    package's top level are modules; another ``name.py`` is the latest ``pkg/``'s."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    chunks = re.split(r"^\s*▼.*$", re.search(r"## The layers\n.*?```\n(.*?)```", text,
                                             re.S).group(1), flags=re.M)
    known, folders = modules(), subpackages()
    named, packages = {}, {}
    for layer, chunk in enumerate(chunks):
        where = None
        for match in re.finditer(r"\b(?:(\w+)/)?(\w+)\.py\b|\b(\w+)/(?!\w)", chunk):
            folder, name, package = match.groups()
            if package is not None:
                found = {f"onebit_dask.{package}", *([f"{where}.{package}"] if where else [])}
                found &= folders
                assert len(found) == 1, f"{package}/ in the picture: {sorted(found) or 'no folder'}"
                (where,) = found
                packages.setdefault(where, layer)
                continue
            if folder is not None:
                module = f"onebit_dask.{folder}.{name}"
            elif where is None or f"onebit_dask.{name}" in known:
                module = f"onebit_dask.{name}"
            else:
                module = f"{where}.{name}"
            assert module in known, f"the picture names {module}, which does not exist"
            named.setdefault(module, layer)
    return named, packages


def layers(known) -> dict:
    """``{module: layer}`` for the modules ``known``: the layer the picture names a module
    in, else the layer of the innermost subpackage it is in (``pkg/`` places every module
    of ``pkg`` that no name places: a new module needs no edit of the picture)."""
    named, packages = picture()
    placed = dict(named)
    for module in known:
        if module not in placed:
            owners = [p for p in packages if module == p or module.startswith(p + ".")]
            if owners:
                placed[module] = packages[max(owners, key=len)]
    return placed


def imports(name: str, path: pathlib.Path) -> set:
    """The package's modules that ``name`` imports, anywhere in it."""
    known = modules()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [target] + [f"{target}.{alias.name}" for alias in node.names]
            if target == "onebit_dask":  # the root's lazy names are their modules'
                candidates += [f"onebit_dask{ROOT_NAMES[alias.name]}" for alias in node.names
                               if alias.name in ROOT_NAMES]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(c for c in candidates if c in known and c != name)
    return found


def test_every_module_is_in_the_picture():
    """By its folder: every subpackage is named as one (``pkg/``), so that a module added
    to it is in the picture without an edit; a module of the package's top level is named
    by itself."""
    known = modules()
    assert set(known) - set(layers(known)) == set()
    assert subpackages() - set(picture()[1]) == set()


def test_no_module_imports_a_layer_above_its_own():
    known = modules()
    layer = layers(known)
    upward = sorted(f"{name} (layer {layer[name]}) imports {target} (layer {layer[target]})"
                    for name, path in known.items() for target in imports(name, path)
                    if layer[target] < layer[name])
    assert upward == []


def test_the_check_sees_an_upward_import(tmp_path):
    """The check rejects what it should: the kernels importing the estimator."""
    known = modules()
    layer = layers(known)
    for line in ("from ..estimator import OneBitMultiLabel",
                 "from .. import OneBitMultiLabel",  # a lazy name of the root
                 "import onebit_dask.estimator"):
        fake = tmp_path / "kernels.py"
        fake.write_text(line + "\n")
        assert imports("onebit_dask.ops.kernels", fake) == {"onebit_dask.estimator"}, line
    assert layer["onebit_dask.estimator"] < layer["onebit_dask.ops.kernels"]


def test_a_new_module_in_a_folder_is_in_its_folders_layer():
    """The picture names folders: a module it does not name is in its folder's layer, in
    every subpackage (``data/synthetic/`` and ``io/stores/`` too)."""
    known = modules()
    known["onebit_dask.data.new_kind"] = PACKAGE / "data" / "new_kind.py"
    layer = layers(known)
    assert layer["onebit_dask.data.new_kind"] == layer["onebit_dask.data.source"]
    for package in sorted(subpackages()):
        new = f"{package}.new_module"
        known = {**modules(), new: PACKAGE.parent.joinpath(*new.split(".")).with_suffix(".py")}
        layer = layers(known)
        assert layer[new] == layer[package], new


def test_no_module_imports_a_private_name_of_another():
    """A name that starts with one underscore stays in its module (scikit-learn's own
    ``sklearn.utils._param_validation`` and the like are outside the package)."""
    found = []
    for name, path in modules().items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "onebit_dask":
                continue
            found += [f"{name} imports {target}.{alias.name}" for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert found == []
