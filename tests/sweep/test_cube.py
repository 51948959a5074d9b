"""The result cube: layout, attributes, per-cell region writes from parallel tasks."""

import os
import re
import shutil
import time

import numpy as np
import pytest

from onebit_dask.io.stores.zarr_format import group_attrs
from onebit_dask.sweep import cube as store
from onebit_dask.sweep import plan
from onebit_dask.sweep.spec import parse_spec
from tests.support.helpers import places_as_format_8

SPEC = parse_spec("""
name: tiny
grid:
  d1: [12, 16]
  d2: [8]
  rank: [2]
  noise: [none, flip=0.05, gaussian=0.3]
  step: [paper, averaged]
  batch_size: [500]
  n_iter: [2, 3]
  seed: [0, 1]
fixed: {n_test: 50, n_shards: 2}
""", "tiny.yaml")


@pytest.fixture
def cube(tmp_path):
    path = str(tmp_path / "cube.zarr")
    store.create(path, SPEC)
    return path


def test_layout(cube):
    ds = store.open_cube(cube)
    assert ds["auc"].dims == (*store.dims(SPEC), "iteration")
    assert store.dims(SPEC)[0] == "estimator" and SPEC.dims[0] == "method"
    assert ds.sel(estimator="onebit")["auc"].ndim == ds["auc"].ndim - 1
    assert ds.sizes["iteration"] == 4 and "noise" not in ds.variables
    assert ds.attrs["noise_settings"] == ["none", "flip=0.05", "gaussian=0.3"]
    assert list(ds["noise_model"].values) == ["none", "flip", "gaussian"]
    np.testing.assert_array_equal(ds["noise_level"].values, [0.0, 0.05, 0.3])
    assert store.cube_shape(SPEC) == ds["done"].shape == (1, 2, 1, 1, 1, 3, 3, 2, 1, 2, 2)
    for digests in ("coords_sha256", "arrays_sha256"):  # the index coordinates are checked
        assert {"noise_model", "noise_level"} <= set(ds.attrs[digests])
    assert "noise_settings" in ds.attrs["attrs_digested"]
    for name in ("spectral_error", "frobenius_error", "hamming_loss", "auc", "n_samples",
                 "fit_s", "n_active"):
        assert ds[name].dims == (*store.dims(SPEC), "iteration")
    for name in ("wall_s", "done", "failed"):
        assert ds[name].dims == store.dims(SPEC)
    cells = store.open_cells(cube)
    for name in ("worker", "host", "engine"):
        assert cells[name].dims == store.dims(SPEC) and name not in ds.variables
    # every variable can be masked (the README's ds.where(..., drop=True))
    ds.where(ds["noise_model"].load() == "flip", drop=True).load()
    for name in store.VARIABLES:  # what other readers (CF tools, xarray) look for
        var = cells[name] if name in store.STRINGS else ds[name]
        assert var.attrs["long_name"] and var.attrs["description"]
        assert ("units" in var.attrs) == (name not in ("done", "failed", "worker",
                                                         "host", "engine"))
    assert ds["n_samples"].attrs["units"] == "1" and ds["n_active"].attrs["units"] == "1"
    assert ds["fit_s"].attrs["units"] == "s"
    for flag in ("done", "failed"):
        assert list(ds[flag].attrs["flag_values"]) == [0, 1]
        assert ds[flag].attrs["flag_meanings"] == f"not_{flag} {flag}"
    assert all(ds[c].attrs["long_name"] for c in ("d1", "noise_level", "iteration"))
    assert (ds.attrs["n_test"], ds.attrs["n_shards"], ds.attrs["max_eval_labels"]) == (
        50, 2, 1000)
    assert ds.attrs["Conventions"] == "CF-1.10"
    # one chunk holds all 96 cells of this grid (288 with the noise combinations not asked)
    assert ds["auc"].encoding["chunks"] == (*store.cube_shape(SPEC), 4)
    assert not ds["done"].any() and np.isnan(ds["auc"]).all()
    for key in ("spec_text", "onebit_dask_version", "git_revision", "numpy_version",
                "dask_version", "xarray_version", "zarr_version", "created"):
        assert ds.attrs[key]
    assert ds.attrs["spec_fingerprint"] == SPEC.fingerprint()
    assert ds.attrs["sampler"] == "conditional"  # the default


def test_cell_chunks_keep_trailing_dimensions_whole():
    assert store.cell_chunks((3, 4, 5), 10) == (3, 4, 5)
    assert store.cell_chunks((100, 50, 40), 11) == (2, 50, 40)  # 4000 <= 4096 cells
    assert store.cell_chunks((10, 10000), 11) == (1, 4096)
    assert store.cell_chunks((10, 10), 2 ** 19) == (1, 1)  # very long cells: one a chunk


def _result(value, n):
    return {**{k: np.full(n, value) for k in ("spectral_error", "frobenius_error", "hamming_loss",
                                               "auc", "n_samples", "fit_s", "n_active")},
            "wall_s": value}


WHERE = {"worker": "tcp://127.0.0.1:1", "host": "h", "engine": "local"}


def _on_spec(ds, name, spec=SPEC):
    """The values of the cube's variable ``name`` over the spec's grid."""
    return store.spec_grid(spec, ds[name].values)


