"""The package as installed: shipped specs and configs, metadata, declared dependencies and
the wheel itself."""

import ast
import os
import pathlib
import re
import shutil
import subprocess
import tarfile
import sys

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from onebit_dask.cli import shipped
from onebit_dask.cli import main

from tests.support.helpers import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_subpackage_is_listed_and_the_data_is_mapped():
    setuptools = PYPROJECT["tool"]["setuptools"]
    on_disk = {".".join(p.parent.relative_to(ROOT).parts)
               for p in (ROOT / "onebit_dask").rglob("__init__.py")}
    assert set(setuptools["packages"]) == on_disk | {"onebit_dask._pipelines",
                                                     "onebit_dask._cluster"}
    assert setuptools["package-dir"] == {"onebit_dask._pipelines": "pipelines",
                                         "onebit_dask._cluster": "cluster"}


def test_one_version_source_a_license_and_a_citation():
    import importlib.metadata

    import onebit_dask

    assert onebit_dask.__version__ == importlib.metadata.version("onebit-dask")
    assert "version" not in PYPROJECT["project"].get("dynamic", [])
    assert not re.search(r"""__version__ = ["']\d+\.""", (ROOT / "onebit_dask" / "__init__.py")
                         .read_text())  # no literal version in the package
    assert (ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License")
    import yaml

    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    paper = citation["preferred-citation"]
    assert paper["title"] == "Nonconvex One-bit Single-label Multi-label Learning"
    assert [a["family-names"] for a in paper["authors"]] == ["Qiu", "Luo", "Ye", "Lin"]
    assert "version" not in citation


def test_shipped_files_are_named_without_a_path(tmp_path, monkeypatch, capsys):
    from onebit_dask.cli.client import check_cluster_target
    from onebit_dask.sweep.spec import load_spec

    monkeypatch.chdir(tmp_path)  # outside the checkout
    for kind, folder in (("pipelines", "pipelines"), ("cluster", "cluster")):
        files = sorted(p.stem for p in (ROOT / folder).glob("*.yaml"))
        assert shipped.names(kind) == files
    path = shipped.resolve("pipelines", "quickstart")
    assert pathlib.Path(path).read_text() == (ROOT / "pipelines" / "quickstart.yaml").read_text()
    assert load_spec(path).name == "quickstart"
    assert shipped.resolve("pipelines", "quickstart.yaml") == path
    check_cluster_target(cluster=shipped.resolve("cluster", "local"))
    (tmp_path / "quickstart").write_text("grid: {}\n")  # a path that exists wins
    assert shipped.resolve("pipelines", "quickstart") == "quickstart"
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "quickstart" in out and "local-tls" in out
    assert main(["sweep", "nosuch", "--out", "q.zarr", "--workers", "0"]) == 2
    assert "onebit-dask list shows them" in capsys.readouterr().err


def _third_party_imports():
    """``{top-level module: [files]}`` of every absolute import in the package that is not
    the standard library's or the package's own, found by reading the source."""
    found = {}
    for path in sorted((ROOT / "onebit_dask").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for top in {name.split(".")[0] for name in names} - set(sys.stdlib_module_names):
                if top != "onebit_dask":
                    found.setdefault(top, []).append(str(path.relative_to(ROOT)))
    return found


def _names(requirements):
    """The distributions that ``requirements`` (PEP 508 strings) name, normalised."""
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def test_every_import_of_the_package_is_a_declared_dependency():
    """What a clean install brings: every third-party module the package imports belongs
    to a distribution of ``dependencies`` (or, for the cluster back ends, of the
    ``cluster`` extra), not one that happens to come with another."""
    import importlib.metadata

    found = importlib.metadata.packages_distributions()

    def owners(module):
        return {canonicalize_name(d) for d in found.get(module, [module])}

    core = _names(PYPROJECT["project"]["dependencies"])
    extra = _names(PYPROJECT["project"]["optional-dependencies"]["cluster"])
    imports = _third_party_imports()
    assert {"numpy", "dask", "zarr", "sklearn"} <= set(imports)  # the scan sees imports
    undeclared = {}
    for module, files in imports.items():
        if not owners(module) & (core | extra):
            undeclared[module] = files
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
    for module in ("asyncssh", "dask_jobqueue", "dask_kubernetes"):  # only with the extra
        assert owners(module) & extra and not owners(module) & core, module


@pytest.mark.integration
@pytest.mark.slow
def test_the_wheel_in_a_venv_of_its_own_runs_the_quickstart_outside_the_checkout(tmp_path):
    """An sdist (``python -m build``), a wheel from it (pip wheel, build isolation: only
    pyproject.toml's build requirements), install it
    alone into a venv of its own, and run the quickstart by name from a directory outside
    the checkout, with nothing of the checkout on the path.

    The venv reaches the dependencies already installed here through a ``.pth`` line (the
    site directories of this interpreter, without running their ``.pth`` files: the
    editable install of the checkout stays out); that every import is declared is
    :func:`test_every_import_of_the_package_is_a_declared_dependency`'s part, and ``.ci/run``
    installs the declared ones into a fresh venv."""
    import site

    wheels, venv, work = tmp_path / "wheels", tmp_path / "venv", tmp_path / "work"
    assert not str(tmp_path).startswith(str(ROOT))
    source = tmp_path / "source"  # a copy: the build leaves nothing in the checkout
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        "build", "dist", "*.egg-info", "*.zarr", "__pycache__", ".pytest_cache"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    # the sdist (python -m build), then the wheel from the sdist, as an index would
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir", str(wheels),
                    str(source)], check=True, env=env, capture_output=True, timeout=600)
    sdist = next(wheels.glob("onebit_dask-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert {"_build/backend.py", "onebit_dask/_revision.json"} <= names
    subprocess.run([*pip, "wheel", "--no-deps", "-q", "-w", str(wheels), str(sdist)],
                   check=True, env=env, capture_output=True, timeout=600)
    wheel = next(wheels.glob("onebit_dask-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([*pip, "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
                   check=True, env=env, capture_output=True, timeout=900)
    venv_site = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                               check=True, capture_output=True, text=True).stdout.strip()
    here = [p for p in site.getsitepackages() if not p.startswith(str(ROOT))]
    pathlib.Path(venv_site, "deps-of-the-test.pth").write_text("\n".join(here) + "\n")
    work.mkdir()
    proc = subprocess.run([str(venv / "bin" / "onebit-dask"), "sweep", "quickstart", "--out",
                           "q.zarr", "--workers", "0", "--quiet"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    check = subprocess.run(
        [str(python), "-c", ("import onebit_dask, xarray as xr; ds = xr.open_zarr('q.zarr'); "
                             "print(onebit_dask.__file__); "
                             # every cell the spec asks (its noise settings) is done
                             "asked = ds['done'].size // (ds.sizes['noise_model'] "
                             "* ds.sizes['noise_level']) * len(ds.attrs['noise_settings']); "
                             "print(int(int(ds['done'].sum()) == asked)); "
                             "print(ds.attrs['onebit_dask_version']); "
                             "print(ds.attrs['git_revision'])")],
        cwd=work, env=env, capture_output=True, text=True, timeout=300)
    where, done, version, revision = check.stdout.split()
    assert where.startswith(str(venv)) and done == "1"
    import onebit_dask

    assert version == onebit_dask.__version__
    # the build wrote the commit into the wheel, and left the checkout's copy as it was
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    assert revision == (head or "unknown")  # a checkout that is no git work tree: unknown
    assert not (source / "onebit_dask" / "_revision.json").exists()
