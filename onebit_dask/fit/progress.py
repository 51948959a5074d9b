"""The progress bar of the steps of a fit (``tqdm.auto``: a widget in Jupyter, a redrawn
line in a terminal, periodic lines in a file or a pipe)."""

from __future__ import annotations


class StepProgress:
    """``step i/T``, observations per second and the last AUC.

    Parameters
    ----------
    total : int
        Steps of the fit (``n_iter + 1``).
    enabled : bool, default True
        Draw the bar (``OneBitMultiLabel(progress=...)``); whether stderr is a terminal
        does not matter.
    stream : file-like, optional
        Where to draw (``sys.stderr`` at the start of the fit by default).
    """

    def __init__(self, total: int, *, enabled: bool = True, stream=None):
        self.total = total
        self.enabled = enabled
        self.stream = stream
        self.done = 0
        self.bar = None

    def __enter__(self):
        if self.enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, desc="step", unit="step", file=self.stream,
                            dynamic_ncols=True, leave=True)
        return self

    def update(self, record: dict) -> None:
        self.done += 1
        if self.bar is None:
            return
        rate = record["n_samples"] / max(record["fit_s"], 1e-9)
        postfix = {"obs/s": f"{rate:,.0f}"}
        if "auc" in record:
            postfix["auc"] = f"{record['auc']:.4f}"
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(1)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
        return False