def test_batched_writes_land_in_their_cells(cube):
    cells = [index for index, _ in SPEC.cells()]
    values = {index: float(k) for k, index in enumerate(cells)}
    writer = store.CubeWriter(cube, SPEC)
    for k, (index, value) in enumerate(values.items()):
        params = SPEC.cells_at(index)
        writer.add(index, False, params, _result(value, params["n_iter"] + 1),
                   {**WHERE, "worker": f"w{k}"})
        if k % 7 == 6:  # batches that straddle each other
            writer.flush()
    writer.flush()
    assert writer.written == len(cells)
    ds = store.open_cube(cube).load()
    ds = ds.merge(store.open_cells(cube).load())
    done = ds["done"].values
    assert _on_spec(ds, "done").all() and not ds["failed"].any()
    assert done.sum() == len(cells) == done.size // 3  # 3 of 9 noise combinations asked
    auc = _on_spec(ds, "auc")
    for k, (index, value) in enumerate(values.items()):
        n_iter = SPEC.grid["n_iter"][index[SPEC.dims.index("n_iter")]]
        np.testing.assert_array_equal(auc[index][: n_iter + 1], value)
        assert np.isnan(auc[index][n_iter + 1:]).all()
        assert _on_spec(ds, "wall_s")[index] == value
        assert _on_spec(ds, "worker")[index] == f"w{k}" and _on_spec(ds, "host")[index] == "h"
    asked = np.zeros((3, 3), dtype=bool)
    asked[[0, 1, 2], [0, 1, 2]] = True  # none/0, flip/0.05, gaussian/0.3
    np.testing.assert_array_equal(ds["done"].any(
        [d for d in ds["done"].dims if not d.startswith("noise_")]).values, asked)


def test_one_value_method_lands_on_its_last_iteration_and_all_steps(cube):
    where = {"d1": 1, "noise": 2, "n_iter": 1, "seed": 1}  # n_iter = 3
    index = tuple(where.get(dim, 0) for dim in SPEC.dims)
    writer = store.CubeWriter(cube, SPEC)
    writer.add(index, True, SPEC.cells_at(index), _result(7.0, 1), WHERE)
    writer.flush()
    ds = store.open_cube(cube).load()
    for step in range(2):
        cell = list(index)
        cell[SPEC.dims.index("step")] = step
        np.testing.assert_array_equal(_on_spec(ds, "auc")[tuple(cell)], [np.nan] * 3 + [7.0])
        assert _on_spec(ds, "done")[tuple(cell)]
    assert float(ds["auc"].sel(noise_model="gaussian", noise_level=0.3, d1=16, n_iter=3,
                               seed=1, step="paper", iteration=3).squeeze()) == 7.0
    assert int(ds["done"].sum()) == 2


def test_failed_cell_then_retried(cube):
    index = (0,) * len(SPEC.dims)
    writer = store.CubeWriter(cube, SPEC)
    writer.add(index, False, SPEC.cells_at(index), None, {})
    writer.flush()
    ds = store.open_cube(cube)
    assert ds["failed"].values.sum() == 1 and not ds["done"].any()
    writer.add(index, False, SPEC.cells_at(index), _result(1.0, 3), WHERE)
    writer.flush()
    ds = store.open_cube(cube)
    assert not ds["failed"].any() and ds["done"].values.sum() == 1


def test_files_per_cell_on_a_real_store(tmp_path):
    """A 400-cell store written in 20 batches holds well under 2 files a cell (the old
    layout had 13; one file per cell per variable would be 13 again)."""
    spec = parse_spec(SPEC.text.replace("seed: [0, 1]", "seed: [0, 1, 2, 3, 4, 5, 6, 7]")
                      .replace("d1: [12, 16]", "d1: [12, 16, 20, 24, 28]")
                      .replace("noise: [none, flip=0.05, gaussian=0.3]", "noise: [none, flip=0.05]"))
    path = str(tmp_path / "files.zarr")
    store.create(path, spec)
    writer = store.CubeWriter(path, spec)
    cells = list(spec.cells())
    for k, (index, params) in enumerate(cells):
        writer.add(index, False, params, _result(1.0, params["n_iter"] + 1), WHERE)
        if k % 20 == 19:
            writer.flush()
    writer.flush()
    store.consolidate(path)
    n_files = sum(len(files) for _, _, files in os.walk(path))
    assert len(cells) == 320 and _on_spec(store.open_cube(path), "done", spec).all()
    assert n_files / len(cells) <= 2, n_files
    assert n_files < 80  # metadata and a chunk per array: independent of the cell count


def test_creation_is_fast_and_atomic(tmp_path):
    big = parse_spec(SPEC.text.replace("seed: [0, 1]", f"seed: {list(range(840))}"))
    assert np.prod(big.shape) == 20160
    path = str(tmp_path / "big.zarr")
    start = time.perf_counter()
    store.create(path, big)
    assert time.perf_counter() - start < 10.0  # 27 s before; about 1 s idle
    assert sorted(os.listdir(tmp_path)) == ["big.zarr"]  # no build directory left behind
    assert store.damage(path, big) is None
    # a build interrupted by a kill leaves only a marked hidden directory, removed next
    # time; a directory of the user's named alike (no marker) is left alone
    leftover = tmp_path / ".big.zarr.onebit-tmp-0123456789ab"
    leftover.mkdir()
    (leftover / ".onebit-dask-temporary.json").write_text(
        '{"format": "onebit-dask/temporary", "token": "0123456789ab"}')
    users = tmp_path / ".big.zarr.onebit-tmp-ffff"
    users.mkdir()
    store.create(path, big)
    assert sorted(os.listdir(tmp_path)) == [".big.zarr.onebit-tmp-ffff", "big.zarr"]


