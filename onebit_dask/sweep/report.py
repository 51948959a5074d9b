"""Tables and figures from a sweep's result cube.

Only the cells marked ``done`` are read: the ``done`` flags first (one boolean per
cell), then the values of the done cells, in blocks, so time and memory grow with
the cells done, not with the grid. Progress goes to stderr.

Tables: mean +- std over seeds of each cell's last iteration, methods (and step
rules) as rows and noise settings as columns, like the paper's Table 1; an entry
with fewer seeds done than the grid has says how many. Figures (PNG): error vs
iteration per noise setting (the paper's Fig. 1), error vs observations on log-log
axes, final error vs batch size (when the grid has several), AUC per method and
noise setting. A grid dimension a figure does not show that has several values
gives one figure per value (``NAME_d1=20.png``, ...), never an average over it.

A cube of file datasets (:mod:`.datafiles`) holds held-out ranking metrics instead: its
tables have the datasets as columns and one row per method / step (and per value of
every other grid dimension with several), and its figures show P@1, P@5 and PSP@5
against the bits used, one line per row, one figure per dataset.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import os
import re
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from ..utils.errors import RunError
from ..metrics.names import METRICS, RANKING
from ..io.stores.zarr_format import DamagedStoreError
from .methods import METHODS
from .cube import open_cube
from .noise import parse_noise

TABLE_METRICS = ("auc", "frobenius_error", "hamming_loss", "wall_s")
SERIES = (*METRICS, "n_samples")
FILE_TABLE_METRICS = ("precision_at_1", "precision_at_3", "precision_at_5", "psp_at_5",
                      "ndcg_at_5", "auc", "n_samples", "wall_s")
FILE_SERIES = (*RANKING, "n_samples")
FILE_PLOTTED = ("precision_at_1", "precision_at_5", "psp_at_5")
# dimensions a file cube's figure shows as lines or aggregates
FILE_SHOWN = ("estimator", "step", "seed", "features", "threshold", "queries", "rank",
              "batch_size", "n_iter")
SHOWN = ("estimator", "step", "noise", "seed")  # dimensions every figure shows or aggregates
MAX_FACETS = 16
BLOCK = 20_000  # cells of the grid per block read
DENSE = 0.1  # a block with at least this fraction done is read whole, else cell by cell


class TooManyFacets(ValueError):
    """The figures would need more facets than :data:`MAX_FACETS`."""


@dataclass
class Cells:
    """The done cells of a cube: their grid coordinates and values."""

    dims: tuple          # grid dimensions (without iteration)
    coords: dict         # dim -> all coordinate values of the grid
    params: pd.DataFrame  # one row per done cell: its grid coordinates
    series: dict         # name -> (n_done, n_iterations) per-iteration values
    wall_s: np.ndarray   # (n_done,)
    n_cells: int
    n_failed: int

    def final(self) -> pd.DataFrame:
        """Each done cell's values at its last iteration (``n_iter``), with its coordinates."""
        last = np.clip(self.params["n_iter"].to_numpy(dtype=int), 0,
                       next(iter(self.series.values())).shape[1] - 1)
        rows = np.arange(len(last))
        out = self.params.copy()
        for name, values in self.series.items():
            out[name] = values[rows, last]
        out["wall_s"] = self.wall_s
        return out


log = logging.getLogger(__name__)


def _progress(enabled: bool, text: str) -> None:
    if enabled:
        log.info("report: %s", text)


