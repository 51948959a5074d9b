"""Tables and figures from a sweep's result cube.

Tables: mean +- std over seeds of the last iteration, methods (and step rules)
as rows and noise settings as columns, like the paper's Table 1. Figures (PNG):
error vs iteration per noise setting (the paper's Fig. 1), error vs observations
on log-log axes, and AUC per method and noise setting.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import xarray as xr

from .methods import METHODS
from .store import open_cube

TABLE_METRICS = ("auc", "frobenius_error", "hamming_loss", "wall_s")


def final(ds: xr.Dataset) -> xr.Dataset:
    """Values at each cell's last iteration (``n_iter``), done cells only."""
    last = ds.sel(iteration=ds["n_iter"].clip(max=int(ds.iteration[-1])))
    keep = ds["done"]
    return last.where(keep)


def tables(ds: xr.Dataset, metrics=TABLE_METRICS) -> str:
    """Text tables of mean +- std over seeds: rows method/step, columns noise (or
    ``dataset`` when there is one noise setting and several datasets).

    (Selections use the dict form of ``.sel``: ``method`` is also a keyword of it.)
    """
    col = "noise"
    if ds.sizes["noise"] == 1 and ds.sizes.get("dataset", 1) > 1:
        col = "dataset"
    fin = final(ds).drop_vars([v for v in ("noise_model", "noise_level") if v in ds.coords])
    mean = fin.mean("seed").compute()
    std = fin.std("seed", ddof=1 if ds.sizes["seed"] > 1 else 0).compute()
    lines = []
    rest = [d for d in ds["done"].dims if d not in ("method", "step", col, "seed")]
    groups = [d for d in rest if ds.sizes[d] > 1]
    for combo in itertools.product(*(ds[d].values for d in groups)):
        sel = dict(zip(groups, combo))
        fixed = {d: ds[d].values[0] for d in rest if d not in sel}
        header = ", ".join(f"{k}={v}" for k, v in {**fixed, **sel}.items())
        for metric in metrics:
            scale, unit = {"auc": (100.0, " (%)"), "wall_s": (1.0, " (training seconds)")}.get(
                metric, (1.0, ""))
            lines.append(f"{metric}{unit}, mean +- std over {ds.sizes['seed']} seeds; {header}")
            cols = [str(n) for n in ds[col].values]
            width = max(17, *(len(c) + 2 for c in cols))
            lines.append(f"{'method / step':22s}" + "".join(f"{c:>{width}s}" for c in cols))
            for method, step, name in _rows(ds):
                row = f"{name:22s}"
                for value in ds[col].values:
                    where = {**sel, **fixed, "method": method, "step": step, col: value}
                    m = float(mean[metric].sel(where).squeeze())
                    s = float(std[metric].sel(where).squeeze())
                    digits = 4 if unit == "" else (2 if metric == "auc" else 1)
                    cell = "-" if np.isnan(m) else f"{m * scale:.{digits}f}+-{s * scale:.{digits}f}"
                    row += f"{cell:>{width}s}"
                lines.append(row)
            lines.append("")
    n_done, n_all = int(ds["done"].sum()), int(ds["done"].size)
    lines.append(f"{n_done} of {n_all} cells done, {int(ds['failed'].sum())} failed")
    return "\n".join(lines)


def _rows(ds: xr.Dataset):
    """``(method, step, row name)``: one row per step rule for the methods that use
    one, a single row (stored along every step) for the others."""
    for method in ds["method"].values:
        uses_step = METHODS[method].uses_step if method in METHODS else True
        if not uses_step:
            yield method, ds["step"].values[0], str(method)
            continue
        for step in ds["step"].values:
            yield method, step, f"{method} / {step}"


def _squeeze_others(da: xr.DataArray, keep) -> xr.DataArray:
    for dim in da.dims:
        if dim not in keep:
            da = da.isel({dim: 0}) if da.sizes[dim] == 1 else da.mean(dim)
    return da


