"""The revision recorded with a result is the package's own (onebit_dask.utils.provenance)."""

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from onebit_dask.utils import provenance

SOURCE = Path(provenance.__file__)
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def _repo(path: Path) -> str:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run([*GIT, "init", "-q", str(path)], check=True)
    (path / "README").write_text("another project\n")
    subprocess.run([*GIT, "-C", str(path), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(path), "commit", "-qm", "x"], check=True)
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def _load_copy_at(package: Path):
    """provenance.py copied into ``package/utils`` and imported from there."""
    (package / "utils").mkdir(parents=True, exist_ok=True)
    shutil.copy(SOURCE, package / "utils" / "provenance.py")
    spec = importlib.util.spec_from_file_location(f"copy_{abs(hash(package))}",
                                                  package / "utils" / "provenance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def has_git():
    if shutil.which("git") is None:
        pytest.skip("git is not installed")


def test_a_package_at_the_top_of_a_clone_records_its_head_and_local_changes(tmp_path, has_git):
    head = _repo(tmp_path / "clone")
    (tmp_path / "clone" / "onebit_dask").mkdir()
    module = _load_copy_at(tmp_path / "clone" / "onebit_dask")
    assert module.revision() == {"git_revision": head, "source_tree_modified": "false"}
    (tmp_path / "clone" / "README").write_text("changed\n")
    module.revision.cache_clear()
    assert module.revision() == {"git_revision": head, "source_tree_modified": "true"}


def test_an_install_inside_another_repository_does_not_take_its_revision(tmp_path, has_git):
    other = _repo(tmp_path / "project")
    site = tmp_path / "project" / ".venv" / "lib" / "python3" / "site-packages" / "onebit_dask"
    module = _load_copy_at(site)
    recorded = module.revision()
    assert recorded["git_revision"] != other
    assert recorded["git_revision"] == (module._recorded_revision() or "unknown")
    assert recorded["source_tree_modified"] == "unknown"


def test_provenance_names_every_library_that_computes():
    attrs = provenance.provenance()
    for key in ("onebit_dask_version", "git_revision", "source_tree_modified", "python_version",
                "numpy_version", "scipy_version", "scikit_learn_version", "dask_version",
                "distributed_version", "zarr_version", "xarray_version"):
        assert attrs[key] and attrs[key] != "not installed", key
    import sklearn

    assert attrs["scikit_learn_version"] == sklearn.__version__
