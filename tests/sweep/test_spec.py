import re

import pytest

from onebit_dask.sweep.spec import SpecError, load_spec, parse_noise, parse_spec
from tests.support.helpers import ROOT

PIPELINES = sorted((ROOT / "pipelines").glob("*.yaml"))
GOOD = """
grid:
  d1: [20, 30]
  d2: 10
  rank: [2]
  batch_size: [1000]
  noise: [none, flip=0.1]
fixed: {n_test: 100}
"""


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.name)
def test_shipped_pipelines_parse(path):
    try:
        spec = load_spec(path)
    except SpecError as exc:  # a spec of data files that are not on this machine
        if "does not exist" not in str(exc) or "datasets." not in str(exc):
            raise
        pytest.skip(f"its data files are missing here: {exc}")
    assert spec.dims[0] == "method" and spec.n_iterations >= 2


def test_defaults_and_cells():
    spec = parse_spec(GOOD, "good.yaml")
    assert spec.name == "good"
    assert spec.grid["d2"] == [10] and spec.grid["step"] == ["paper"]
    assert spec.grid["seed"] == [0] and spec.fixed["n_shards"] == 4 and spec.fixed["n_test"] == 100
    cells = list(spec.cells())
    assert len(cells) == 4 and cells[0][1]["d1"] == 20 and cells[-1][1]["noise"] == "flip=0.1"
    assert spec.fingerprint() == parse_spec(GOOD + "\n# a comment\n").fingerprint()


def test_noise_labels():
    assert parse_noise("none") == ("none", 0.0)
    assert parse_noise("flip=0.05") == ("flip", 0.05)
    assert parse_noise("gaussian=0.3") == ("gaussian", 0.3)


