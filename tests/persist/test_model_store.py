"""Model stores: save/load round trips, checkpoints that survive a SIGKILL, and the CLI,
on real zarr stores, real subprocesses and a real 2-worker LocalCluster."""

import contextlib
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import zarr
from distributed import get_task_stream

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.persist import model_store as model_io
from onebit_dask.engine import placement
from onebit_dask.engine.dask_engine import DaskEngine
from onebit_dask.io import write_observations
from onebit_dask.persist import SaveError
from onebit_dask.io.stores.atomic import ForeignPathError
from onebit_dask.io.stores.lock import StoreLock, StoreLockedError
from onebit_dask.io.stores.zarr_format import DamagedStoreError
from onebit_dask.testing import assert_same_fit, computed

from tests.support.filesystems import read_only_dir, small_disk
from tests.support.helpers import fit_args, run_cli, run_main

pytestmark = pytest.mark.integration
PROBLEM = SyntheticProblem(20, 30, 2, flip=0.02, seed=3, n_test=300)
# Across engines, the explicit sampler: projected draws depend on the bits of A, and the
# engines' initial states may differ in the last bits (see the report to the lead)
EXPLICIT = SyntheticProblem(20, 30, 2, flip=0.02, seed=3, n_test=300, sampler="explicit")
PARAMS = dict(batch_size=4000, n_iter=4, n_shards=4, random_state=0)
X_NEW = np.random.default_rng(5).standard_normal((9, 20))


@pytest.fixture(scope="module")
def reference():
    """The uninterrupted fit, in this process, without checkpoints."""
    return OneBitMultiLabel(2, **PARAMS).fit(PROBLEM)


@pytest.fixture(scope="module")
def explicit_reference():
    return OneBitMultiLabel(2, **PARAMS).fit(EXPLICIT)


@pytest.fixture
def cluster(client2):
    """The session's 2-worker cluster (tests/conftest.py)."""
    return client2


def assert_same_model(a, b, history=True):
    assert_same_fit(a, b, X_NEW, history)


# -- save / load ---------------------------------------------------------------------------
def test_save_load_round_trip(reference, tmp_path):
    path = reference.save(tmp_path / "model.zarr")
    assert path == str(tmp_path / "model.zarr")
    model = OneBitMultiLabel.load(path)
    assert_same_model(model, reference)
    assert model.history_ == reference.history_  # fit_s included: they are the same numbers
    params = reference.get_params()
    assert model.get_params() == params
    assert (model.n_features_in_, model.n_labels_) == (20, 30)
    # the store: tops, one group per label block (sizes differ by one), versions, no pickle
    root = zarr.open_group(path, mode="r")
    assert root.attrs["format"] == "onebit-dask/model" and root.attrs["version"] == 3
    assert set(root.attrs["versions"]) >= {"onebit_dask", "numpy", "zarr"}
    assert root.attrs["data"] == {"kind": "SyntheticProblem", "d1": 20, "d2": 30, "rank": 2,
                                  "flip": 0.02, "noise_std": 0.0, "seed": 3, "n_test": 300,
                                  "max_eval_labels": 1000, "sampler": "conditional",
                                  "positive_rate": None}
    np.testing.assert_array_equal(root["Q_top"][...], reference.A_)
    sizes = [root[f"blocks/{s}/B"].shape[0] for s in range(4)]
    assert sizes == [7, 8, 7, 8]
    np.testing.assert_array_equal(np.concatenate([root[f"blocks/{s}/B"][...] for s in range(4)]),
                                  reference.B_)
    for dirpath, _, files in os.walk(path):
        assert not any(f.endswith((".pkl", ".pickle")) for f in files)
    # the loaded model's test metrics are the fit's last ones
    last = {k: v for k, v in reference.history_[-1].items()
            if k in ("spectral_error", "frobenius_error", "hamming_loss", "auc")}
    assert model.evaluate(PROBLEM) == last
    # a loaded model trains on as the original does
    X, labels, y = PROBLEM.draw(9, 2000)
    original = OneBitMultiLabel(2, **PARAMS).fit(PROBLEM)  # not the shared reference
    assert_same_model(model.partial_fit(X, labels, y), original.partial_fit(X, labels, y))


