"""The result cube of a sweep: one xarray Dataset in a zarr (v3) store.

Every grid parameter is a dimension, plus ``iteration``. A chunk holds many cells
(:func:`cell_chunks`: the trailing grid dimensions whole, about
:data:`CHUNK_CELLS` cells), so a sweep of ``n`` cells writes about
``n_variables * n / CHUNK_CELLS`` chunk files. Only the runner writes (one
:class:`CubeWriter`, cells in batches); workers return their cells' values.
``done`` marks the cells written and is written after their values in each batch,
``failed`` the cells that raised (their error text goes to ``STORE.failures.jsonl``
next to the store). A store is created whole or not at all: it is built in a
marked temporary directory next to ``--out`` and moved into place
(:mod:`onebit_dask.io.stores.atomic`).
"""

from __future__ import annotations

import datetime
import json
import os
import socket

import numpy as np
import xarray as xr

from ..io import FORMAT_OF
from ..utils.warnings import ignored
from ..utils.provenance import provenance
from ..io.stores import atomic
from ..io.stores.zarr_format import ALL_CHUNKS, DamagedStoreError, group_attrs, missing_chunk
from .noise import parse_noise
from .spec import SweepSpec

FORMAT = FORMAT_OF["cube"]
FORMAT_VERSION = 4  # 3: the spec's ``method`` is the cube's ``estimator`` dimension;
#                     4: every chunk is written at creation, so a missing one is damage
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
CELL_VARIABLES = {
    "wall_s": ("s", "training wall time of the cell (per-iteration evaluation excluded)"),
    "worker": ("", "address of the Dask worker that ran the cell; for a cell fitted across "
                   "the cluster (engine 'dask') the scheduler's address; empty in-process"),
    "host": ("", "host name of the machine that ran the cell (the runner's for engine 'dask' "
                 "and in-process; at most 64 characters)"),
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
CONVENTIONS = "CF-1.10"
STRINGS = ("worker", "host", "engine")
STRING_LENGTH = 64  # fixed-length strings (``ds.where`` cannot promote numpy's StringDType)
VARIABLES = {**ITERATION_VARIABLES, **CELL_VARIABLES, **FLAGS}
COORDS = {
    "estimator": "estimator (the spec's method)", "d1": "feature dimension",
    "d2": "number of labels",
    "rank": "rank k of the truth and the model", "noise": "noise setting",
    "noise_model": "none, flip (bit flipped with probability noise_level) or gaussian "
                   "(noise of std noise_level added to x^T w_j)",
    "noise_level": "flip probability or Gaussian noise std",
    "step": "the estimator's step rule (OneBitMultiLabel step)",
    "batch_size": "observations per batch m",
    "n_iter": "steps after the initial batch", "seed": "seed of the truth, data and start",
    "iteration": "0 = after the initial batch, t = after step t",
}


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


def _coords(spec: SweepSpec) -> xr.Dataset:
    noise = [parse_noise(label) for label in spec.grid["noise"]]
    coords = {RENAMED.get(dim, dim): np.asarray(spec.grid[dim]) for dim in spec.dims}
    if spec.datasets:
        names = spec.grid["dataset"]
        for key in next(iter(spec.datasets.values())):
            coords[key] = ("dataset", np.asarray([spec.datasets[n][key] for n in names]))
    coords["noise_model"] = ("noise", np.asarray([m for m, _ in noise]))
    coords["noise_level"] = ("noise", np.asarray([lv for _, lv in noise], dtype=float))
    coords["iteration"] = np.arange(spec.n_iterations)
    ds = xr.Dataset(coords=coords)
    for name, text in COORDS.items():
        if name in ds:
            ds[name].attrs.update(long_name=text, description=text)
    ds.attrs.update(
        Conventions=CONVENTIONS, **{key: spec.fixed[key] for key in FIXED_ATTRS},
        format=FORMAT, format_version=FORMAT_VERSION, spec_name=spec.name,
        spec_description=spec.description, spec_text=spec.text,
        spec_fingerprint=spec.fingerprint(), sampler=spec.fixed["sampler"],
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **provenance())
    return ds


def _quiet_zarr():
    """A block in which zarr's warnings about the cube's string types and metadata are
    ignored."""
    return ignored(dict(message=".*does not have a Zarr V3 specification.*"),
                   dict(message=".*[Cc]onsolidated metadata.*"),
                   dict(category=UserWarning, module="zarr.*"))


def _build(path: str, spec: SweepSpec) -> None:
    """Write the empty cube at ``path``: coordinates, attributes, and arrays with every
    chunk written (filled), so that a chunk missing later is a damaged store."""
    import zarr

    _coords(spec).to_zarr(path, mode="a", zarr_format=3, consolidated=False,  # a new store
                          write_empty_chunks=True)
    group = zarr.open_group(path, mode="r+")
    grid = cell_chunks(spec.shape, spec.n_iterations)
    n_it = spec.n_iterations
    for name in VARIABLES:
        per_iteration = name in ITERATION_VARIABLES
        dtype, fill = {"done": (bool, False), "failed": (bool, False)}.get(name, ("f8", np.nan))
        if name in STRINGS:
            dtype, fill = f"<U{STRING_LENGTH}", ""
        array = group.create_array(
            name, shape=(*spec.shape, n_it) if per_iteration else spec.shape,
            chunks=(*grid, n_it) if per_iteration else grid, dtype=dtype, fill_value=fill,
            dimension_names=(*dims(spec), "iteration") if per_iteration else dims(spec),
            attributes=variable_attrs(name), config=ALL_CHUNKS)
        array[...] = fill


def missing_part(group) -> str | None:
    """``"NAME/KEY"`` of the first chunk of the cube's ``group`` that is missing (every
    chunk of a cube of format 4 is written when it is created), or ``None``."""
    for name, array in group.arrays():
        gone = missing_chunk(array)
        if gone is not None:
            return f"{name}/{gone[2]}"
    return None


def dims(spec: SweepSpec) -> tuple:
    """The cube's grid dimensions: the spec's, with ``method`` named ``estimator``."""
    return tuple(RENAMED.get(d, d) for d in spec.dims)


def variable_attrs(name: str) -> dict:
    """The attributes of the cube's variable ``name``: ``long_name``, ``description``,
    ``units`` for numbers (``"1"`` for counts and ratios, none for strings and flags),
    ``flag_values``/``flag_meanings`` for the flags."""
    units, text = VARIABLES[name]
    attrs = {"long_name": LONG_NAMES[name], "description": text}
    if name in FLAGS:
        attrs.update(flag_values=[0, 1], flag_meanings=f"not_{name} {name}")
    elif name not in STRINGS:
        attrs["units"] = units
    return attrs


def create(path: str, spec: SweepSpec) -> None:
    """Create (or replace) the store at ``path``, whole or not at all.

    The cube is built in a marked temporary next to it and moved into place
    (:func:`onebit_dask.io.stores.atomic.replace`); a build left by a killed run is removed
    here (the caller holds the store's lock).
    """
    path = os.fspath(path).rstrip("/")
    atomic.recover(path, temporaries=True)
    tmp = atomic.temporary_name(path)
    with _quiet_zarr():
        try:
            atomic.make_temporary(tmp)
            _build(tmp, spec)
            atomic.replace(tmp, path)
        except BaseException:
            atomic.discard(tmp)
            raise
    if os.path.exists(failures_path(path)):
        os.remove(failures_path(path))


def check_output(path: str, spec: SweepSpec, overwrite: bool) -> bool:
    """Check the output before any work; return True if a store must be created.

    A missing or read-only parent directory, a path that is not one of our
    stores, or one of ours made from another spec or an older format (without
    ``overwrite``) is a :class:`StoreError`; one of ours that is damaged and holds
    results is a :class:`DamagedStoreError` (``overwrite`` replaces it); one that
    holds no results yet is recreated. Nothing is touched here.
    """
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise StoreError(f"--out {path!r}: the directory {parent!r} does not exist")
    if not atomic.writable(parent):
        raise StoreError(f"--out {path!r}: the directory {parent!r} is not writable")
    if not os.path.lexists(path):
        return True
    if not os.path.isdir(path):
        raise StoreError(f"--out {path!r} exists and is a file, not a sweep store: choose "
                         "another path for the cube (nothing was changed)")
    attrs = group_attrs(path)
    if attrs is None or attrs.get("format") != FORMAT:
        if attrs is None and _ours_without_attributes(path):
            return True  # a store we started to make and that holds nothing yet
        raise StoreError(f"--out {path!r} exists and is not an onebit-dask sweep store: "
                         "choose another path (nothing was changed)")
    if not os.access(path, os.W_OK):
        raise StoreError(f"--out {path!r} is not writable")
    if overwrite:
        return True
    if attrs.get("spec_fingerprint") != spec.fingerprint():
        was, now = attrs.get("sampler"), spec.fixed.get("sampler")
        hint = (f"; its onebit cells were drawn with sampler {was!r} and this spec uses "
                f"{now!r} (the default is 'conditional'): write 'sampler: {was}' under "
                "fixed to resume it" if was is not None and was != now else "")
        raise StoreError(f"--out {path!r} holds the results of another spec "
                         f"({attrs.get('spec_name')!r}){hint}: use a new path, or "
                         "--overwrite to replace them")
    if attrs.get("format_version") != FORMAT_VERSION:
        raise StoreError(f"--out {path!r} was made by an older onebit-dask (store format "
                         f"{attrs.get('format_version')}, this one writes {FORMAT_VERSION}): "
                         "use a new path, or --overwrite to recompute it")
    problem = damage(path, spec)
    if problem is None:
        return False
    raise DamagedStoreError(f"the store {path!r} is damaged ({problem}): run again with "
                            "--overwrite to recompute it, or choose another --out")


def _ours_without_attributes(path: str) -> bool:
    """A directory with nothing but zarr metadata in it (an interrupted ``to_zarr`` of an
    older version): safe to recreate."""
    for _, _, files in os.walk(path):
        if any(f != "zarr.json" for f in files):
            return False
    return True


def damage(path: str, spec: SweepSpec) -> str | None:
    """What is wrong with our store at ``path`` (``None``: it can be resumed)."""
    import zarr

    with _quiet_zarr():
        try:
            group = zarr.open_group(os.fspath(path), mode="r", use_consolidated=False)
            for name in VARIABLES:
                if name not in group:
                    return f"the array {name!r} is missing"
                want = ((*spec.shape, spec.n_iterations) if name in ITERATION_VARIABLES
                        else spec.shape)
                if group[name].shape != want:
                    return f"the array {name!r} has shape {group[name].shape}, expected {want}"
            gone = missing_part(group)
            if gone is not None:
                return f"the chunk {gone} is missing"
            for name in FLAGS:
                group[name][...]
        except Exception as exc:  # unreadable metadata or chunks
            return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def flags(path: str) -> tuple[np.ndarray, np.ndarray]:
    """The ``done`` and ``failed`` masks."""
    import zarr

    group = zarr.open_group(os.fspath(path), mode="r", use_consolidated=False)
    return group["done"][...], group["failed"][...]


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
        """Queue a finished cell: ``result`` (``None`` if it failed) and ``where`` it ran
        (``worker``, ``host``, ``engine``)."""
        self.pending.append((cell_region(self.spec, index, all_steps), params, result, where))

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
            self.arrays = {name: group[name].with_config(ALL_CHUNKS) for name in VARIABLES}
        n_it = self.spec.n_iterations
        ok = [(idx, p, r, w) for idx, p, r, w in self.pending if r is not None]
        with _quiet_zarr():
            if ok:
                cells = np.array([i for idx, *_ in ok for i in idx]).reshape(
                    -1, len(self.spec.dims))
                repeat = [len(idx) for idx, *_ in ok]
                grid_sel = tuple(cells.T)
                it_sel = tuple(np.repeat(cells[:, d:d + 1], n_it, axis=1) for d in
                               range(cells.shape[1])) + (np.broadcast_to(np.arange(n_it),
                                                                         (len(cells), n_it)),)
                for name in ITERATION_VARIABLES:
                    rows = [iteration_values(r, name, p["n_iter"], n_it) for _, p, r, _ in ok]
                    self.arrays[name].set_coordinate_selection(
                        it_sel, np.repeat(np.array(rows), repeat, axis=0))
                per_cell = {"wall_s": [float(r["wall_s"]) for _, _, r, _ in ok],
                            **{k: [w[k][:STRING_LENGTH] for *_, w in ok] for k in STRINGS}}
                for name, vals in per_cell.items():
                    self.arrays[name].set_coordinate_selection(
                        grid_sel, np.repeat(np.array(vals), repeat))
            cells_all = np.array([i for idx, *_ in self.pending for i in idx]).reshape(
                -1, len(self.spec.dims))
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
    """Update the cube's attributes (between runs' writes, before :func:`consolidate`)."""
    import zarr

    zarr.open_group(os.fspath(path), mode="r+", use_consolidated=False).attrs.update(attrs)


def consolidate(path: str) -> None:
    """Consolidate the metadata (once no cell is being written): ``xr.open_zarr(path)``
    then opens the cube without a warning."""
    import zarr

    with _quiet_zarr():
        zarr.consolidate_metadata(os.fspath(path))


def _consolidated(path: str) -> bool:
    try:
        with open(os.path.join(os.fspath(path), "zarr.json")) as fh:
            return json.load(fh).get("consolidated_metadata") is not None
    except (OSError, ValueError):
        return False


def open_cube(path) -> xr.Dataset:
    """The result cube as an xarray Dataset (lazy); a cube of format 2 or older has its
    ``method`` dimension renamed ``estimator`` as it is opened. A cube of format 4 with a
    chunk missing is refused (:class:`DamagedStoreError`)."""
    import zarr

    path = os.fspath(path)
    with _quiet_zarr():
        ds = xr.open_zarr(path, consolidated=_consolidated(path))
        if ds.attrs.get("format") == FORMAT and ds.attrs.get("format_version", 0) >= 4:
            gone = missing_part(zarr.open_group(path, mode="r", use_consolidated=False))
            if gone is not None:
                raise DamagedStoreError(
                    f"the result cube {path!r} is damaged: the chunk {gone} is missing; "
                    "run its sweep again with --overwrite to recompute it")
    if ds.attrs.get("format") == FORMAT and ds.attrs.get("format_version", 0) < 3:
        ds = ds.rename({old: new for old, new in RENAMED.items() if old in ds.dims})
    return ds


def this_host() -> str:
    return socket.gethostname()