def collect(ds, progress: bool = False, path: str = "the cube",
            require_done: bool = False) -> Cells:
    """Read the done cells of ``ds`` (from :func:`open_cube`), block by block;
    ``require_done``: no cell done is an error (there is nothing to plot)."""
    start = time.perf_counter()
    try:
        done_var = ds["done"]
        dims = tuple(done_var.dims)
        done = np.asarray(done_var.values, dtype=bool)
        failed = int(np.asarray(ds["failed"].values).sum()) if "failed" in ds else 0
    except Exception as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DamagedStoreError(f"{path}: the 'done' flags are missing or unreadable ({detail}): "
                                "the store is damaged; run the sweep again with --overwrite "
                                "to rebuild it") from None
    index = np.nonzero(done)
    n_done = len(index[0]) if index else 0
    if require_done and n_done == 0:
        raise RunError(f"no cell of the cube {path} is done: there is nothing to plot yet "
                       "(run the sweep, then report again)")
    _progress(progress, f"{n_done:,} of {done.size:,} cells done "
                        f"({time.perf_counter() - start:.1f} s to read the done flags)")
    coords = {d: ds[d].values for d in dims}
    params = pd.DataFrame({d: coords[d][i] for d, i in zip(dims, index)})
    if "dataset" in dims:  # keys a dataset sets are coordinates along it (batch_size, d1 ...)
        at = index[dims.index("dataset")]
        for name, coord in ds.coords.items():
            if name not in dims and coord.dims == ("dataset",):
                params[name] = coord.values[at]
    n_it = ds.sizes["iteration"]
    names = FILE_SERIES if on_files(ds) else SERIES
    series = {name: np.empty((n_done, n_it)) for name in names}
    wall = np.empty(n_done)
    variables = ds[[*names, "wall_s"]]
    got = 0
    for axes, mask in _slabs(done):
        where = {dims[axis]: key for axis, key in axes.items()}
        rows = np.nonzero(mask)
        if not len(rows[0]):
            continue
        if len(rows[0]) >= DENSE * mask.size:  # mostly done: read the slab whole
            block = variables.isel(where).compute()
            picked = {name: block[name].transpose(*(d for d in dims if d in block[name].dims),
                                                  ...).values[rows]
                      for name in variables.data_vars}
        else:  # a few done cells: read only theirs
            inner = [d for d in dims if d not in where or isinstance(where[d], slice)]
            offsets = {d: where[d].start if isinstance(where.get(d), slice) else 0 for d in inner}
            points = {**{d: v for d, v in where.items() if not isinstance(v, slice)},
                      **{d: xr.DataArray(r + offsets[d], dims="cell") for d, r in zip(inner, rows)}}
            block = variables.isel(points).compute()
            picked = {name: block[name].transpose("cell", ...).values
                      for name in variables.data_vars}
        n = len(rows[0])
        for name in names:
            series[name][got:got + n] = picked[name]
        wall[got:got + n] = picked["wall_s"]
        got += n
        _progress(progress, f"read {got:,} of {n_done:,} done cells "
                            f"({time.perf_counter() - start:.1f} s)")
    n_cells = int(done.size)
    if "noise_model" in dims and "noise_level" in dims:
        n_cells = n_cells // (ds.sizes["noise_model"] * ds.sizes["noise_level"]) * len(
            ds.attrs.get("noise_settings") or [])
        dims, coords, params = _noise_settings(ds, dims, coords, params)
    return Cells(dims, coords, params, series, wall, n_cells, failed)


def _noise_settings(ds, dims: tuple, coords: dict, params: pd.DataFrame):
    """``(dims, coords, params)`` with the cube's ``noise_model`` and ``noise_level``
    dimensions as the spec's ``noise`` settings (their labels, in the spec's order: the
    attribute ``noise_settings``), as the tables and figures show them (a combination
    the spec does not ask for is never done)."""
    labels = list(ds.attrs.get("noise_settings") or [])
    label = {parse_noise(text): text for text in labels}
    at = dims.index("noise_model")
    pairs = zip(params["noise_model"].tolist(), params["noise_level"].tolist())
    params = params.drop(columns=["noise_model", "noise_level"])
    params.insert(at, "noise", [label[m, lv] for m, lv in pairs])
    coords = {d: v for d, v in coords.items() if d not in ("noise_model", "noise_level")}
    coords["noise"] = np.asarray(labels, dtype=object)
    dims = tuple(d for d in dims if d != "noise_level")
    return tuple("noise" if d == "noise_model" else d for d in dims), coords, params


