"""The result cube of a sweep: one xarray Dataset in a zarr (v3) store.

Every grid parameter is a dimension, plus ``iteration``; the spec's ``noise`` settings are
two index dimensions, ``noise_model`` x ``noise_level`` (:func:`noise_axes`), whose
combinations the spec does not ask for are never run. A chunk holds many cells
(:func:`cell_chunks`: the trailing grid dimensions whole, about
:data:`CHUNK_CELLS` cells), so a sweep of ``n`` cells writes about
``n_variables * n / CHUNK_CELLS`` chunk files. Only the runner writes (one
:class:`CubeWriter`, cells in batches); workers return their cells' values.
``done`` marks the cells written and is written after their values in each batch,
``failed`` the cells that raised (their error text goes to ``STORE.failures.jsonl``
next to the store). A store is created whole or not at all: it is built in a
marked temporary directory next to ``--out`` and moved into place
(:mod:`onebit_dask.io.stores.atomic`); so is a cube extended by a spec that appends grid
values to its own (:func:`.plan.plan_output` decides, :func:`.extension.extend` does it):
the new cube is built in a temporary, the old cells copied into it, and it replaces the
old one.

Damage is detected before anything is read (:func:`check_cube`, in :func:`open_cube`
and before a sweep resumes): every chunk of the arrays the package wrote is zstd with
its frame checksum and present; the attributes the package wrote (the spec, its
fingerprint, the fixed settings, the provenance; their names in ``attrs_digested``) have
their SHA-256 in ``attrs_sha256``, signed again whenever the runner changes them
(:func:`set_attrs`, under the store's lock); the metadata of each array the package wrote
(its ``zarr.json``: shape, data type, chunk grid, codecs with their byte order, fill
value) has its SHA-256 in ``arrays_sha256``, under that digest. Arrays and attributes a
user adds are not checked.
"""

from __future__ import annotations

import datetime
import json
import os
import urllib.parse
import socket

import numpy as np
import xarray as xr

from ..io import FORMAT_OF
from ..utils.warnings import ignored
from ..utils.provenance import provenance
from ..io.stores import atomic, paths
from ..io.stores.zarr_format import (ALL_CHUNKS, DamagedStoreError, arrays_digests,
                                     arrays_problem, attrs_digest, check_added,
                                     check_version, checked_codecs, consolidate as
                                     consolidate_metadata, missing_chunk, unreadable_chunk)
from ..metrics.names import RANKING_KS
from .noise import parse_noise
from .spec import SweepSpec

FORMAT = FORMAT_OF["cube"]
FORMAT_VERSION = 9  # 3: the spec's ``method`` is the cube's ``estimator`` dimension;
#                     4: every chunk is written at creation, so a missing one is damage;
#                     5: zstd chunks with their frame checksum, the attributes' digest;
#                     6: a file cube's grid has the queries dimension;
#                     7: string coordinates of zarr's variable-length ``string`` data type,
#                        ``units`` on the numeric coordinates, their values' digest;
#                     8: the digest of each package array's metadata (arrays_sha256);
#                        the noise settings on two index dimensions, noise_model x
#                        noise_level (:func:`noise_axes`);
#                     9: the per-cell strings (worker, host, engine) of zarr's ``string``
#                        data type, in the group ``cells`` (:data:`CELLS`)
CHECKED_SINCE = 5  # the first format with checksums and the attributes' digest
COORDS_CHECKED_SINCE = 7  # the first format with the coordinates' digest (coords_sha256)
ARRAYS_CHECKED_SINCE = 8  # the first format with the arrays' metadata digest (arrays_sha256)
CELLS_SINCE = 9  # the first format with the per-cell strings in the group CELLS
CELLS = "cells"  # the group of the per-cell strings: xarray's open_zarr(cube) leaves it out
CELLS_TEXT = ("where each cell ran (worker, host, engine), over the cube's grid: "
              "open_cells(cube), or xarray.open_datatree(cube)")
