"""A small progress bar of the steps of a fit, on stderr."""

from __future__ import annotations

import sys
import time


class StepProgress:
    """``step i/T``, observations per second and the last AUC, redrawn in place.

    Draws only when ``enabled`` and ``stream`` is a terminal (or ``force``).
    """

    def __init__(self, total: int, *, enabled: bool = True, stream=None, force: bool = False):
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and (force or self.stream.isatty())
        self.done = 0

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def update(self, record: dict) -> None:
        self.done += 1
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        width = 24
        fill = int(width * self.done / self.total)
        rate = record["n_samples"] / max(record["fit_s"], 1e-9)
        text = (f"\rstep {self.done}/{self.total} [{'#' * fill}{'.' * (width - fill)}] "
                f"{rate:,.0f} obs/s {elapsed:6.1f}s")
        if "auc" in record:
            text += f" auc={record['auc']:.4f}"
        self.stream.write(text)
        self.stream.flush()

    def __exit__(self, *exc):
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
        return False
