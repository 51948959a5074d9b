"""Observations and CSR stores are verified on read: a chunk whose bytes changed, an empty
or missing chunk, an edited attribute and a newer format are each refused as one line
naming the store and the part, never read as other numbers; a store of the previous
format (no checksums) is read as before with one warning."""

import json
import os
import shutil
import warnings

import numpy as np
import pytest
import zarr

from onebit_dask import SyntheticProblem
from onebit_dask.data.observations import ZarrSource
from onebit_dask.io.csr_store import convert, open_csr_store
from onebit_dask.io.observations import write_observations
from onebit_dask.io.stores.zarr_format import DamagedStoreError

from tests.support.helpers import FILES, run_cli, run_main


@pytest.fixture(scope="module")
def obs_store(tmp_path_factory):
    problem = SyntheticProblem(30, 20, 2, seed=4)
    path = tmp_path_factory.mktemp("obs") / "obs.zarr"
    return str(write_observations(path, *problem.draw_batches(range(2), 3000, 2), n_labels=20,
                                  chunk_rows=1000))


@pytest.fixture(scope="module")
def csr_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("csr") / "csr.zarr"
    return convert(os.path.join(FILES, "emotions_train.txt"), path, chunk_rows=50,
                   chunk_nnz=2000)


def _read_obs(path):
    source = ZarrSource(path)
    for shard in source.batch(0, source.n, 4):
        shard.load()


def _read_csr(path):
    store = open_csr_store(path)
    store.rows(0, store.n)


KINDS = {"observations": ("obs_store", "X/c/1/0", "n_labels", 7, _read_obs),
         "csr": ("csr_store", "X/data/c/2", "d2", 5, _read_csr)}


def _copy(request, kind, tmp_path):
    path = tmp_path / f"{kind}.zarr"
    shutil.copytree(request.getfixturevalue(KINDS[kind][0]), path)
    return str(path)


def _flip(file, at=0.6, n=4):
    raw = bytearray(open(file, "rb").read())
    start = int(len(raw) * at)
    for k in range(start, min(start + n, len(raw))):
        raw[k] ^= 0xFF
    open(file, "wb").write(bytes(raw))


def _edit_attrs(path, **changes):
    meta_file = os.path.join(path, "zarr.json")
    meta = json.load(open(meta_file))
    meta["attributes"].update(changes)
    json.dump(meta, open(meta_file, "w"))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("damage, match", [
    ("flipped bytes", "cannot be read"),
    ("empty chunk", "cannot be read"),
    ("missing chunk", "missing"),
    ("edited attribute", "attributes .* differ from what was written"),
    ("newer version", r"written by a newer onebit-dask \(format v99, this reads up to v\d\): "
                      "upgrade onebit-dask$"),
    ("lowered version", r"version=1 is older than the attributes' digest it carries"),
])
def test_damage_is_refused_naming_store_and_part(request, tmp_path, kind, damage, match):
    path = _copy(request, kind, tmp_path)
    _, chunk, key, value, read = KINDS[kind]
    chunk_file = os.path.join(path, *chunk.split("/"))
    if damage == "flipped bytes":
        _flip(chunk_file)
    elif damage == "empty chunk":
        open(chunk_file, "wb").close()
    elif damage == "missing chunk":
        os.remove(chunk_file)
    elif damage == "edited attribute":
        _edit_attrs(path, **{key: value})
    elif damage == "lowered version":  # a store of the checked format passed off as older
        _edit_attrs(path, version=1)
    else:
        _edit_attrs(path, version=99)
    with pytest.raises(DamagedStoreError, match=match) as info:
        read(path)
    message = str(info.value)
    assert path in message and "\n" not in message
    if damage in ("flipped bytes", "empty chunk", "missing chunk"):
        assert chunk.rsplit("/c/", 1)[0] in message  # the array


@pytest.mark.parametrize("arrays", [("X", "labels", "y"), ("X",), ("y",)])
def test_an_observations_store_whose_shape_was_edited_is_refused(request, tmp_path, arrays):
    """Version 3 keeps the arrays' shape under the digest: the rows of all three arrays cut
    in their own zarr.json (zarr would read a shorter store, silently) or of one of them
    (read as a usage error before) are refused as a damaged store, naming it and the
    array, through the command line too (exit 1, one line)."""
    path = _copy(request, "observations", tmp_path)
    for name in arrays:
        meta_file = os.path.join(path, name, "zarr.json")
        meta = json.load(open(meta_file))
        meta["shape"][0] = 4000
        json.dump(meta, open(meta_file, "w"))
    with pytest.raises(DamagedStoreError, match=rf"its array {arrays[0]} has shape "
                                                r"\(4000[,)].*n_rows=6000"):
        ZarrSource(path)
    done = run_main("fit", "--data", path, "--rank", "2", "--batch-size", "3000",
                    "--n-iter", "1", "--workers", "0", "--quiet")
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done
    assert path in done.stderr and "damaged" in done.stderr