def test_predict_top_k_of_loaded_model_is_argsort_of_dense_scores(reference, tmp_path):
    model = OneBitMultiLabel.load(reference.save(tmp_path / "m.zarr"))
    scores = X_NEW @ reference.A_ @ reference.B_.T + reference.intercept_
    labels, best = model.predict_top_k(X_NEW, 5)
    np.testing.assert_array_equal(labels, np.argsort(-scores, axis=1, kind="stable")[:, :5])
    np.testing.assert_allclose(best, -np.sort(-scores, axis=1)[:, :5], rtol=1e-12)


def _block_writers(stream, name):
    """The workers of the tasks of ``name`` in a task stream, one entry per task."""
    return [t["worker"] for t in stream if name in str(t["key"])]


def test_save_and_load_on_cluster_each_block_by_its_worker(explicit_reference, cluster, tmp_path,
                                                           monkeypatch):
    """Blocks kept on the workers (as for a large model) are written and read there: one
    task per block, on the cluster's workers (which worker runs which block is Dask's
    choice: under load both blocks may be placed on one worker)."""
    reference = explicit_reference
    monkeypatch.setattr(placement, "KEEP_LOCAL_LIMIT", 0)
    with cluster.as_current():
        est = OneBitMultiLabel(2, engine="dask", **PARAMS).fit(EXPLICIT)
    assert isinstance(est._state.blocks, DaskEngine)
    workers = set(cluster.scheduler_info()["workers"])
    n_blocks = len(est._state.blocks.handles)
    assert {w for h in est._state.blocks.handles for w in cluster.who_has(h)[h.key]} <= workers
    with get_task_stream(cluster) as ts:
        path = est.save(tmp_path / "model.zarr")
    writers = _block_writers(ts.data, "onebit-write-block-")
    assert len(writers) == n_blocks and set(writers) <= workers
    with get_task_stream(cluster) as ts, cluster.as_current():
        on_cluster = OneBitMultiLabel.load(path, engine="dask")
    readers = _block_writers(ts.data, "onebit-read-block-")
    assert len(readers) == n_blocks and set(readers) <= workers
    assert isinstance(on_cluster._state.blocks, DaskEngine)
    assert_same_model(on_cluster, reference)
    monkeypatch.undo()
    assert_same_model(OneBitMultiLabel.load(path), reference)  # read in this process


def test_save_refuses_existing_paths_and_load_refuses_non_models(reference, tmp_path):
    path = reference.save(tmp_path / "model.zarr")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        reference.save(path)
    other = OneBitMultiLabel(2, **dict(PARAMS, n_iter=1)).fit(PROBLEM)
    other.save(path, overwrite=True)
    assert OneBitMultiLabel.load(path).n_steps_ == 1
    assert no_leftovers(path)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an onebit-dask model store"):
        reference.save(plain, overwrite=True)
    assert (plain / "keep.txt").read_text() == "mine"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        OneBitMultiLabel.load(tmp_path / "missing.zarr")
    with pytest.raises(ValueError, match="not an onebit-dask model store"):
        OneBitMultiLabel.load(plain)
    obs = write_observations(tmp_path / "obs.zarr", *PROBLEM.draw(0, 100), n_labels=30)
    with pytest.raises(ValueError, match="format='onebit-dask/observations'"):
        OneBitMultiLabel.load(obs)
    # a store whose writer died before the attrs (the completion mark) is not a model
    half = tmp_path / "half.zarr"
    shutil.copytree(path, half)
    zarr.open_group(half, mode="r+").attrs.pop("format")
    with pytest.raises(ValueError, match="interrupted"):
        OneBitMultiLabel.load(half)
    # a damaged block names itself
    shutil.rmtree(os.path.join(path, "blocks", "2"))
    with pytest.raises(DamagedStoreError, match="block 2"):
        OneBitMultiLabel.load(path)


def no_leftovers(path):
    """No temporary, replaced copy or lock of the store at ``path`` is left beside it."""
    head, tail = os.path.split(str(path))
    return not glob.glob(os.path.join(head, f".{tail}.onebit-*")) and not os.path.exists(
        f"{path}.lock")


