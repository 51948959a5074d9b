"""Run a sweep: every pending cell as a Dask task (or in this process), each written to
the cube as soon as it finishes; a second run of the same command resumes."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import dataclass

from . import store
from .methods import METHODS
from .spec import SweepSpec


@dataclass
class SweepSummary:
    total: int
    ran: int = 0
    skipped: int = 0
    failed: int = 0
    wall_s: float = 0.0

    def __str__(self) -> str:
        return (f"{self.total} cells: {self.ran} run, {self.skipped} skipped (already done), "
                f"{self.failed} failed, {self.wall_s:.1f} s")


def compute_cell(path: str, spec: SweepSpec, index: tuple, params: dict, all_steps: bool):
    """Run one cell and write it; never raises (a failure is written and returned)."""
    start = time.perf_counter()
    try:
        result = METHODS[params["method"]].run(params, spec.fixed)
        error = None
    except Exception as exc:  # the cell failed: record it, let the others go on
        result, error = None, "".join(traceback.format_exception_only(type(exc), exc)).strip()
    store.write_cell(path, spec, index, result, all_steps)
    return index, params, error, time.perf_counter() - start


def pending_cells(spec: SweepSpec, done):
    """Cells still to run. A method that ignores ``step`` runs once (at the first step)."""
    step_axis = spec.dims.index("step")
    for index, params in spec.cells():
        all_steps = not METHODS[params["method"]].uses_step
        if all_steps and index[step_axis] != 0:
            continue
        yield index, params, all_steps, bool(done[index])


def _label(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


class CellProgress:
    """``[done/total] cell parameters`` lines on stderr (a redrawn line on a terminal)."""

    def __init__(self, total: int, enabled: bool, stream=None):
        self.total, self.count = total, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = self.stream.isatty()

    def update(self, params: dict, error: str | None, seconds: float) -> None:
        self.count += 1
        if not self.enabled:
            return
        state = f"FAILED: {error}" if error else f"{seconds:.1f}s"
        end = "" if self.tty and not error else "\n"
        prefix = "\r\033[K" if self.tty else ""
        self.stream.write(f"{prefix}[{self.count}/{self.total}] {_label(params)} {state}{end}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty and self.count:
            self.stream.write("\n")


def run_sweep(spec: SweepSpec, out, client=None, *, overwrite: bool = False,
              progress: bool = True) -> SweepSummary:
    """Run (or resume) ``spec`` into the zarr store ``out``.

    Parameters
    ----------
    spec : SweepSpec
    out : str or os.PathLike
        The cube's zarr store. Created if missing; if it holds the same spec,
        the cells already done are skipped; another spec is refused unless
        ``overwrite``.
    client : distributed.Client, optional
        Run the cells as tasks on its workers (they must see ``out``); ``None``
        runs them here, one after the other.
    """
    out = os.fspath(out)
    start = time.perf_counter()
    if store.check_output(out, spec, overwrite):
        store.create(out, spec)
    done = store.done_mask(out)
    cells = list(pending_cells(spec, done))
    summary = SweepSummary(total=len(cells))
    todo = [(index, params, all_steps) for index, params, all_steps, is_done in cells if not is_done]
    summary.skipped = len(cells) - len(todo)
    bar = CellProgress(len(todo), enabled=progress)
    if client is None:
        results = (compute_cell(out, spec, *cell) for cell in todo)
    else:
        from distributed import as_completed

        futures = [client.submit(compute_cell, out, spec, *cell, pure=False) for cell in todo]
        results = (future.result() for future in as_completed(futures))
    for index, params, error, seconds in results:
        bar.update(params, error, seconds)
        if error is None:
            summary.ran += 1
        else:
            summary.failed += 1
            with open(store.failures_path(out), "a") as fh:
                fh.write(json.dumps({"cell": params, "error": error,
                                     "time": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
    bar.close()
    summary.wall_s = time.perf_counter() - start
    return summary