def _slabs(done: np.ndarray):
    """``({dim index: int or slice}, done mask of the slab)`` covering the grid in C order
    (the order cells run and are written in), each slab at most :data:`BLOCK` cells."""
    shape = done.shape
    split = 0
    while split < len(shape) and int(np.prod(shape[split + 1:])) > BLOCK:
        split += 1
    if split == len(shape):
        yield {}, done
        return
    inner = int(np.prod(shape[split + 1:]))
    step = max(1, BLOCK // inner)
    for outer in np.ndindex(*shape[:split]):
        for lo in range(0, shape[split], step):
            key = (*outer, slice(lo, min(lo + step, shape[split])))
            yield dict(enumerate(key)), done[key]


# --- tables --------------------------------------------------------------------------------

def _rows(ds):
    """``(method, step, row name)``: one row per step rule for the methods that use
    one, a single row (stored along every step) for the others. ``ds`` is anything
    indexable by ``"estimator"`` and ``"step"`` giving their values."""
    for method in np.asarray(ds["estimator"].values if hasattr(ds["estimator"], "values")
                             else ds["estimator"]):
        uses_step = METHODS[method].uses_step if method in METHODS else True
        steps = np.asarray(ds["step"].values if hasattr(ds["step"], "values") else ds["step"])
        if not uses_step:
            yield method, steps[0], str(method)
            continue
        for step in steps:
            yield method, step, f"{method} / {step}"


def _entry(mean, std, count, n_seeds, scale, digits) -> str:
    if count == 0 or not np.isfinite(mean):
        return "-"
    text = f"{mean * scale:.{digits}f}"
    if count > 1:
        text += f"+-{std * scale:.{digits}f}"
    if count < n_seeds:
        text += f" [{count}/{n_seeds}]"
    return text


def tables(cells: Cells, metrics=TABLE_METRICS) -> str:
    """Text tables of mean +- std over seeds: rows method/step, columns noise (or
    ``dataset`` when there is one noise setting and several datasets). An entry
    ``[k/N]`` has ``k`` of the grid's ``N`` seeds done (no std with one seed)."""
    coords = cells.coords
    col = "noise"
    if len(coords["noise"]) == 1 and len(coords.get("dataset", ())) > 1:
        col = "dataset"
    n_seeds = len(coords["seed"])
    rest = [d for d in cells.dims if d not in ("estimator", "step", col, "seed")]
    groups = [d for d in rest if len(coords[d]) > 1]
    keys = ["estimator", "step", col, *rest]
    final = cells.final()
    stats = {}
    if len(final):
        grouped = final.groupby(keys, sort=False)[list(metrics)]
        mean, std, count = grouped.mean(), grouped.std(ddof=1), grouped.count()
        for key in mean.index:
            stats[key] = (mean.loc[key], std.loc[key], count.loc[key])
    lines = []
    for combo in itertools.product(*(coords[d] for d in groups)):
        sel = dict(zip(groups, combo))
        fixed = {d: coords[d][0] for d in rest if d not in sel}
        header = ", ".join(f"{k}={v}" for k, v in {**fixed, **sel}.items())
        for metric in metrics:
            scale, unit = {"auc": (100.0, " (%)"), "wall_s": (1.0, " (training seconds)")}.get(
                metric, (1.0, ""))
            digits = 4 if unit == "" else (2 if metric == "auc" else 1)
            lines.append(f"{metric}{unit}, mean +- std over {n_seeds} seeds "
                         f"([k/{n_seeds}]: k seeds done); {header}")
            cols = [str(n) for n in coords[col]]
            entries = []
            for method, step, name in _rows(coords):
                row = []
                for value in coords[col]:
                    key = (method, step, value, *(sel.get(d, fixed.get(d)) for d in rest))
                    m, s, c = stats.get(key, (None, None, None))
                    row.append("-" if m is None else
                               _entry(m[metric], s[metric], int(c[metric]), n_seeds, scale,
                                      digits))
                entries.append((name, row))
            width = max(17, *(len(c) + 2 for c in cols),
                        *(len(e) + 2 for _, row in entries for e in row))
            lines.append(f"{'method / step':22s}" + "".join(f"{c:>{width}s}" for c in cols))
            for name, row in entries:
                lines.append(f"{name:22s}" + "".join(f"{e:>{width}s}" for e in row))
            lines.append("")
    lines.append(f"{len(cells.params)} of {cells.n_cells} cells done, {cells.n_failed} failed")
    return "\n".join(lines)


# --- figures -------------------------------------------------------------------------------

def check_plot_dir(directory, cube=None) -> None:
    """The figures' directory must be a directory we can write (created if missing), and
    not the cube ``cube`` nor inside it."""
    directory = os.fspath(directory)
    if cube is not None:
        inside, store = os.path.realpath(directory), os.path.realpath(os.fspath(cube))
        if os.path.commonpath([inside, store]) == store:
            raise ValueError(f"--plots {directory!r} is inside the cube {os.fspath(cube)!r}: "
                             "choose a directory outside the store for the figures")
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ValueError(f"--plots {directory!r} is a file, not a directory: choose a "
                         "directory for the figures")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--plots {directory!r} cannot be created ({exc.strerror}): choose "
                         "a writable directory") from None
    from ..io.stores.atomic import writable

    if not writable(directory):
        raise ValueError(f"--plots {directory!r} is not writable: choose a writable directory")