def temporaries(path, kind="tmp"):
    head, tail = os.path.split(str(path))
    return glob.glob(os.path.join(head, f".{tail}.onebit-{kind}-*"))


def mark_as_ours(directory, token):
    """What :mod:`onebit_dask.io.stores.atomic` writes into its own temporaries."""
    with open(os.path.join(directory, ".onebit-dask-temporary.json"), "w") as fh:
        json.dump({"format": "onebit-dask/temporary", "token": token}, fh)


# -- checkpoints -----------------------------------------------------------------------------
KILLED_FIT = textwrap.dedent("""
    import sys, time
    from onebit_dask import OneBitMultiLabel, SyntheticProblem
    from onebit_dask.fit import loop as fitting
    from onebit_dask.persist import model_store as model_io

    phase, path, sampler = sys.argv[1:]
    # hang at a known point, where the parent's SIGKILL lands
    if phase == "write":  # ... after the first block of the 4th checkpoint (iteration 3)
        write_block, calls = model_io.write_block, []
        def hang_in_write(*args):
            out = write_block(*args)
            calls.append(1)
            if len(calls) == 3 * 4 + 1:
                time.sleep(3600)
            return out
        model_io.write_block = hang_in_write
    else:  # ... after iteration 3, before its checkpoint
        advance = fitting.advance
        def hang_after_step(settings, state, *args):
            advance(settings, state, *args)
            if state.n_steps == 3:
                time.sleep(3600)
        fitting.advance = hang_after_step
    problem = SyntheticProblem(20, 30, 2, flip=0.02, seed=3, n_test=300, sampler=sampler)
    OneBitMultiLabel(2, batch_size=4000, n_iter=4, n_shards=4, random_state=0).fit(
        problem, checkpoint=path)
""")


def _checkpointed_steps(path):
    try:
        return model_io.read_attrs(path)["n_steps"]
    except (OSError, ValueError):
        return -1


