"""Sweeps over data files (onebit_dask.sweep.datafiles): a spec whose datasets name train
and test files runs, resumes and reports; its cube equals the fits it names; bad specs
are refused with one line before any work."""

import dataclasses
import shutil

import numpy as np
import pytest
import xarray as xr

from onebit_dask.estimator import OneBitMultiLabel
from onebit_dask.fit.evaluation import read_test_data
from onebit_dask.metrics.names import RANKING
from onebit_dask.sweep import methods, run_sweep
from onebit_dask.sweep.cube import open_cells, open_cube
from onebit_dask.sweep.spec import load_spec
from onebit_dask.testing import cube_values

from tests.support.helpers import FILES, one_line, run_main

pytestmark = pytest.mark.integration

SETS = ("emotions", "bibtex")
SPEC_TEXT = """\
name: two_files
datasets:
  emotions: {train: data/emotions_train.txt, test: data/emotions_test.txt}
  bibtex: {train: data/bibtex_train.txt, test: data/bibtex_test.txt}
grid:
  dataset: [emotions, bibtex]
  rank: [2]
  step: [auto, paper]
  batch_size: [1500]
  n_iter: [2]
  seed: [0, 1]
fixed: {n_shards: 2}
"""
N_CELLS = 2 * 2 * 2


def _spec_dir(directory):
    """A spec folder: the spec and, in ``data/``, the sample files it names."""
    (directory / "data").mkdir(parents=True, exist_ok=True)
    for name in SETS:
        for part in ("train", "test"):
            shutil.copy(FILES / f"{name}_{part}.txt", directory / "data")
    (directory / "spec.yaml").write_text(SPEC_TEXT)
    return directory / "spec.yaml"


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """``(spec path, cube path)`` of an uninterrupted sweep, in this process."""
    spec_path = _spec_dir(tmp_path_factory.mktemp("files"))
    out = str(spec_path.parent / "cube.zarr")
    summary = run_sweep(load_spec(spec_path), out, progress=False)
    assert (summary.ran, summary.failed) == (N_CELLS, 0)
    return spec_path, out


def test_cube_holds_the_ranking_metrics_per_iteration(swept):
    _, out = swept
    ds = open_cube(out).load()
    assert ds.attrs["data"] == "files" and ds["done"].all()
    for name in (*RANKING, "n_samples", "fit_s", "n_active"):
        assert ds[name].dims[-1] == "iteration" and np.isfinite(ds[name]).all(), name
    assert "spectral_error" not in ds and "noise" not in ds.dims
    assert list(ds["d2"].values) == [6, 159] and list(ds["d1"].values) == [72, 1836]
    assert list(ds["train"].values) == ["data/emotions_train.txt", "data/bibtex_train.txt"]
    np.testing.assert_array_equal(ds["n_samples"].isel(iteration=-1), 3 * 1500)
    assert set(np.unique(ds["features"])) == {"auto"}
    assert set(np.unique(ds["threshold"])) == {"auto"}


def test_cube_equals_the_fits_it_names(swept):
    spec_path, out = swept
    ds = open_cube(out).load()
    data = spec_path.parent / "data"
    for name in SETS:
        train = str(data / f"{name}_train.txt")
        for step in ("auto", "paper"):
            for seed in (0, 1):
                est = OneBitMultiLabel(2, batch_size=1500, n_iter=2, step=step,
                                       threshold="auto", features="auto", n_shards=2,
                                       random_state=seed, engine="local")
                test = read_test_data(data / f"{name}_test.txt", *_sizes(train),
                                      name="test", training="train")
                est.fit(train, eval_set=test)
                cell = ds.sel(dataset=name, step=step, seed=seed).squeeze()
                for key in (*RANKING, "n_samples", "n_active"):
                    want = [h[key] for h in est.history_]
                    np.testing.assert_array_equal(cell[key].values, want, err_msg=key)


def test_a_sweep_over_query_policies_equals_the_fits_it_names(tmp_path):
    """``grid.queries``: one cell per policy; each cell is the fit with that policy."""
    spec_path = _spec_dir(tmp_path)
    spec_path.write_text(SPEC_TEXT.replace("  step: [auto, paper]\n",
                                           "  queries: [uniform, model]\n")
                         .replace("seed: [0, 1]", "seed: [0]"))
    out = str(tmp_path / "cube.zarr")
    summary = run_sweep(load_spec(spec_path), out, progress=False)
    assert (summary.ran, summary.failed) == (4, 0)
    ds = open_cube(out).load()
    data = spec_path.parent / "data"
    for name in SETS:
        train = str(data / f"{name}_train.txt")
        for queries in ("uniform", "model"):
            est = OneBitMultiLabel(2, batch_size=1500, n_iter=2, queries=queries, n_shards=2,
                                   random_state=0, engine="local")
            est.fit(train, eval_set=read_test_data(data / f"{name}_test.txt", *_sizes(train),
                                                   name="test", training="train"))
            cell = ds.sel(dataset=name, queries=queries).squeeze()
            for key in (*RANKING, "n_samples"):
                np.testing.assert_array_equal(cell[key].values,
                                              [h[key] for h in est.history_], err_msg=key)


