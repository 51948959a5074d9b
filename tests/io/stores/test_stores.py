"""The shared store plumbing (onebit_dask/io/stores/): marked temporaries, typed attributes,
chunk checks through zarr's store API, and stores at URLs (memory://, and s3:// on a
local S3-compatible server: moto's server mode with s3fs, from the test extra)."""

import json
import logging
import os
import socket

import numpy as np
import pytest
import xarray as xr
import zarr

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.io import write_observations
from onebit_dask.io.stores import atomic, paths
from onebit_dask.io.stores.zarr_format import DamagedStoreError, attr, check_array, missing_chunk

PROBLEM = SyntheticProblem(20, 30, 2, flip=0.02, seed=3, n_test=300)
PARAMS = dict(batch_size=2000, n_iter=2, n_shards=4, random_state=0)


@pytest.fixture(scope="module")
def fitted():
    return OneBitMultiLabel(2, **PARAMS).fit(PROBLEM)


# -- marked temporaries ----------------------------------------------------------------------
def test_replace_and_recover_touch_only_marked_directories(tmp_path):
    path = str(tmp_path / "s.zarr")
    os.mkdir(path)
    (tmp_path / "s.zarr" / "v").write_text("1")
    tmp = atomic.new_temporary(path)
    (tmp_path / os.path.basename(tmp) / "v").write_text("2")
    atomic.replace(tmp, path)
    assert (tmp_path / "s.zarr" / "v").read_text() == "2"
    assert sorted(os.listdir(tmp_path)) == ["s.zarr"]  # marker, temporary, old copy gone
    # killed between the two renames: the marked old copy comes back
    old = tmp_path / ".s.zarr.onebit-old-abcd"
    os.rename(path, old)
    (old / atomic.MARKER).write_text(json.dumps({"format": atomic.TEMPORARY,
                                                 "token": "abcd"}))
    unmarked = tmp_path / ".s.zarr.onebit-old-ef01"
    unmarked.mkdir()
    atomic.recover(path, temporaries=True)
    assert (tmp_path / "s.zarr" / "v").read_text() == "2"
    assert not (tmp_path / "s.zarr" / atomic.MARKER).exists()
    assert unmarked.is_dir()  # no marker: not ours
    assert atomic.leftovers(path, "old") == [] and atomic.leftovers(path, "tmp") == []


def test_publish_never_replaces_what_appeared_at_the_path(tmp_path):
    path = str(tmp_path / "s.zarr")
    tmp = atomic.new_temporary(path)
    (tmp_path / os.path.basename(tmp) / "v").write_text("new")
    os.mkdir(path)  # the user's, made while the temporary was written
    (tmp_path / "s.zarr" / "notes.txt").write_text("mine")
    with pytest.raises(OSError):
        atomic.publish(tmp, path)
    assert os.listdir(path) == ["notes.txt"]
    assert (tmp_path / "s.zarr" / "notes.txt").read_text() == "mine"
    atomic.discard(tmp)
    os.remove(os.path.join(path, "notes.txt"))
    os.rmdir(path)
    tmp = atomic.new_temporary(path)
    atomic.publish(tmp, path)  # where nothing is: moved, its marker gone
    assert os.listdir(tmp_path) == ["s.zarr"] and os.listdir(path) == []


def test_a_temporary_whose_marker_cannot_be_written_is_not_left(tmp_path, monkeypatch):
    def full_disk(directory, token):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic, "_mark", full_disk)
    with pytest.raises(OSError, match="No space left"):
        atomic.new_temporary(str(tmp_path / "s.zarr"))
    assert os.listdir(tmp_path) == []  # an unmarked directory would never be removed


# -- typed attributes and chunks ---------------------------------------------------------------
def test_a_discarded_temporary_outlives_no_write_still_running(tmp_path):
    # a failed write's sibling chunk writes go on in zarr's event loop after the failure
    # reaches the caller: one landing after the temporary was removed would make its
    # directory again (seen as a leftover .NAME.onebit-tmp-* after a full disk)
    import asyncio

    from zarr.core.sync import _get_loop

    tmp = atomic.new_temporary(str(tmp_path / "m.zarr"))
    late = os.path.join(tmp, "blocks", "0", "B", "c", "0", "0")

    async def late_write():
        await asyncio.sleep(0.5)
        os.makedirs(os.path.dirname(late), exist_ok=True)
        with open(late, "wb") as file:
            file.write(b"chunk")

    running = asyncio.run_coroutine_threadsafe(late_write(), _get_loop())
    atomic.discard(tmp)
    running.result(timeout=600)
    assert os.listdir(tmp_path) == []