def kill_mid_fit(path, phase, sampler):
    """Run the fit in a subprocess and SIGKILL it once the checkpoint of iteration 2 is
    whole: during iteration 3, or (``"write"``) while its checkpoint is being written."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", KILLED_FIT, phase, str(path), sampler], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300  # only stops a hang: the child waits an hour
    try:
        while time.time() < deadline and proc.poll() is None:
            ready = _checkpointed_steps(path) == 2
            if phase == "write":
                ready = ready and any(os.path.isdir(os.path.join(t, "blocks", "0", "B"))
                                      for t in temporaries(path))
            if ready:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.02)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    return model_io.read_attrs(path)["n_steps"]


def resume_and_check(path, steps, problem, reference, client=None, killed=None):
    resumed_from = OneBitMultiLabel.load(killed or path)
    assert resumed_from.n_steps_ == steps
    with client.as_current() if client is not None else contextlib.nullcontext():
        est = OneBitMultiLabel(2, engine="local" if client is None else "dask",
                               **PARAMS).fit(problem, checkpoint=path)
    assert_same_model(est, reference)
    # the resumed fit went on from the checkpoint: its early records are the killed run's
    assert est.history_[: steps + 1] == resumed_from.history_
    assert model_io.read_attrs(str(path))["n_steps"] == PARAMS["n_iter"]
    assert no_leftovers(path)


def test_resume_after_sigkill_between_steps(reference, tmp_path):
    path = tmp_path / "ckpt.zarr"
    steps = kill_mid_fit(path, "steps", PROBLEM.sampler)
    assert steps == 2
    # a copy as if killed between the renames PATH -> .PATH.onebit-old-T and the
    # temporary -> PATH (the temporary half written): the fit resumes from the old copy
    renamed = tmp_path / "renamed.zarr"
    old = tmp_path / ".renamed.zarr.onebit-old-0123abcd"
    shutil.copytree(path, old)
    mark_as_ours(old, "0123abcd")
    half = tmp_path / ".renamed.zarr.onebit-tmp-4567ef01"
    shutil.copytree(path, half)
    mark_as_ours(half, "4567ef01")
    shutil.rmtree(half / "blocks" / "1")
    resume_and_check(path, steps, PROBLEM, reference)
    assert not os.path.exists(renamed)
    with pytest.raises(FileNotFoundError, match="an interrupted write moved aside"):
        OneBitMultiLabel.load(renamed)
    killed = tmp_path / "killed.zarr"
    shutil.copytree(old, killed)
    os.remove(killed / ".onebit-dask-temporary.json")
    resume_and_check(renamed, steps, PROBLEM, reference, killed=killed)


def test_resume_on_cluster_after_sigkill_during_a_checkpoint(explicit_reference, cluster,
                                                              tmp_path):
    path = tmp_path / "ckpt.zarr"
    steps = kill_mid_fit(path, "write", EXPLICIT.sampler)
    assert steps == 2
    [half] = temporaries(path)
    assert sorted(os.listdir(f"{half}/blocks")) == ["0", "zarr.json"]  # half written
    resume_and_check(path, steps, EXPLICIT, explicit_reference, cluster)


def test_checkpoints_on_cluster_are_written_by_the_workers(explicit_reference, cluster,
                                                           tmp_path):
    reference = explicit_reference
    path = tmp_path / "ckpt.zarr"
    with get_task_stream(cluster) as ts, cluster.as_current():
        est = OneBitMultiLabel(2, engine="dask", **PARAMS).fit(EXPLICIT, checkpoint=path,
                                                               checkpoint_every=3)
    writes = [t for t in ts.data if "onebit-write-block-" in str(t["key"])]
    assert len(writes) == 3 * 4  # 4 blocks at iterations 0, 3 (every 3) and 4 (the last)
    assert {t["worker"] for t in writes} == set(cluster.scheduler_info()["workers"])
    assert_same_model(est, reference)
    # the same fit again: nothing left to do, the final checkpoint is the model
    again = OneBitMultiLabel(2, **PARAMS).fit(EXPLICIT, checkpoint=path)
    assert_same_model(again, reference)
    assert again.history_ == est.history_


def _refused(path, est, data, match, **kwargs):
    before = model_io.read_attrs(str(path))
    with pytest.raises(ValueError, match=match) as info:
        est.fit(*data, checkpoint=path, **kwargs)
    assert f"delete '{path}'" in str(info.value)
    assert model_io.read_attrs(str(path)) == before  # the checkpoint is untouched


def test_a_checkpoint_cuts_the_lineage_on_the_cluster(explicit_reference, cluster, tmp_path,
                                                     monkeypatch):
    """After each checkpoint the blocks restart from it: the scheduler holds no earlier
    round of the fit (their tasks carry ``d1 x l`` arguments), and the fit's numbers are
    those of the uninterrupted fit. Without a checkpoint it holds every step's rounds."""
    monkeypatch.setattr(placement, "KEEP_LOCAL_LIMIT", 0)  # the fitted blocks stay there
    scheduler = cluster.cluster.scheduler

    def rounds_held(est):
        keys = {h.key for h in est._state.blocks.handles}
        assert keys <= set(scheduler.tasks)  # the model's blocks are there
        return sum(str(k).startswith("onebit-step-close-") for k in list(scheduler.tasks))

    with cluster.as_current():
        est = OneBitMultiLabel(2, engine="dask", **PARAMS).fit(
            EXPLICIT, checkpoint=tmp_path / "ckpt.zarr")
        assert rounds_held(est) == 0
        assert_same_model(est, explicit_reference)
        del est
        plain = OneBitMultiLabel(2, engine="dask", **PARAMS).fit(EXPLICIT)
        assert rounds_held(plain) == PARAMS["n_iter"] * PARAMS["n_shards"]


