"""The model store (onebit_dask.persist.model_store): save/load round trips, each label
block written and read by the worker that holds it, what is not a model, damaged or
edited stores naming the part, the generator's exact state; on real zarr stores and a
real 2-worker LocalCluster."""

import json
import re
import os
import shutil

import numpy as np
import pytest
import zarr
from distributed import get_task_stream

from onebit_dask import OneBitMultiLabel
from onebit_dask.engine import placement
from onebit_dask.engine.dask_engine import DaskEngine
from onebit_dask.io import write_observations
from onebit_dask.io.stores.zarr_format import DamagedStoreError

from tests.support.models import (DAMAGES, EXPLICIT, PARAMS, PROBLEM, X_NEW, assert_same_model,
                                  no_leftovers)

pytestmark = pytest.mark.integration


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
    assert root.attrs["format"] == "onebit-dask/model" and root.attrs["version"] == 7
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


# -- damaged or edited model stores -------------------------------------------------------------
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


# -- format 4: the attributes' digest, chunk checksums, versions (issue 36 item 2) -------------
def _flip_byte(file, at=0.6):
    raw = bytearray(open(file, "rb").read())
    raw[int(len(raw) * at)] ^= 0xFF
    open(file, "wb").write(bytes(raw))


def test_xarray_opens_a_model_without_a_warning(reference, tmp_path):
    """The metadata are consolidated (format 5): ``xr.open_zarr`` reads the tops under
    warnings as errors."""
    import warnings

    import xarray as xr

    path = reference.save(tmp_path / "model.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = xr.open_zarr(path)
    np.testing.assert_array_equal(ds["Q_top"].values, reference.A_)
    assert ds.attrs["n_labels"] == 30


def test_the_package_reads_each_arrays_own_metadata(reference, tmp_path):
    """The consolidated copy is for other readers: a wrong shape there changes nothing."""
    path = reference.save(tmp_path / "model.zarr")
    meta_file = os.path.join(path, "zarr.json")
    meta = json.load(open(meta_file))
    meta["consolidated_metadata"]["metadata"]["Q_top"]["shape"] = [1, 1]
    json.dump(meta, open(meta_file, "w"))
    assert_same_model(OneBitMultiLabel.load(path), reference)


def test_a_model_of_format_4_loads_as_before(reference, tmp_path):
    """Format 4 is format 7 without the consolidated metadata, predict_proba's link and
    a binary target's classes:
    it loads, without a warning, to the same model without the link."""
    import warnings

    from onebit_dask.persist.model_store import signed_attrs

    path = reference.save(tmp_path / "model.zarr")
    meta_file = os.path.join(path, "zarr.json")
    meta = json.load(open(meta_file))
    meta.pop("consolidated_metadata")
    attrs = {k: v for k, v in meta["attributes"].items()
             if k not in ("attrs_sha256", "calibration", "classes", "classes_dtype")}
    meta["attributes"] = signed_attrs({**attrs, "version": 4})
    json.dump(meta, open(meta_file, "w"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = OneBitMultiLabel.load(path)
    assert not hasattr(model, "calibration_")
    for name in ("A_", "B_", "intercept_"):
        np.testing.assert_array_equal(getattr(model, name), getattr(reference, name))
    np.testing.assert_array_equal(model.decision_function(X_NEW),
                                  reference.decision_function(X_NEW))


def _raw_attrs(path, edit):
    """Edit the root ``zarr.json``'s attributes by hand (``edit(attrs)``), as a user would,
    without signing them again."""
    meta_file = os.path.join(path, "zarr.json")
    meta = json.load(open(meta_file))
    edit(meta["attributes"])
    json.dump(meta, open(meta_file, "w"))


def _set_history_auc(attrs):
    attrs["history"][0]["auc"] = 0.123


FORMAT_DAMAGES = {  # (damage, what the one line says)
    "flipped byte": (lambda p: _flip_byte(os.path.join(p, "blocks", "1", "B", "c", "0", "0")),
                     r"the chunk blocks/1/B/c/0/0 cannot be read \(RuntimeError: .*checksum"),
    "edited attribute": (lambda p: _raw_attrs(p, _set_history_auc),
                         r"its attributes \(params, history, .*\) differ from what was written"),
    "removed attribute": (lambda p: _raw_attrs(p, lambda a: a.pop("data")),
                          r"its attributes \(params, history, .*\) differ from what was written"),
    "version 99": (lambda p: _raw_attrs(p, lambda a: a.update(version=99)),
                   r"was written by a newer onebit-dask \(format v99, this reads up to v7\): "
                   r"upgrade onebit-dask$"),
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """A saved model and a checkpoint, each of :data:`PROBLEM`, through the command line's
    fit (in this process)."""
    from tests.support.models import FIT
    from tests.support.helpers import run_main

    where = tmp_path_factory.mktemp("format4")
    model, checkpoint = str(where / "model.zarr"), str(where / "ckpt.zarr")
    done = run_main(*FIT, "--save", model, "--checkpoint", checkpoint)
    assert done.returncode == 0, done.stderr
    return {"model": model, "checkpoint": checkpoint}


def _copy_of(stores, kind, tmp_path):
    path = str(tmp_path / f"{kind}.zarr")
    shutil.copytree(stores[kind], path)
    return path


def _resume(path):
    """Resume the checkpoint at ``path`` through the command line (the fit that wrote it)."""
    from tests.support.models import FIT
    from tests.support.helpers import run_main

    return run_main(*FIT, "--checkpoint", path)


@pytest.mark.parametrize("case", sorted(FORMAT_DAMAGES))
@pytest.mark.parametrize("kind", ["model", "checkpoint"])
def test_a_damaged_store_of_format_4_is_refused_in_one_line(stores, tmp_path, kind, case):
    """Each damage is refused through the library (load; the fit that resumes a
    checkpoint) and the command line (evaluate; fit --checkpoint): exit 1, one line
    naming the store. Without the check that each case is for, the store is read (the
    digest for the edited and removed attributes, the version check for v99, the chunk's
    check for the flipped byte)."""
    from onebit_dask import persist
    from onebit_dask.engine.local import LocalEngine
    from tests.support.helpers import run_main

    damage, message = FORMAT_DAMAGES[case]
    path = _copy_of(stores, kind, tmp_path)
    damage(path)
    with pytest.raises(DamagedStoreError, match=message) as info:
        if kind == "model":
            OneBitMultiLabel.load(path)
        else:
            attrs = persist.read_attrs(path)
            persist.read_state(path, attrs, LocalEngine())
    assert f"model store {path!r}" in str(info.value) and "\n" not in str(info.value)
    done = run_main("evaluate", path, "--json") if kind == "model" else _resume(path)
    assert done.returncode == 1, done
    assert done.stderr.count("\n") == 1 and path in done.stderr, done.stderr
    assert re.search(message, done.stderr.strip()), done.stderr


@pytest.mark.parametrize("kind", ["model", "checkpoint"])
def test_a_store_of_format_3_is_read_with_one_warning(stores, tmp_path, kind):
    """A store of the previous format (no ``attrs_sha256``) is read as before, with one
    warning; an attribute edited in it is then not detected (what format 4 adds)."""
    path = _copy_of(stores, kind, tmp_path)
    _raw_attrs(path, lambda a: (a.update(version=3), a.pop("attrs_sha256"),
                                a.pop("calibration", None), a.pop("classes", None),
                                a.pop("classes_dtype", None)))
    with pytest.warns(UserWarning, match="without a digest of its attributes") as seen:
        est = OneBitMultiLabel.load(path)
    assert len([w for w in seen if "older onebit-dask" in str(w.message)]) == 1
    assert est.history_ == json.load(open(os.path.join(path, "zarr.json")))["attributes"][
        "history"]
    _raw_attrs(path, _set_history_auc)  # not detected in format 3
    with pytest.warns(UserWarning, match="without a digest"):
        assert OneBitMultiLabel.load(path).history_[0]["auc"] == 0.123
    if kind == "checkpoint":  # resumed by the fit that wrote it
        _raw_attrs(path, lambda a: a["history"][0].update(auc=est.history_[0]["auc"]))
        with pytest.warns(UserWarning, match="without a digest"):
            done = _resume(path)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["history"] == est.history_


@pytest.mark.parametrize("kind", ["model", "checkpoint"])
def test_a_store_of_format_5_is_read_without_a_link(stores, tmp_path, kind):
    """A store of format 5 (before predict_proba's link) is read as before, its digest over
    its own attributes, and has no ``calibration_``; one that carries the attribute, which
    format 5 does not digest, is refused as damaged."""
    from onebit_dask.io.stores.zarr_format import attrs_digest
    from onebit_dask.persist.model_store import digested

    def sign_as_5(attrs, link=None):
        attrs.pop("calibration", None)
        attrs.pop("classes", None)
        attrs.pop("classes_dtype", None)
        if link is not None:
            attrs["calibration"] = link
        attrs.update(version=5)
        attrs["attrs_sha256"] = attrs_digest(attrs, digested(attrs))

    path = _copy_of(stores, kind, tmp_path)
    _raw_attrs(path, sign_as_5)
    est = OneBitMultiLabel.load(path)
    assert est.n_steps_ >= 0
    with pytest.raises(AttributeError, match="predict_proba") as refused:
        est.predict_proba(X_NEW)
    assert "calibration_" in str(refused.value.__cause__)
    _raw_attrs(path, lambda a: sign_as_5(a, [1.0, 1.0]))
    with pytest.raises(DamagedStoreError, match="'calibration', which version 5"):
        OneBitMultiLabel.load(path)


def test_a_models_link_is_saved_and_checked(stores, tmp_path):
    path = _copy_of(stores, "model", tmp_path)
    link = json.load(open(os.path.join(path, "zarr.json")))["attributes"]["calibration"]
    assert len(link) == 2 and link[0] > 0
    np.testing.assert_array_equal(OneBitMultiLabel.load(path).calibration_, link)
    _raw_attrs(path, lambda a: a.update(calibration=[link[0] * 2, link[1]]))
    with pytest.raises(DamagedStoreError, match="attributes"):
        OneBitMultiLabel.load(path)


@pytest.mark.parametrize("kind", ["model", "checkpoint"])
def test_a_lowered_format_version_is_refused_not_read_unchecked(stores, tmp_path, kind):
    """A store of format 4 whose version was edited to 3 (which has no digest) still
    carries its attrs_sha256: refused as damaged, instead of read without its checks
    with an edited attribute."""
    from onebit_dask.io.stores.zarr_format import DamagedStoreError

    path = _copy_of(stores, kind, tmp_path)
    _raw_attrs(path, lambda a: a.update(version=3, n_steps=2))
    with pytest.raises(DamagedStoreError, match=r"version=3 is older than the attributes' "
                                                r"digest it carries"):
        OneBitMultiLabel.load(path)