def _facets(cells: Cells, shown) -> list[tuple[str, dict]]:
    """``(file suffix, {dim: value})`` of each facet: one per combination of the grid
    dimensions a figure does not show that have several values among the done cells."""
    dims = [d for d in cells.dims if d not in shown
            and cells.params[d].nunique() > 1]
    if not dims:
        return [("", {})]
    combos = cells.params[dims].drop_duplicates().sort_values(dims)
    if len(combos) > MAX_FACETS:
        raise TooManyFacets(
            f"the figures would need {len(combos)} facets (one per value of "
            f"{' x '.join(dims)}), more than {MAX_FACETS}: plot a subset with xarray "
            "(see the README), or report without --plots")
    return [(_file_suffix(dict(zip(dims, row))), dict(zip(dims, row)))
            for row in combos.itertuples(index=False)]


def _file_suffix(where: dict) -> str:
    """``_d1=20_dataset=NAME`` as a file name part: characters other than letters, digits,
    ``.=+-`` become ``_``, and a name that had to change gets 8 hex digits of its hash, so
    that names never leave the plot directory and two facets never share a file."""
    text = "_".join(f"{d}={v}" for d, v in where.items())
    safe = re.sub(r"[^A-Za-z0-9.=+-]", "_", text)
    if safe != text:
        safe += "_" + hashlib.sha256(text.encode()).hexdigest()[:8]
    return "_" + safe


def _select(cells: Cells, where: dict) -> np.ndarray:
    mask = np.ones(len(cells.params), dtype=bool)
    for dim, value in where.items():
        mask &= (cells.params[dim] == value).to_numpy()
    return mask


def _seed_stats(values: np.ndarray):
    """Mean, std (0 with one seed) and count over rows, ignoring NaN."""
    count = np.sum(np.isfinite(values), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.nansum(values, axis=0)
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        dev = np.nansum((values - mean) ** 2, axis=0)
        std = np.where(count > 1, np.sqrt(dev / np.maximum(count - 1, 1)), 0.0)
    return mean, std, count


def _title_suffix(where: dict) -> str:
    return (" — " + ", ".join(f"{k}={v}" for k, v in where.items())) if where else ""


def _style(cells: Cells):
    """Colours by noise setting; ``(line style, marker)`` by method / step row, so that
    lines that coincide (the step rules agree before averaging starts) stay visible."""
    import matplotlib.pyplot as plt

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    noise = {n: colors[i % len(colors)] for i, n in enumerate(cells.coords["noise"])}
    looks = list(zip(("o", "x", "s", "+", "D", "^"), ("-", "--", ":", "-.", "-", "--")))
    rows = {(m, s): looks[k % len(looks)] for k, (m, s, _) in enumerate(_rows(cells.coords))}
    return noise, rows


def plots(cells: Cells, directory, progress: bool = False) -> list[str]:
    """Write the figures as PNG into ``directory``; return their paths."""
    if len(cells.params) == 0:
        raise RunError("no cell of the cube is done: there is nothing to plot yet (run the "
                       "sweep, then report again)")
    by_iteration = _facets(cells, SHOWN)
    by_observations = _facets(cells, (*SHOWN, "batch_size"))
    check_plot_dir(directory)
    import matplotlib

    matplotlib.use("Agg")
    paths = []
    for suffix, where in by_iteration:
        paths.append(_error_vs_iteration(cells, where, directory, suffix))
        paths.append(_auc_per_method(cells, where, directory, suffix))
    for suffix, where in by_observations:
        paths.append(_error_vs_observations(cells, where, directory, suffix))
        if cells.params.loc[_select(cells, where), "batch_size"].nunique() > 1:
            paths.append(_error_vs_batch_size(cells, where, directory, suffix))
    _progress(progress, f"wrote {len(paths)} figures into {os.fspath(directory)}")
    return sorted(paths)


def _panels(cells: Cells, mask):
    present = cells.params.loc[mask]
    return [(m, s, name) for m, s, name in _rows(cells.coords)
            if ((present["estimator"] == m) & (present["step"] == s)).any()]


def _error_vs_iteration(cells, where, directory, suffix):
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    base = _select(cells, where)
    panels = _panels(cells, base)
    noise_color, _ = _style(cells)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels) + 1.5, 4.2),
                             squeeze=False, sharey=True)
    for ax, (method, step, name) in zip(axes[0], panels):
        for noise in cells.coords["noise"]:
            mask = base & _select(cells, {"estimator": method, "step": step, "noise": noise})
            if not mask.any():
                continue
            mean, std, count = _seed_stats(cells.series["frobenius_error"][mask])
            ok = count > 0
            it = np.arange(len(mean))[ok]
            seeds = int(count[ok].max())
            ax.errorbar(it, mean[ok], yerr=std[ok], marker="o", ms=3, capsize=2,
                        color=noise_color[noise],
                        label=f"{noise} ({seeds} of {len(cells.coords['seed'])} seeds)")
        ax.set(title=name, xlabel="iteration (0 = initialisation)", yscale="log")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(title="noise", fontsize=8)
    axes[0][0].set_ylabel("frobenius_error (RMS column error)")
    fig.suptitle("Recovery error vs iteration: mean over seeds, error bars = std over seeds"
                 + _title_suffix(where), fontsize=10)
    return _save(fig, directory, f"error_vs_iteration{suffix}.png")