def test_checkpoint_of_another_fit_is_refused(tmp_path):
    path = tmp_path / "ckpt.zarr"
    params = dict(PARAMS, n_iter=1)
    OneBitMultiLabel(2, **params).fit(PROBLEM, checkpoint=path)
    other_problem = SyntheticProblem(20, 30, 2, flip=0.02, seed=4, n_test=300)
    _refused(path, OneBitMultiLabel(2, **params), (other_problem,), r"data\.seed=3 there, 4 here")
    _refused(path, OneBitMultiLabel(2, **dict(params, n_iter=2)), (PROBLEM,),
             r"params\.n_iter=1 there, 2 here")
    _refused(path, OneBitMultiLabel(2, **dict(params, step="averaged")), (PROBLEM,),
             r"params\.step='auto' there, 'averaged' here")
    # eval_every, progress and engine do not change the numbers: accepted
    OneBitMultiLabel(2, **dict(params, eval_every=0)).fit(PROBLEM, checkpoint=path)
    # arrays: identified by their shape and a hash
    X, labels, y = PROBLEM.draw_batches(range(2), 4000)
    arrays = tmp_path / "arrays.zarr"
    OneBitMultiLabel(2, **params).fit(X, labels, y, n_labels=30, checkpoint=arrays)
    y2 = y.copy()
    y2[-1] *= -1
    _refused(arrays, OneBitMultiLabel(2, **params), (X, labels, y2), r"data\.sha256=",
             n_labels=30)
    # a saved model or another directory is not a checkpoint
    model = OneBitMultiLabel(2, **params).fit(PROBLEM).save(tmp_path / "model.zarr")
    with pytest.raises(ValueError, match="a saved model, not a checkpoint"):
        OneBitMultiLabel(2, **params).fit(PROBLEM, checkpoint=model)
    with pytest.raises(ValueError, match="not an onebit-dask model store.*delete"):
        OneBitMultiLabel(2, **params).fit(PROBLEM, checkpoint=tmp_path)
    with pytest.raises(ValueError, match="checkpoint_every=2 is not allowed without checkpoint"):
        OneBitMultiLabel(2, **params).fit(PROBLEM, checkpoint_every=2)
    with pytest.raises(ValueError, match="checkpoint_every=0"):
        OneBitMultiLabel(2, **params).fit(PROBLEM, checkpoint=tmp_path / "new", checkpoint_every=0)
    with pytest.raises(TypeError, match="checkpoint=3"):
        OneBitMultiLabel(2, **params).fit(PROBLEM, checkpoint=3)
    assert not os.path.exists(tmp_path / "new")


# -- the command line -------------------------------------------------------------------------
FIT = fit_args("--quiet", "--json", workers=0, d2=30, batch_size=4000, n_iter=3, n_test=300,
               flip=0.02, seed=3)


def test_cli_fit_save_then_predict_and_evaluate(tmp_path):
    model = str(tmp_path / "model.zarr")
    checkpoint = str(tmp_path / "ckpt.zarr")
    _user_dir(f"{model}.old")  # the user's, beside it (issue 18 item 2): left alone
    fitted = run_cli(*FIT, "--save", model, "--checkpoint", checkpoint)  # the real command
    assert fitted.returncode == 0, fitted.stderr
    assert _intact(f"{model}.old")
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


# -- what the user owns is never renamed or removed --------------------------------------------
def _user_dir(path):
    os.makedirs(path)
    with open(os.path.join(path, "f"), "w") as fh:
        fh.write("x")


def _intact(path):
    with open(os.path.join(path, "f")) as fh:
        return fh.read() == "x"


def test_user_directories_named_like_old_temporaries_are_left_alone(reference, tmp_path):
    """Issue 18 item 2: ``PATH.old`` and ``PATH.tmp`` were deleted by save and checkpoint."""
    model, ckpt = tmp_path / "model.zarr", tmp_path / "ckpt.zarr"
    mine = [f"{model}.old", f"{model}.tmp", f"{ckpt}.old", f"{ckpt}.tmp"]
    for path in mine:
        _user_dir(path)
    reference.save(model)
    reference.save(model, overwrite=True)
    OneBitMultiLabel(2, **dict(PARAMS, n_iter=2)).fit(PROBLEM, checkpoint=ckpt)
    status, _, err = run_main(*FIT, "--n-iter", 1, "--save", tmp_path / "cli.zarr",
                              "--checkpoint", tmp_path / "cli-ckpt.zarr")
    assert status == 0, err
    for path in mine:
        assert _intact(path), path
    assert no_leftovers(model) and no_leftovers(ckpt)
    assert OneBitMultiLabel.load(model).n_steps_ == reference.n_steps_


