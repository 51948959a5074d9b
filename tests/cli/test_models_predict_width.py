"""``predict --data`` whose features are not the model's: one line in the command line's
words (the model's ``n_features_in_`` and the data's width, not the API's
``n_features``), exit 2, before any work (no scheduler is reached); a file without a
header that reaches fewer features is scored with the others at zero."""

import json

import numpy as np
import pytest

from tests.support.helpers import one_line, run_cli, run_main

D1, D2 = 20, 10
UNREACHABLE = ("--scheduler", "tcp://127.0.0.1:9")  # reached only after the input is checked


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from onebit_dask import OneBitMultiLabel, SyntheticProblem

    path = tmp_path_factory.mktemp("predict") / "m.zarr"
    OneBitMultiLabel(2, batch_size=1000, n_iter=1, random_state=0, engine="local").fit(
        SyntheticProblem(D1, D2, 2, seed=0)).save(path)
    return path


def xc_file(path, lines, header=None):
    path.write_text("".join(([header + "\n"] if header else []) + [f"{line}\n" for line in lines]))
    return path


@pytest.mark.parametrize("header, lines, width, how", [
    ("2 30 10", ["1 0:1.0 25:0.5", "3 1:1.0"], 30, "its header declares them"),
    ("2 12 10", ["1 0:1.0 5:0.5", "3 11:1.0"], 12, "its header declares them"),
    (None, ["1 0:1.0 25:0.5", "3 1:1.0 29:2"], 30, "feature indices up to 29"),
])
def test_a_file_of_another_width_is_refused_naming_both_widths(model, tmp_path, header, lines,
                                                               width, how):
    data = xc_file(tmp_path / "x.txt", lines, header)
    line = one_line(run_main("predict", model, "--data", data, *UNREACHABLE), 2)
    assert (f"--data {str(data)!r} has {width} features ({how}), but the model was fitted "
            f"with n_features_in_={D1}") in line
    assert "n_features=" not in line and "leave n_features out" not in line


def test_a_store_of_another_width_is_refused_naming_both_widths(model, tmp_path):
    from onebit_dask import SyntheticProblem
    from onebit_dask.io import write_observations

    X, labels, y = SyntheticProblem(D1 + 5, D2, 2, seed=1).draw(0, 30)
    store = write_observations(tmp_path / "o.zarr", X, labels, y, n_labels=D2)
    line = one_line(run_main("predict", model, "--data", store, *UNREACHABLE), 2)
    assert (f"has {D1 + 5} features, but the model was fitted with n_features_in_={D1}"
            in line)


def test_a_wide_file_is_refused_by_a_real_process(model, tmp_path):
    data = xc_file(tmp_path / "x.txt", ["1 0:1.0 25:0.5"], "1 30 10")
    proc = run_cli("predict", model, "--data", data, *UNREACHABLE)
    line = one_line(proc, 2)
    assert "has 30 features" in line and f"n_features_in_={D1}" in line
    assert proc.stdout == ""


def test_a_file_without_a_header_may_reach_fewer_features(model, tmp_path):
    from onebit_dask import OneBitMultiLabel
    from onebit_dask.io.xc import read_xc

    data = xc_file(tmp_path / "x.txt", ["1 0:1.0 5:0.5", "3 1:1.0 11:2"])
    out = run_main("predict", model, "--data", data, "--json", "--top-k", 3)
    assert out.returncode == 0, out.stderr
    X = read_xc(data, n_features=D1)[0]
    scores = OneBitMultiLabel.load(model).decision_function(X)
    assert json.loads(out.stdout)["labels"] == np.argsort(
        -scores, axis=1, kind="stable")[:, :3].tolist()