@pytest.mark.parametrize("text, match", [
    ("grid: {d1: 5, d2: 5, rank: 1, batch_size: 10}\nfixd: {}\n",
     r"unknown key 'fixd' \(did you mean 'fixed'\?\)"),
    ("grid: {d1: 5, d2: 5, rank: 1, batch_size: 10, seeds: [1]}\n",
     r"unknown key 'grid.seeds' \(did you mean 'seed'\?\)"),
    ("grid: {d1: 5, d2: 5, rank: 1}\n", r"missing key 'grid.batch_size'"),
    ("grid: {d1: 5, d2: 3, rank: [1, 4], batch_size: 10}\n",
     r"grid.rank: rank=4 is not allowed: rank must be <= min\(d1, d2\) = 3"),
    ("grid: {d1: 5, d2: 5, rank: 1, batch_size: 10, noise: [flip=0.5]}\n",
     r"grid.noise: 'flip=0.5': flip=0.5 is not allowed"),
    ("grid: {d1: 5, d2: 5, rank: 1, batch_size: 10, noise: [salt=1]}\n",
     r"grid.noise: 'salt=1' is not allowed"),
    ("grid: {d1: five, d2: 5, rank: 1, batch_size: 10}\n", r"grid.d1: d1='five' is not allowed"),
    ("grid: {d1: 5, d2: 5, rank: 1, batch_size: 10, method: [onebitt]}\n",
     r"method='onebitt' is not allowed \(did you mean 'onebit'\?\)"),
    ("grid: {d1: 5, d2: 5, rank: 1, batch_size: 10, step: [fast]}\n", r"grid.step: step='fast'"),
    ("grid: {d1: 5, d2: 5, rank: 1, batch_size: 10, step: [select]}\n",
     r"grid.step: 'select' scores every bit of a batch, and fixed.sampler='conditional'"),
    ("grid: {d1: 5, d2: 5, rank: 1, batch_size: 10, seed: [1, 1]}\n", r"grid.seed: repeated"),
    ("grid: {d1: 5, d2: 5, rank: 1, batch_size: 10, seed: []}\n", r"grid.seed: an empty list"),
    ("grid: {d1: 5, d2: 5, rank: 1, batch_size: 10}\nfixed: {n_test: 0}\n",
     r"fixed.n_test: n_test=0 is not allowed"),
    ("grid: {d1: 5, d2: 5, rank: 1, batch_size: 10}\nfixed: {shards: 2}\n",
     r"unknown key 'fixed.shards' \(did you mean 'n_shards'\?\)"),
    ("grid: {d1: 5, d2: 5, rank: 1, batch_size: 10}\nfixed: {sampler: implicit}\n",
     r"fixed.sampler='implicit' is not allowed: choose from conditional, projected, explicit"),
    ("grid: [1, 2]\n", r"'grid' must be a mapping"),
    ("grid: {d1: [5\n", r"not valid YAML"),
])
def test_bad_specs_name_the_key(text, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(text)


def test_select_runs_with_the_explicit_sampler_or_full_observations():
    grid = "grid: {d1: 5, d2: 5, rank: 1, batch_size: 10, step: [select]"
    assert parse_spec(grid + "}\nfixed: {sampler: explicit}\n").grid["step"] == ["select"]
    assert parse_spec(grid + ", n_train: [20]}\n").grid["step"] == ["select"]


def test_missing_spec_file(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")


DATASETS = """
datasets:
  a: {d1: 20, d2: 10, rank: 2, n_train: 300, batch_size: 2000}
  b: {d1: 30, d2: 12, rank: 2, n_train: 400, batch_size: 3000}
grid:
  method: [onebit, svm]
  dataset: [a, b]
  n_iter: [2]
"""


def test_datasets_expand_into_cells():
    spec = parse_spec(DATASETS)
    assert "d1" not in spec.dims and "dataset" in spec.dims
    params = [p for _, p in spec.cells()]
    assert {(p["dataset"], p["d1"], p["n_train"]) for p in params} == {("a", 20, 300),
                                                                        ("b", 30, 400)}


@pytest.mark.parametrize("text, match", [
    (DATASETS.replace("n_train: 300", "n_trian: 300"),
     r"unknown key 'datasets.a.n_trian' \(did you mean 'n_train'\?\)"),
    (DATASETS.replace("dataset: [a, b]", "dataset: [a, c]"), r"'c' is not in datasets"),
    (DATASETS.replace("n_iter: [2]", "n_iter: [2]\n  d1: [5]"), "d1 is set both in grid"),
    (DATASETS.replace("rank: 2, n_train: 300", "rank: 25, n_train: 300"), "rank=25"),
    (DATASETS.replace("n_train: 300", "n_train: 0").replace("n_train: 400", "n_train: 0"),
     "method='svm' does not run on single-observation data"),
    ("grid: {d1: 5, d2: 5, rank: 1, batch_size: 10, method: [onevsall], n_train: [50]}\n",
     "method='onevsall' does not run on full-observation data"),
])
def test_bad_datasets(text, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(text)


def test_placement_keys():
    spec = parse_spec(GOOD.replace("fixed: {n_test: 100}",
                                   "fixed: {n_test: 100, distributed: never, "
                                   "distributed_batch: 5}"))
    assert spec.fixed["distributed"] == "never" and spec.fixed["distributed_batch"] == 5
    assert spec.fixed["distributed_labels"] == 2 ** 17
    # where a cell runs never changes its values: a store can be resumed under another rule
    assert spec.fingerprint() == parse_spec(GOOD).fingerprint()
    with pytest.raises(SpecError, match=r"fixed.distributed='sometimes' is not allowed: choose "
                                        r"from auto, always, never"):
        parse_spec(GOOD.replace("fixed: {n_test: 100}", "fixed: {distributed: sometimes}"))
    with pytest.raises(SpecError, match=r"fixed.distributed_labels: distributed_labels=0"):
        parse_spec(GOOD.replace("fixed: {n_test: 100}", "fixed: {distributed_labels: 0}"))


def test_runs_distributed_rule():
    from onebit_dask.sweep.distribute import runs_distributed

    fixed = parse_spec(GOOD).fixed
    small = {"method": "onebit", "d1": 20, "d2": 10, "rank": 2, "batch_size": 1000}
    assert not runs_distributed(small, fixed)
    big_batch = {**small, "batch_size": 2 ** 25 // 20 + 1}
    explicit = {**fixed, "sampler": "explicit"}
    assert runs_distributed(big_batch, explicit)  # 2**25 features drawn
    assert not runs_distributed(big_batch, {**fixed, "sampler": "projected"})  # 6 a row
    assert not runs_distributed(big_batch, {**fixed, "sampler": "conditional"})  # 10 x 20
    assert runs_distributed({**big_batch, "d1": 2 ** 25 // 10 + 1}, fixed)  # whole labels
    assert runs_distributed({**small, "d2": 2 ** 17}, fixed)
    assert not runs_distributed({**small, "d2": 2 ** 17, "method": "leml"}, fixed)
    assert runs_distributed(small, {**fixed, "distributed": "always"})
    assert not runs_distributed({**small, "d2": 2 ** 20}, {**fixed, "distributed": "never"})


# --- bounds and strict YAML ----------------------------------------------------------------

BOUNDED = """
grid:
  d1: [{d1}]
  d2: [10]
  rank: [2]
  batch_size: [1000]
  n_iter: [{n_iter}]
fixed: {{n_test: {n_test}}}
"""


@pytest.mark.parametrize("d1, n_iter, n_test, fragment", [
    (20, 10**12, 100, "n_iter=1000000000000 is not allowed: n_iter must be <= 1,000,000"),
    (10**29, 2, 100, f"d1={10**29} is not allowed: d1 must be <= 2,147,483,647"),
    (20, 2, 10**23, f"n_test={10**23} is not allowed: n_test must be <= 2,147,483,647"),
])
def test_sizes_beyond_the_fixed_limits_are_refused(d1, n_iter, n_test, fragment):
    with pytest.raises(SpecError, match=re.escape(fragment)):
        parse_spec(BOUNDED.format(d1=d1, n_iter=n_iter, n_test=n_test), "s.yaml",
                   allow_large=True)  # hard limits: even with allow_large


def test_arrays_beyond_the_soft_limit_need_allow_large():
    text = BOUNDED.format(d1=2 * 10**6, n_iter=2, n_test=10**4)  # 2e10 test features
    with pytest.raises(SpecError, match=r"the test features n_test x d1 would hold "
                                        r"20,000,000,000 numbers.*--allow-large"):
        parse_spec(text, "s.yaml")
    assert parse_spec(text, "s.yaml", allow_large=True).grid["d1"] == [2 * 10**6]
    many = BOUNDED.format(d1=20, n_iter=200_000, n_test=100).replace(
        "n_iter: [200000]", f"n_iter: [200000]\n  seed: {list(range(1000))}")
    with pytest.raises(SpecError, match=r"1,000 cells x 200,001 iterations"):
        parse_spec(many, "s.yaml")


@pytest.mark.parametrize("text, fragment", [
    ("grid:\n  d1: [20]\n  d1: [30]\n",
     "s.yaml: line 3: key 'd1' is given twice (first on line 2)"),
    ("grid:\n  d1:\n  d2: [10]\n", "s.yaml: grid.d1 has no value (null)"),
    ("grid:\n  d1: [20, null]\n", "s.yaml: grid.d1[1] has no value (null)"),
    ("grid:\n\td1: [20]\n", "s.yaml: line 2, column 1: not valid YAML: found character '\\t'"),
])
def test_duplicate_keys_nulls_and_tabs_name_the_file_line_and_key(text, fragment):
    with pytest.raises(SpecError) as info:
        parse_spec(text, "s.yaml")
    assert str(info.value).startswith(fragment), str(info.value)


def test_a_spec_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: x\ndescription: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(SpecError, match=re.escape(f"{path}: line 2: byte 0xe9 is not UTF-8")):
        load_spec(path)


def test_positive_rate_is_a_grid_dimension_only_where_given():
    from onebit_dask.sweep.methods import make_problem

    assert "positive_rate" not in parse_spec(GOOD).dims
    text = GOOD.replace("  rank: [2]\n", "  rank: [2]\n  positive_rate: [none, 0.05, '0.005:0.3']\n")
    spec = parse_spec(text)
    assert spec.grid["positive_rate"] == ["none", "0.05", "0.005:0.3"]
    rates = {make_problem(params, spec.fixed).positive_rate for _, params in spec.cells()}
    assert rates == {None, 0.05, (0.005, 0.3)}
    with pytest.raises(SpecError, match=r"grid.positive_rate: positive_rate=1.5 is not allowed"):
        parse_spec(text.replace("0.05,", "1.5,"))
    with pytest.raises(SpecError, match="the same setting"):
        parse_spec(text.replace("[none, 0.05", "[5e-2, 0.05"))


def _alias_bomb(depth: int) -> str:
    """Top-level ``seed: &s0 [0..8]``, then ``extraN: &sN [*s(N-1) x9]``: 9^(depth+1)
    values once expanded, in ``depth + 1`` short lines (keys a spec does not know)."""
    lines = [GOOD.strip(), "seed: &s0 [0, 1, 2, 3, 4, 5, 6, 7, 8]"]
    lines += [f"extra{n}: &s{n} [{', '.join([f'*s{n - 1}'] * 9)}]" for n in range(1, depth + 1)]
    return "\n".join(lines) + "\n"


def test_nested_aliases_are_refused_before_they_are_expanded(tmp_path):
    """A 10-line spec whose aliases expand to 9^10 values is refused by counting its
    distinct nodes (before the null check or the key check walk the expanded tree); the
    same file with one level of aliases is read and refused for its unknown key."""
    with pytest.raises(ValueError, match="aliases .* expand to more than 100,000 values"):
        parse_spec(_alias_bomb(9), "bomb.yaml")
    with pytest.raises(SpecError, match="unknown key 'seed'"):  # read, then checked
        parse_spec(_alias_bomb(1), "small.yaml")
    from onebit_dask.cli.clusters import load_cluster_config

    config = tmp_path / "cluster.yaml"
    config.write_text("kind: local\noptions:\n  n_workers: 1\n" + "\n".join(
        _alias_bomb(9).splitlines()[len(GOOD.strip().splitlines()):]) + "\n")
    with pytest.raises(ValueError, match="aliases .* expand to more than"):
        load_cluster_config(config)


def test_a_number_of_100000_digits_names_the_file_and_line():
    with pytest.raises(ValueError, match=r"big\.yaml: line 4: the number 1{20}\.\.\. has "
                                         r"100000 characters"):
        parse_spec(GOOD.replace("d2: 10", "d2: " + "1" * 100_000), "big.yaml")


def test_a_name_with_terminal_escapes_is_refused():
    with pytest.raises(SpecError, match=r"name='\\x1b\[31mred' holds control characters"):
        parse_spec("name: \"\\e[31mred\"\n" + GOOD, "esc.yaml")