def _error_vs_observations(cells, where, directory, suffix):
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    base = _select(cells, where)
    noise_color, row_look = _style(cells)
    sizes = sorted(cells.params.loc[base, "batch_size"].unique())
    fig, ax = plt.subplots(figsize=(9.5, 5.2))
    for (method, step, name), noise, size in itertools.product(
            _panels(cells, base), cells.coords["noise"], sizes):
        mask = base & _select(cells, {"estimator": method, "step": step, "noise": noise,
                                      "batch_size": size})
        if not mask.any():
            continue
        err, std, count = _seed_stats(cells.series["frobenius_error"][mask])
        obs, _, _ = _seed_stats(cells.series["n_samples"][mask])
        ok = (count > 0) & np.isfinite(obs)
        label = f"{name}, {noise}" + (f", m={size}" if len(sizes) > 1 else "")
        marker, line = row_look[(method, step)]
        ax.errorbar(obs[ok], err[ok], yerr=std[ok], capsize=2, lw=1.3, ms=6, alpha=0.85,
                    color=noise_color[noise], linestyle=line, marker=marker,
                    markerfacecolor="none", label=label)
    ax.set(xscale="log", yscale="log", xlabel="observations used (initial batch included)",
           ylabel="frobenius_error (RMS column error)",
           title="Recovery error vs observations: mean over seeds, error bars = std over seeds"
                 + _title_suffix(where))
    ax.title.set_fontsize(10)
    for axis in (ax.xaxis, ax.yaxis):  # ticks at 1, 2, 5 x 10^k, labelled plainly
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_minor_locator(LogLocator(base=10, subs=np.arange(1, 10)))
        axis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(_count))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.grid(True, which="major", alpha=0.4)
    ax.grid(True, which="minor", alpha=0.12)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0),
              title="method / step, noise (colour: noise)", title_fontsize=8)
    return _save(fig, directory, f"error_vs_observations{suffix}.png")


def _count(value, _pos=None) -> str:
    """10000 -> '10k', 2000000 -> '2M'."""
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= div:
            return f"{value / div:g}{unit}"
    return f"{value:g}"