def _sizes(train):
    from onebit_dask.io.xc import read_header

    return read_header(train)[1:]


def _interrupt_after(n_cells, spec_path, out):
    """Sweep ``spec_path`` into ``out`` (a cell flushed at a time), stopped by a
    ``KeyboardInterrupt`` as cell ``n_cells + 1`` starts (deterministic)."""
    onebit, calls = methods.METHODS["onebit"], []

    def interrupted(params, fixed, client=None):
        calls.append(params)
        if len(calls) > n_cells:
            raise KeyboardInterrupt
        return onebit.run(params, fixed)

    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(methods.METHODS, "onebit", dataclasses.replace(onebit, run=interrupted))
        with pytest.raises(KeyboardInterrupt):
            run_sweep(load_spec(spec_path), out, progress=False, flush_cells=1)


def test_interrupted_sweep_resumes_to_the_same_cube(swept, tmp_path):
    spec_path = _spec_dir(tmp_path)
    out = str(tmp_path / "resumed.zarr")
    _interrupt_after(3, spec_path, out)
    assert int(open_cube(out)["done"].sum()) == 3
    summary = run_sweep(load_spec(spec_path), out, progress=False)
    assert (summary.ran, summary.skipped, summary.failed) == (N_CELLS - 3, 3, 0)
    xr.testing.assert_equal(cube_values(out), cube_values(swept[1]))
    assert (open_cube(out).attrs["spec_fingerprint"]
            == open_cube(swept[1]).attrs["spec_fingerprint"])


def test_a_resume_refuses_edited_data_files(tmp_path):
    """The spec's fingerprint covers the files' contents: a cube started on one version of
    a data file is not resumed on another (same path, same size class)."""
    from onebit_dask.sweep.cube import StoreError

    spec_path = _spec_dir(tmp_path)
    out = str(tmp_path / "cube.zarr")
    _interrupt_after(1, spec_path, out)
    test_file = tmp_path / "data" / "emotions_test.txt"
    lines = test_file.read_text().splitlines()
    lines[1], lines[2] = lines[2], lines[1]  # two rows swapped: the same sizes
    test_file.write_text("\n".join(lines) + "\n")
    with pytest.raises(StoreError, match="data files that changed"):
        run_sweep(load_spec(spec_path), out, progress=False)


def test_dask_workers_give_the_same_cube(swept, tmp_path, client2):
    spec_path, _ = swept
    out = str(tmp_path / "dask.zarr")
    summary = run_sweep(load_spec(spec_path), out, client2, progress=False)
    assert (summary.ran, summary.failed) == (N_CELLS, 0)
    xr.testing.assert_equal(cube_values(out), cube_values(swept[1]))
    spread = open_cube(out).attrs["placement"]
    assert "Dask cluster" in spread, spread


def test_file_cells_run_across_the_cluster(swept, tmp_path, client2):
    spec_path, _ = swept
    spec_path.with_name("always.yaml").write_text(
        SPEC_TEXT.replace("fixed: {n_shards: 2}", "fixed: {n_shards: 2, distributed: always}")
        .replace("seed: [0, 1]", "seed: [0]").replace("step: [auto, paper]", "step: [auto]"))
    out = str(tmp_path / "across.zarr")
    summary = run_sweep(load_spec(spec_path.with_name("always.yaml")), out, client2,
                        progress=False)
    assert (summary.ran, summary.failed) == (2, 0)
    assert (open_cells(out)["engine"] == "dask").all()
    want = cube_values(swept[1]).sel(step=["auto"], seed=[0])
    got = cube_values(out)
    for name in (*RANKING, "n_samples"):
        np.testing.assert_array_equal(got[name].values, want[name].values, err_msg=name)


def test_cli_runs_and_reports(swept, tmp_path):
    spec_path, _ = swept
    out = tmp_path / "cli.zarr"
    ran = run_main("sweep", spec_path, "--out", out, "--workers", "0", "--quiet")
    assert ran.returncode == 0, ran.stderr
    xr.testing.assert_equal(cube_values(out), cube_values(swept[1]))
    shown = run_main("report", out, "--plots", tmp_path / "plots")
    assert shown.returncode == 0, shown.stderr
    assert "precision_at_1 at the last iteration" in shown.stdout
    assert "psp_at_5" in shown.stdout and "emotions" in shown.stdout
    assert "onebit / paper" in shown.stdout
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "ranking_vs_bits_dataset=bibtex.png", "ranking_vs_bits_dataset=emotions.png"]


