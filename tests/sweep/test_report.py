import os

import matplotlib.image
import pytest

from onebit_dask.sweep import run_sweep
from onebit_dask.sweep.report import report
from onebit_dask.sweep.spec import parse_spec

from tests.support.helpers import run_main

SPEC = parse_spec("""
grid:
  d1: [30]
  d2: [15]
  rank: [2]
  noise: [none, gaussian=0.2]
  step: [paper, averaged]
  batch_size: [3000]
  n_iter: [3]
  seed: [0, 1]
fixed: {n_test: 200, n_shards: 2}
""")


def swept(tmp_path_factory, spec, folder):
    """The path of the cube of ``spec``, swept in this process into a new ``folder``."""
    path = str(tmp_path_factory.mktemp(folder) / "cube.zarr")
    run_sweep(spec, path, progress=False)
    return path


@pytest.fixture(scope="module")
def cube(tmp_path_factory):
    return swept(tmp_path_factory, SPEC, "rep")


def test_tables_and_pngs(cube, tmp_path):
    text, paths = report(cube, tmp_path / "plots")
    assert "auc (%), mean +- std over 2 seeds" in text
    assert "onebit / averaged" in text and "gaussian=0.2" in text
    assert "8 of 8 cells done, 0 failed" in text
    assert sorted(p.rsplit("/", 1)[1] for p in paths) == [
        "auc_per_method.png", "error_vs_iteration.png", "error_vs_observations.png"]
    for path in paths:
        with open(path, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
        image = matplotlib.image.imread(path)
        assert image.shape[0] > 200 and image.shape[1] > 300
        assert image.std() > 0.01  # not blank


@pytest.mark.integration
def test_report_cli(cube, tmp_path):
    # in this process (the README's doc test runs `onebit-dask report` as a real one)
    proc = run_main("report", cube, "--plots", tmp_path / "p")
    assert proc.returncode == 0, proc.stderr
    assert "frobenius_error" in proc.stdout and proc.stdout.count("wrote ") == 3
    bad = run_main("report", tmp_path)
    assert bad.returncode == 2 and "is not an onebit-dask sweep store" in bad.stderr


def test_methods_without_a_step_rule_get_one_row():
    import xarray as xr

    from onebit_dask.sweep.report import _rows

    ds = xr.Dataset(coords={"estimator": ["onebit", "colwise_1bit"], "step": ["paper", "averaged"]})
    assert [name for _, _, name in _rows(ds)] == [
        "onebit / paper", "onebit / averaged", "colwise_1bit"]


FACETED = parse_spec("""
grid:
  d1: [20, 40]
  d2: [10]
  rank: [2]
  noise: [none]
  step: [paper]
  batch_size: [2000]
  n_iter: [2]
  seed: [0, 1, 2]
fixed: {n_test: 200, n_shards: 2}
""")


@pytest.fixture(scope="module")
def faceted(tmp_path_factory):
    return swept(tmp_path_factory, FACETED, "facet")


def test_figures_are_faceted_by_dimensions_they_do_not_show(faceted, tmp_path):
    from onebit_dask.sweep.report import collect
    from onebit_dask.sweep.cube import open_cube

    text, paths = report(faceted, tmp_path)
    names = sorted(p.rsplit("/", 1)[1] for p in paths)
    assert names == ["auc_per_method_d1=20.png", "auc_per_method_d1=40.png",
                     "error_vs_iteration_d1=20.png", "error_vs_iteration_d1=40.png",
                     "error_vs_observations_d1=20.png", "error_vs_observations_d1=40.png"]
    # the tables keep the settings apart too, with the mean over seeds of each
    ds = open_cube(faceted).load()
    for d1 in (20, 40):
        values = ds["frobenius_error"].sel(d1=d1).isel(iteration=-1).values.ravel()
        assert f"d1={d1}" in text
        assert f"{values.mean():.4f}+-{values.std(ddof=1):.4f}" in text
    cells = collect(open_cube(faceted))
    assert len(cells.params) == 6 and set(cells.params["d1"]) == {20, 40}


def test_too_many_facets_are_refused(faceted, tmp_path, monkeypatch):
    from onebit_dask.sweep import report as module

    monkeypatch.setattr(module, "MAX_FACETS", 1)
    with pytest.raises(module.TooManyFacets, match=r"2 facets \(one per value of d1\)"):
        report(faceted, tmp_path / "p")
    assert not (tmp_path / "p").exists() or not list((tmp_path / "p").iterdir())


def test_half_finished_cube_says_how_many_seeds(tmp_path):
    import warnings

    from onebit_dask.sweep import cube as store

    path = str(tmp_path / "half.zarr")
    store.create(path, FACETED)
    result = {m: [0.5, 0.25, 0.125] for m in ("spectral_error", "frobenius_error",
                                              "hamming_loss", "auc")}
    result.update(n_samples=[2000.0, 4000.0, 6000.0], fit_s=[0.1, 0.2, 0.3],
                  n_active=[2000.0, 100.0, 50.0], wall_s=1.0)
    writer = store.CubeWriter(path, FACETED)
    for index, params in FACETED.cells():
        if params["d1"] == 20 and params["seed"] < 2 or params["d1"] == 40 and params["seed"] == 0:
            planted = dict(result, frobenius_error=[0.5, 0.25, 0.1 + 0.1 * params["seed"]])
            writer.add(index, False, params, planted, {"worker": "", "host": "h",
                                                       "engine": "local"})
    writer.flush()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from a mean of nothing
        text, paths = report(path, tmp_path / "plots")
    assert "0.1500+-0.0707 [2/3]" in text  # d1=20: seeds 0 and 1 done, planted 0.1 and 0.2
    assert "0.1000 [1/3]" in text          # d1=40: one seed, no std
    assert "nan" not in text and "3 of 6 cells done" in text
    assert len(paths) == 6


DATASETS = parse_spec("""
datasets:
  "a/b": {d1: 20, d2: 10, rank: 2, batch_size: 2000}
  "a_b": {d1: 20, d2: 10, rank: 2, batch_size: 4000}
  "../up": {d1: 30, d2: 10, rank: 2, batch_size: 2000}
grid:
  dataset: ["a/b", "a_b", "../up"]
  n_iter: [2]
  seed: [0, 1]
fixed: {n_test: 200, n_shards: 2}
""")


def test_datasets_that_set_batch_size_and_names_with_slashes_plot(tmp_path):
    """The shape of pipelines/paper_table2.yaml: ``batch_size`` is a coordinate along
    ``dataset``, not a dimension; dataset names are not file names (a ``/`` neither
    makes a directory nor lets two facets write one file)."""
    from onebit_dask.sweep import cube as store
    from onebit_dask.sweep.report import collect
    from onebit_dask.sweep.cube import open_cube

    path = str(tmp_path / "ds.zarr")
    store.create(path, DATASETS)
    writer = store.CubeWriter(path, DATASETS)
    for index, params in DATASETS.cells():
        result = {m: [0.5, 0.25, 0.1 * (1 + index[0])] for m in (
            "spectral_error", "frobenius_error", "hamming_loss", "auc")}
        result.update(n_samples=[1.0 * params["batch_size"] * (i + 1) for i in range(3)],
                      fit_s=[0.1, 0.2, 0.3], n_active=[10.0, 5.0, 5.0], wall_s=1.0)
        writer.add(index, False, params, result, {"worker": "", "host": "h", "engine": "local"})
    writer.flush()
    cells = collect(open_cube(path))
    assert sorted(zip(cells.params["dataset"], cells.params["batch_size"])) == sorted(
        [("a/b", 2000), ("a_b", 4000), ("../up", 2000)] * 2)
    plots = tmp_path / "plots"
    _, paths = report(path, plots)
    assert len(paths) == len(set(paths)) == 9  # three figures for each of three datasets
    for p in paths:  # every figure directly in the plot directory
        assert os.path.dirname(os.path.abspath(p)) == str(plots)
        assert os.path.isfile(p)
    assert sorted(os.listdir(plots)) == sorted(os.path.basename(p) for p in paths)
    assert not (tmp_path / "up").exists()


def test_plots_never_replace_a_users_file(tmp_path, capsys, cube):
    """A figure's name taken by a file ``report`` did not write: exit 2, one line, the
    file untouched; the figures it wrote itself are replaced on the next report."""
    from onebit_dask.cli import main

    plots = tmp_path / "plots"
    assert main(["report", cube, "--plots", str(plots), "--quiet"]) == 0
    assert main(["report", cube, "--plots", str(plots), "--quiet"]) == 0  # ours: replaced
    capsys.readouterr()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "auc_per_method.png").write_text("keep")
    assert main(["report", cube, "--plots", str(mine), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "was not written by onebit-dask" in err
    assert (mine / "auc_per_method.png").read_text() == "keep"


def test_plots_never_land_in_the_cube_nor_through_a_link(tmp_path, cube):
    """``--plots`` inside the input cube is refused before anything is written; a symbolic
    link where a figure goes is refused and neither it nor its target (a figure report
    wrote elsewhere) changes; an empty file left by an interrupted write (a full disk) is
    replaced, and no temporary is left."""
    before = sorted(os.listdir(cube))
    for inside in (cube, os.path.join(cube, "figs")):
        proc = run_main("report", cube, "--plots", inside, "--quiet")
        assert proc.returncode == 2 and "inside the cube" in proc.stderr, proc
    assert sorted(os.listdir(cube)) == before
    elsewhere = tmp_path / "elsewhere"
    assert run_main("report", cube, "--plots", elsewhere, "--quiet").returncode == 0
    target = elsewhere / "auc_per_method.png"
    stamp = target.read_bytes()
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "auc_per_method.png").symlink_to(target)
    proc = run_main("report", cube, "--plots", linked, "--quiet")
    assert proc.returncode == 2 and "link" in proc.stderr, proc
    assert (linked / "auc_per_method.png").is_symlink() and target.read_bytes() == stamp
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "auc_per_method.png").write_bytes(b"")
    assert run_main("report", cube, "--plots", empty, "--quiet").returncode == 0
    assert (empty / "auc_per_method.png").stat().st_size > 0
    assert not [n for n in os.listdir(empty) if n.endswith(".tmp")]