def _error_vs_batch_size(cells, where, directory, suffix):
    import matplotlib.pyplot as plt

    base = _select(cells, where)
    final = cells.final()
    noise_color, row_look = _style(cells)
    sizes = np.array(sorted(cells.params.loc[base, "batch_size"].unique()), dtype=float)
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for (method, step, name), noise in itertools.product(_panels(cells, base),
                                                         cells.coords["noise"]):
        mask = base & _select(cells, {"estimator": method, "step": step, "noise": noise})
        if not mask.any():
            continue
        sub = final.loc[mask]
        table = np.array([sub.loc[sub["batch_size"] == m, "frobenius_error"].to_numpy()
                          for m in sizes], dtype=object)
        mean = np.array([v.mean() if len(v) else np.nan for v in table])
        std = np.array([v.std(ddof=1) if len(v) > 1 else 0.0 for v in table])
        ok = np.isfinite(mean)
        slope = (np.polyfit(np.log(sizes[ok]), np.log(mean[ok]), 1)[0] if ok.sum() > 1
                 else np.nan)
        marker, line = row_look[(method, step)]
        ax.errorbar(sizes[ok], mean[ok], yerr=std[ok], marker=marker, markerfacecolor="none",
                    capsize=2, color=noise_color[noise], linestyle=line,
                    label=f"{name}, {noise}: slope {slope:.2f}")
    ax.set(xscale="log", yscale="log", xlabel="batch size m",
           ylabel="frobenius_error at the last iteration",
           title="Sample complexity (Theorem 1: slope -1); error bars = std over seeds"
                 + _title_suffix(where))
    ax.title.set_fontsize(10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return _save(fig, directory, f"error_vs_batch_size{suffix}.png")


def _auc_per_method(cells, where, directory, suffix):
    import matplotlib.pyplot as plt

    base = _select(cells, where)
    final = cells.final().loc[base]
    panels = _panels(cells, base)
    noises = list(cells.coords["noise"])
    width = 0.8 / len(panels)
    fig, ax = plt.subplots(figsize=(max(6.5, 1.1 * len(noises) * len(panels) / 2 + 3), 4.6))
    lows, seeds = [], set()
    for k, (method, step, name) in enumerate(panels):
        means, stds = [], []
        for noise in noises:
            v = 100 * final.loc[(final["estimator"] == method) & (final["step"] == step)
                                & (final["noise"] == noise), "auc"].dropna().to_numpy()
            means.append(v.mean() if len(v) else np.nan)
            stds.append(v.std(ddof=1) if len(v) > 1 else 0.0)
            seeds.add(len(v))
            if len(v):
                lows.append((v.mean() - stds[-1]))
        ax.bar(np.arange(len(noises)) + k * width, means, width, yerr=stds, capsize=3,
               label=name)
    ax.set_xticks(np.arange(len(noises)) + width * (len(panels) - 1) / 2, noises)
    low = min(lows) if lows else 50.0
    ax.set(xlabel="noise setting", ylabel="AUC at the last iteration (%)",
           ylim=(max(0.0, min(50.0, low - 2)) if low < 50 else max(50.0, low - 2), 100.0))
    seed_text = "/".join(str(s) for s in sorted(seeds - {0})) or "0"
    ax.set_title(f"AUC at the last iteration{_title_suffix(where)}\nbars: mean over seeds "
                 f"({seed_text} seeds), error bars: std over seeds", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), title="method / step",
              title_fontsize=8)
    return _save(fig, directory, f"auc_per_method{suffix}.png")


# --- file datasets ---------------------------------------------------------------------

def on_files(ds) -> bool:
    """Whether the cube ``ds`` is of file datasets (its ``data`` attribute)."""
    return ds.attrs.get("data") == "files"


def _file_rows(cells: Cells) -> list:
    """The dimensions that name a row (a line) of a file cube's tables and figures:
    ``estimator``, ``step`` and every other grid dimension but ``dataset`` and ``seed``
    with several values among the done cells."""
    varied = [d for d in cells.dims if d not in ("estimator", "step", "dataset", "seed")
              and cells.params[d].nunique() > 1]
    return ["estimator", "step", *varied]


def _row_name(keys, values) -> str:
    parts = [str(v) if k in ("estimator", "step") else f"{k}={v}" for k, v in zip(keys, values)]
    return " / ".join(parts)