RENAMED = {"method": "estimator"}  # spec key -> cube dimension (``.sel(method=)`` is taken)
CHUNK_CELLS = 4096  # cells per chunk at most (fewer when a cell has many iterations)
ITERATION_VARIABLES = {
    "spectral_error": ("1", "||W* - W||_2 (the paper's Theorem 1), exact, from the factors"),
    "frobenius_error": ("1", "||W* - W||_F / sqrt(d2): RMS error of a unit column, in [0, 2]"),
    "hamming_loss": ("1", "fraction of test (instance, label) pairs whose predicted sign "
                          "differs from the noiseless label"),
    "auc": ("1", "macro ROC AUC over labels of the scores x^T w_j on the test set"),
    "n_samples": ("1", "observations used up to this iteration (initial batch "
                       "included); float so that a missing value is NaN"),
    "fit_s": ("s", "training seconds up to this iteration (cumulative, evaluation excluded)"),
    "n_active": ("1", "observations of this iteration's batch with a non-zero "
                      "residual (onebit); NaN for the baselines"),
}
RANKING_TEXT = {
    "precision": "share of a test row's k best-scored labels that are its labels, mean "
                 "over the test rows",
    "ndcg": "normalised discounted cumulative gain of a test row's k best-scored labels, "
            "mean over the test rows",
    "psp": "propensity-scored precision of a test row's k best-scored labels (training "
           "labels' propensities, Jain et al. 2016, A = 0.55, B = 1.5)",
}
FILE_ITERATION_VARIABLES = {  # a cube of file datasets (.datafiles): held-out metrics
    "auc": ("1", "macro ROC AUC over the labels with both classes in the test set, of the "
                 "held-out scores"),
    **{f"{name}_at_{k}": ("1", f"{text}, k = {k}") for name, text in RANKING_TEXT.items()
       for k in RANKING_KS},
    "n_samples": ("1", "bits (one-bit observations of the training label matrix) used up "
                       "to this iteration (initial batch included); float so that a "
                       "missing value is NaN"),
    "fit_s": ITERATION_VARIABLES["fit_s"],
    "n_active": ("1", "observations of this iteration's batch with a non-zero residual"),
}
CELL_VARIABLES = {
    "wall_s": ("s", "training wall time of the cell (per-iteration evaluation excluded)"),
    "worker": ("", "address of the Dask worker that ran the cell; for a cell fitted across "
                   "the cluster (engine 'dask') the scheduler's address; empty in-process"),
    "host": ("", "host name of the machine that ran the cell (the runner's for engine 'dask' "
                 "and in-process)"),
    "engine": ("", "'local': the cell's fit ran in one process (one task); 'dask': it ran "
                   "with the Dask engine, its shards on all the workers"),
}
FLAGS = {
    "done": ("", "True once the cell's values are written"),
    "failed": ("", "True if the cell raised; its error is in STORE.failures.jsonl"),
}
LONG_NAMES = {
    "spectral_error": "spectral error of the unit-column factor model",
    "frobenius_error": "RMS error of a unit column",
    "hamming_loss": "Hamming loss on the test set",
    "auc": "macro ROC AUC on the test set",
    "n_samples": "observations used",
    **{f"{name}_at_{k}": f"{name}@{k} on the test set" for name in RANKING_TEXT
       for k in RANKING_KS},
    "fit_s": "training time",
    "n_active": "active observations of the batch",
    "wall_s": "training wall time of the cell",
    "worker": "Dask worker of the cell",
    "host": "host of the cell",
    "engine": "engine of the cell",
    "done": "cell written",
    "failed": "cell failed",
}
FIXED_ATTRS = ("n_test", "n_shards", "max_eval_labels")  # fixed settings, as attributes
FILE_FIXED_ATTRS = ("n_shards",)  # the same, for file datasets
DIGEST_REQUIRED = ("format", "format_version", "spec_name", "spec_text", "spec_fingerprint",
                   "data")  # what attrs_digested lists at least, for either kind of cube
LATER_ATTRS = ("placement", "blas")  # set by the runner at the end of a run (set_attrs)
XARRAY_ATTRS = ("coordinates",)  # xarray's own, rewritten when a user appends with xarray
CONVENTIONS = "CF-1.10"
STRINGS = ("worker", "host", "engine")  # per cell, in the group CELLS (format 9 on)
OLD_STRING_DTYPE = np.dtype("<U64")  # theirs in formats 4 to 8 (fixed-length UTF-32, at the root)
VARIABLES = {**ITERATION_VARIABLES, **CELL_VARIABLES, **FLAGS}  # a planted cube's
FILE_VARIABLES = {**FILE_ITERATION_VARIABLES, **CELL_VARIABLES, **FLAGS}  # a file cube's
COORDS = {
    "estimator": "estimator (the spec's method)", "d1": "feature dimension",
    "d2": "number of labels",
    "rank": "rank k of the truth and the model",
    "noise_model": "none, flip (bit flipped with probability noise_level) or gaussian "
                   "(noise of std noise_level added to x^T w_j)",
    "noise_level": "flip probability or Gaussian noise std",
    "step": "the estimator's step rule (OneBitMultiLabel step)",
    "batch_size": "observations per batch m",
    "n_iter": "steps after the initial batch", "seed": "seed of the truth, data and start",
    "iteration": "0 = after the initial batch, t = after step t",
    "features": "the estimator's feature map (OneBitMultiLabel features)",
    "threshold": "the estimator's one-bit model (OneBitMultiLabel threshold)",
    "queries": "the pairs each batch asks about (OneBitMultiLabel queries)",
    "train": "the training set (a data file or CSR store), as the spec names it",
    "test": "the test set (a data file or CSR store), as the spec names it",
    "n_train": "training rows (instances)",
    "dataset": "the spec's named dataset",
    "positive_rate": "label priors: none (balanced), a positive rate or a range LO:HI of rates",
}
COORD_UNITS = "1"  # every numeric coordinate is a count, an index or a ratio