def test_attr_checks_type_and_bound():
    attrs = {"n": 3, "flag": True, "s": "four", "x": 1.5}
    assert attr(attrs, "n", int, "store") == 3
    for key, kind, message in [("flag", int, "flag=True is not an int"),
                               ("s", int, "s='four' is not an int"),
                               ("missing", int, "'missing' is missing"),
                               ("x", int, "x=1.5 is not an int")]:
        with pytest.raises(DamagedStoreError, match=message):
            attr(attrs, key, kind, "store")
    with pytest.raises(DamagedStoreError, match="n=3 is below 4"):
        attr(attrs, "n", int, "store", low=4)


@pytest.mark.parametrize("where", ["local", "memory"])
def test_missing_chunks_found_through_the_store_api(tmp_path, where):
    url = str(tmp_path / "a.zarr") if where == "local" else f"memory://chunks-{os.getpid()}.zarr"
    array = zarr.create_array(url, shape=(10, 3), chunks=(4, 3), dtype="f8",
                              config={"write_empty_chunks": True}, overwrite=True)
    array[:] = 0.0  # all zeros: written anyway
    assert missing_chunk(array) is None
    from zarr.core.sync import sync

    key = "/".join(p for p in (array.store_path.path, "c/1/0") if p)
    sync(array.store_path.store.delete(key))
    assert missing_chunk(array) == (4, 8, "c/1/0")
    with pytest.raises(DamagedStoreError, match=r"the chunk X/c/1/0 \(rows 4\.\.7\) is missing"):
        check_array(array, "store", "X")


