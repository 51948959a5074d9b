import json

import pytest

from onebit_dask.cli import main

from tests.support.helpers import FILES, fit_args, run_cli, run_main

SMALL = ["fit", "--workers", "0", *fit_args(batch_size=3000, n_iter=3, n_test=300)[1:]]


@pytest.mark.integration
def test_fit_json_is_one_object():
    proc = run_cli(*SMALL, "--json", "--seed", "4")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)  # exactly one JSON document
    for key in ("spectral_error", "frobenius_error", "hamming_loss", "auc", "wall_s",
                "n_samples", "d1", "d2", "rank", "seed"):
        assert key in result
    assert result["n_samples"] == 4 * 3000
    assert (result["d1"], result["d2"], result["rank"], result["seed"]) == (20, 10, 2, 4)
    assert 0.5 < result["auc"] <= 1 and 0 <= result["frobenius_error"] <= 2


def test_fit_same_seed_same_numbers(capsys):
    outs = []
    for _ in range(2):
        assert main([*SMALL, "--json", "--quiet"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    for key in ("auc", "spectral_error", "frobenius_error", "hamming_loss"):
        assert outs[0][key] == outs[1][key]


def test_fit_human_summary(capsys):
    assert main([*SMALL, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "auc" in out and "frobenius_error" in out and "observations" in out


@pytest.mark.parametrize("args, fragment", [
    (["--rank", "0"], "argument --rank: '0' is not allowed: give an integer >= 1"),
    (["--rank", "11"], "--rank 11 is not allowed: give at most min(d1, d2) = 10 (--d1 and "
                       "--d2 give 20 features and 10 labels)"),
    (["--batch-size", "0"], "argument --batch-size: '0' is not allowed: give an integer >= 1"),
    (["--n-iter", "-1"], "argument --n-iter: '-1' is not allowed: give an integer >= 0"),
    (["--flip", "0.5"], "argument --flip: '0.5' is not allowed: give a number in [0, 0.5)"),
    (["--noise-std", "-0.1"], "argument --noise-std: '-0.1' is not allowed: give a number >= 0"),
    (["--step", "fast"], "argument --step: invalid choice: 'fast'"),
    (["--seed", "-3"], "argument --seed: '-3' is not allowed: give an integer >= 0"),
    (["--shards", "0"], "argument --shards: '0' is not allowed: give an integer >= 1"),
    (["--positive-rate", "0.5:0.1"], "argument --positive-rate: '0.5:0.1' is not allowed: "
                                     "give none, a rate P with 0 < P < 1, or a range"),
    (["--d1", "abc"], "argument --d1: 'abc' is not an integer"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_input_exits_2_with_one_line(args, fragment, capsys):
    if args in (["--rank", "11"], ["--d1", "abc"]):  # real processes: a check, argparse
        proc = run_cli(*SMALL, *args)
        status, out, err = proc.returncode, proc.stdout, proc.stderr
    else:  # the same two paths of main(), in this process (no interpreter start, ~2 s)
        status = main([*SMALL, *args])
        out, err = capsys.readouterr()
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert fragment in lines[0] and "Traceback" not in err
    assert out == ""


def test_fit_sampler_option():
    import numpy as np

    from onebit_dask import OneBitMultiLabel, SyntheticProblem

    args = fit_args("--workers", "0", "--json", "--quiet", d1=30, d2=20, batch_size=3000,
                    n_test=300)
    # in this process: test_bad_input_exits_2_with_one_line runs real ones
    proc = run_main(*args, "--sampler", "implicit")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "argument --sampler: invalid choice: 'implicit'" in proc.stderr
    out = run_main(*args, "--sampler", "explicit")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    est = OneBitMultiLabel(2, batch_size=3000, n_iter=2, random_state=0).fit(
        SyntheticProblem(30, 20, 2, n_test=300, sampler="explicit"))
    assert got["sampler"] == "explicit"
    assert np.isclose(got["auc"], est.history_[-1]["auc"], rtol=0, atol=0)


@pytest.mark.integration  # --workers 1: a LocalCluster
def test_the_cli_logs_the_dashboard_and_leaves_dask_loggers_as_they_were(capsys):
    import logging

    import distributed  # noqa: F401  (its import sets its loggers' levels)

    dask_log = logging.getLogger("distributed")
    before = dask_log.level
    assert main([*SMALL[:1], "--workers", "1", *SMALL[3:]]) == 0
    err = capsys.readouterr().err
    assert "dask dashboard: http://127.0.0.1:" in err  # the onebit_dask.cli.client logger
    assert dask_log.level == before  # quieted only while the command ran
    assert not logging.getLogger("onebit_dask").handlers  # the CLI's handler is gone


def test_fit_positive_rate(capsys):
    assert main([*SMALL, "--json", "--quiet", "--positive-rate", "0.05:0.3"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["positive_rate"] == [0.05, 0.3]
    assert main([*SMALL, "--quiet", "--positive-rate", "0:0.3"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert ("argument --positive-rate: '0:0.3' is not allowed: give none, a rate P with "
            "0 < P < 1, or a range P_MIN:P_MAX with 0 < P_MIN <= P_MAX < 1") in err


def test_predict_takes_the_files_fit_takes(tmp_path):
    """``predict --data FILE`` reads an XC file's features (as ``fit --data`` does): its top
    labels are those of the saved model's scores."""
    import os

    import numpy as np

    from onebit_dask import OneBitMultiLabel
    from onebit_dask.io.xc import read_xc

    model = str(tmp_path / "m.zarr")
    fitted = run_main("fit", "--data", os.path.join(FILES, "emotions_train.txt"), "--rank", 2,
                      "--batch-size", 2000, "--n-iter", 2, "--workers", 0, "--quiet",
                      "--save", model)
    assert fitted.returncode == 0, fitted.stderr
    test = os.path.join(FILES, "emotions_test.txt")
    out = run_main("predict", model, "--data", test, "--rows", 5, "--top-k", 3, "--json",
                   "--workers", 0)
    assert out.returncode == 0, out.stderr
    scores = OneBitMultiLabel.load(model).decision_function(read_xc(test)[0][:5])
    assert json.loads(out.stdout)["labels"] == np.argsort(
        -scores, axis=1, kind="stable")[:, :3].tolist()


def test_bare_command_prints_the_usage_and_a_hint():
    proc = run_main()
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("usage: onebit-dask") and "{fit,sweep," in proc.stderr
    assert lines[-1].startswith("onebit-dask: error: give a command") and "--help" in lines[-1]


def test_a_closed_pipe_ends_list_quietly(tmp_path):
    """``onebit-dask list | head -1``: the reader has left; no error line, status 141.
    The pipe's reading end is closed before the command starts, so its first write
    fails whatever the two processes' timing (a live ``head`` races the writer: output
    that fits the pipe's buffer is written whole before ``head`` leaves)."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "onebit_dask", "list"], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write)
    assert proc.returncode == 141, proc
    assert "Error" not in proc.stderr and "error" not in proc.stderr, proc.stderr


def test_predict_json_gives_every_row_by_default(tmp_path):
    from onebit_dask import OneBitMultiLabel, SyntheticProblem
    from onebit_dask.io.observations import write_observations

    problem = SyntheticProblem(10, 8, 2, seed=0)
    model = OneBitMultiLabel(2, batch_size=1000, n_iter=1, random_state=0,
                             engine="local").fit(problem)
    model.save(tmp_path / "m.zarr")
    X, labels, y = problem.draw(0, 25)
    write_observations(tmp_path / "o.zarr", X, labels, y, n_labels=8)
    out = run_main("predict", tmp_path / "m.zarr", "--data", tmp_path / "o.zarr", "--json")
    assert out.returncode == 0 and len(json.loads(out.stdout)["labels"]) == 25
    text = run_main("predict", tmp_path / "m.zarr", "--data", tmp_path / "o.zarr")
    assert text.stdout.count("row ") == 10
