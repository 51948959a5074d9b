"""A sweep extends its cube along grid dimensions (issue 40): a spec that appends grid
values to the cube's own, everything else the same, keeps the cells done and runs the new
ones, and the cube ends as a fresh sweep of that spec would make it; any other spec is
refused naming what differs; an extension interrupted at any point leaves the old cube or
one the same command finishes."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import xarray as xr
import zarr

from onebit_dask.io.stores import atomic
from onebit_dask.sweep import cube as store
from onebit_dask.sweep import extension, methods, plan, run_sweep
from onebit_dask.sweep.spec import parse_spec
from onebit_dask.testing import MEASURED, PLACES, cube_values

from tests.support.helpers import run_main

A = """\
name: small
grid:
  method: [onebit, onevsall]
  d1: [20]
  d2: [10]
  rank: [2]
  noise: [none, flip=0.05]
  step: [paper]
  batch_size: [500]
  n_iter: [2]
  seed: [0]
fixed: {n_test: 100, n_shards: 2}
"""
ONE_SEED = A.replace("seed: [0]", "seed: [0, 1]")
# a noise model and a level between two of the cube's (a noise_level inserted in the
# cube's ascending axis), a step (onevsall, which has no step rule, is stored along every
# step: its cells done are copied to the new step), a longer n_iter, a method
WIDER = (A.replace("noise: [none, flip=0.05]", "noise: [none, flip=0.05, gaussian=0.1, "
                   "flip=0.01]")
         .replace("step: [paper]", "step: [paper, averaged]")
         .replace("n_iter: [2]", "n_iter: [2, 3]")
         .replace("method: [onebit, onevsall]", "method: [onebit, onevsall, leml]"))
LATER = ("created", "attrs_sha256")  # the time a cube is made, and the digest covering it


def _sweep(text, path, **kwargs):
    return run_sweep(parse_spec(text), str(path), progress=False, **kwargs)


@pytest.fixture(scope="module")
def cubes(tmp_path_factory):
    """The cube of ``A`` and fresh cubes of the specs that extend it."""
    where = tmp_path_factory.mktemp("extend")
    made = {}
    for name, text in {"A": A, "ONE_SEED": ONE_SEED, "WIDER": WIDER}.items():
        made[name] = str(where / f"{name}.zarr")
        summary = _sweep(text, made[name])
        assert summary.failed == 0 and summary.ran == summary.total
    return made


def _copy(path, tmp_path, name="cube.zarr"):
    out = str(tmp_path / name)
    shutil.copytree(path, out)
    return out


def _package_view(path) -> xr.Dataset:
    """The cube as the package writes it: its variables but the measured and placement
    ones, every coordinate, the variables' attributes and the root's but the time it was
    made."""
    ds = store.open_cube(path).load().drop_vars([*MEASURED, *PLACES], errors="ignore")
    ds.attrs = {k: v for k, v in ds.attrs.items() if k not in LATER}
    return ds


def assert_extended_as_fresh(extended, fresh, old):
    """``extended`` equals ``fresh`` (every variable the package computes, coordinate and
    attribute but the creation time), and holds every value of ``old`` (measured ones,
    places and ``done`` marks included) bit for bit at the same coordinates."""
    store.check_cube(extended)
    xr.testing.assert_identical(_package_view(extended), _package_view(fresh))
    xr.testing.assert_identical(cube_values(extended), cube_values(fresh))
    was = store.open_cube(old).load()
    now = store.open_cube(extended).load()
    at = now.sel({d: was[d].values for d in was.dims}, method=None)
    for name in was.data_vars:
        assert at[name].dtype == was[name].dtype
        xr.testing.assert_identical(at[name].drop_attrs(), was[name].drop_attrs())
    assert not atomic.leftovers(extended, "tmp") and not atomic.leftovers(extended, "old")


def test_extend_by_one_seed(cubes, tmp_path):
    path = _copy(cubes["A"], tmp_path)
    summary = _sweep(ONE_SEED, path)
    assert (summary.ran, summary.skipped, summary.total) == (4, 4, 8)
    assert summary.extended == {"seed": [1]} and "the cube extended (seed + 1)" in str(summary)
    assert_extended_as_fresh(path, cubes["ONE_SEED"], cubes["A"])
    again = _sweep(ONE_SEED, path)  # now the cube's own spec: resumed, nothing to run
    assert (again.ran, again.skipped, again.extended) == (0, 8, {})


def test_extend_by_noise_settings_a_step_a_method_and_iterations(cubes, tmp_path):
    path = _copy(cubes["A"], tmp_path)
    summary = _sweep(WIDER, path)
    assert set(summary.extended) == {"method", "noise", "step", "n_iter"}
    # the 4 cells done of A are kept; onevsall's 2 also stand for the averaged step
    assert summary.skipped == 4 and summary.ran == summary.total - 4
    assert_extended_as_fresh(path, cubes["WIDER"], cubes["A"])
    ds = store.open_cube(path)
    np.testing.assert_array_equal(ds["noise_level"].values, [0.0, 0.01, 0.05, 0.1])
    assert ds.sizes["iteration"] == 4


def test_extend_in_two_steps_and_through_the_command_line(cubes, tmp_path):
    """A then ONE_SEED then WIDER with seed 1 too, the last by ``onebit-dask sweep``."""
    path = _copy(cubes["A"], tmp_path)
    _sweep(ONE_SEED, path)
    middle = _copy(path, tmp_path, "middle.zarr")
    both = WIDER.replace("seed: [0]", "seed: [0, 1]")
    spec = tmp_path / "both.yaml"
    spec.write_text(both)
    done = run_main("sweep", spec, "--out", path, "--workers", "0", "--quiet")
    assert done.returncode == 0, done.stderr
    assert "the cube extended (" in done.stdout and "8 skipped (already done)" in done.stdout
    fresh = str(tmp_path / "fresh.zarr")
    _sweep(both, fresh)
    assert_extended_as_fresh(path, fresh, middle)


def _state(path) -> dict:
    """Every file of the store at ``path`` and beside it, with its bytes (the specs
    apart, in ``spec/``)."""
    found = {}
    parent = os.path.dirname(path)
    for root, dirs, files in os.walk(parent):
        dirs[:] = [d for d in dirs if d != "spec"]
        for name in files:
            full = os.path.join(root, name)
            found[os.path.relpath(full, parent)] = open(full, "rb").read()
    return found


REFUSED = {  # the spec -> what the message names
    "a seed removed": (A.replace("seed: [0]", "seed: [1]"), r"grid\.seed \(\[0\] in the cube, "
                       r"\[1\] here: a value removed, reordered or inserted\)"),
    "noise reordered": (A.replace("[none, flip=0.05]", "[flip=0.05, none]"),
                        r"grid\.noise \(\['none', 'flip=0\.05'\] in the cube, \['flip=0\.05', "
                        r"'none'\] here"),
    "a value inserted": (A.replace("method: [onebit, onevsall]", "method: [onebit, leml, "
                                  "onevsall]"), r"grid\.method \("),
    "a fixed key changed": (A.replace("n_test: 100", "n_test: 120").replace(
        "seed: [0]", "seed: [0, 1]"), r"fixed\.n_test \(100 in the cube, 120 here\)"),
    "the sampler changed": (A.replace("n_shards: 2}", "n_shards: 2, sampler: projected}"),
                            r"drawn with sampler 'conditional' and this spec uses "
                            r"'projected'.*fixed\.sampler \('conditional' in the cube, "
                            r"'projected' here\)"),
    "a dimension added": (A.replace("seed: [0]", "seed: [0]\n  threshold: [none]"),
                          r"grid\.threshold \(a dimension added\)"),
    "a value changed and one appended": (A.replace("d2: [10]", "d2: [12, 10]"),
                                         r"grid\.d2 \(\[10\] in the cube, \[12, 10\] here"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_other_specs_are_refused_naming_the_difference(cubes, tmp_path, case):
    text, names = REFUSED[case]
    path = _copy(cubes["A"], tmp_path)
    before = _state(path)
    with pytest.raises(store.StoreError) as info:
        plan.check_output(path, parse_spec(text), False)
    message = str(info.value)
    assert "\n" not in message and "holds the results of another spec ('small')" in message
    assert "a sweep extends a cube only by grid values appended after the cube's own" in message
    import re

    assert re.search(names, message), message
    (tmp_path / "spec").mkdir()
    spec = tmp_path / "spec" / "other.yaml"
    spec.write_text(text)
    done = run_main("sweep", spec, "--out", path, "--workers", "0", "--quiet")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done
    assert re.search(names, done.stderr), done.stderr
    with pytest.raises(store.StoreError, match="another spec"):
        _sweep(text, path)
    assert _state(path) == before  # nothing changed (the lock is gone again)


def test_overwrite_still_replaces_an_extensible_cube(cubes, tmp_path):
    path = _copy(cubes["A"], tmp_path)
    summary = _sweep(ONE_SEED, path, overwrite=True)
    assert (summary.ran, summary.skipped, summary.extended) == (8, 0, {})


def test_a_damaged_cube_is_not_extended(cubes, tmp_path):
    path = _copy(cubes["A"], tmp_path)
    meta_file = os.path.join(path, "zarr.json")
    meta = json.load(open(meta_file))
    meta["attributes"]["n_test"] = 20
    json.dump(meta, open(meta_file, "w"))
    with pytest.raises(store.DamagedStoreError, match="is damaged .*its attributes"):
        _sweep(ONE_SEED, path)


def test_failed_cells_and_their_errors_are_kept(cubes, tmp_path, monkeypatch):
    onebit = methods.METHODS["onebit"]

    def fails(params, fixed):
        raise RuntimeError("planted failure")

    path = str(tmp_path / "cube.zarr")
    with monkeypatch.context() as patch:
        patch.setitem(methods.METHODS, "onebit", dataclasses_replace(onebit, run=fails))
        assert _sweep(A, path).failed == 2
    errors = open(store.failures_path(path)).read()
    summary = _sweep(ONE_SEED, path)
    assert (summary.ran, summary.skipped, summary.skipped_failed) == (4, 2, 2)
    assert open(store.failures_path(path)).read() == errors
    ds = store.open_cube(path)
    assert int(ds["failed"].sum()) == 2 and int(ds["done"].sum()) == 6
    summary = _sweep(ONE_SEED, path, retry_failed=True)
    assert (summary.ran, summary.failed) == (2, 0)
    assert_extended_as_fresh(path, cubes["ONE_SEED"], path)


def dataclasses_replace(obj, **changes):
    import dataclasses

    return dataclasses.replace(obj, **changes)


def _append_with_xarray(path, name, variable):
    import warnings

    ds = store.open_cube(path)
    with warnings.catch_warnings():  # zarr's about the fixed-length strings
        warnings.simplefilter("ignore")
        ds[["auc"]].assign({name: variable(ds)})[[name]].to_zarr(path, mode="a")


def test_arrays_a_user_added_along_a_growing_dimension_refuse_the_extension(cubes, tmp_path):
    path = _copy(cubes["A"], tmp_path)
    _append_with_xarray(path, "auc_pct", lambda ds: ds.auc * 100)
    before = _state(path)
    with pytest.raises(store.StoreError, match=r"holds arrays that onebit-dask did not write "
                                               r"along the dimensions the extension grows: "
                                               r"'auc_pct' \(along seed\); their values for "
                                               r"the new cells cannot be made"):
        _sweep(ONE_SEED, path)
    assert _state(path) == before
    shutil.rmtree(os.path.join(path, "auc_pct"))  # as the message says: moved out
    _sweep(ONE_SEED, path)
    assert_extended_as_fresh(path, cubes["ONE_SEED"], cubes["A"])


def test_what_a_user_added_elsewhere_is_carried_over(cubes, tmp_path):
    """An array along dimensions that do not grow, a group and an attribute of the user's
    are in the extended cube as they were; the cube is still whole."""
    path = _copy(cubes["A"], tmp_path)
    _append_with_xarray(path, "auc_by_iteration",
                        lambda ds: ds.auc.mean([d for d in ds.auc.dims if d != "iteration"]))
    xr.Dataset({"x": ("k", np.arange(3.0))}).to_zarr(path, group="mine", mode="w",
                                                     consolidated=False)
    meta_file = os.path.join(path, "zarr.json")
    meta = json.load(open(meta_file))
    meta["attributes"]["note"] = "mine"
    json.dump(meta, open(meta_file, "w"))
    kept = store.open_cube(path)["auc_by_iteration"].values
    _sweep(ONE_SEED, path)
    ds = store.open_cube(path)
    assert ds.attrs["note"] == "mine" and "note" not in ds.attrs["attrs_digested"]
    np.testing.assert_array_equal(ds["auc_by_iteration"].values, kept)
    np.testing.assert_array_equal(xr.open_zarr(path, group="mine")["x"].values, np.arange(3.0))
    fresh = cube_values(cubes["ONE_SEED"])
    xr.testing.assert_identical(cube_values(path).drop_vars("auc_by_iteration"), fresh)


def test_an_error_while_extending_leaves_the_old_cube(cubes, tmp_path, monkeypatch):
    """A failure (here a Ctrl-C) while the new cube is built: the old one is whole and
    unchanged, the temporary removed; the same command then extends it."""
    path = _copy(cubes["A"], tmp_path)
    before = _state(path)

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(extension, "_carry_over", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _sweep(ONE_SEED, path)
    after = _state(path)
    assert after.keys() == before.keys()  # no temporary, no lock
    store.check_cube(path)
    xr.testing.assert_identical(store.open_cube(path).load(), store.open_cube(cubes["A"]).load())
    monkeypatch.undo()
    _sweep(ONE_SEED, path)
    assert_extended_as_fresh(path, cubes["ONE_SEED"], cubes["A"])


def test_an_interrupted_run_after_the_extension_is_resumed(cubes, tmp_path, monkeypatch):
    """Interrupted while its new cells run (after the extended cube is in place): the
    cube is of the new spec with the cells written so far; the same command resumes."""
    path = _copy(cubes["A"], tmp_path)
    onebit, calls = methods.METHODS["onebit"], []

    def stops(params, fixed):
        calls.append(params)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return onebit.run(params, fixed)

    with monkeypatch.context() as patch:
        patch.setitem(methods.METHODS, "onebit", dataclasses_replace(onebit, run=stops))
        with pytest.raises(KeyboardInterrupt):
            _sweep(ONE_SEED, path, flush_cells=1)
    attrs = store.check_cube(path)
    assert attrs["spec_fingerprint"] == parse_spec(ONE_SEED).fingerprint()
    summary = _sweep(ONE_SEED, path)
    assert summary.skipped > 4 and summary.extended == {}
    assert_extended_as_fresh(path, cubes["ONE_SEED"], cubes["A"])


# ``onebit-dask sweep ARGS`` killed (SIGKILL: no except, no finally) at the point named
# by argv[1]: "copy" after the first variable is copied into the new cube, "swap" between
# the two renames of the replace (the old cube renamed away, the new not yet in place)
KILLED_SWEEP = textwrap.dedent("""
    import os, signal, sys
    from onebit_dask.cli import main
    from onebit_dask.io.stores import atomic
    from onebit_dask.sweep import extension

    where = sys.argv.pop(1)

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    if where == "copy":
        def copied_once(path, tmp, old, spec):
            names = list(extension.variables(spec))
            extension.variables = lambda spec: names[:1]
            copy(path, tmp, old, spec)
            die()

        copy, extension._copy_cells = extension._copy_cells, copied_once
    else:
        def swap_killed(tmp, path):
            token = "0123456789abcdef"
            atomic._mark(path, token)
            os.rename(path, atomic._sibling(path, "old", token))
            die()

        atomic.replace = swap_killed
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.integration
@pytest.mark.parametrize("where", ["copy", "swap"])
def test_killed_while_extending_then_the_same_command_finishes(cubes, tmp_path, where):
    path = _copy(cubes["A"], tmp_path)
    spec = tmp_path / "one_seed.yaml"
    spec.write_text(ONE_SEED)
    args = ["sweep", str(spec), "--out", path, "--workers", "0", "--quiet"]
    proc = subprocess.run([sys.executable, "-c", KILLED_SWEEP, where, *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    if where == "copy":  # the old cube whole at its path, the new one's temporary beside it
        assert atomic.leftovers(path, "tmp")
        store.check_cube(path)
        xr.testing.assert_identical(store.open_cube(path).load(),
                                    store.open_cube(cubes["A"]).load())
    else:  # no cube at the path: the old one is marked beside it
        assert not os.path.exists(path) and atomic.leftovers(path, "old")
    done = run_main(*args)
    assert done.returncode == 0, done.stderr
    assert "4 run, 4 skipped (already done)" in done.stdout
    assert_extended_as_fresh(path, cubes["ONE_SEED"], cubes["A"])
    assert not os.path.exists(path + ".lock")
    zarr.open_group(path, mode="r")  # consolidated at the end, as a fresh cube


FILE_SPEC = """\
name: files
datasets:
  emotions: {train: data/emotions_train.txt, test: data/emotions_test.txt}
grid:
  dataset: [emotions]
  rank: [2]
  batch_size: [1500]
  n_iter: [2]
  seed: [0]
fixed: {n_shards: 2}
"""
BIBTEX = ("  bibtex: {train: data/bibtex_train.txt, test: data/bibtex_test.txt}\n")
FILE_WIDER = (FILE_SPEC.replace("grid:\n", BIBTEX + "grid:\n")
              .replace("dataset: [emotions]", "dataset: [emotions, bibtex]")
              .replace("seed: [0]", "seed: [0, 1]"))


def test_a_cube_of_data_files_extends_by_a_dataset_and_a_seed(tmp_path):
    """The cube's spec is read with the files of the spec's folder; a dataset appended
    (its sizes are coordinates along ``dataset``) and a seed; the files edited since the
    cube was made refuse it."""
    from onebit_dask.sweep.spec import load_spec
    from tests.support.helpers import FILES

    (tmp_path / "data").mkdir()
    for name in ("emotions", "bibtex"):
        for part in ("train", "test"):
            shutil.copy(FILES / f"{name}_{part}.txt", tmp_path / "data")
    for name, text in {"a": FILE_SPEC, "b": FILE_WIDER}.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    path, fresh = str(tmp_path / "cube.zarr"), str(tmp_path / "fresh.zarr")
    run_sweep(load_spec(tmp_path / "a.yaml"), path, progress=False)
    old = _copy(path, tmp_path, "old.zarr")
    summary = run_sweep(load_spec(tmp_path / "b.yaml"), path, progress=False)
    assert summary.extended == {"dataset": ["bibtex"], "seed": [1]} and summary.skipped == 1
    run_sweep(load_spec(tmp_path / "b.yaml"), fresh, progress=False)
    assert_extended_as_fresh(path, fresh, old)
    with open(tmp_path / "data" / "emotions_test.txt", "a") as fh:
        fh.write("\n")
    with pytest.raises(store.StoreError, match=r"another spec \('files'\).*the data files' "
                                               r"contents \(changed since the cube was made\)"):
        plan.check_output(old, load_spec(tmp_path / "b.yaml"), False)


def test_every_value_is_copied_to_its_coordinates_across_chunkings(tmp_path, monkeypatch):
    """The copy alone, on cubes whose chunks split the grid otherwise (30 cells a chunk at
    most here: the old cube's split along noise_model, the new one's along noise_level
    too; the new noise level shifts the old ones' positions): random values in every position of the
    old cube land at the same coordinates of the new one, a method without a step rule's
    also at the appended steps (from step 0), and every other position holds the fill
    value."""
    text = """\
name: chunks
grid:
  method: [onevsall, onebit]
  d1: [20]
  d2: [10]
  rank: [2]
  noise: [none, flip=0.05, gaussian=0.3]
  step: [paper, averaged]
  batch_size: [500]
  n_iter: [3]
  seed: [0, 1, 2, 3, 4]
fixed: {n_test: 100, n_shards: 2}
"""
    old = parse_spec(text)
    new = parse_spec(text.replace("[none, flip=0.05, gaussian=0.3]",
                                  "[none, flip=0.05, gaussian=0.3, gaussian=0.1]")
                     .replace("step: [paper, averaged]", "step: [paper, averaged, harmonic]")
                     .replace("n_iter: [3]", "n_iter: [3, 4]")
                     .replace("3, 4]", "3, 4, 5, 6]"))
    monkeypatch.setattr(store, "CHUNK_CELLS", 30)
    path = str(tmp_path / "cube.zarr")
    store.create(path, old)
    group = zarr.open_group(path, mode="r+", use_consolidated=False)
    rng = np.random.default_rng(0)
    for name in store.variables(old):
        array = group[store.array_key(name)]
        assert array.chunks != array.shape  # the grid split into several chunks
        if array.dtype == bool:
            array[...] = rng.random(array.shape) < 0.5
        elif array.dtype.kind in "UT":
            array[...] = rng.integers(0, 100, array.shape).astype(str)
        else:
            array[...] = rng.random(array.shape)
    before = xr.merge([xr.open_zarr(path, consolidated=False),
                       xr.open_zarr(path, group=store.CELLS, consolidated=False)]).load()
    chunks = group["done"].chunks
    extension.extend(path, old, new)
    after = store.open_cube(path).merge(store.open_cells(path)).load()
    assert zarr.open_array(os.path.join(path, "done"), mode="r").chunks[:-2] != chunks[:-2]
    for name in store.variables(old):
        was, now = before[name], after[name]
        fill = {"b": False, "U": "", "T": ""}.get(now.dtype.kind, np.nan)
        expected = xr.full_like(now, fill)
        at = {d: was[d].values for d in was.dims}
        expected.loc[at] = was.values
        expected.loc[{**at, "estimator": ["onevsall"], "step": ["harmonic"]}] = was.sel(
            estimator=["onevsall"], step=["paper"]).values
        np.testing.assert_array_equal(now.values, expected.values)


@pytest.mark.integration
def test_ctrl_c_while_extending_then_the_same_command_finishes(cubes, tmp_path):
    """A real Ctrl-C (SIGINT to the command's process group) while the extended cube is
    built beside the old one: exit 130 with one line, no temporary and no lock left, and
    the cube is the old one or the extended one, whole (the signal may come before or
    after the swap: every assertion holds for both); the same command finishes it. On a
    loaded machine the signal may land only once the command is over (a Ctrl-C then
    changes nothing: exit 0, main.run's rule): then the cube is the extended one, whole.
    Either way nothing is left beside the cube and the cube equals a fresh sweep."""
    from tests.support.helpers import Session, wait_until

    (tmp_path / "run").mkdir()
    path = _copy(cubes["A"], tmp_path / "run")
    spec = tmp_path / "one_seed.yaml"
    spec.write_text(ONE_SEED)
    args = ("sweep", spec, "--out", path, "--workers", 0, "--quiet")
    with Session.cli(*args, cwd=tmp_path) as session:
        def building():
            assert session.proc.poll() is None, session.finish()
            return bool(atomic.leftovers(path, "tmp"))

        wait_until(building, "the extended cube's temporary", every=0.001)
        session.ctrl_c()
        done = session.finish()
    assert done.returncode in (0, 130), done
    if done.returncode == 130:
        assert done.stderr.strip().splitlines() == ["onebit-dask: interrupted"], done.stderr
    assert sorted(os.listdir(tmp_path / "run")) == ["cube.zarr"]
    attrs = store.check_cube(path)
    assert attrs["spec_fingerprint"] in (parse_spec(A).fingerprint(),
                                         parse_spec(ONE_SEED).fingerprint())
    again = run_main(*args)
    assert again.returncode == 0, again.stderr
    assert_extended_as_fresh(path, cubes["ONE_SEED"], cubes["A"])
