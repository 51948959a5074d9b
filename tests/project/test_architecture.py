"""The layer picture of docs/ARCHITECTURE.md is true: every module of the package is in
it, and no module imports one of a layer above its own (an import inside a function
counts too)."""

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


def layers(known) -> dict:
    """``{module: layer}`` from the picture (0 at the top). In a layer, ``pkg/name.py``
    and ``name.py`` of the package's top level are modules; another ``name.py`` is the
    latest ``pkg/``'s; ``pkg/`` places every module of ``pkg`` that no name places."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    picture = re.search(r"## The layers\n.*?```\n(.*?)```", text, re.S).group(1)
    chunks = re.split(r"^\s*▼.*$", picture, flags=re.M)
    named, packages = {}, {}
    for layer, chunk in enumerate(chunks):
        where = None
        for match in re.finditer(r"\b(?:(\w+)/)?(\w+)\.py\b|\b(\w+)/(?!\w)", chunk):
            folder, name, package = match.groups()
            if package is not None:
                where = package
                packages.setdefault(f"onebit_dask.{package}", layer)
                continue
            if folder is None and f"onebit_dask.{name}" not in known:
                folder = where
            module = ".".join(p for p in ("onebit_dask", folder, name) if p)
            assert module in known, f"the picture names {module}, which does not exist"
            named.setdefault(module, layer)
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
    known = modules()
    assert set(known) - set(layers(known)) == set()


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
    """The picture names folders: a module it does not name is in its folder's layer."""
    known = modules()
    known["onebit_dask.data.new_kind"] = PACKAGE / "data" / "new_kind.py"
    layer = layers(known)
    assert layer["onebit_dask.data.new_kind"] == layer["onebit_dask.data.source"]


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