@pytest.mark.parametrize("change, says", [
    (("data/bibtex_test.txt", "data/missing_test.txt"),
     "datasets.bibtex.test: 'data/missing_test.txt' does not exist"),
    (("test: data/emotions_test.txt}", "test: data/emotions_test.txt, shuffle: yes}"),
     "unknown key 'datasets.emotions.shuffle'"),
    (("test: data/emotions_test.txt}", "test: data/emotions_test.txt, d1: 72}"),
     "unknown key 'datasets.emotions.d1' (a planted problem's size"),
    (("  rank: [2]\n", "  rank: [2]\n  d1: [72]\n"), "grid.d1 does not apply to file datasets"),
    (("  rank: [2]\n", "  rank: [2]\n  noise: [none]\n"),
     "grid.noise does not apply to file datasets"),
    (("fixed: {n_shards: 2}", "fixed: {n_shards: 2, n_test: 100}"),
     "fixed.n_test sets the planted problem"),
    (("  bibtex: {train:", "  planted: {d1: 20, d2: 8, rank: 2, batch_size: 100}\n"
                           "  bibtex: {train:"),
     "file datasets (emotions, bibtex) and planted datasets (planted) cannot be mixed"),
    (("  rank: [2]", "  rank: [7]"), "grid.rank: "),
    (("  rank: [2]\n", "  rank: [2]\n  queries: [uniform, model]\n"),
     "grid: step='paper' is not allowed with queries='model'"),
    (("  rank: [2]\n", "  rank: [2]\n  queries: [best]\n"), "queries='best' is not allowed"),
    (("  step: [auto, paper]\n  batch_size: [1500]\n  n_iter: [2]\n",
      "  queries: [model]\n  batch_size: [1500]\n  n_iter: [0]\n"),
     "grid: query_warmup=0.6 is not allowed with n_iter=0"),
    (("  rank: [2]\n", "  rank: [2]\n  features: [pca]\n"), "features='pca' is not allowed"),
    (("  dataset: [emotions, bibtex]\n", "  dataset: [emotions, bibtex]\n  method: [leml]\n"),
     "method='leml' does not run on file datasets"),
])
def test_bad_specs_are_refused_with_one_line(tmp_path, change, says):
    spec_path = _spec_dir(tmp_path)
    text = SPEC_TEXT.replace(*change)
    assert text != SPEC_TEXT
    spec_path.write_text(text)
    proc = run_main("sweep", spec_path, "--out", tmp_path / "x.zarr", "--workers", "0")
    line = one_line(proc, 2)
    assert says in line, line
    assert not (tmp_path / "x.zarr").exists()


@pytest.mark.parametrize("key, value", [("features", "none"), ("queries", "model")])
def test_file_keys_are_refused_on_a_planted_spec(tmp_path, key, value):
    spec = tmp_path / "planted.yaml"
    spec.write_text("grid: {d1: [20], d2: [8], rank: [2], batch_size: [100], "
                    f"{key}: [{value}]}}\n")
    line = one_line(run_main("sweep", spec, "--out", tmp_path / "x.zarr", "--workers", "0"), 2)
    assert f"grid.{key} applies to file datasets only" in line


def test_csr_stores_as_datasets(tmp_path):
    from onebit_dask.io.csr_store import convert

    data = tmp_path / "stores"
    data.mkdir()
    for part in ("train", "test"):
        convert(FILES / f"emotions_{part}.txt", data / f"emotions_{part}.zarr")
    spec_path = tmp_path / "stores.yaml"
    spec_path.write_text(
        "datasets:\n"
        "  emotions: {train: stores/emotions_train.zarr, test: stores/emotions_test.zarr}\n"
        "grid: {dataset: [emotions], rank: [2], batch_size: [1500], n_iter: [2]}\n"
        "fixed: {n_shards: 2}\n")
    spec = load_spec(spec_path)
    assert spec.sizes == {"emotions": {"n_train": 300, "d1": 72, "d2": 6}}
    out = str(tmp_path / "stores_cube.zarr")
    assert run_sweep(spec, out, progress=False).ran == 1
    cell = open_cube(out).load().squeeze()
    est = OneBitMultiLabel(2, batch_size=1500, n_iter=2, n_shards=2, random_state=0,
                           engine="local")
    est.fit(str(data / "emotions_train.zarr"),
            eval_set=read_test_data(data / "emotions_test.zarr", 72, 6, name="test",
                                    training="train"))
    for key in (*RANKING, "n_samples"):
        np.testing.assert_array_equal(cell[key].values, [h[key] for h in est.history_],
                                      err_msg=key)
    spec_path.write_text(spec_path.read_text().replace("n_iter: [2]", "n_iter: [2], "
                                                       "queries: [uniform, model]"))
    line = one_line(run_main("sweep", spec_path, "--out", tmp_path / "q.zarr",
                             "--workers", "0"), 2)
    assert "queries='model' is not allowed with datasets.emotions.train, a CSR store" in line
    assert not (tmp_path / "q.zarr").exists()