def test_damaged_store_is_named_and_empty_one_recreated(tmp_path, cube):
    import shutil

    writer = store.CubeWriter(cube, SPEC)
    index = (0,) * len(SPEC.dims)
    writer.add(index, False, SPEC.cells_at(index), _result(1.0, 3), WHERE)
    writer.flush()
    shutil.rmtree(os.path.join(cube, "done"))
    with pytest.raises(store.DamagedStoreError, match="damaged .*'done' is missing.*--overwrite"):
        plan.check_output(cube, SPEC, False)
    assert plan.check_output(cube, SPEC, True) is True
    # a cube appears whole (built aside, then moved into place) with every chunk written:
    # one that lost an array or a chunk before any result is damaged too, never re-read
    empty = str(tmp_path / "empty.zarr")
    store.create(empty, SPEC)
    shutil.rmtree(os.path.join(empty, "done"))
    with pytest.raises(store.DamagedStoreError, match="'done' is missing"):
        plan.check_output(empty, SPEC, False)
    lost = str(tmp_path / "lost.zarr")
    store.create(lost, SPEC)
    chunk = next(os.path.join(root, f) for root, _, files in os.walk(os.path.join(lost, "auc"))
                 for f in files if f != "zarr.json")
    os.remove(chunk)
    with pytest.raises(store.DamagedStoreError, match="the chunk auc/c/.* is missing"):
        plan.check_output(lost, SPEC, False)
    with pytest.raises(store.DamagedStoreError, match="the chunk auc/c/.* is missing"):
        store.open_cube(lost)


def test_check_output(tmp_path, cube):
    assert plan.check_output(str(tmp_path / "new.zarr"), SPEC, False) is True
    assert plan.check_output(cube, SPEC, False) is False
    other = parse_spec(SPEC.text.replace("seed: [0, 1]", "seed: [5]"))
    with pytest.raises(store.StoreError, match="holds the results of another spec"):
        plan.check_output(cube, other, False)
    assert plan.check_output(cube, other, True) is True
    projected = parse_spec(SPEC.text.replace("n_shards: 2}", "n_shards: 2, sampler: projected}"))
    with pytest.raises(store.StoreError, match="drawn with sampler 'conditional' and this "
                                               "spec uses 'projected'"):
        plan.check_output(cube, projected, False)
    with pytest.raises(store.StoreError, match=r"another spec \('[^']*'\): use"):
        plan.check_output(cube, other, False)  # no sampler hint when it is the same
    with pytest.raises(store.StoreError, match="does not exist"):
        plan.check_output(str(tmp_path / "no" / "dir.zarr"), SPEC, False)
    foreign = tmp_path / "foreign.zarr"
    foreign.mkdir()
    (foreign / "data.txt").write_text("not ours")
    with pytest.raises(store.StoreError, match="is not an onebit-dask sweep store"):
        plan.check_output(str(foreign), SPEC, True)
    assert (foreign / "data.txt").read_text() == "not ours"


def test_read_only_directory(tmp_path):
    # /sys is read-only even for root; a chmod 500 directory only for other users
    targets = ["/sys/cube.zarr"]
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        targets.append(str(ro / "cube.zarr"))
    for target in targets:
        with pytest.raises(store.StoreError, match="is not writable"):
            plan.check_output(target, SPEC, False)


def test_a_cube_of_format_2_opens_with_the_estimator_dimension(tmp_path, cube):
    """Cubes written before the rename named the dimension ``method``: opened, it is
    ``estimator``; resuming one is refused with a message (its layout is older)."""
    old = str(tmp_path / "old.zarr")
    ds = store.open_cube(cube).rename({"estimator": "method"})
    ds.attrs["format_version"] = 2
    del ds.attrs["attrs_sha256"], ds.attrs["attrs_digested"]  # format 5 on
    del ds.attrs["arrays_sha256"]  # format 8 on
    for name in ds.variables:
        ds[name].encoding.clear()
    ds.to_zarr(old, zarr_format=3, consolidated=False)
    with pytest.warns(UserWarning, match="older onebit-dask without checksums"):
        opened = store.open_cube(old)
    assert "estimator" in opened.dims and "method" not in opened.dims
    assert list(opened["estimator"].values) == list(SPEC.grid["method"])
    with pytest.raises(store.StoreError, match="older onebit-dask .*format 2.*--overwrite"):
        plan.check_output(old, SPEC, False)