# -- URLs ------------------------------------------------------------------------------------
def test_memory_url_round_trip_without_a_local_directory(fitted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = f"memory://m-{os.getpid()}.zarr"
    assert fitted.save(url) == url
    fitted.save(url, overwrite=True)
    model = OneBitMultiLabel.load(url)
    np.testing.assert_array_equal(model.B_, fitted.B_)
    assert os.listdir(tmp_path) == []  # no ./memory:
    with pytest.raises(FileExistsError, match="overwrite=True"):
        fitted.save(url)
    ckpt = f"memory://ck-{os.getpid()}.zarr"
    first = OneBitMultiLabel(2, **PARAMS).fit(PROBLEM, checkpoint=ckpt)
    again = OneBitMultiLabel(2, **PARAMS).fit(PROBLEM, checkpoint=ckpt)  # resumed: done
    np.testing.assert_array_equal(again.B_, first.B_)
    assert again.history_ == first.history_
    assert paths.normalise(f"file://{tmp_path}/x.zarr") == str(tmp_path / "x.zarr")


def test_xarray_reads_a_model_store(fitted, tmp_path):
    path = fitted.save(tmp_path / "m.zarr")
    ds = xr.open_zarr(path, consolidated=False)
    assert ds["Q_top"].dims == ("feature", "component")
    np.testing.assert_array_equal(ds["Q_top"].values, fitted.A_)
    block = xr.open_zarr(path, group="blocks/0", consolidated=False)
    assert block["B"].dims == ("label", "component")


@pytest.fixture(scope="module")
def s3():
    """A bucket on moto's S3-compatible server on 127.0.0.1, reached through s3fs with
    fsspec's configuration (as a user would set it)."""
    pytest.importorskip("s3fs", reason="s3fs is not installed (pip install -e '.[test]')")
    server_module = pytest.importorskip(
        "moto.server", reason="moto's server is not installed (pip install -e '.[test]')")
    import fsspec

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = dict(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               AWS_DEFAULT_REGION="us-east-1")
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    conf = fsspec.config.conf.get("s3")
    fsspec.config.conf["s3"] = {"endpoint_url": f"http://127.0.0.1:{port}"}
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir("bucket")
    try:
        yield fs
    finally:
        server.stop()
        fsspec.config.conf.pop("s3")
        if conf is not None:
            fsspec.config.conf["s3"] = conf
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_s3_model_and_observations(s3):
    """Few objects (one label block): each request to the local server costs ~0.1 s on
    a busy machine. Checkpoints at URLs take the same path (tested on memory://)."""
    fitted = OneBitMultiLabel(2, **dict(PARAMS, n_shards=1)).fit(PROBLEM)
    url = "s3://bucket/m.zarr"
    fitted.save(url)
    model = OneBitMultiLabel.load(url)
    np.testing.assert_array_equal(model.B_, fitted.B_)
    assert xr.open_zarr(url, consolidated=False)["Q_top"].dims == ("feature", "component")
    X, labels, y = PROBLEM.draw(0, 200)
    obs = write_observations("s3://bucket/o.zarr", X, labels, y, n_labels=30)
    np.testing.assert_array_equal(xr.open_zarr(obs, consolidated=False)["labels"].values, labels)
    # a lost object is a damaged store, named, not zeros
    s3.rm("bucket/m.zarr/blocks/0/B/c/0/0")
    with pytest.raises(DamagedStoreError, match=r"blocks/0/B/c/0/0 \(rows 0\.\.29\) is missing"):
        OneBitMultiLabel.load(url)
    # an overwrite removes the old store's root first: one interrupted there is no model
    s3.rm("bucket/m.zarr/zarr.json")
    with pytest.raises(ValueError, match="not an onebit-dask model store"):
        OneBitMultiLabel.load(url)


def test_storage_options_reach_a_bucket_fsspec_is_not_configured_for(s3, monkeypatch):
    """Without fsspec's configuration or credentials in the environment, ``save``,
    ``load``, ``write_observations``, a fit of that store and a checkpoint of ``fit``
    reach the bucket with the ``storage_options`` they are given, or with a zarr
    ``FsspecStore`` or an fsspec ``FSMap`` that carries them; without them the bucket is
    not reached. Local paths take none."""
    import fsspec

    endpoint = fsspec.config.conf["s3"]["endpoint_url"]
    monkeypatch.delitem(fsspec.config.conf, "s3")
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(key)
    options = {"endpoint_url": endpoint, "key": "testing", "secret": "testing"}
    params = dict(PARAMS, n_shards=1)
    fitted = OneBitMultiLabel(2, **params).fit(PROBLEM)
    with pytest.raises(Exception):  # no endpoint, no credentials: not this server
        fitted.save("s3://bucket/options.zarr")
    assert not s3.exists("bucket/options.zarr/zarr.json")
    assert fitted.save("s3://bucket/options.zarr", storage_options=options).startswith("s3://")
    loaded = OneBitMultiLabel.load("s3://bucket/options.zarr", storage_options=options)
    np.testing.assert_array_equal(loaded.B_, fitted.B_)
    store = zarr.storage.FsspecStore.from_url("s3://bucket/object.zarr", storage_options=options)
    fitted.save(store)
    mapper = fsspec.filesystem("s3", **options).get_mapper("bucket/object.zarr")
    np.testing.assert_array_equal(OneBitMultiLabel.load(mapper).B_, fitted.B_)
    resumed = OneBitMultiLabel(2, **params).fit(PROBLEM, checkpoint="s3://bucket/ck.zarr",
                                                storage_options=options)
    np.testing.assert_array_equal(resumed.B_, fitted.B_)
    checkpoint = OneBitMultiLabel.load("s3://bucket/ck.zarr", storage_options=options)
    np.testing.assert_array_equal(checkpoint.B_, fitted.B_)
    X, labels, y = PROBLEM.draw(0, 6000)  # the three batches of the fit
    url = write_observations("s3://bucket/obs.zarr", X, labels, y, n_labels=PROBLEM.d2,
                             storage_options=options)
    remote = OneBitMultiLabel(2, **params).fit(url, storage_options=options)
    local = OneBitMultiLabel(2, **params).fit(X, labels, y, n_labels=PROBLEM.d2)
    np.testing.assert_array_equal(remote.Q_, local.Q_)
    ck_store = zarr.storage.FsspecStore.from_url("s3://bucket/ck2.zarr",
                                                 storage_options=options)
    each = OneBitMultiLabel(2, **params).fit(url, checkpoint=ck_store, storage_options=options)
    np.testing.assert_array_equal(each.Q_, local.Q_)  # X with the options, the store its own
    with pytest.raises(ValueError, match="storage_options is not allowed without a URL"):
        fitted.save("local.zarr", storage_options=options)
    with pytest.raises(TypeError, match="storage_options is not allowed with path="):
        fitted.save(store, storage_options=options)
    with pytest.raises(TypeError, match="path=.* is not allowed: give a path or URL"):
        fitted.save(zarr.storage.MemoryStore())


def test_storage_options_are_a_calls_own():
    """A call's options are removed when it ends, whichever call came since (by
    identity, not the last pushed); the same options may nest; other options for a URL
    in use are refused, not mixed."""
    with paths.options({"key": "A"}, "s3://b/m.zarr/"):
        assert paths.options_for("s3://b/m.zarr/blocks/0") == {"key": "A"}
        with paths.options({"key": "A"}, "s3://b/m.zarr"):
            assert paths.options_for("s3://b/m.zarr") == {"key": "A"}
        with pytest.raises(ValueError, match="in use with other options"):
            with paths.options({"key": "B"}, "s3://b/m.zarr"):
                pass
        assert paths.options_for("s3://b/m.zarr") == {"key": "A"}
        assert paths.options_for("s3://b/other.zarr") == {}
    assert paths.options_for("s3://b/m.zarr") == {}


@pytest.mark.integration
def test_workers_without_credentials_say_so_in_one_line(s3, monkeypatch):
    """Dask workers started without credentials or an endpoint (the client's
    ``storage_options`` never reach them): the fit of a store at an s3:// URL fails with
    one line that names the worker's process, the URL and what it lacks, not botocore's
    NoCredentialsError."""
    import fsspec

    from onebit_dask.utils.errors import StoreAccessError
    from tests.support.clusters import local_client

    endpoint = fsspec.config.conf["s3"]["endpoint_url"]
    options = {"endpoint_url": endpoint, "key": "testing", "secret": "testing"}
    X, labels, y = PROBLEM.draw(0, 6000)
    url = write_observations("s3://bucket/workers.zarr", X, labels, y, n_labels=PROBLEM.d2)
    monkeypatch.delitem(fsspec.config.conf, "s3")
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(key)
    with local_client(1) as client, client.as_current():
        with pytest.raises(StoreAccessError) as failed:
            OneBitMultiLabel(2, engine="dask", **PARAMS).fit(url, storage_options=options)
    message = str(failed.value)
    assert "\n" not in message
    assert url in message and "NoCredentialsError" in message
    assert f"process {os.getpid()} " not in message  # a worker's, not the client's


def test_fit_reads_an_observations_store_at_a_url():
    """``fit("memory://...")`` reads the store through zarr's store API and equals the fit
    of the same observations in memory, bit for bit."""
    import numpy as np

    from onebit_dask import OneBitMultiLabel
    from onebit_dask.io import write_observations

    rng = np.random.default_rng(0)
    X, labels = rng.standard_normal((3000, 10)), rng.integers(0, 5, 3000)
    y = rng.choice([-1, 1], 3000)
    write_observations("memory://fit-obs.zarr", X, labels, y, n_labels=5)
    params = dict(batch_size=1000, n_iter=2, random_state=0)
    remote = OneBitMultiLabel(2, **params).fit("memory://fit-obs.zarr")
    local = OneBitMultiLabel(2, **params).fit(X, labels, y, n_labels=5)
    np.testing.assert_array_equal(remote.Q_, local.Q_)


def test_a_finished_cube_copied_to_s3_is_checked_reported_and_opened(s3, tmp_path):
    """A sweep writes its cube locally (``--out s3://`` is refused in one line: the
    runner's lock and failures file need a file system); the finished cube copied to the
    object store, as the refusal says, is read there as here: ``report`` gives the same
    tables, xarray opens and groups it, and a flipped byte in the copy is refused naming
    the chunk (the checks read through fsspec as they read files)."""
    from onebit_dask.sweep import load_spec, run_sweep
    from onebit_dask.sweep.report import report
    from tests.support.helpers import small_quickstart

    local = str(tmp_path / "q.zarr")
    run_sweep(load_spec(small_quickstart(tmp_path)), local, progress=False)
    s3.put(local, "bucket/q.zarr", recursive=True)
    url = "s3://bucket/q.zarr"
    assert report(url)[0] == report(local)[0]
    ds = xr.open_zarr(url)
    means = ds["auc"].groupby("noise_model").mean(...).compute()
    np.testing.assert_allclose(means.values, xr.open_zarr(local)["auc"].groupby(
        "noise_model").mean(...).compute().values, rtol=1e-12)
    chunk = next(key for key in s3.find("bucket/q.zarr/auc") if "/c/" in key)
    data = bytearray(s3.cat_file(chunk))
    data[len(data) // 2] ^= 0xFF
    s3.pipe_file(chunk, bytes(data))
    with pytest.raises(DamagedStoreError, match=r"s3://bucket/q.zarr.*auc/c/"):
        report(url)
