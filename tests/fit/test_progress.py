"""A fit with progress=True shows its steps when stderr is not a terminal (a notebook,
a pipe, a log file), and nothing with progress=False."""

import re
import sys

import pytest

from onebit_dask import OneBitMultiLabel, SyntheticProblem


def _fit(progress):
    problem = SyntheticProblem(20, 10, 2, seed=1, n_test=200)
    OneBitMultiLabel(2, batch_size=2000, n_iter=3, random_state=0, progress=progress
                     ).fit(problem)


def test_progress_shows_on_a_stderr_that_is_not_a_terminal(capsys):
    _fit(True)
    err = capsys.readouterr().err
    assert not sys.stderr.isatty()
    assert re.search(r"\b4/4\b", err), err  # all n_iter + 1 steps counted
    _fit(False)
    assert capsys.readouterr().err == ""


def test_a_log_file_gets_one_plain_line_a_step(tmp_path):
    """Into a file (not a terminal) each step is a line of its own, without the carriage
    returns of a redrawn bar; a terminal gets tqdm's bar."""
    from onebit_dask.fit.progress import StepProgress

    log = tmp_path / "fit.log"
    with open(log, "w") as stream, StepProgress(3, stream=stream) as progress:
        for t in range(3):
            progress.update({"n_samples": 1000 * (t + 1), "fit_s": 0.5, "auc": 0.9})
    text = log.read_text()
    assert "\r" not in text
    assert text.splitlines() == [f"step {t}/3  obs/s={2000 * t:,}  auc=0.9000"
                                 for t in (1, 2, 3)]

    class Terminal:
        def __init__(self):
            self.parts = []

        def isatty(self):
            return True

        def write(self, text):
            self.parts.append(text)

        def flush(self):
            pass

    terminal = Terminal()
    with StepProgress(3, stream=terminal) as progress:
        progress.update({"n_samples": 1000, "fit_s": 0.5})
    assert "\r" in "".join(terminal.parts)


def test_a_resumed_fit_counts_on_from_its_checkpoint(tmp_path, capsys, monkeypatch):
    """A fit stopped after its checkpoint of iteration 2 and resumed shows steps 4/5 and
    5/5, not 1/5."""
    from onebit_dask.persist import Checkpoint

    problem = SyntheticProblem(20, 10, 2, seed=1, n_test=200)
    est = OneBitMultiLabel(2, batch_size=2000, n_iter=4, random_state=0, progress=True)
    checkpoint = str(tmp_path / "ck.zarr")
    write = Checkpoint.write

    def stop_after_iteration_2(self, state, engine):
        write(self, state, engine)
        if state.n_steps == 2:
            raise RuntimeError("stopped")

    with monkeypatch.context() as patched:
        patched.setattr(Checkpoint, "write", stop_after_iteration_2)
        with pytest.raises(RuntimeError, match="stopped"):
            est.fit(problem, checkpoint=checkpoint)
    capsys.readouterr()
    est.fit(problem, checkpoint=checkpoint)
    steps = re.findall(r"step (\d+)/5", capsys.readouterr().err)
    assert steps == ["4", "5"], steps