def test_an_observations_store_of_version_2_is_read_without_a_warning(request, tmp_path):
    """Version 2 (checksums and digest, no shape under it) reads as before, unwarned."""
    from onebit_dask.io.observations import DIGESTED_V2
    from onebit_dask.io.stores.zarr_format import attrs_digest

    path = _copy(request, "observations", tmp_path)
    meta_file = os.path.join(path, "zarr.json")
    meta = json.load(open(meta_file))
    attrs = {k: v for k, v in meta["attributes"].items()
             if k not in ("n_rows", "n_features", "arrays_sha256", "attrs_sha256")}
    attrs["version"] = 2
    meta["attributes"] = {**attrs, "attrs_sha256": attrs_digest(attrs, DIGESTED_V2)}
    json.dump(meta, open(meta_file, "w"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ZarrSource(path).n == 6000


def test_the_checks_have_power(request, tmp_path):
    """Undamaged copies read without a warning, and a v1 store written without checksums
    would have read the flipped bytes as other numbers (what the checksums prevent)."""
    for kind, (_, _, _, _, read) in KINDS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            read(_copy(request, kind, tmp_path))
    path = str(tmp_path / "plain.zarr")
    group = zarr.open_group(path, mode="w")
    X = np.linspace(0.1, 1.0, 3000).reshape(1000, 3)
    group.create_array("X", data=X, chunks=(500, 3))  # zarr's default: zstd, no checksum
    _flip(os.path.join(path, "X", "c", "1", "0"), n=1)
    read_back = zarr.open_group(path, mode="r")["X"][:]
    assert not np.array_equal(read_back, X)  # silently other numbers


def test_a_store_of_the_previous_format_is_read_with_one_warning(request, tmp_path):
    path = _copy(request, "observations", tmp_path)
    meta = json.load(open(os.path.join(path, "zarr.json")))["attributes"]
    _edit_attrs(path, version=1, attrs_sha256=None, arrays_sha256=None)
    with pytest.warns(UserWarning, match="without checksums") as seen:
        source = ZarrSource(path)
    assert len([w for w in seen if "checksums" in str(w.message)]) == 1
    assert source.d2 == meta["n_labels"]


def test_the_command_line_says_it_in_one_line(request, tmp_path):
    path = _copy(request, "observations", tmp_path)
    _flip(os.path.join(path, "X", "c", "1", "0"))
    args = ("fit", "--workers", 0, "--data", path, "--rank", 2, "--batch-size", 2000,
            "--n-iter", 2, "--quiet")
    proc = run_main(*args)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc
    assert "X/c/1/0" in proc.stderr and "damaged" in proc.stderr
    proc = run_cli(*args)  # a real process
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    csr = _copy(request, "csr", tmp_path)
    _edit_attrs(csr, version=99)
    proc = run_main("fit", "--workers", 0, "--data", csr, "--rank", 2, "--n-iter", 1, "--quiet")
    assert proc.returncode == 1 and "newer onebit-dask" in proc.stderr, proc
    assert proc.stderr.count("\n") == 1



def _edit_array_meta(path, name, edit):
    """Edit the metadata of the store's array ``name`` by hand in its own ``zarr.json``."""
    meta_file = os.path.join(path, *name.split("/"), "zarr.json")
    meta = json.load(open(meta_file))
    edit(meta)
    json.dump(meta, open(meta_file, "w"))


def _big_endian(meta):
    meta["codecs"] = [dict(c, configuration={"endian": "big"}) if c["name"] == "bytes" else c
                      for c in meta["codecs"]]


ARRAY_EDITS = {  # (kind, array, edit of its zarr.json, what the refusal says of it)
    "observations X endian": ("observations", "X", _big_endian, "differ"),
    "observations labels endian": ("observations", "labels", _big_endian, "differ"),
    "observations y data type": ("observations", "y", lambda m: m.update(data_type="uint8"),
                                 "differ"),
    "observations X fill value": ("observations", "X", lambda m: m.update(fill_value=1.0),
                                  "differ"),
    "csr X/data endian": ("csr", "X/data", _big_endian, "differ"),
    "csr X/indptr endian": ("csr", "X/indptr", _big_endian, "differ"),
    "csr Y/indices endian": ("csr", "Y/indices", _big_endian, "differ"),
    "csr Y/indptr chunk grid": ("csr", "Y/indptr", lambda m: m["chunk_grid"][
        "configuration"].update(chunk_shape=[25]), "differ"),
    # metadata zarr cannot parse (the message named neither the array nor where: issue
    # 36's second pass)
    "observations X fill value x": ("observations", "X", lambda m: m.update(fill_value="x"),
                                    "cannot be read"),
    "csr X/data data type": ("csr", "X/data", lambda m: m.update(data_type="nonsense"),
                             "cannot be read"),
    "observations X shape removed": ("observations", "X", lambda m: m.pop("shape"),
                                     "cannot be read"),
    "csr Y/indptr data type removed": ("csr", "Y/indptr", lambda m: m.pop("data_type"),
                                       "cannot be read"),
}


@pytest.mark.parametrize("case", sorted(ARRAY_EDITS))
def test_an_array_whose_metadata_was_edited_is_refused(request, tmp_path, case):
    """The byte order of an array's chunks (or its data type, fill value, chunk grid)
    edited in its own zarr.json, which zarr would read as other numbers (their SHA-256,
    ``arrays_sha256``, differs), or into metadata zarr cannot parse (a fill value ``"x"``
    for floats, an unknown or missing data type, no shape): refused as a damaged store in
    one line naming the store and the array."""
    kind, name, edit, says = ARRAY_EDITS[case]
    path = _copy(request, kind, tmp_path)
    _edit_array_meta(path, name, edit)
    with pytest.raises(DamagedStoreError, match=rf"the metadata of the array {name} "
                                                rf"\(its zarr.json.*{says}") as info:
        KINDS[kind][4](path)
    assert path in str(info.value) and "damaged" in str(info.value)
    assert "\n" not in str(info.value)


def _previous_version(path, kind):
    """The store at ``path`` as the previous version wrote it: without ``arrays_sha256``,
    its attributes' digest as that version made it."""
    from onebit_dask.io import csr_store, observations
    from onebit_dask.io.stores.zarr_format import attrs_digest

    module, version, digested = {"observations": (observations, 3, observations.DIGESTED_V3),
                                 "csr": (csr_store, 2, csr_store.DIGESTED_V2)}[kind]
    assert module.VERSION == version + 1
    meta_file = os.path.join(path, "zarr.json")
    meta = json.load(open(meta_file))
    attrs = {k: v for k, v in meta["attributes"].items()
             if k not in ("arrays_sha256", "attrs_sha256")}
    attrs["version"] = version
    meta["attributes"] = {**attrs, "attrs_sha256": attrs_digest(attrs, digested)}
    json.dump(meta, open(meta_file, "w"))


@pytest.mark.parametrize("kind", KINDS)
def test_a_store_of_the_version_before_the_arrays_digest_is_read_as_before(request, tmp_path,
                                                                           kind):
    """The previous version (no ``arrays_sha256``) is read without a warning and without
    that check; the same store passed off as that version while carrying
    ``arrays_sha256`` is refused as damaged."""
    path = _copy(request, kind, tmp_path)
    _previous_version(path, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KINDS[kind][4](path)
    lowered = _copy(request, kind, tmp_path / "lowered")
    version = json.load(open(os.path.join(lowered, "zarr.json")))["attributes"]["version"] - 1
    _edit_attrs(lowered, version=version)
    with pytest.raises(DamagedStoreError, match=rf"version={version} is older than the "
                                                "attribute arrays_sha256 it carries"):
        KINDS[kind][4](lowered)


def test_the_arrays_digest_is_under_the_attributes_digest(request, tmp_path):
    """``arrays_sha256`` edited (to match an edited array) breaks the attributes' digest."""
    for kind in KINDS:
        path = _copy(request, kind, tmp_path / kind)
        meta = json.load(open(os.path.join(path, "zarr.json")))["attributes"]
        name = sorted(meta["arrays_sha256"])[0]
        _edit_attrs(path, arrays_sha256={**meta["arrays_sha256"], name: "0" * 64})
        with pytest.raises(DamagedStoreError, match="attributes .* differ from what was "
                                                    "written"):
            KINDS[kind][4](path)


def test_a_ctrl_c_during_consolidation_is_held_back_until_it_ends(tmp_path, monkeypatch):
    """zarr consolidates in its event loop's thread: a Ctrl-C that left the block silencing
    zarr's consolidated-metadata warning while that thread went on printed the warning
    after "onebit-dask: interrupted" (Ctrl-C on fit --checkpoint while a checkpoint is
    written). The interrupt is held back until the consolidation ends, then raised."""
    import signal

    from onebit_dask.io.stores.zarr_format import consolidate

    path = tmp_path / "g.zarr"
    zarr.open_group(str(path), mode="w", zarr_format=3).create_array("a", data=np.arange(3))
    real = zarr.consolidate_metadata

    def interrupted(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)  # a Ctrl-C as the consolidation starts
        return real(*args, **kwargs)

    monkeypatch.setattr(zarr, "consolidate_metadata", interrupted)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(KeyboardInterrupt):
            consolidate(path)
    root = json.loads((path / "zarr.json").read_text())
    assert "a" in root["consolidated_metadata"]["metadata"]  # it ran to its end
    assert not [w for w in caught if "onsolidated metadata" in str(w.message)], caught
