"""A fit with progress=True shows its steps when stderr is not a terminal (a notebook,
a pipe, a log file), and nothing with progress=False."""

import re
import sys

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