def test_a_foreign_file_where_the_lock_goes_is_refused_before_any_work(reference, tmp_path):
    model = tmp_path / "model.zarr"
    lock = tmp_path / "model.zarr.lock"
    lock.write_text("my notes")
    with pytest.raises(ForeignPathError, match="model.zarr.lock.*not an onebit-dask lock"):
        reference.save(model)
    status, out, err = run_main(*FIT, "--save", model)
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "model.zarr.lock" in err and "not an onebit-dask lock" in err
    ckpt_lock = tmp_path / "ckpt.zarr.lock"
    os.mkdir(ckpt_lock)
    status, out, err = run_main(*FIT, "--checkpoint", tmp_path / "ckpt.zarr")
    assert status == 2 and "ckpt.zarr.lock" in err, err
    assert lock.read_text() == "my notes" and ckpt_lock.is_dir()
    assert not model.exists() and not (tmp_path / "ckpt.zarr").exists()


def test_only_marked_temporaries_are_recovered_or_removed(reference, tmp_path):
    """A directory named like the package's temporaries but without its marker (or with
    another token) is the user's: kept."""
    model = tmp_path / "model.zarr"
    lookalikes = [tmp_path / ".model.zarr.onebit-old-aaaa", tmp_path / ".model.zarr.onebit-tmp-bbbb"]
    for path in lookalikes:
        _user_dir(path)
    mark_as_ours(lookalikes[1], "cccc")  # a marker whose token is not the name's
    reference.save(model)
    reference.save(model, overwrite=True)
    for path in lookalikes:
        assert _intact(path)
    assert OneBitMultiLabel.load(model).n_steps_ == reference.n_steps_


# -- damaged or edited model stores -------------------------------------------------------------
def _edit_attrs(path, **changes):
    zarr.open_group(path, mode="r+").attrs.update(changes)


def _drop_chunk(path, part):
    os.remove(os.path.join(path, *part.split("/")))


def _as_int8(path):
    group = zarr.open_group(os.path.join(path, "blocks", "0"), mode="r+")
    group.create_array("B", data=group["B"][...].astype(np.int8), overwrite=True)


def _set_value(path, value):
    zarr.open_array(os.path.join(path, "blocks", "1", "B"), mode="r+")[0, 0] = value


DAMAGES = {  # issue 18 item 3, each case: (how, what the message says)
    "chunk of blocks/2/B": (lambda p: _drop_chunk(p, "blocks/2/B/c/0/0"),
                            r"the chunk blocks/2/B/c/0/0 \(rows 0\.\.6\) is missing"),
    "chunk of Q_top": (lambda p: _drop_chunk(p, "Q_top/c/0/0"),
                       r"the chunk Q_top/c/0/0 \(rows 0\.\.19\) is missing"),
    "n_labels edited": (lambda p: _edit_attrs(p, n_labels=1000),
                        r"bounds=\[0, 7, 15, 22, 30\] does not cut the n_labels=1000 labels"),
    "params.rank edited": (lambda p: _edit_attrs(
        p, params=dict(zarr.open_group(p).attrs["params"], rank=5)),
        r"Q_top has shape \(20, 4\), expected \(20, 10\)"),
    "params with an unknown key": (lambda p: _edit_attrs(
        p, params=dict(zarr.open_group(p).attrs["params"], bogus=1)),
        r"its params hold 'bogus', which OneBitMultiLabel does not take"),
    "params.step not a rule": (lambda p: _edit_attrs(
        p, params=dict(zarr.open_group(p).attrs["params"], step="fastest")),
        r"its params do not make a OneBitMultiLabel \(step='fastest' is not allowed"),
    "n_steps a string": (lambda p: _edit_attrs(p, n_steps="four"),
                         r"n_steps='four' is not an int"),
    "B as int8": (_as_int8, r"blocks/0/B has dtype int8, expected float64"),
    "NaN in B": (lambda p: _set_value(p, np.nan), r"blocks/1/B\[0, 0\] is nan"),
    "B edited": (lambda p: _set_value(p, 0.5),
                 r"blocks/1/B differs from what was written \(its SHA-256"),
    "bit_generator not NumPy's": (lambda p: _edit_attrs(
        p, rng_state=dict(zarr.open_group(p).attrs["rng_state"], bit_generator="SeedSequence")),
        r"rng_state.bit_generator='SeedSequence' is not one of NumPy's bit generators"),
    "bit_generator a function": (lambda p: _edit_attrs(
        p, rng_state={"bit_generator": "default_rng"}), r"bit_generator='default_rng'"),
}


