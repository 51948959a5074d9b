"""predict and evaluate (onebit_dask.cli.models) on saved models: fit --save then predict
and evaluate, a checkpoint resumed by the same command, bad input (exit 2) and damaged
models (exit 1) as one line; on real zarr stores and real processes."""

import json
import os
import re
import shutil

import numpy as np
import pytest
import zarr

from onebit_dask import OneBitMultiLabel
from onebit_dask.io import write_observations
from onebit_dask.testing import computed

from tests.support.helpers import run_cli, run_main
from tests.support.models import DAMAGES, FIT, PARAMS, PROBLEM, fit_reference, intact, user_dir

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The reference fit (tests/support/models.py), saved."""
    return fit_reference().save(tmp_path_factory.mktemp("saved") / "model.zarr")


def test_cli_fit_save_then_predict_and_evaluate(tmp_path):
    model = str(tmp_path / "model.zarr")
    checkpoint = str(tmp_path / "ckpt.zarr")
    user_dir(f"{model}.old")  # the user's, beside it (issue 18 item 2): left alone
    fitted = run_cli(*FIT, "--save", model, "--checkpoint", checkpoint)  # the real command
    assert fitted.returncode == 0, fitted.stderr
    assert intact(f"{model}.old")
    result = json.loads(fitted.stdout)
    est = OneBitMultiLabel.load(model)
    assert est.history_ == result["history"]
    obs = write_observations(tmp_path / "obs.zarr", *PROBLEM.draw(0, 50), n_labels=30)
    X = zarr.open_group(obs, mode="r")["X"][:4]
    status, out, err = run_main("predict", model, "--data", obs, "--top-k", 3, "--rows", 4,
                                "--json")
    assert status == 0, err
    out = json.loads(out)
    scores = (X.astype(np.float64) @ est.A_) @ est.B_.T + est.intercept_
    assert out["labels"] == np.argsort(-scores, axis=1, kind="stable")[:, :3].tolist()
    np.testing.assert_allclose(out["scores"], -np.sort(-scores, axis=1)[:, :3], rtol=1e-12)
    status, out, err = run_main("evaluate", model, "--json")
    assert status == 0, err
    metrics = json.loads(out)
    for key in ("auc", "hamming_loss", "spectral_error", "frobenius_error"):
        assert metrics[key] == result[key]
    # the checkpoint: the same command again resumes from it (nothing left to do)
    status, out, err = run_main(*FIT, "--checkpoint", checkpoint)
    assert status == 0, err
    assert computed(json.loads(out)["history"]) == computed(result["history"])


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """An observations store and a model fitted on it (not on a synthetic problem)."""
    tmp = tmp_path_factory.mktemp("stores")
    (tmp / "afile.txt").write_text("mine")
    obs = write_observations(tmp / "obs.zarr", *PROBLEM.draw_batches(range(2), 4000),
                             n_labels=30)
    OneBitMultiLabel(2, **dict(PARAMS, n_iter=1)).fit(obs).save(tmp / "model.zarr")
    return tmp


@pytest.mark.parametrize("args, message", [
    (["predict", "{tmp}/missing.zarr", "--data", "{tmp}/obs.zarr"], "does not exist"),
    (["predict", "{tmp}/obs.zarr", "--data", "{tmp}/obs.zarr"], "not an onebit-dask model"),
    (["evaluate", "{tmp}"], "not an onebit-dask model store"),
    (["predict", "{tmp}/model.zarr", "--data", "{tmp}/missing.zarr"], "does not exist"),
    (["predict", "{tmp}/model.zarr", "--data", "{tmp}/obs.zarr", "--top-k", "31"], "--top-k=31"),
    (["evaluate", "{tmp}/model.zarr"], "not fitted on a synthetic problem"),
    ([*FIT, "--save", "{tmp}/model.zarr"], "exists"),
    ([*FIT, "--checkpoint-every", "2"], "--checkpoint-every needs --checkpoint"),
    ([*FIT, "--checkpoint", "{tmp}/model.zarr"], "a saved model, not a checkpoint"),
    # issue 18 item 5: targets checked before the work
    ([*FIT, "--save", "{tmp}/ck.zarr", "--checkpoint", "{tmp}/ck.zarr"], "are one path"),
    ([*FIT, "--save", "{tmp}/afile.txt/m.zarr"], "afile.txt' is not a directory"),
    ([*FIT, "--save", "{tmp}/nodir/m.zarr"], "nodir' does not exist"),
    ([*FIT, "--save", ""], "--save='' is not allowed"),
    ([*FIT, "--checkpoint", ""], "checkpoint='' is not allowed"),
])
def test_cli_bad_input_exits_2_with_one_line(stores, args, message):
    before = sorted(os.listdir(stores))
    status, out, err = run_main(*[a.format(tmp=stores) for a in args])
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], err
    assert out == ""
    assert sorted(os.listdir(stores)) == before  # nothing written, nothing removed


def test_cli_damaged_model_exits_1_with_one_line(stores, tmp_path):
    damaged = tmp_path / "damaged.zarr"
    shutil.copytree(stores / "model.zarr", damaged)
    shutil.rmtree(damaged / "blocks" / "3")
    status, out, err = run_main("predict", damaged, "--data", stores / "obs.zarr")
    assert status == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "block 3" in lines[0] and "damaged" in lines[0], err


def test_damaged_model_exits_1_with_one_line_naming_the_part(saved, stores, tmp_path):
    cases = {"predict": ("chunk of blocks/2/B", ["--data", stores / "obs.zarr"]),
             "evaluate": ("NaN in B", [])}
    for command, (case, extra) in cases.items():
        path = tmp_path / f"{command}.zarr"
        shutil.copytree(saved, path)
        DAMAGES[case][0](str(path))
        status, out, err = run_main(command, path, *extra)
        assert status == 1 and out == "", err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0], err
        assert re.search(DAMAGES[case][1], lines[0]), err
    proc = run_cli("evaluate", str(tmp_path / "evaluate.zarr"))  # one real process
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "is nan" in proc.stderr


def test_cli_predict_by_probability(stores, tmp_path):
    """``predict --by proba``: the model's ``predict_top_k(X, k, by="proba")`` (labels and
    probabilities); refused in one line, before anything is read, for a model without a
    fitted link (``partial_fit``) and for another ranking."""
    model, obs = stores / "model.zarr", stores / "obs.zarr"
    X = zarr.open_group(obs, mode="r")["X"][:4]
    status, out, err = run_main("predict", model, "--data", obs, "--top-k", 3, "--rows", 4,
                                "--by", "proba", "--json")
    assert status == 0, err
    labels, proba = OneBitMultiLabel.load(model).predict_top_k(X, 3, by="proba")
    assert json.loads(out)["labels"] == labels.tolist()
    assert json.loads(out)["scores"] == proba.tolist()
    unlinked = tmp_path / "partial.zarr"
    OneBitMultiLabel(2, **PARAMS).partial_fit(*PROBLEM.draw(0, 2000), n_labels=30).save(unlinked)
    for args, message in ((["--by", "proba"], "--by proba is not allowed with this model"),
                          (["--by", "rank"], "--by")):
        status, out, err = run_main("predict", unlinked, "--data", obs, *args)
        assert status == 2 and out == "" and message in err, err
        assert len(err.strip().splitlines()) == 1, err