def file_tables(cells: Cells, metrics=FILE_TABLE_METRICS) -> str:
    """Text tables of a file cube: for each metric, mean +- std over seeds at each
    cell's last iteration, one row per method / step (and per value of the other grid
    dimensions with several), one column per dataset."""
    n_seeds = len(cells.coords["seed"])
    datasets = list(cells.coords["dataset"])
    keys = _file_rows(cells)
    final = cells.final()
    lines = []
    rows = (final[keys].drop_duplicates().itertuples(index=False, name=None)
            if len(final) else [])
    rows = list(rows)
    names = [_row_name(keys, r) for r in rows]
    for metric in metrics:
        scale, unit, digits = {"auc": (100.0, " (%)", 2), "n_samples": (1.0, " (bits)", 0),
                               "wall_s": (1.0, " (training seconds)", 1)}.get(
            metric, (1.0, "", 4))
        lines.append(f"{metric}{unit} at the last iteration, mean +- std over {n_seeds} "
                     f"seeds ([k/{n_seeds}]: k seeds done)")
        entries = []
        for row, name in zip(rows, names):
            mask = np.ones(len(final), dtype=bool)
            for k, v in zip(keys, row):
                mask &= (final[k] == v).to_numpy()
            out = []
            for dataset in datasets:
                v = final.loc[mask & (final["dataset"] == dataset).to_numpy(),
                              metric].dropna().to_numpy(dtype=float)
                out.append(_entry(v.mean() if len(v) else np.nan,
                                  v.std(ddof=1) if len(v) > 1 else 0.0, len(v), n_seeds,
                                  scale, digits))
            entries.append((name, out))
        width = max(12, *(len(str(d)) + 2 for d in datasets),
                    *(len(e) + 2 for _, row in entries for e in row))
        first = max(22, *(len(n) + 2 for n in names)) if names else 22
        lines.append(f"{'method / step':{first}s}" + "".join(f"{str(d):>{width}s}"
                                                             for d in datasets))
        for name, row in entries:
            lines.append(f"{name:{first}s}" + "".join(f"{e:>{width}s}" for e in row))
        lines.append("")
    lines.append(f"{len(cells.params)} of {cells.n_cells} cells done, {cells.n_failed} failed")
    return "\n".join(lines)


def file_plots(cells: Cells, directory, progress: bool = False) -> list[str]:
    """Write a file cube's figures as PNG into ``directory`` (one per dataset, and per
    value of a dimension not shown): P@1, P@5 and PSP@5 against the bits used."""
    if len(cells.params) == 0:
        raise RunError("no cell of the cube is done: there is nothing to plot yet (run the "
                       "sweep, then report again)")
    facets = _facets(cells, FILE_SHOWN)
    check_plot_dir(directory)
    import matplotlib

    matplotlib.use("Agg")
    paths = [_ranking_vs_bits(cells, where, directory, suffix) for suffix, where in facets]
    _progress(progress, f"wrote {len(paths)} figures into {os.fspath(directory)}")
    return sorted(paths)


def _ranking_vs_bits(cells, where, directory, suffix):
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    base = _select(cells, where)
    keys = _file_rows(cells)
    rows = list(cells.params.loc[base, keys].drop_duplicates().itertuples(index=False,
                                                                          name=None))
    n_seeds = len(cells.coords["seed"])
    fig, axes = plt.subplots(1, len(FILE_PLOTTED), figsize=(4.6 * len(FILE_PLOTTED) + 2.5, 4.2),
                             squeeze=False)
    looks = list(zip(("o", "x", "s", "+", "D", "^"), ("-", "--", ":", "-.", "-", "--")))
    for ax, metric in zip(axes[0], FILE_PLOTTED):
        for k, row in enumerate(rows):
            mask = base & _select(cells, dict(zip(keys, row)))
            mean, std, count = _seed_stats(cells.series[metric][mask])
            bits, _, _ = _seed_stats(cells.series["n_samples"][mask])
            ok = (count > 0) & np.isfinite(bits)
            if not ok.any():
                continue
            marker, line = looks[k % len(looks)]
            ax.errorbar(bits[ok], mean[ok], yerr=std[ok], capsize=2, ms=5, lw=1.3,
                        marker=marker, linestyle=line, markerfacecolor="none",
                        label=f"{_row_name(keys, row)} ({int(count[ok].max())} of "
                              f"{n_seeds} seeds)")
        ax.set(xscale="log", xlabel="bits used (initial batch included)",
               ylabel=f"{metric} on the test set", title=metric)
        ax.xaxis.set_major_formatter(FuncFormatter(_count))
        ax.xaxis.set_minor_formatter(FuncFormatter(_count))
        ax.grid(True, which="both", alpha=0.3)
    axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       title=" / ".join(keys), title_fontsize=8)
    fig.suptitle("Held-out ranking metrics vs bits: mean over seeds, error bars = std over "
                 "seeds" + _title_suffix(where), fontsize=10)
    return _save(fig, directory, f"ranking_vs_bits{suffix}.png")