@pytest.fixture(scope="module")
def saved(reference, tmp_path_factory):
    return reference.save(tmp_path_factory.mktemp("saved") / "model.zarr")


@pytest.mark.parametrize("case", sorted(DAMAGES))
def test_damaged_or_edited_model_store_is_refused_naming_the_part(saved, tmp_path, case):
    damage, message = DAMAGES[case]
    path = str(tmp_path / "damaged.zarr")
    shutil.copytree(saved, path)
    damage(path)
    with pytest.raises(DamagedStoreError, match=message) as info:
        OneBitMultiLabel.load(path)
    assert f"model store {path!r} is damaged" in str(info.value)


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


def test_rng_state_is_exact_for_every_json_reader(saved):
    """The 128-bit PCG64 state is a decimal string (JSON readers that use doubles round
    numbers beyond 2**53), and the loaded model's generator continues the fit's."""
    with open(os.path.join(saved, "zarr.json")) as fh:
        state = json.load(fh)["attributes"]["rng_state"]
    assert state["bit_generator"] == "PCG64"
    for key in ("state", "inc"):
        assert isinstance(state["state"][key], str) and state["state"][key].isdigit()
    model = OneBitMultiLabel.load(saved)
    reference = OneBitMultiLabel(2, **PARAMS).fit(PROBLEM)
    assert model._state.rng.bit_generator.state == reference._state.rng.bit_generator.state


# -- one writer per checkpoint, resumed only when whole ---------------------------------------
def test_a_checkpoint_held_by_another_writer_is_refused_before_any_work(tmp_path):
    """Deterministic two writers: this process holds the checkpoint's lock (as a fit
    does) while another fit, in-process and as a real process, starts on it."""
    path = tmp_path / "ckpt.zarr"
    with StoreLock(str(path), writer="fit"):
        with pytest.raises(StoreLockedError, match=f"in use by another fit .*pid {os.getpid()}"):
            OneBitMultiLabel(2, **PARAMS).fit(PROBLEM, checkpoint=path)
        status, out, err = run_main(*FIT, "--checkpoint", path)
        assert status == 1 and out == "" and len(err.strip().splitlines()) == 1, err
        proc = run_cli(*FIT, "--checkpoint", str(path))
        assert proc.returncode == 1 and proc.stdout == "", proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert f"pid {os.getpid()}, since" in proc.stderr
        with pytest.raises(StoreLockedError):
            OneBitMultiLabel(2, **PARAMS).fit(PROBLEM).save(path)
    assert not path.exists()  # nothing was written
    # released: the fit runs, and releases the lock when it ends
    OneBitMultiLabel(2, **dict(PARAMS, n_iter=1)).fit(PROBLEM, checkpoint=path)
    assert no_leftovers(path)


def test_a_checkpoint_whose_lock_was_taken_over_stops_writing(tmp_path, monkeypatch):
    """A fit whose lock another writer took over (it froze past the stale time) stops
    before its next write, and the checkpoint is the other writer's."""
    from onebit_dask import persist

    path = tmp_path / "ckpt.zarr"
    write = persist.Checkpoint.write

    def steal_after_first(self, est, engine):
        write(self, est, engine)
        with open(f"{path}.lock", "w") as fh:
            json.dump({"format": "onebit-dask/lock", "host": "elsewhere", "pid": 7,
                       "started": "now", "token": "z"}, fh)

    monkeypatch.setattr(persist.Checkpoint, "write", steal_after_first)
    with pytest.raises(StoreLockedError, match="taken over by elsewhere pid 7"):
        OneBitMultiLabel(2, **PARAMS).fit(PROBLEM, checkpoint=path)
    assert json.load(open(f"{path}.lock"))["token"] == "z"  # the other writer's: kept
    assert model_io.read_attrs(str(path))["n_steps"] == 0


