"""The result cube of a sweep: one xarray Dataset in a zarr (v3) store.

Every grid parameter is a dimension, plus ``iteration``. Each cell owns its own
chunks (chunk size 1 along every grid dimension), so cells write their regions
concurrently without sharing a chunk. ``done`` marks the cells written (it is
written after the cell's values), ``failed`` the cells that raised; their error
text goes to ``STORE.failures.jsonl`` next to the store.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import warnings

import numpy as np
import xarray as xr

from .. import __version__
from .spec import SweepSpec, parse_noise

FORMAT = "onebit-dask/sweep"
VARIABLES = {
    "spectral_error": ("1", "||W* - W||_2 (the paper's Theorem 1), exact, from the factors"),
    "frobenius_error": ("1", "||W* - W||_F / sqrt(d2): RMS error of a unit column, in [0, 2]"),
    "hamming_loss": ("1", "fraction of test (instance, label) pairs whose predicted sign "
                          "differs from the noiseless label"),
    "auc": ("1", "macro ROC AUC over labels of the scores x^T w_j on the test set"),
    "n_samples": ("observations", "observations used up to this iteration (initial batch "
                                  "included); float so that a missing value is NaN"),
    "wall_s": ("s", "training wall time of the cell (per-iteration evaluation excluded)"),
    "done": ("", "True once the cell's values are written"),
    "failed": ("", "True if the cell raised; its error is in STORE.failures.jsonl"),
}
COORDS = {
    "method": "estimator", "d1": "feature dimension", "d2": "number of labels",
    "rank": "rank k of the truth and the model", "noise": "noise setting",
    "noise_model": "none, flip (bit flipped with probability noise_level) or gaussian "
                   "(noise of std noise_level added to x^T w_j)",
    "noise_level": "flip probability or Gaussian noise std",
    "step": "step size rule (paper or averaged)", "batch_size": "observations per batch m",
    "n_iter": "steps after the initial batch", "seed": "seed of the truth, data and start",
    "iteration": "0 = after the initial batch, t = after step t",
}


class StoreError(ValueError):
    """An output store that cannot be used."""


def failures_path(path: str) -> str:
    return os.fspath(path).rstrip("/") + ".failures.jsonl"


def _git_revision() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                              text=True, timeout=5).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _versions() -> dict:
    import dask
    import numpy
    import zarr

    return {"numpy_version": numpy.__version__, "dask_version": dask.__version__,
            "xarray_version": xr.__version__, "zarr_version": zarr.__version__}


def template(spec: SweepSpec) -> xr.Dataset:
    """The empty cube: dask arrays of NaN / False, one chunk per cell."""
    import dask.array as da

    dims = spec.dims
    shape = spec.shape
    cell_chunks = (1,) * len(dims)
    full = (*shape, spec.n_iterations)
    data = {}
    for name in ("spectral_error", "frobenius_error", "hamming_loss", "auc", "n_samples"):
        data[name] = ((*dims, "iteration"), da.full(full, np.nan, chunks=(*cell_chunks, -1)))
    data["wall_s"] = (dims, da.full(shape, np.nan, chunks=cell_chunks))
    for name in ("done", "failed"):
        data[name] = (dims, da.zeros(shape, dtype=bool, chunks=cell_chunks))
    noise = [parse_noise(label) for label in spec.grid["noise"]]
    coords = {dim: np.asarray(spec.grid[dim]) for dim in dims}
    if spec.datasets:
        names = spec.grid["dataset"]
        for key in next(iter(spec.datasets.values())):
            coords[key] = ("dataset", np.asarray([spec.datasets[n][key] for n in names]))
    coords["noise_model"] = ("noise", np.asarray([m for m, _ in noise]))
    coords["noise_level"] = ("noise", np.asarray([lv for _, lv in noise], dtype=float))
    coords["iteration"] = np.arange(spec.n_iterations)
    ds = xr.Dataset(data, coords=coords)
    for name, (units, text) in VARIABLES.items():
        ds[name].attrs.update(units=units, description=text)
    for name, text in COORDS.items():
        ds[name].attrs["description"] = text
    ds.attrs.update(
        format=FORMAT, format_version=1, spec_name=spec.name, spec_description=spec.description,
        spec_text=spec.text, spec_fingerprint=spec.fingerprint(),
        onebit_dask_version=__version__, git_revision=_git_revision(),
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **_versions())
    return ds


def _quiet_zarr():
    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.filterwarnings("ignore", message=".*does not have a Zarr V3 specification.*")
    warnings.filterwarnings("ignore", category=UserWarning, module="zarr.*")
    return ctx


def check_output(path: str, spec: SweepSpec, overwrite: bool) -> bool:
    """Check the output before any work; return True if a store must be created.

    A missing or read-only parent directory, a path that is not one of our
    stores, or one of ours made from another spec (without ``overwrite``) is an
    error; nothing is touched.
    """
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise StoreError(f"--out {path!r}: the directory {parent!r} does not exist")
    if not _writable(parent):
        raise StoreError(f"--out {path!r}: the directory {parent!r} is not writable")
    if not os.path.exists(path):
        return True
    attrs = read_attrs(path)
    if attrs is None or attrs.get("format") != FORMAT:
        raise StoreError(f"--out {path!r} exists and is not an onebit-dask sweep store: "
                         "choose another path (nothing was changed)")
    if not os.access(path, os.W_OK):
        raise StoreError(f"--out {path!r} is not writable")
    if attrs.get("spec_fingerprint") != spec.fingerprint():
        if not overwrite:
            raise StoreError(f"--out {path!r} holds the results of another spec "
                             f"({attrs.get('spec_name')!r}): use a new path, or --overwrite "
                             "to replace them")
        return True
    return overwrite


def _writable(directory: str) -> bool:
    """Whether a file can be created in ``directory`` (tried for real: ``os.access``
    says yes to root even on a read-only file system)."""
    import tempfile

    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".onebit-write-probe-")
    except OSError:
        return False
    os.close(fd)
    os.remove(probe)
    return True


def read_attrs(path: str) -> dict | None:
    import zarr

    try:
        return dict(zarr.open_group(os.fspath(path), mode="r").attrs)
    except Exception:  # not a zarr group at all
        return None


def create(path: str, spec: SweepSpec) -> None:
    path = os.fspath(path)
    if os.path.exists(path):
        shutil.rmtree(path)
    if os.path.exists(failures_path(path)):
        os.remove(failures_path(path))
    ctx = _quiet_zarr()
    try:
        template(spec).to_zarr(path, mode="w-", compute=False, zarr_format=3, consolidated=False)
    finally:
        ctx.__exit__(None, None, None)


def done_mask(path: str) -> np.ndarray:
    import zarr

    return zarr.open_group(os.fspath(path), mode="r")["done"][...]


def region_of(spec: SweepSpec, index: tuple, all_steps: bool) -> dict:
    region = {dim: slice(i, i + 1) for dim, i in zip(spec.dims, index)}
    if all_steps:
        region["step"] = slice(0, len(spec.grid["step"]))
    return region


def write_cell(path: str, spec: SweepSpec, index: tuple, result: dict | None,
               all_steps: bool = False) -> None:
    """Write one cell's values into its own chunks, then mark it done (or failed)."""
    params = spec.cells_at(index)
    region = region_of(spec, index, all_steps)
    shape = tuple(s.stop - s.start for s in region.values())
    dims = spec.dims
    n_it = spec.n_iterations
    ctx = _quiet_zarr()
    try:
        if result is not None:
            data = {}
            for name in ("spectral_error", "frobenius_error", "hamming_loss", "auc", "n_samples"):
                values = np.full(n_it, np.nan)
                # a method without iterations reports its final value at the last iteration
                end = params["n_iter"] + 1
                series = np.asarray(result[name], dtype=float)[-end:]
                values[end - len(series): end] = series
                data[name] = ((*dims, "iteration"), np.broadcast_to(values, (*shape, n_it)))
            data["wall_s"] = (dims, np.full(shape, float(result["wall_s"])))
            xr.Dataset(data).to_zarr(path, region=region, mode="r+", consolidated=False)
        flags = {"done": result is not None, "failed": result is None}
        xr.Dataset({k: (dims, np.full(shape, v)) for k, v in flags.items()}).to_zarr(
            path, region=region, mode="r+", consolidated=False)
    finally:
        ctx.__exit__(None, None, None)


def open_cube(path) -> xr.Dataset:
    """The result cube as an xarray Dataset (lazy)."""
    return xr.open_zarr(os.fspath(path), consolidated=False)