FIGURE_SOFTWARE = "onebit-dask report"
"""The PNG ``Software`` text of every figure ``report`` writes: a file of that name in the
figures' directory is replaced only if it carries it (nothing of the user's is lost)."""


def _ours(path: str) -> bool:
    """Whether the file at ``path`` is a figure ``report`` wrote."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            return image.info.get("Software") == FIGURE_SOFTWARE
    except (OSError, ValueError):
        return False


def _replaceable(path: str) -> bool:
    """Whether a figure may be written at ``path``: nothing there, a figure ``report``
    wrote, or an empty file (it holds nothing to lose). Never a symbolic link: the link
    is the user's, and so is what it points to."""
    if not os.path.lexists(path):
        return True
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    return os.path.getsize(path) == 0 or _ours(path)


def _save(fig, directory, name) -> str:
    """Write the figure as ``directory/name``: into a temporary file beside it, then
    renamed over it, so that a failed write (a full disk) leaves the old file or none."""
    import uuid

    import matplotlib.pyplot as plt

    path = os.path.join(os.fspath(directory), name)
    tmp = None
    try:
        if not _replaceable(path):
            raise FileExistsError(f"--plots: {path!r} exists and was not written by "
                                  "onebit-dask report (or is a link): move it away or choose "
                                  "another directory")
        fig.tight_layout()
        tmp = os.path.join(os.path.dirname(path), f".{name}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "xb") as fh:  # the umask's mode, as a plain savefig's file
            fig.savefig(fh, format="png", dpi=110, metadata={"Software": FIGURE_SOFTWARE})
        os.replace(tmp, path)
        tmp = None
    finally:
        plt.close(fig)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.remove(tmp)
    return path


def _check_whole(path: str, ds) -> None:
    """A store whose arrays are missing or unreadable (the store module's check, which
    sees through consolidated metadata) is a :class:`DamagedStoreError`."""
    from types import SimpleNamespace

    from .cube import damage

    try:
        shape = SimpleNamespace(shape=ds["done"].shape, n_iterations=ds.sizes["iteration"],
                                files=on_files(ds))
        problem = damage(path, shape, whole=False)  # open_cube checked the rest
    except Exception as exc:
        problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if problem:
        raise DamagedStoreError(f"{path}: the store is damaged ({problem}): run the sweep again "
                                "with --overwrite to rebuild it")


REPORT_LOCK = ".onebit-dask-report.lock"
"""The lock file of a report writing figures, inside their directory (its parent, which
may be above the working directory, is not the report's to write)."""


def report(path, plot_dir=None, progress: bool = False) -> tuple[str, list[str]]:
    """Tables (text) and, with ``plot_dir``, the figures' paths of the cube at ``path``.

    With ``plot_dir``, the directory is checked (:func:`check_plot_dir`) and its lock
    (:data:`REPORT_LOCK`, :class:`~onebit_dask.io.stores.lock.StoreLock`) held from the
    start: a second report writing figures there is refused at once
    (:class:`~onebit_dask.io.stores.lock.StoreLockedError`, naming the holder).
    """
    if plot_dir is None:
        return _report(path, None, progress)
    from ..io.stores.lock import StoreLock

    check_plot_dir(plot_dir, cube=path)
    with StoreLock(os.fspath(plot_dir), writer="report", kind="figures' directory",
                   path=os.path.join(os.fspath(plot_dir), REPORT_LOCK)):
        return _report(path, plot_dir, progress)


def _report(path, plot_dir, progress: bool) -> tuple[str, list[str]]:
    start = time.perf_counter()
    try:
        ds = open_cube(path)
    except DamagedStoreError:
        raise  # one line naming the cube and the part (or a newer format)
    except Exception as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DamagedStoreError(f"{path}: the cube cannot be opened ({detail}): the store is "
                                "damaged; run the sweep again with --overwrite to rebuild it"
                                ) from None
    _check_whole(os.fspath(path), ds)
    cells = collect(ds, progress, os.fspath(path), require_done=plot_dir is not None)
    files = on_files(ds)
    text = (file_tables if files else tables)(cells)
    paths = ((file_plots if files else plots)(cells, plot_dir, progress)
             if plot_dir is not None else [])
    _progress(progress, f"done in {time.perf_counter() - start:.1f} s")
    return text, paths