def variables(spec) -> dict:
    """The cube's variables (name -> ``(units, description)``): :data:`FILE_VARIABLES`
    for a spec of file datasets (``spec.files``), else :data:`VARIABLES`."""
    return FILE_VARIABLES if getattr(spec, "files", False) else VARIABLES


def iteration_variables(spec) -> dict:
    """The cube's per-iteration variables (see :func:`variables`)."""
    return FILE_ITERATION_VARIABLES if getattr(spec, "files", False) else ITERATION_VARIABLES


class StoreError(ValueError):
    """An output path that cannot be used (bad input: nothing was touched)."""


def failures_path(path: str) -> str:
    return os.fspath(path).rstrip("/") + ".failures.jsonl"


def cell_chunks(shape: tuple, n_iterations: int) -> tuple:
    """Chunk shape over the grid dimensions: the trailing dimensions whole (C order, the
    order cells are submitted in), about ``CHUNK_CELLS`` cells, fewer for long cells."""
    target = max(1, min(CHUNK_CELLS, 2 ** 19 // max(1, n_iterations)))
    chunks, cells = [], 1
    for size in reversed(shape):
        take = min(size, max(1, target // cells))
        chunks.append(take)
        cells *= take
    return tuple(reversed(chunks))


def _values(values) -> np.ndarray:
    """``values`` as an array; strings as Python strings (dtype object), which xarray
    writes as zarr's variable-length ``string`` data type."""
    array = np.asarray(values)
    return array.astype(object) if array.dtype.kind == "U" else array


def noise_axes(spec: SweepSpec):
    """``(models, levels, at)`` of a spec with a ``noise`` grid key: the cube's index
    dimensions ``noise_model`` (the models in the spec's order) and ``noise_level`` (the
    levels, ascending) in place of the spec's ``noise`` axis, and ``at[i]``, the
    ``(model, level)`` position of the spec's ``i``-th setting. A combination the spec does
    not ask for is never run (``done`` stays False, its values NaN)."""
    settings = [parse_noise(label) for label in spec.grid["noise"]]
    models = list(dict.fromkeys(m for m, _ in settings))
    levels = sorted({lv for _, lv in settings})
    return models, levels, [(models.index(m), levels.index(lv)) for m, lv in settings]


def _noise_axis(spec) -> int | None:
    """The position of ``noise`` among the spec's grid dimensions (``None``: none)."""
    return spec.dims.index("noise") if "noise" in getattr(spec, "grid", ()) else None


def cube_shape(spec) -> tuple:
    """The shape of the cube's grid for ``spec``: the spec's, its ``noise`` axis as the two
    of :func:`noise_axes`; anything else with a ``shape`` (a cube's own) as it is."""
    axis = _noise_axis(spec) if isinstance(spec, SweepSpec) else None
    if axis is None:
        return tuple(spec.shape)
    models, levels, _ = noise_axes(spec)
    shape = spec.shape
    return (*shape[:axis], len(models), len(levels), *shape[axis + 1:])


def cube_indices(spec: SweepSpec, indices) -> np.ndarray:
    """The cube's grid indices (rows) of the spec's grid indices ``indices`` (rows)."""
    indices = np.asarray(indices, dtype=np.intp).reshape(-1, len(spec.dims))
    axis = _noise_axis(spec)
    if axis is None:
        return indices
    at = np.asarray(noise_axes(spec)[2], dtype=np.intp).reshape(-1, 2)
    return np.concatenate([indices[:, :axis], at[indices[:, axis]], indices[:, axis + 1:]],
                          axis=1)


def spec_grid(spec: SweepSpec, values: np.ndarray) -> np.ndarray:
    """An array over the cube's grid (and trailing axes) as one over the spec's grid."""
    axis = _noise_axis(spec)
    if axis is None:
        return values
    at = np.asarray(noise_axes(spec)[2], dtype=np.intp).reshape(-1, 2)
    return values[(slice(None),) * axis + (at[:, 0], at[:, 1])]


def _coords(spec: SweepSpec) -> xr.Dataset:
    coords = {}
    for dim in spec.dims:
        if dim == "noise":
            models, levels, _ = noise_axes(spec)
            coords["noise_model"] = _values(models)
            coords["noise_level"] = np.asarray(levels, dtype=float)
        else:
            coords[RENAMED.get(dim, dim)] = _values(spec.grid[dim])
    if spec.datasets:
        names = spec.grid["dataset"]
        for key in next(iter(spec.datasets.values())):
            coords[key] = ("dataset", _values([spec.datasets[n][key] for n in names]))
        for key in next(iter((spec.sizes or {}).values()), ()):  # file datasets' sizes
            coords[key] = ("dataset", _values([spec.sizes[n][key] for n in names]))
    coords["iteration"] = np.arange(spec.n_iterations)
    ds = xr.Dataset(coords=coords)
    ds.attrs["coords_sha256"] = {name: coord_digest(ds[name].values) for name in ds.coords}
    for name, text in COORDS.items():
        if name in ds:
            ds[name].attrs.update(long_name=text, description=text)
    for name, coord in ds.coords.items():
        if coord.dtype.kind in "iuf":
            ds[name].attrs["units"] = COORD_UNITS
    planted = {} if spec.files else {"sampler": spec.fixed["sampler"]}
    ds.attrs.update(
        Conventions=CONVENTIONS,
        **{key: spec.fixed[key] for key in (FILE_FIXED_ATTRS if spec.files else FIXED_ATTRS)},
        format=FORMAT, format_version=FORMAT_VERSION, spec_name=spec.name,
        spec_description=spec.description, spec_text=spec.text,
        spec_fingerprint=spec.fingerprint(), data="files" if spec.files else "planted",
        **planted, **({"noise_settings": list(spec.grid["noise"])} if "noise" in spec.grid
                      else {}),
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **provenance())
    return ds


def coord_digest(values) -> str:
    """SHA-256 of a coordinate's values as JSON (strings of either zarr type, integers and
    floats read back alike)."""
    import hashlib

    text = json.dumps(np.asarray(values).tolist(), default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _coords_problem(group, digests) -> str | None:
    """What is wrong with the coordinates recorded in ``coords_sha256`` (format 7 on): one
    missing, or whose values differ from those written (a chunk gone, which reads as the
    fill value, or edited)."""
    if not isinstance(digests, dict):
        return f"the attribute coords_sha256={digests!r} is not a mapping"
    for name, digest in digests.items():
        if name not in group:
            return f"the coordinate {name!r} is missing"
        try:
            values = group[name][...]
        except Exception as exc:  # zarr and its codecs raise several types
            return f"the coordinate {name!r} cannot be read ({type(exc).__name__})"
        if coord_digest(values) != digest:
            return (f"the coordinate {name!r} differs from what was written (a chunk missing "
                    "or edited)")
    return None


def quiet_zarr():
    """A block in which zarr's warnings about the cube's string types and metadata are
    ignored."""
    return ignored(dict(message=".*does not have a Zarr V3 specification.*"),
                   dict(message=".*[Cc]onsolidated metadata.*"),
                   dict(category=UserWarning, module="zarr.*"))


def _build(path: str, spec: SweepSpec) -> None:
    """Write the empty cube at ``path``: coordinates, attributes, and arrays with every
    chunk written (filled), so that a chunk missing later is a damaged store."""
    import zarr

    ds = _coords(spec)
    encoding = {name: {"compressors": checked_codecs()["compressors"]} for name in ds.variables}
    ds.to_zarr(path, mode="a", zarr_format=3, consolidated=False,  # a new store
               write_empty_chunks=True, encoding=encoding)
    group = zarr.open_group(path, mode="r+")
    shape = cube_shape(spec)
    grid = cell_chunks(shape, spec.n_iterations)
    n_it = spec.n_iterations
    group.create_group(CELLS, attributes={"description": CELLS_TEXT})
    for name in variables(spec):
        per_iteration = name in iteration_variables(spec)
        dtype, fill = {"done": (bool, False), "failed": (bool, False)}.get(name, ("f8", np.nan))
        if name in STRINGS:
            dtype, fill = str, ""
        array = group.create_array(
            array_key(name), shape=(*shape, n_it) if per_iteration else shape,
            chunks=(*grid, n_it) if per_iteration else grid, dtype=dtype, fill_value=fill,
            dimension_names=(*dims(spec), "iteration") if per_iteration else dims(spec),
            attributes=variable_attrs(name), config=ALL_CHUNKS, **checked_codecs())
        array[...] = fill
    group = zarr.open_group(path, mode="r+", use_consolidated=False)
    group.attrs.update(arrays_sha256=arrays_digests(
        group, [*ds.variables, *(array_key(name) for name in variables(spec))]))
    _sign(group, LATER_ATTRS)


def _sign(group, extra=()) -> None:
    """Write ``attrs_digested`` (the names of the attributes the package wrote: those
    listed already, or all but xarray's at creation, and ``extra``) and ``attrs_sha256``,
    their digest (:func:`~onebit_dask.io.stores.zarr_format.attrs_digest`)."""
    attrs = dict(group.attrs)
    keys = attrs.get("attrs_digested")
    if not isinstance(keys, list):
        keys = [k for k in attrs if k not in ("attrs_digested", "attrs_sha256", *XARRAY_ATTRS)]
    keys = sorted(set(keys) | set(extra))
    signed = {**attrs, "attrs_digested": keys}
    group.attrs.update({"attrs_digested": keys,
                        "attrs_sha256": attrs_digest(signed, ("attrs_digested", *keys))})


def array_key(name: str, version: int = FORMAT_VERSION) -> str:
    """Where the variable ``name`` is in a cube of format ``version``: ``cells/NAME`` for
    the per-cell strings from format 9 on, else ``NAME``."""
    return f"{CELLS}/{name}" if name in STRINGS and version >= CELLS_SINCE else name


def _version(group) -> int:
    version = group.attrs.get("format_version")
    return version if isinstance(version, int) and not isinstance(version, bool) else 0


def stored_variables(group) -> dict:
    """The variables of the cube ``group`` by its kind (attribute ``data``):
    :data:`FILE_VARIABLES` or :data:`VARIABLES`."""
    return FILE_VARIABLES if group.attrs.get("data") == "files" else VARIABLES


def package_arrays(group) -> list[str]:
    """The names of the arrays of the cube's ``group`` that the package wrote: its
    variables (:func:`stored_variables`) and the coordinates along its dimensions (a
    variable a user added is not one of them)."""
    kind = stored_variables(group)
    keys = [array_key(name, _version(group)) for name in kind]
    names = [key for key in keys if key in group]
    dims = {"iteration"}
    if "done" in group:
        dims |= set(group["done"].metadata.dimension_names or ())
    for name, array in group.arrays():
        along = array.metadata.dimension_names or (None,)
        if name not in kind and array.ndim == 1 and along[0] in dims:
            names.append(name)
    return names


def missing_part(group) -> str | None:
    """``"NAME/KEY"`` of the first chunk of the cube's variables (:func:`stored_variables`) in
    ``group`` that is missing (every chunk of a cube of format 4 or later is written when
    it is created), or ``None``. The coordinates are not asked: xarray writes them again
    when a user appends a variable, without the chunks equal to the fill value."""
    keys = (array_key(name, _version(group)) for name in stored_variables(group))
    for key in (key for key in keys if key in group):
        gone = missing_chunk(group[key])
        if gone is not None:
            return f"{key}/{gone[2]}"
    return None


def _attrs_problem(attrs: dict, required=DIGEST_REQUIRED) -> str | None:
    """What is wrong with a checked cube's attributes (format 5 or later; ``required``:
    what ``attrs_digested`` lists at least), or ``None``."""
    keys = attrs.get("attrs_digested")
    if (not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)
            or not set(required) <= set(keys)):
        return (f"the attribute attrs_digested={keys!r} does not list the attributes "
                f"{', '.join(required)}")
    if attrs.get("attrs_sha256") != attrs_digest(attrs, ("attrs_digested", *keys)):
        return ("its attributes (the spec, its fingerprint, the fixed settings, the "
                "provenance) differ from what was written (their SHA-256 does not match "
                "attrs_sha256)")
    return None


def _dtype_of(name: str, version: int) -> np.dtype:
    """The dtype of the variable ``name`` in a cube of format ``version``."""
    if name in FLAGS:
        return np.dtype(bool)
    if name in STRINGS:
        return np.dtypes.StringDType() if version >= CELLS_SINCE else OLD_STRING_DTYPE
    return np.dtype("f8")


def cube_problem(group, attrs: dict) -> str | None:
    """What is wrong with the cube ``group`` whose attributes are ``attrs`` (``None``: it
    is whole): for format 4 on, a variable missing or of another dtype, a chunk missing
    (from format 9 the per-cell strings' in the group ``cells``, :func:`array_key`);
    for format 5 on, the attributes' digest and a chunk that cannot be decoded; for format
    8 on, the metadata of each array the package wrote (``arrays_sha256``). Only the
    package's arrays and attributes are checked."""
    version = attrs.get("format_version")
    checked = isinstance(version, int) and version >= CHECKED_SINCE
    if checked:
        problem = _attrs_problem(attrs, DIGEST_REQUIRED + (
            ("arrays_sha256",) if version >= ARRAYS_CHECKED_SINCE else ()))
        if problem is None and version >= ARRAYS_CHECKED_SINCE:
            problem = arrays_problem(group, attrs.get("arrays_sha256"))
        if problem is None and version >= COORDS_CHECKED_SINCE:
            problem = _coords_problem(group, attrs.get("coords_sha256"))
        if problem is not None:
            return problem
    if not isinstance(version, int) or version < 4:
        return None
    for name in stored_variables(group):
        key = array_key(name, version)
        if key not in group:
            return f"the array {key!r} is missing"
        if group[key].dtype != _dtype_of(name, version):
            return (f"the array {key!r} has dtype {group[key].dtype}, expected "
                    f"{_dtype_of(name, version)}")
    gone = missing_part(group)
    if gone is not None:
        return f"the chunk {gone} is missing"
    if checked:
        for name in package_arrays(group):
            bad = unreadable_chunk(group[name])
            if bad is not None:
                return f"the chunk {name}/{bad[0]} cannot be read ({bad[1]})"
    return None


def check_cube(path) -> dict:
    """The attributes of the cube at ``path``, after its checks: a newer format is
    refused (one line), an older one without checksums read with one warning, a damaged
    one (:func:`cube_problem`) refused naming the part; each a
    :class:`~onebit_dask.io.stores.zarr_format.DamagedStoreError`."""
    import zarr

    path = os.fspath(path)
    where = f"the result cube {path!r}"
    with quiet_zarr():
        group = zarr.open_group(path, mode="r", use_consolidated=False)
        attrs = dict(group.attrs)
        if attrs.get("format") != FORMAT:
            return attrs
        check_version(attrs, FORMAT_VERSION, CHECKED_SINCE, where, key="format_version")
        check_added(attrs, "arrays_sha256", ARRAYS_CHECKED_SINCE, where, key="format_version")
        try:
            problem = cube_problem(group, attrs)
        except Exception as exc:  # unreadable metadata
            problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if problem is not None:
        raise DamagedStoreError(f"{where} is damaged: {problem}; run its sweep again with "
                                "--overwrite to recompute it")
    return attrs


def dims(spec: SweepSpec) -> tuple:
    """The cube's grid dimensions: the spec's, with ``method`` named ``estimator`` and
    ``noise`` as ``noise_model`` and ``noise_level`` (:func:`noise_axes`)."""
    return tuple(name for d in spec.dims
                 for name in (("noise_model", "noise_level") if d == "noise"
                              else (RENAMED.get(d, d),)))


def variable_attrs(name: str) -> dict:
    """The attributes of the cube's variable ``name``: ``long_name``, ``description``,
    ``units`` for numbers (``"1"`` for counts and ratios, none for strings and flags),
    ``flag_values``/``flag_meanings`` for the flags."""
    units, text = {**FILE_VARIABLES, **VARIABLES}[name]
    attrs = {"long_name": LONG_NAMES[name], "description": text}
    if name in FLAGS:
        attrs.update(flag_values=[0, 1], flag_meanings=f"not_{name} {name}")
    elif name not in STRINGS:
        attrs["units"] = units
    return attrs


def create(path: str, spec: SweepSpec) -> None:
    """Create (or replace) the store at ``path``, whole or not at all.

    The cube is built in a marked temporary next to it and moved into place
    (:func:`build_aside`); a build left by a killed run is removed here (the caller holds
    the store's lock).
    """
    path = os.fspath(path).rstrip("/")
    build_aside(path, spec)
    if os.path.exists(failures_path(path)):
        os.remove(failures_path(path))


def build_aside(path: str, spec: SweepSpec, fill=None) -> None:
    """Build the cube of ``spec`` (:func:`_build`) in a marked temporary next to ``path``,
    ``fill(tmp)`` it when given, and move it into place
    (:func:`onebit_dask.io.stores.atomic.replace`): ``path`` holds the old store or the
    new one, whole; a build left by a killed run is removed first, and the temporary on
    any error (the caller holds the store's lock)."""
    path = os.fspath(path).rstrip("/")
    atomic.recover(path, temporaries=True)
    tmp = atomic.temporary_name(path)
    with quiet_zarr():
        try:
            atomic.make_temporary(tmp)
            _build(tmp, spec)
            if fill is not None:
                fill(tmp)
            atomic.replace(tmp, path)
        except BaseException:
            atomic.discard(tmp)
            raise


def local_output(path) -> str:
    """The local path a cube is written to: ``path`` itself, or the path of a ``file://``
    URL; a URL of another scheme is a :class:`StoreError` (the runner's lock and failures
    file are files next to the cube, docs/STORES.md)."""
    path = os.fspath(path)
    if not paths.is_url(path):
        return path
    parts = urllib.parse.urlsplit(path)
    if parts.scheme.lower() == "file" and parts.netloc in ("", "localhost") and parts.path:
        return urllib.parse.unquote(parts.path)
    raise StoreError(f"--out {path!r}: a sweep writes its cube to a local directory (its "
                     "lock and failures file are files beside it); give a path or a file:// "
                     "URL, and copy the finished cube to the object store")


def damage(path: str, spec: SweepSpec, whole: bool = True) -> str | None:
    """What is wrong with our store at ``path`` (``None``: it can be resumed): the arrays'
    shapes for ``spec`` (:func:`cube_shape`; or anything with the cube's grid ``shape``
    and ``n_iterations``), then, with
    ``whole``, :func:`cube_problem` (without: the caller has run :func:`check_cube`)."""
    import zarr

    with quiet_zarr():
        try:
            group = zarr.open_group(os.fspath(path), mode="r", use_consolidated=False)
            shape = cube_shape(spec)
            for name in variables(spec):
                key = array_key(name, _version(group))
                if key not in group:
                    return f"the array {key!r} is missing"
                want = ((*shape, spec.n_iterations) if name in iteration_variables(spec)
                        else shape)
                if group[key].shape != want:
                    return f"the array {key!r} has shape {group[key].shape}, expected {want}"
            problem = cube_problem(group, dict(group.attrs)) if whole else None
            if problem is not None:
                return problem
            for name in FLAGS:
                group[name][...]
        except Exception as exc:  # unreadable metadata or chunks
            return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def flags(path: str, spec: SweepSpec) -> tuple[np.ndarray, np.ndarray]:
    """The ``done`` and ``failed`` masks over the spec's grid (:func:`spec_grid`)."""
    import zarr

    group = zarr.open_group(os.fspath(path), mode="r", use_consolidated=False)
    return spec_grid(spec, group["done"][...]), spec_grid(spec, group["failed"][...])


def cell_region(spec: SweepSpec, index: tuple, all_steps: bool) -> list:
    """The grid indices a cell's result is stored at (all steps for a method without one)."""
    if not all_steps:
        return [index]
    axis = spec.dims.index("step")
    return [(*index[:axis], s, *index[axis + 1:]) for s in range(len(spec.grid["step"]))]


def iteration_values(result: dict, name: str, n_iter: int, n_iterations: int) -> np.ndarray:
    """A result's series placed on the cube's ``iteration`` axis: a method without
    iterations reports its final value at the cell's last iteration."""
    values = np.full(n_iterations, np.nan)
    end = n_iter + 1
    series = np.asarray(result[name], dtype=float)[-end:]
    values[end - len(series): end] = series
    return values


class CubeWriter:
    """Buffers finished cells and writes them in batches (the only writer of a store).

    Each :meth:`flush` writes every variable with one coordinate selection (zarr
    reads, updates and rewrites each touched chunk once, atomically per chunk
    file), the ``failed`` flags next and the ``done`` flags last, so a cell is
    ``done`` only once all its values are on disk. ``before_write()`` is called before
    each write (the runner waits there for the store's creation and checks its lock);
    the store is opened at the first write.
    """

    def __init__(self, path: str, spec: SweepSpec, before_write=None):
        self.path, self.spec = os.fspath(path), spec
        self.arrays = None  # opened at the first write: the store may still be created
        self.before_write = before_write
        self.pending = []  # (indices, params, result or None)
        self.written = 0

    def add(self, index: tuple, all_steps: bool, params: dict, result: dict | None,
            where: dict) -> None:
        """Queue a finished cell (``index`` on the spec's grid): ``result`` (``None`` if it
        failed) and ``where`` it ran (``worker``, ``host``, ``engine``)."""
        region = cube_indices(self.spec, cell_region(self.spec, index, all_steps))
        self.pending.append((region, params, result, where))

    def __len__(self) -> int:
        return len(self.pending)

    def flush(self) -> int:
        """Write the queued cells; return how many."""
        if not self.pending:
            return 0
        if self.before_write is not None:
            self.before_write()
        if self.arrays is None:
            import zarr

            group = zarr.open_group(self.path, mode="r+", use_consolidated=False)
            self.arrays = {name: group[array_key(name)].with_config(ALL_CHUNKS)
                           for name in variables(self.spec)}
        n_it = self.spec.n_iterations
        ok = [(idx, p, r, w) for idx, p, r, w in self.pending if r is not None]
        with quiet_zarr():
            if ok:
                cells = np.concatenate([idx for idx, *_ in ok])
                repeat = [len(idx) for idx, *_ in ok]
                grid_sel = tuple(cells.T)
                it_sel = tuple(np.repeat(cells[:, d:d + 1], n_it, axis=1) for d in
                               range(cells.shape[1])) + (np.broadcast_to(np.arange(n_it),
                                                                         (len(cells), n_it)),)
                for name in iteration_variables(self.spec):
                    rows = [iteration_values(r, name, p["n_iter"], n_it) for _, p, r, _ in ok]
                    self.arrays[name].set_coordinate_selection(
                        it_sel, np.repeat(np.array(rows), repeat, axis=0))
                per_cell = {"wall_s": [float(r["wall_s"]) for _, _, r, _ in ok],
                            **{k: [w[k] for *_, w in ok] for k in STRINGS}}
                for name, vals in per_cell.items():
                    self.arrays[name].set_coordinate_selection(
                        grid_sel, np.repeat(np.array(vals), repeat))
            cells_all = np.concatenate([idx for idx, *_ in self.pending])
            is_done = np.concatenate([np.full(len(idx), r is not None)
                                      for idx, _, r, _ in self.pending])
            sel = tuple(cells_all.T)
            self.arrays["failed"].set_coordinate_selection(sel, ~is_done)
            self.arrays["done"].set_coordinate_selection(sel, is_done)
        n = len(self.pending)
        self.written += n
        self.pending = []
        return n


def set_attrs(path: str, **attrs) -> None:
    """Update the cube's attributes and sign them again (``attrs_sha256``; the caller
    holds the store's lock; between runs' writes, before :func:`consolidate`)."""
    import zarr

    group = zarr.open_group(os.fspath(path), mode="r+", use_consolidated=False)
    group.attrs.update(attrs)
    _sign(group, attrs)


def consolidate(path: str) -> None:
    """Consolidate the metadata (once no cell is being written): ``xr.open_zarr(path)``
    then opens the cube without a warning."""
    with quiet_zarr():
        consolidate_metadata(os.fspath(path))


def open_cells(path) -> xr.Dataset:
    """Where each cell of the cube at ``path`` ran: ``worker``, ``host`` and ``engine``
    over the cube's grid, with its coordinates and attributes, once :func:`check_cube` has
    found it whole (lazy; a cube of format 8 or older holds them among its variables)."""
    path = os.fspath(path)
    attrs = check_cube(path)
    with quiet_zarr():
        ds = xr.open_zarr(path, consolidated=False)
        if attrs.get("format_version", 0) < CELLS_SINCE:
            return ds[list(STRINGS)]
        cells = xr.open_zarr(path, group=CELLS, consolidated=False)
    grid = set(ds["done"].dims)
    cells = cells.assign_coords({name: coord for name, coord in ds.coords.items()
                                 if set(coord.dims) <= grid})
    cells.attrs = dict(ds.attrs)
    return cells


def open_cube(path) -> xr.Dataset:
    """The result cube as an xarray Dataset (lazy), once :func:`check_cube` has found it
    whole (every chunk of the package's arrays is decoded once); a cube of format 2 or
    older has its ``method`` dimension renamed ``estimator`` as it is opened.

    Raises
    ------
    DamagedStoreError
        The cube is of a newer format, or damaged (the message names the part).
    """
    path = os.fspath(path)
    check_cube(path)
    with quiet_zarr():
        ds = xr.open_zarr(path, consolidated=False)  # each array's own, as checked
    if ds.attrs.get("format") == FORMAT and ds.attrs.get("format_version", 0) < 3:
        ds = ds.rename({old: new for old, new in RENAMED.items() if old in ds.dims})
    return ds


def this_host() -> str:
    return socket.gethostname()