def test_a_cube_of_format_7_with_its_noise_dimension_reports_the_same(cube, tmp_path):
    """Formats 5 to 7 have one ``noise`` dimension of the spec's labels (``noise_model``
    and ``noise_level`` along it): such a cube reports the tables of a format 8 cube of the
    same spec (its ``noise_model`` x ``noise_level``)."""
    import zarr

    from onebit_dask.io.stores.zarr_format import checked_codecs
    from onebit_dask.sweep import cube as store
    from onebit_dask.utils.warnings import ignored
    from tests.support.helpers import by_noise_setting

    new = store.open_cube(cube).load()
    old = by_noise_setting(new).drop_encoding()
    cells = by_noise_setting(store.open_cells(cube).load())
    for name in store.STRINGS:  # format 7's per-cell strings: fixed-length variables
        old[name] = cells[name].astype("<U64").drop_encoding()
    old = old.transpose(*(d for d in new["auc"].dims if d != "noise_level"
                          for d in (("noise",) if d == "noise_model" else (d,))))
    assert old["auc"].dims[5] == "noise" and old["noise_model"].dims == ("noise",)
    old.attrs = {k: v for k, v in new.attrs.items() if k not in (
        "arrays_sha256", "noise_settings", "attrs_digested", "attrs_sha256")}
    old.attrs.update(format_version=7, coords_sha256={
        name: store.coord_digest(old[name].values) for name in old.coords})
    path = str(tmp_path / "format7.zarr")
    with ignored(dict(message=".*does not have a Zarr V3 specification.*")):
        old.to_zarr(path, zarr_format=3, consolidated=False, write_empty_chunks=True,
                    encoding={name: {"compressors": checked_codecs()["compressors"]}
                              for name in old.variables})
    store._sign(zarr.open_group(path, mode="r+"))
    assert "noise" in store.open_cube(path).dims
    assert report(path)[0] == report(cube)[0]