@pytest.mark.parametrize("damage", ["a block replaced", "a value edited", "checksums dropped"])
def test_a_checkpoint_that_is_not_whole_is_not_resumed(tmp_path, damage):
    path = tmp_path / "ckpt.zarr"
    OneBitMultiLabel(2, **dict(PARAMS, n_iter=1)).fit(PROBLEM, checkpoint=path)
    if damage == "a block replaced":  # as two writers interleaving would leave it
        other = tmp_path / "other.zarr"
        OneBitMultiLabel(2, **dict(PARAMS, n_iter=1)).fit(
            SyntheticProblem(20, 30, 2, flip=0.02, seed=4, n_test=300), checkpoint=other)
        shutil.rmtree(path / "blocks" / "1")
        shutil.copytree(other / "blocks" / "1", path / "blocks" / "1")
        match = r"blocks/1/Q differs from what was written"
    elif damage == "a value edited":
        _set_value(str(path), 0.25)
        match = r"blocks/1/B differs from what was written"
    else:
        attrs = dict(zarr.open_group(path).attrs)
        attrs.pop("checksums")
        zarr.open_group(path, mode="r+").attrs.put(attrs)
        match = r"the attribute 'checksums' is missing"
    with pytest.raises(DamagedStoreError, match=match) as info:
        OneBitMultiLabel(2, **dict(PARAMS, n_iter=1)).fit(PROBLEM, checkpoint=path)
    assert f"delete '{path}'" in str(info.value)


# -- targets checked before the work; a full disk during save ------------------------------
def test_save_targets_are_checked_before_writing(reference, tmp_path):
    (tmp_path / "afile.txt").write_text("mine")
    for path, message in [("", "path='' is not allowed"),
                          (tmp_path / "afile.txt" / "m.zarr", "is not a directory"),
                          (tmp_path / "afile.txt", "not an onebit-dask model store")]:
        with pytest.raises(ValueError, match=message):
            reference.save(path, overwrite=True)
    with read_only_dir(tmp_path / "ro") as ro:
        with pytest.raises(ValueError, match="is not writable"):
            reference.save(ro / "m.zarr")
        status, out, err = run_main(*FIT, "--save", ro / "m.zarr")
        assert status == 2 and len(err.strip().splitlines()) == 1 and "not writable" in err
        status, out, err = run_main(*FIT, "--checkpoint", ro / "ck.zarr")
        assert status == 2 and len(err.strip().splitlines()) == 1 and "not writable" in err
    assert (tmp_path / "afile.txt").read_text() == "mine"


WIDE = ["--d1", "20000", "--d2", "30", "--rank", "2", "--batch-size", "1000", "--n-iter", "1",
        "--n-test", "20", "--workers", "0", "--quiet"]  # Q_top alone is 640 kB


def test_full_disk_during_save_leaves_nothing_and_keeps_the_model(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 20_000))
    labels, y = rng.integers(0, 30, 60), rng.choice([-1.0, 1.0], 60)
    est = OneBitMultiLabel(2, n_shards=2, random_state=0).partial_fit(X, labels, y, n_labels=30)
    with small_disk(tmp_path / "disk", "200k") as disk:
        with pytest.raises(SaveError, match="no space left .*nothing was written at .*still in "
                                            "memory: call save again"):
            est.save(disk / "m.zarr")
        assert os.listdir(disk) == []  # no temporary, no lock
        status, out, err = run_main("fit", *WIDE, "--save", disk / "m.zarr")
        assert status == 1 and out == "", err
        assert len(err.strip().splitlines()) == 1 and "no space left" in err, err
        assert "the fitted model is lost with this command" in err
        assert os.listdir(disk) == []
    model = OneBitMultiLabel.load(est.save(tmp_path / "m.zarr"))  # the retry
    for name in ("A_", "B_"):
        np.testing.assert_array_equal(getattr(model, name), getattr(est, name))
