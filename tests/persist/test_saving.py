"""Saving (onebit_dask.persist.saving): checkpoints that survive a SIGKILL, written by the
workers on a cluster, cut the lineage, belong to one fit and one writer and are resumed
only when whole; save's targets checked before the work, a full disk during save; on
real zarr stores, real subprocesses and a real 2-worker LocalCluster."""

import contextlib
import json
import os
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
from onebit_dask.persist import SaveError
from onebit_dask.io.stores.lock import StoreLock, StoreLockedError
from onebit_dask.io.stores.zarr_format import DamagedStoreError

from tests.support.filesystems import read_only_dir, small_disk
from tests.support.helpers import run_cli, run_main
from tests.support.models import (EXPLICIT, FIT, PARAMS, PROBLEM, assert_same_model, mark_as_ours,
                                  no_leftovers, set_value, temporaries)

pytestmark = pytest.mark.integration


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
        set_value(str(path), 0.25)
        match = r"blocks/1/B differs from what was written"
    else:
        attrs = dict(zarr.open_group(path).attrs)
        attrs.pop("checksums")
        attrs.pop("attrs_sha256")
        zarr.open_group(path, mode="r+").attrs.put(model_io.signed_attrs(attrs))
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
