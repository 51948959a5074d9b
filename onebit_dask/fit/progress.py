"""The progress of the steps of a fit: ``tqdm.auto``'s bar where someone watches (a
widget in Jupyter, a redrawn line in a terminal), and one plain line a step in a file or a
pipe (a log has no use for carriage returns)."""

from __future__ import annotations

import sys


def _watched(stream) -> bool:
    """Whether ``stream`` is a terminal, or the fit runs in a Jupyter kernel."""
    if "ipykernel" in sys.modules:
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class StepProgress:
    """``step i/T``, observations per second and the last AUC.

    Parameters
    ----------
    total : int
        Steps of the fit (``n_iter + 1``).
    done : int, default 0
        Steps already done (those a resumed checkpoint holds): the bar starts there.
    enabled : bool, default True
        Draw the bar (``OneBitMultiLabel(progress=...)``); whether stderr is a terminal
        does not matter.
    stream : file-like, optional
        Where to draw (``sys.stderr`` at the start of the fit by default).
    """

    def __init__(self, total: int, *, done: int = 0, enabled: bool = True, stream=None):
        self.total = total
        self.enabled = enabled
        self.stream = stream
        self.done = done
        self.bar = None

    def __enter__(self):
        if self.enabled and _watched(self.stream or sys.stderr):
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, initial=self.done, desc="step", unit="step",
                            file=self.stream, dynamic_ncols=True, leave=True)
        return self

    def update(self, record: dict) -> None:
        self.done += 1
        if not self.enabled:
            return
        rate = record["n_samples"] / max(record["fit_s"], 1e-9)
        postfix = {"obs/s": f"{rate:,.0f}"}
        if "auc" in record:
            postfix["auc"] = f"{record['auc']:.4f}"
        if self.bar is None:  # a file or a pipe: one line a step
            stream = self.stream or sys.stderr
            shown = "  ".join(f"{k}={v}" for k, v in postfix.items())
            print(f"step {self.done}/{self.total}  {shown}", file=stream, flush=True)
            return
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(1)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
        return False