def plots(ds: xr.Dataset, directory) -> list[str]:
    """Write the figures as PNG into ``directory``; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    paths = []
    data = ds.where(ds["done"]).compute()
    panels = list(_rows(data))  # (method, step, name): one per step rule where it applies

    # 1. error vs iteration per noise setting (the paper's Fig. 1)
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False,
                             sharey=True)
    for ax, (method, step, name) in zip(axes[0], panels):
        sub = data["frobenius_error"].sel({"method": method, "step": step})
        for noise in data["noise"].values:
            curve = _squeeze_others(sub.sel(noise=noise), {"iteration", "seed"})
            mean, std = curve.mean("seed"), curve.std("seed")
            ax.errorbar(curve["iteration"], mean, yerr=std, marker="o", ms=3, capsize=2,
                        label=str(noise))
        ax.set(title=name, xlabel="iteration", yscale="log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("frobenius_error (RMS column error)")
    axes[0][-1].legend(title="noise", fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle("Recovery error vs iteration (mean +- std over seeds)")
    paths.append(_save(fig, directory, "error_vs_iteration.png"))

    # 2. error vs observations, log-log: one line per cell setting, over the iterations
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    sizes = data["batch_size"].values if "batch_size" in data.dims else [None]
    for (method, step, name), noise, size in itertools.product(panels, data["noise"].values,
                                                               sizes):
        where = {"method": method, "step": step, "noise": noise}
        if size is not None:
            where["batch_size"] = size
        sub = data.sel(where)
        err = _squeeze_others(sub["frobenius_error"], {"iteration", "seed"}).mean("seed")
        obs = _squeeze_others(sub["n_samples"], {"iteration", "seed"}).mean("seed")
        ok = np.isfinite(err.values) & np.isfinite(obs.values)
        label = f"{name}, {noise}" + (f", m={size}" if len(sizes) > 1 else "")
        ax.plot(obs.values[ok], err.values[ok], marker=".", label=label)
    ax.set(xscale="log", yscale="log", xlabel="observations used", ylabel="frobenius_error",
           title="Recovery error vs observations")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.02, 0.5))
    paths.append(_save(fig, directory, "error_vs_observations.png"))

    # 2b. final error vs batch size m, with the fitted log-log slope (Theorem 1: -1)
    if len(sizes) > 1:
        fin_err = final(ds)["frobenius_error"].compute()
        fig, ax = plt.subplots(figsize=(6, 4.5))
        for (method, step, name), noise in itertools.product(panels, data["noise"].values):
            err = _squeeze_others(fin_err.sel({"method": method, "step": step, "noise": noise}),
                                  {"batch_size", "seed"})
            mean = err.mean("seed").values
            m = np.asarray(sizes, dtype=float)
            ok = np.isfinite(mean)
            slope = np.polyfit(np.log(m[ok]), np.log(mean[ok]), 1)[0] if ok.sum() > 1 else np.nan
            ax.errorbar(m, mean, yerr=err.std("seed").values, marker="o", capsize=2,
                        label=f"{name}, {noise}: slope {slope:.2f}")
        ax.set(xscale="log", yscale="log", xlabel="batch size m",
               ylabel="frobenius_error at the last iteration",
               title="Sample complexity (Theorem 1: slope -1)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        paths.append(_save(fig, directory, "error_vs_batch_size.png"))

    # 3. AUC per method and noise
    fin = final(ds).compute()
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * ds.sizes["noise"] * len(panels) / 2), 4.5))
    noises = list(data["noise"].values)
    width = 0.8 / len(panels)
    for k, (method, step, name) in enumerate(panels):
        auc = _squeeze_others(fin["auc"].sel({"method": method, "step": step}), {"noise", "seed"})
        ax.bar(np.arange(len(noises)) + k * width, 100 * auc.mean("seed"), width,
               yerr=100 * auc.std("seed"), capsize=2, label=name)
    ax.set_xticks(np.arange(len(noises)) + width * (len(panels) - 1) / 2, noises, rotation=20)
    lows = 100 * fin["auc"].min().item() if np.isfinite(fin["auc"].min().item()) else 50
    ax.set(ylabel="AUC (%)", ylim=(max(50, lows - 1), 100.2), title="AUC at the last iteration")
    ax.legend(fontsize=8)
    paths.append(_save(fig, directory, "auc_per_method.png"))
    return paths


def _save(fig, directory, name) -> str:
    import matplotlib.pyplot as plt

    path = os.path.join(directory, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(path, plot_dir=None) -> tuple[str, list[str]]:
    ds = open_cube(path)
    return tables(ds), (plots(ds, plot_dir) if plot_dir else [])