def test_an_existing_file_as_out_is_refused_before_any_cell(tmp_path):
    """``--out`` naming a file (a PNG, say) exits 2 at once, the file untouched, instead of
    running every cell and failing with "Not a directory"."""
    from tests.support.helpers import run_main, small_quickstart

    spec = small_quickstart(tmp_path)
    png = tmp_path / "existing.png"
    png.write_bytes(b"\x89PNG mine")
    proc = run_main("sweep", spec, "--out", png, "--workers", 0, "--quiet")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc
    assert "is a file" in proc.stderr and png.read_bytes() == b"\x89PNG mine"


def test_out_as_a_url(tmp_path):
    """``--out`` takes a path or a ``file://`` URL (the cube lands at its path); a URL of
    another scheme exits 2 in one line, before any cell, rather than naming a directory
    made of the URL's text."""
    from tests.support.helpers import run_main, small_quickstart

    assert store.local_output(f"file://{tmp_path}/q.zarr") == f"{tmp_path}/q.zarr"
    assert store.local_output("file://localhost/a%20b/q.zarr") == "/a b/q.zarr"
    assert store.local_output("runs/q.zarr") == "runs/q.zarr"
    for url in ("s3://bucket/q.zarr", "memory://q.zarr", "file://host/q.zarr"):
        with pytest.raises(store.StoreError, match="local directory"):
            store.local_output(url)
    from onebit_dask.sweep import load_spec, run_sweep

    spec = small_quickstart(tmp_path)
    with pytest.raises(store.StoreError, match="local directory"):  # the Python API too
        run_sweep(load_spec(spec), "s3://bucket/q.zarr", progress=False)
    proc = run_main("sweep", spec, "--out", "s3://bucket/q.zarr", "--workers", 0, "--quiet")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc
    assert "'s3://bucket/q.zarr'" in proc.stderr and not (tmp_path / "s3:").exists()
    proc = run_main("sweep", spec, "--out", f"file://{tmp_path}/q.zarr", "--workers", 0,
                    "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert group_attrs(str(tmp_path / "q.zarr"))["format"] == store.FORMAT


# -- format 5: chunk checksums and the attributes' digest (issue 36 item 2) ---------------------
RUN_SPEC = parse_spec("""
grid:
  d1: [30]
  d2: [15]
  rank: [2]
  noise: [none]
  step: [paper, averaged]
  batch_size: [3000]
  n_iter: [2]
  seed: [0]
fixed: {n_test: 200, n_shards: 2}
""")


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A cube a sweep wrote (its cells, then the runner's attributes), and ran again."""
    from onebit_dask.sweep import run_sweep

    path = str(tmp_path_factory.mktemp("swept") / "cube.zarr")
    run_sweep(RUN_SPEC, path, progress=False, flush_cells=1)
    again = run_sweep(RUN_SPEC, path, progress=False)  # resumed: every cell done
    assert again.skipped == again.total
    return path


def _copy_cube(swept, tmp_path):
    import shutil

    path = str(tmp_path / "cube.zarr")
    shutil.copytree(swept, path)
    return path


def _cube_attrs(path, edit):
    """Edit the cube's root attributes by hand in its ``zarr.json`` (``edit(attrs)``)."""
    import json

    meta_file = os.path.join(path, "zarr.json")
    meta = json.load(open(meta_file))
    edit(meta["attributes"])
    json.dump(meta, open(meta_file, "w"))


def _big_endian(path, name):
    """The byte order of the array ``name``'s chunks edited in its own ``zarr.json`` (zarr
    would read other numbers)."""
    import json

    meta_file = os.path.join(path, name, "zarr.json")
    meta = json.load(open(meta_file))
    meta["codecs"] = [dict(c, configuration={"endian": "big"}) if c["name"] == "bytes" else c
                      for c in meta["codecs"]]
    json.dump(meta, open(meta_file, "w"))


def _set_coordinate(path, name, value):
    """The first value of the coordinate ``name`` edited with zarr (its chunk decodes)."""
    import zarr

    zarr.open_group(path, mode="r+", use_consolidated=False)[name][0] = value


def _first_chunk(path, array):
    return sorted(os.path.join(root, f) for root, _, files in os.walk(os.path.join(path, array))
                  for f in files if f != "zarr.json")[0]


def _flip(chunk):
    raw = bytearray(open(chunk, "rb").read())
    raw[int(len(raw) * 0.6)] ^= 0xFF
    open(chunk, "wb").write(bytes(raw))


def _flip_auc(path):
    _flip(_first_chunk(path, "auc"))


CUBE_DAMAGES = {  # (damage, what the one line says)
    "flipped byte": (_flip_auc, r"is damaged.{1,2}the chunk auc/c/[0-9/]+ cannot be read \("
                                r"RuntimeError: .*checksum"),
    "edited attribute": (lambda p: _cube_attrs(p, lambda a: a.update(n_test=20)),
                         r"is damaged.{1,2}its attributes \(the spec, .*\) differ from what "
                         r"was written"),
    "removed attribute": (lambda p: _cube_attrs(p, lambda a: a.pop("spec_text")),
                          r"is damaged.{1,2}its attributes \(the spec, .*\) differ from what "
                          r"was written"),
    "edited noise settings": (
        lambda p: _cube_attrs(p, lambda a: a.update(noise_settings=["flip=0.1"])),
        r"is damaged.{1,2}its attributes \(the spec, .*\) differ from what was written"),
    "edited noise level": (lambda p: _set_coordinate(p, "noise_level", 0.25),
                           r"is damaged.{1,2}the coordinate 'noise_level' differs from what "
                           r"was written"),
    "missing coordinate chunk": (lambda p: os.remove(os.path.join(p, "step", "c", "0")),
                                 r"is damaged.{1,2}the coordinate 'step' differs from what "
                                 r"was written \(a chunk missing or edited\)"),
    "missing per-cell string chunk": (
        lambda p: os.remove(_first_chunk(p, os.path.join("cells", "worker"))),
        r"is damaged.{1,2}the chunk cells/worker/c/[0-9/]+ is missing"),
    "flipped byte in a per-cell string": (
        lambda p: _flip(_first_chunk(p, os.path.join("cells", "host"))),
        r"is damaged.{1,2}the chunk cells/host/c/[0-9/]+ cannot be read"),
    "flipped byte in done": (lambda p: _flip(_first_chunk(p, "done")),
                             r"is damaged.{1,2}the chunk done/c/[0-9/]+ cannot be read"),
    "edited byte order": (lambda p: _big_endian(p, "auc"),
                          r"is damaged.{1,2}the metadata of the array auc \(its zarr.json"),
    "edited byte order of a coordinate": (
        lambda p: _big_endian(p, "d1"),
        r"is damaged.{1,2}the metadata of the array d1 \(its zarr.json"),
    "version 99": (lambda p: _cube_attrs(p, lambda a: a.update(format_version=99)),
                   r"was written by a newer onebit-dask \(format v99, this reads up to v9\): "
                   r"upgrade onebit-dask$"),
}


def test_a_swept_cube_is_signed_through_its_writes(swept, tmp_path):
    """The digest holds after the cells' writes, the runner's attributes and a resumed
    run; and after each batch of a writer's cells and each :func:`set_attrs`."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        attrs = store.check_cube(swept)
    assert attrs["format_version"] == 9 and {"placement", "blas"} <= set(
        attrs["attrs_digested"])
    path = str(tmp_path / "cube.zarr")
    store.create(path, SPEC)
    writer = store.CubeWriter(path, SPEC)
    for seed in (0, 1):
        index = (*(0,) * (len(SPEC.dims) - 1), seed)
        writer.add(index, False, SPEC.cells_at(index), _result(1.0, 3), WHERE)
        writer.flush()
        store.check_cube(path)
        store.set_attrs(path, placement=f"run {seed}")
        assert store.check_cube(path)["placement"] == f"run {seed}"


@pytest.mark.parametrize("case", sorted(CUBE_DAMAGES))
def test_a_damaged_cube_is_refused_in_one_line(swept, tmp_path, case):
    """Refused by open_cube, before a sweep resumes (check_output) and by ``report``
    (exit 1, one line naming the cube). Without the check each case is for (the chunks'
    decoding, the digest, the version) the cube is read."""
    from tests.support.helpers import run_main

    damage, message = CUBE_DAMAGES[case]
    path = _copy_cube(swept, tmp_path)
    damage(path)
    for read in (store.open_cube, lambda p: plan.check_output(p, RUN_SPEC, False)):
        with pytest.raises(store.DamagedStoreError, match=message) as info:
            read(path)
        assert repr(path) in str(info.value) and "\n" not in str(info.value)
    done = run_main("report", path)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done
    assert path in done.stderr and re.search(message, done.stderr.strip()), done.stderr


def test_the_consolidated_copy_is_not_what_the_package_reads(swept, tmp_path):
    """An edit of the root's consolidated metadata (the byte order of auc's chunks) does
    not change what open_cube reads: each array's own metadata, as checked."""
    import json

    path = _copy_cube(swept, tmp_path)
    before = store.open_cube(path)["auc"].values
    meta_file = os.path.join(path, "zarr.json")
    meta = json.load(open(meta_file))
    meta["consolidated_metadata"] = meta.get("consolidated_metadata") or {
        "kind": "inline", "must_understand": False,
        "metadata": {"auc": json.load(open(os.path.join(path, "auc", "zarr.json")))}}
    auc = meta["consolidated_metadata"]["metadata"]["auc"]
    auc["codecs"] = [dict(c, configuration={"endian": "big"}) if c["name"] == "bytes" else c
                     for c in auc["codecs"]]
    json.dump(meta, open(meta_file, "w"))
    np.testing.assert_array_equal(store.open_cube(path)["auc"].values, before)


def test_a_cube_of_format_4_is_read_with_one_warning(swept, tmp_path):
    """The previous format (no checksums, no digest) is read, with one warning; resuming
    it is refused as before (its arrays are of the older format)."""
    from onebit_dask.sweep.report import report

    path = _copy_cube(swept, tmp_path)
    places_as_format_8(path)
    _cube_attrs(path, lambda a: (a.update(format_version=4), a.pop("attrs_sha256"),
                                 a.pop("attrs_digested"), a.pop("arrays_sha256")))
    with pytest.warns(UserWarning, match="older onebit-dask without checksums") as seen:
        text, _ = report(path)
    assert len([w for w in seen if "older onebit-dask" in str(w.message)]) == 1
    assert "2 of 2 cells done" in text
    with pytest.raises(store.StoreError, match="older onebit-dask .*format 4.*--overwrite"):
        plan.check_output(path, RUN_SPEC, False)


def test_what_a_user_adds_with_xarray_is_left_alone(swept, tmp_path):
    """A variable appended with xarray (zarr drops its chunks equal to the fill value)
    and an attribute of the user's: the cube is still whole and reported."""
    from tests.support.helpers import run_main

    path = _copy_cube(swept, tmp_path)
    ds = store.open_cube(path)
    from onebit_dask.utils.warnings import ignored

    with ignored(dict(category=UserWarning)):
        ds[["auc"]].assign(auc_pct=ds.auc * 100)[["auc_pct"]].to_zarr(path, mode="a")
    _cube_attrs(path, lambda a: a.update(note="mine"))
    assert "auc_pct" in store.open_cube(path)
    _big_endian(path, "auc_pct")  # the user's array: not the package's to check
    assert "auc_pct" in store.open_cube(path)
    done = run_main("report", path)
    assert done.returncode == 0, done.stderr


def test_a_cube_whose_format_version_was_lowered_is_refused(swept, tmp_path):
    """A format-5 cube edited to say format 4 (no checksums) but still carrying its digest:
    refused as damaged, not read without its checks."""
    from onebit_dask.sweep.report import report

    path = _copy_cube(swept, tmp_path)
    _cube_attrs(path, lambda a: a.update(format_version=4, description="edited"))
    with pytest.raises(store.DamagedStoreError, match=r"format_version=4 is older than the "
                                                       r"attributes' digest it carries"):
        report(path)


def _as_format_7(path):
    """The cube at ``path`` as format 7 wrote it: without ``arrays_sha256``, signed."""
    places_as_format_8(path)
    def edit(attrs):
        attrs.pop("arrays_sha256")
        attrs.update(format_version=7, attrs_digested=[k for k in attrs["attrs_digested"]
                                                       if k != "arrays_sha256"])
        attrs["attrs_sha256"] = store.attrs_digest(attrs, ("attrs_digested",
                                                           *attrs["attrs_digested"]))
    _cube_attrs(path, edit)


def test_a_cube_of_format_7_is_read_as_before(swept, tmp_path):
    """Format 7 (no digest of the arrays' metadata) opens without a warning, unchecked for
    it as before; a cube passed off as format 7 while carrying ``arrays_sha256`` is
    refused as damaged."""
    import warnings

    path = _copy_cube(swept, tmp_path)
    before = store.open_cube(path)["auc"].values
    _as_format_7(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        ds = store.open_cube(path)
    assert ds.attrs["format_version"] == 7
    np.testing.assert_array_equal(ds["auc"].values, before)
    lowered = _copy_cube(swept, tmp_path / "lowered")
    _cube_attrs(lowered, lambda a: a.update(format_version=7))
    with pytest.raises(store.DamagedStoreError, match=r"format_version=7 is older than the "
                                                       r"attribute arrays_sha256 it carries"):
        store.open_cube(lowered)


# -- format 7: zarr's variable-length strings, units on the coordinates (issue 40) -------------
def test_a_cube_reads_without_a_warning_and_its_strings_are_zarr_strings(cube):
    """The coordinates' strings are zarr's variable-length ``string`` (fixed-length UTF-32
    has no Zarr v3 specification); zarr and xarray read the cube without a warning."""
    import warnings

    import xarray as xr
    import zarr

    store.consolidate(cube)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        group = zarr.open_group(cube, mode="r")
        for _, array in group.arrays():
            array[...]
        ds = xr.open_zarr(cube).load()
    for name in ("estimator", "noise_model", "step"):
        assert group[name].metadata.to_dict()["data_type"] == "string", name
    assert list(ds["noise_model"].values) == ["none", "flip", "gaussian"]
    assert ds.sel(noise_model="flip", noise_level=0.05)["auc"].ndim == ds["auc"].ndim - 2


def test_numeric_coordinates_have_units_and_long_names(cube):
    import xarray as xr

    ds = xr.open_zarr(cube, consolidated=False)
    numeric = [name for name, coord in ds.coords.items() if coord.dtype.kind in "iuf"]
    assert {"d1", "d2", "rank", "n_train", "noise_level", "batch_size", "n_iter", "seed",
            "iteration"} <= set(numeric)
    for name in numeric:
        assert ds[name].attrs["units"] == "1" and ds[name].attrs["long_name"], name
    for name in ("estimator", "noise_model", "step"):
        assert "units" not in ds[name].attrs and ds[name].attrs["long_name"], name


def test_a_cube_of_format_6_opens_as_before(cube):
    """Format 6 stored its string coordinates as fixed-length UTF-32, without units: such
    a cube opens (checked, no warning of an older format) and reads the same values."""
    import json
    import warnings

    import zarr
    from onebit_dask.io.stores.zarr_format import checked_codecs
    from onebit_dask.utils.warnings import ignored

    places_as_format_8(cube)
    group = zarr.open_group(cube, mode="r+", use_consolidated=False)
    with ignored(dict(message=".*does not have a Zarr V3 specification.*")):
        for name in ("estimator", "noise_model", "step"):
            old = group[name]
            values, dims = np.array(old[...].tolist()), old.metadata.dimension_names
            attrs = {k: v for k, v in old.attrs.items() if k != "units"}
            del group[name]
            group.create_array(name, data=values, dimension_names=dims, attributes=attrs,
                               **checked_codecs())
    store.set_attrs(cube, format_version=6, arrays_sha256=None)
    with open(os.path.join(cube, "noise_model", "zarr.json")) as fh:
        assert json.load(fh)["data_type"]["name"] == "fixed_length_utf32"
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        ds = store.open_cube(cube)
    assert ds.attrs["format_version"] == 6
    assert list(ds["noise_model"].values) == ["none", "flip", "gaussian"]
    assert ds.where(ds["noise_model"] == "flip", drop=True).sizes["noise_model"] == 1
    with pytest.raises(store.StoreError, match="older onebit-dask .*format 6.*--overwrite"):
        plan.check_output(cube, SPEC, False)


# -- format 8: the noise settings on two index dimensions (xarray's groupby and where) --------
NOISE_SPEC = parse_spec("""
name: two-models
grid:
  d1: [8]
  d2: [6]
  rank: [2]
  noise: [flip=0.1, gaussian=0.3]
  step: [paper, averaged]
  batch_size: [300]
  n_iter: [2]
  seed: [0, 1]
fixed: {n_test: 40, n_shards: 2}
""", "two-models.yaml")


@pytest.fixture(scope="module")
def noise_cube(tmp_path_factory):
    from onebit_dask.sweep import run_sweep

    path = str(tmp_path_factory.mktemp("noise") / "cube.zarr")
    summary = run_sweep(NOISE_SPEC, path, progress=False)
    assert (summary.ran, summary.failed) == (8, 0)
    return path


def _cell_auc(path) -> dict:
    """Each cell's AUC series, by the spec's noise label, read cell by cell by its
    coordinates: ``{label: [series, ...]}``."""
    from onebit_dask.sweep.noise import parse_noise

    ds = store.open_cube(path)
    out = {}
    for _, params in NOISE_SPEC.cells():
        model, level = parse_noise(params["noise"])
        cell = ds["auc"].sel(estimator=params["method"], noise_model=model,
                             noise_level=level, step=params["step"], seed=params["seed"])
        out.setdefault(params["noise"], []).append(cell.values.ravel())
    return out


def test_a_fresh_cube_groups_by_noise_model(noise_cube):
    """``xr.open_zarr(cube)["auc"].groupby("noise_model")`` works on the cube as written
    (``noise_model`` an index coordinate) and gives the mean over each model's cells."""
    import xarray as xr

    ds = xr.open_zarr(noise_cube)
    assert ds.indexes["noise_model"].tolist() == ["flip", "gaussian"]
    assert ds.indexes["noise_level"].tolist() == [0.1, 0.3]
    means = ds["auc"].groupby("noise_model").mean(...).compute()
    cells = _cell_auc(noise_cube)
    reference = {"flip": np.mean(np.concatenate(cells["flip=0.1"])),
                 "gaussian": np.mean(np.concatenate(cells["gaussian=0.3"]))}
    assert all(np.isfinite(v) for v in reference.values())
    assert list(means["noise_model"].values) == ["flip", "gaussian"]
    np.testing.assert_allclose(means.values, [reference["flip"], reference["gaussian"]],
                               rtol=1e-12)
    # the combinations the spec does not ask for are never run
    done = ds["done"].any([d for d in ds["done"].dims if not d.startswith("noise_")])
    np.testing.assert_array_equal(done.values, [[True, False], [False, True]])
    assert int(ds["done"].sum()) == 8 and not ds["failed"].any()


def test_a_fresh_cube_selects_by_noise_model_with_where(noise_cube):
    import xarray as xr

    ds = xr.open_zarr(noise_cube)
    flip = ds["auc"].where(ds.noise_model == "flip", drop=True)
    assert list(flip["noise_model"].values) == ["flip"]
    kept = flip.values[np.isfinite(flip.values)]
    np.testing.assert_array_equal(np.sort(kept), np.sort(np.concatenate(
        _cell_auc(noise_cube)["flip=0.1"])))
    done = ds["done"].where(ds.noise_model == "flip", drop=True)
    assert int(done.sum()) == 4  # the flip cells: 2 steps x 2 seeds
    whole = ds.where(ds.noise_model == "flip", drop=True).load()  # every variable masks
    assert whole.sizes["noise_model"] == 1 and int(whole["done"].sum()) == 4


def test_a_fresh_cube_opens_and_loads_with_warnings_as_errors(noise_cube):
    """A fresh cube opened by xarray in a new process with ``-W error``: no warning
    (zarr's data types of the cube all have a specification for reading), and its noise
    model groups."""
    import subprocess
    import sys

    import onebit_dask

    code = ("import sys, xarray as xr\n"
            "xr.open_zarr(sys.argv[1]).load()\n"
            "ds = xr.open_zarr(sys.argv[1])  # lazy: load() would read the coordinates\n"
            "ds['auc'].groupby('noise_model').mean(...).load()\n"
            "ds['auc'].where(ds.noise_model == 'flip', drop=True).load()\n"
            "print('ok')\n")
    root = os.path.dirname(os.path.dirname(onebit_dask.__file__))
    proc = subprocess.run([sys.executable, "-W", "error", "-c", code, noise_cube],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": root})
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


# -- format 9: the per-cell strings are zarr strings, in the group ``cells`` -------------------
ZARR_V3_TYPES = {"string", "float64", "bool", "int64"}  # data types with a Zarr v3 spec


def test_every_array_of_a_swept_cube_has_a_zarr_v3_data_type(noise_cube):
    """No array of a fresh cube is of a data type without a Zarr v3 specification (format 8
    wrote the per-cell strings as fixed-length UTF-32); the strings are in the group
    ``cells``, so ``xr.open_zarr(cube)`` holds numbers and flags only and ``Dataset.where``
    on a numeric condition masks every variable of the lazy cube; ``open_cells`` gives
    where each cell ran, on the cube's grid."""
    import json

    import xarray as xr
    import zarr

    group = zarr.open_group(noise_cube, mode="r", use_consolidated=False)
    for name, array in group.members(max_depth=None):
        if not hasattr(array, "shape"):
            continue
        with open(os.path.join(noise_cube, name, "zarr.json")) as fh:
            kind = json.load(fh)["data_type"]
        assert kind in ZARR_V3_TYPES, (name, kind)
    for name in store.STRINGS:
        assert name not in group
        assert group[f"cells/{name}"].metadata.to_dict()["data_type"] == "string", name
    ds = xr.open_zarr(noise_cube)
    assert not set(store.STRINGS) & set(ds.variables)
    level = float(np.nanmedian(ds["auc"].isel(iteration=-1).values))
    kept = ds.where(ds["auc"].isel(iteration=-1) > level).load()  # format 8 raised here
    final = ds["auc"].isel(iteration=-1).values
    np.testing.assert_array_equal(np.isfinite(kept["auc"].isel(iteration=-1).values),
                                  np.isfinite(final) & (final > level))
    cells = store.open_cells(noise_cube)
    done = ds["done"].values
    assert cells["engine"].dims == ds["done"].dims
    assert (cells["engine"].values[done] == "local").all()
    assert (cells["host"].values[done] == store.this_host()).all()
    assert (cells["engine"].values[~done] == "").all()
    assert list(cells["noise_model"].values) == list(ds["noise_model"].values)
    means = ds["auc"].groupby(cells["engine"].compute()).mean(...).compute()
    assert list(means["engine"].values) == ["", "local"]  # not run: every value NaN
    np.testing.assert_allclose(float(means.sel(engine="local")),
                               np.nanmean(ds["auc"].values[done]), rtol=1e-12)
    tree = xr.open_datatree(noise_cube, engine="zarr")  # xarray's own view of both
    np.testing.assert_array_equal(tree["cells"]["host"].values, cells["host"].values)


def test_a_users_append_from_a_stale_copy_leaves_the_cells_alone(tmp_path):
    """The per-cell strings are not coordinates of the cube's variables, so a variable a
    user appends with xarray from a copy loaded before the cells ran (the review's case)
    does not write them again: the cube stays whole and says where each cell ran."""
    import xarray as xr

    from onebit_dask.sweep import run_sweep
    from onebit_dask.utils.warnings import ignored

    path = str(tmp_path / "cube.zarr")
    store.create(path, NOISE_SPEC)
    stale = xr.open_zarr(path, consolidated=False).load()
    run_sweep(NOISE_SPEC, path, progress=False)
    with ignored(dict(category=UserWarning)):
        stale[["auc"]].assign(auc_pct=stale.auc * 100)[["auc_pct"]].to_zarr(path, mode="a")
    ds = store.open_cube(path)  # whole: checked
    cells = store.open_cells(path)
    assert (cells["engine"].values[ds["done"].values] == "local").all()


def test_a_cube_of_format_8_opens_as_before(noise_cube, tmp_path):
    """Format 8 stored the per-cell strings as fixed-length UTF-32 variables: such a cube
    opens (checked, its metadata digest whole) with the same values, and a run on it is
    refused with the message of an older format."""
    import zarr
    from onebit_dask.io.stores.zarr_format import arrays_digests
    from onebit_dask.utils.warnings import ignored

    path = str(tmp_path / "cube.zarr")
    shutil.copytree(noise_cube, path)
    written = places_as_format_8(path)
    group = zarr.open_group(path, mode="r+", use_consolidated=False)
    names = [name.removeprefix("cells/") for name in group.attrs["arrays_sha256"]]
    with ignored(dict(message=".*does not have a Zarr V3 specification.*")):
        store.set_attrs(path, format_version=8, arrays_sha256=arrays_digests(group, names))
    ds = store.open_cube(path)
    assert ds.attrs["format_version"] == 8
    assert set(store.STRINGS) <= set(ds.data_vars) and ds["host"].dtype == np.dtype("<U64")
    for name in store.STRINGS:
        np.testing.assert_array_equal(ds[name].values, written[name])
    fresh = store.open_cube(noise_cube)
    np.testing.assert_array_equal(ds["auc"].values, fresh["auc"].values)
    with pytest.raises(store.StoreError, match="older onebit-dask .*format 8.*--overwrite"):
        plan.check_output(path, NOISE_SPEC, False)
