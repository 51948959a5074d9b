"""Sweep specs (``pipelines/*.yaml``): parsed strictly (:mod:`onebit_dask._yaml`: no key
twice, no null values, UTF-8) and checked whole before any work, sizes included
(:mod:`onebit_dask.utils.limits`).

A spec::

    name: quickstart
    description: free text
    grid:                      # every key is a dimension of the result cube
      method: [onebit]         # see onebit_dask.sweep.methods.METHODS
      d1: [100]
      d2: [50]
      rank: [2]
      noise: [none, flip=0.05, gaussian=0.3]
      step: [paper, averaged]
      batch_size: [10000]
      n_iter: [8]
      seed: [0, 1, 2]
      positive_rate: [none, 0.05, "0.005:0.3"]   # optional: label priors (none = balanced)
      threshold: [none, estimated]   # optional (default none here): also auto, shares
    fixed:                     # the same for every cell
      n_test: 2000
      n_shards: 4
      max_eval_labels: 1000
      sampler: conditional     # conditional | projected | explicit: how onebit's synthetic
                               # batches are drawn (baselines always see explicit draws)
      distributed: auto        # auto | always | never: a onebit cell's fit across the
                               # cluster (Dask engine) or as one task; auto: when
                               # a batch draws >= distributed_batch numbers (default
                               # 2**25: batch_size * d1 explicit, * 3k projected,
                               # min(batch_size, d2) * d1 conditional)
                               # or d2 >= distributed_labels (default 2**17)

A scalar in ``grid`` is a one-value list. Missing grid keys take the defaults of
:data:`GRID_DEFAULTS`. ``n_train: 0`` (the default) streams fresh single-label
batches; ``n_train > 0`` is the full-observation setting (``n_train`` fully labelled
instances, the paper's Sec. 5.2).

Settings that go together (the paper's Synthetic1-3) are named ``datasets``::

    datasets:
      synthetic1: {d1: 500, d2: 100, n_train: 5000, batch_size: 50000}
    grid:
      dataset: [synthetic1]

A key a dataset sets (any of :data:`DATASET_KEYS`) is then a coordinate along the
``dataset`` dimension instead of a dimension of its own.

A dataset may instead name a training and a test set (:mod:`.datafiles`: XC/svmlight
text files or CSR stores, relative to the spec's folder)::

    datasets:
      emotions: {train: data/emotions_train.txt, test: data/emotions_test.txt}
    grid:
      dataset: [emotions]
      rank: [5]
      features: [auto, standardize]
      batch_size: [5000]

The grid keys of :data:`~.datafiles.FILE_GRID` apply (the planted problem's ``d1``,
``d2``, ``n_train``, ``noise``, ``positive_rate`` do not: the files give the data);
``features``, ``step``, ``threshold`` and ``queries`` default to the estimator's
defaults (``auto``, ``auto``, ``auto``, ``uniform``). The files' sizes are coordinates along
``dataset``. Planted and file datasets do not mix in one spec (their cubes hold
different metrics).
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import os
from dataclasses import dataclass

from ..utils import limits
from ..utils.checks import check_int, check_rank, check_seed
from ..utils.yaml import YamlError, parse_yaml, read_text
from ..utils.errors import SpecError
from ..fit import steps
from ..fit.steps import STEPS
from ..ops.thresholds import THRESHOLDS
from ..data.queries import QUERIES, WARMUP_SHARE
from ..io import detect
from ..fit.state import check_chosen
from ..data.synthetic.problem import SAMPLERS, parse_positive_rate
from .methods import METHODS
from .distribute import DISTRIBUTED, PLACEMENT_DEFAULTS
from .noise import parse_noise
from . import datafiles

GRID_ORDER = ("method", "dataset", "d1", "d2", "rank", "n_train", "noise", "positive_rate",
              "features", "step", "threshold", "queries", "batch_size", "n_iter", "seed")
GRID_DEFAULTS = {"method": ["onebit"], "n_train": [0], "noise": ["none"], "step": ["paper"],
                 "n_iter": [10], "seed": [0]}
REQUIRED_GRID = ("d1", "d2", "rank", "batch_size")
DATASET_KEYS = ("d1", "d2", "rank", "n_train", "batch_size")
FIXED_DEFAULTS = {"n_test": 10_000, "n_shards": 4, "max_eval_labels": 1000,
                  "sampler": "conditional"}
TOP_KEYS = ("name", "description", "datasets", "grid", "fixed")


def _did_you_mean(key, allowed) -> str:
    close = difflib.get_close_matches(str(key), list(allowed), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class SweepSpec:
    name: str
    grid: dict  # key -> list of values, keys in GRID_ORDER
    fixed: dict
    text: str  # the spec file as written
    description: str = ""
    datasets: dict = None  # name -> {key: value} for the keys of DATASET_KEYS (or FILE_KEYS)
    folder: str = ""  # the spec file's folder: file datasets' paths are relative to it
    sizes: dict = None  # file datasets: name -> {n_train, d1, d2} of the training set

    @property
    def files(self) -> bool:
        """Whether the datasets are data files (:mod:`.datafiles`), not planted problems."""
        return bool(self.sizes)

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(self.grid)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(v) for v in self.grid.values())

    @property
    def n_iterations(self) -> int:
        return max(p["n_iter"] for _, p in self.cells()) + 1

    def cells(self):
        """``(index, params)`` of every cell, in C order of the grid (datasets expanded)."""
        ranges = [range(n) for n in self.shape]
        for index in itertools.product(*ranges):
            yield index, self.cells_at(index)

    def cells_at(self, index: tuple) -> dict:
        """The parameters of the cell at ``index``."""
        params = {k: self.grid[k][i] for k, i in zip(self.dims, index)}
        if "dataset" in params:
            params.update(self.datasets[params["dataset"]])
        if self.files:
            name = params["dataset"]
            params.update(self.sizes[name], **{
                f"{key}_path": datafiles.resolve(self.datasets[name][key], self.folder)
                for key in datafiles.FILE_KEYS})
        return params

    def fingerprint(self) -> str:
        """Hash of the grid, the datasets and the fixed settings (not of comments, nor of
        the placement keys, which decide where a cell runs and never its values); for file
        datasets, also of the data files' contents
        (:func:`~onebit_dask.sweep.datafiles.content_digest`)."""
        fixed = {k: v for k, v in self.fixed.items() if k not in PLACEMENT_DEFAULTS}
        contents = {} if not self.files else {"contents": {
            name: {key: datafiles.content_digest(datafiles.resolve(paths[key], self.folder))
                   for key in datafiles.FILE_KEYS} for name, paths in self.datasets.items()}}
        canonical = json.dumps({"grid": self.grid, "fixed": fixed,
                                **({"datasets": self.datasets} if self.datasets else {}),
                                **contents}, sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class NotAnExtension(ValueError):
    """A spec that does not extend another by appended grid values (the message says
    what differs)."""


def grid_extension(old: SweepSpec, new: SweepSpec) -> dict:
    """The grid values ``new`` appends to ``old`` (``{key: [values]}``, the keys that get
    some), when ``new`` differs from ``old`` only by values added at the end of some grid
    keys: every value of ``old`` kept, in its order; the same grid keys, fixed settings
    (placement keys aside: they never change a cell's values) and kind of data; each of
    ``old``'s datasets the same (new ones may be added for appended ``dataset`` values).
    Otherwise a :class:`NotAnExtension` naming the differences (the data files'
    contents are the caller's to compare: :meth:`SweepSpec.fingerprint`)."""
    differs = []
    if old.files != new.files:
        kinds = ("data files", "planted problems")
        differs.append(f"the data (the cube's are {kinds[not old.files]}, this spec's "
                       f"{kinds[not new.files]})")
    for key in sorted(set(old.fixed) | set(new.fixed)):
        if key not in PLACEMENT_DEFAULTS and old.fixed.get(key) != new.fixed.get(key):
            differs.append(f"fixed.{key} ({old.fixed.get(key)!r} in the cube, "
                           f"{new.fixed.get(key)!r} here)")
    for name, settings in (old.datasets or {}).items():
        now = (new.datasets or {}).get(name)
        if now != settings:
            differs.append(f"datasets.{name} ({settings!r} in the cube, "
                           f"{'missing' if now is None else repr(now)} here)")
    added = {}
    for key in [*old.grid, *(k for k in new.grid if k not in old.grid)]:
        was, now = old.grid.get(key), new.grid.get(key)
        if was is None or now is None:
            differs.append(f"grid.{key} (a dimension {'added' if was is None else 'removed'})")
        elif now[:len(was)] != was:
            differs.append(f"grid.{key} ({was!r} in the cube, {now!r} here: a value removed, "
                           "reordered or inserted)")
        elif len(now) > len(was):
            added[key] = now[len(was):]
    if differs:
        raise NotAnExtension("; ".join(differs))
    return added


def _as_list(key, value, where="<spec>"):
    values = value if isinstance(value, list) else [value]
    if not values:
        raise SpecError(f"{where}: grid.{key}: an empty list is not allowed")
    if len(set(map(str, values))) != len(values):
        raise SpecError(f"{where}: grid.{key}: repeated values in {values!r}")
    return values


def _same_setting(key, values, where):
    """Refuse two spellings of one setting (``flip=0.05`` and ``flip=5e-2``)."""
    seen = {}
    for v in values:
        canonical = {"noise": parse_noise,
                     "positive_rate": parse_positive_rate}.get(key, lambda v: v)(v)
        if canonical in seen:
            raise SpecError(f"{where}: grid.{key}: {seen[canonical]!r} and {v!r} are the same "
                            "setting: list it once")
        seen[canonical] = v


def _check_grid_values(key, values, where="<spec>"):
    checks = {
        "d1": lambda v: check_int("d1", v, low=1),
        "d2": lambda v: check_int("d2", v, low=1),
        "rank": lambda v: check_int("rank", v, low=1),
        "batch_size": lambda v: check_int("batch_size", v, low=1),
        "n_iter": lambda v: check_int("n_iter", v, low=0),
        "n_train": lambda v: check_int("n_train", v, low=0),
        "seed": lambda v: check_seed("seed", v),
    }
    out = []
    for v in values:
        try:
            if key in checks:
                v = checks[key](v)
                limits.check_hard(key, v)
            elif key in ("noise", "positive_rate"):
                (parse_noise if key == "noise" else parse_positive_rate)(v)
                v = str(v)
            elif key == "features" and v not in datafiles.FEATURES:
                raise ValueError(f"features={v!r} is not allowed: choose from "
                                 f"{', '.join(datafiles.FEATURES)}")
            elif key == "step" and v not in STEPS:
                raise ValueError(f"step={v!r} is not allowed: choose from {', '.join(STEPS)}")
            elif key == "queries" and v not in QUERIES:
                raise ValueError(f"queries={v!r} is not allowed: choose from "
                                 f"{', '.join(QUERIES)}")
            elif key == "threshold" and v not in THRESHOLDS:
                raise ValueError(f"threshold={v!r} is not allowed: choose from "
                                 f"{', '.join(THRESHOLDS)}")
            elif key == "method" and v not in METHODS:
                raise ValueError(f"method={v!r} is not allowed{_did_you_mean(v, METHODS)}: "
                                 f"choose from {', '.join(METHODS)}")
        except SpecError as exc:  # already names the key
            raise SpecError(f"{where}: {exc}") from None
        except (TypeError, ValueError) as exc:
            raise SpecError(f"{where}: grid.{key}: {exc}") from None
        out.append(v)
    _same_setting(key, out, where)
    return out


def parse_spec(text: str, where: str = "<spec>", *, allow_large: bool = False,
               folder: str | None = None) -> SweepSpec:
    """Parse and check a spec given as YAML text.

    File datasets' paths are relative to ``folder`` (default: the folder of ``where``,
    the spec file's path).

    Sizes beyond the hard limits of :mod:`onebit_dask.utils.limits` are refused; a grid of more
    than ``limits.MAX_CELLS`` cells, a cube of more than ``limits.MAX_CUBE_VALUES`` values
    per metric, or a cell holding more than ``limits.MAX_ENTRIES`` numbers in one array
    are refused unless ``allow_large``.
    """
    try:
        data = parse_yaml(text, where)
    except YamlError as exc:
        raise SpecError(str(exc)) from None
    if not isinstance(data, dict):
        raise SpecError(f"{where}: a spec is a mapping with keys {', '.join(TOP_KEYS)}")
    for key in data:
        if key not in TOP_KEYS:
            raise SpecError(f"{where}: unknown key {key!r}{_did_you_mean(key, TOP_KEYS)}")
    grid_in = data.get("grid")
    if not isinstance(grid_in, dict):
        raise SpecError(f"{where}: 'grid' must be a mapping of parameter -> list of values")
    for key in grid_in:
        if key not in GRID_ORDER:
            raise SpecError(f"{where}: unknown key 'grid.{key}'{_did_you_mean(key, GRID_ORDER)}; "
                            f"allowed: {', '.join(GRID_ORDER)}")
    if folder is None:
        folder = os.path.dirname(os.path.abspath(where))
    raw = data.get("datasets")
    if (isinstance(raw, dict) and raw and all(isinstance(d, dict) for d in raw.values())
            and any(datafiles.is_file_dataset(d) for d in raw.values())):
        return _parse_file_spec(data, text, grid_in, folder, where, allow_large)
    if "features" in grid_in:
        raise SpecError(f"{where}: grid.features applies to file datasets only (a planted "
                        "problem's features are N(0, I): the model uses them as they are)")
    if "queries" in grid_in:
        raise SpecError(f"{where}: grid.queries applies to file datasets only (a planted "
                        "problem's sampler draws the labels a batch asks about)")
    datasets = _parse_datasets(raw, grid_in, where)
    for key in REQUIRED_GRID:
        if key not in grid_in and not (datasets and all(key in d for d in datasets.values())):
            raise SpecError(f"{where}: missing key 'grid.{key}'")
    grid = {}
    for key in GRID_ORDER:
        set_by_dataset = any(key in d for d in (datasets or {}).values())
        if (key == "dataset" and not datasets) or set_by_dataset:
            continue
        values = grid_in.get(key, GRID_DEFAULTS.get(key))
        if values is None:
            continue
        grid[key] = _check_grid_values(key, _as_list(key, values, where), where)
    if datasets:
        unknown = [v for v in grid["dataset"] if v not in datasets]
        if unknown:
            raise SpecError(f"{where}: grid.dataset: {unknown[0]!r} is not in datasets "
                            f"({', '.join(datasets)})")
    n_cells = 1
    for values in grid.values():
        n_cells *= len(values)
    if n_cells > limits.MAX_CELLS and not allow_large:
        raise SpecError(f"{where}: the grid has {n_cells:,} cells, more than "
                        f"{limits.MAX_CELLS:,}: pass --allow-large (allow_large=True) if you "
                        "mean it")
    fixed = _parse_fixed(data.get("fixed") or {}, where)
    spec_cells = SweepSpec("", grid, {}, "", datasets=datasets).cells()
    n_iterations = 0
    for _, params in spec_cells:
        try:
            check_rank(params["rank"], params["d1"], params["d2"])
        except ValueError as exc:
            raise SpecError(f"{where}: grid.rank: {exc}") from None
        mode = "full" if params["n_train"] > 0 else "single"
        if mode not in METHODS[params["method"]].modes:
            raise SpecError(f"{where}: method={params['method']!r} does not run on "
                            f"{mode}-observation data (n_train={params['n_train']})")
        sizes = {k: params[k] for k in ("d1", "d2", "rank", "batch_size", "n_train")}
        sampler = fixed["sampler"] if params["method"] == "onebit" else "explicit"
        if (params["method"] == "onebit" and params["step"] == "select"
                and params["n_train"] == 0 and sampler != "explicit"):
            raise SpecError(f"{where}: grid.step: 'select' scores every bit of a batch, and "
                            f"fixed.sampler={sampler!r} draws only the rows a step uses: "
                            "set fixed.sampler: explicit, or n_train > 0, or another step")
        try:
            limits.check_sizes({**sizes, "n_test": fixed["n_test"]}, sampler, allow_large)
        except ValueError as exc:
            raise SpecError(f"{where}: {exc}") from None
        n_iterations = max(n_iterations, params["n_iter"] + 1)
    if n_cells * n_iterations > limits.MAX_CUBE_VALUES and not allow_large:
        raise SpecError(f"{where}: the cube would hold {n_cells:,} cells x {n_iterations:,} "
                        f"iterations = {n_cells * n_iterations:,} values per metric, more than "
                        f"{limits.MAX_CUBE_VALUES:,}: pass --allow-large (allow_large=True) if "
                        "you mean it")
    return SweepSpec(_name(data, where), grid, fixed, text, str(data.get("description", "")),
                     datasets)


def _name(data: dict, where: str) -> str:
    name = data.get("name", os.path.splitext(os.path.basename(where))[0])
    if not isinstance(name, str):
        raise SpecError(f"{where}: name={name!r} must be a string")
    if not name.isprintable():  # escapes would drive the terminal that prints it
        raise SpecError(f"{where}: name={name!r} holds control characters: give a name of "
                        "printable characters")
    return name


def _parse_file_spec(data, text, grid_in, folder, where, allow_large) -> SweepSpec:
    """A spec whose datasets are data files (:mod:`.datafiles`), checked whole."""
    raw = data["datasets"]
    kinds = {name: datafiles.is_file_dataset(d) for name, d in raw.items()}
    if not all(kinds.values()):
        files = ", ".join(n for n, f in kinds.items() if f)
        planted = ", ".join(n for n, f in kinds.items() if not f)
        raise SpecError(f"{where}: datasets: file datasets ({files}) and planted datasets "
                        f"({planted}) cannot be mixed in one spec (their cubes hold different "
                        "metrics): write one spec for each")
    if "dataset" not in grid_in:
        raise SpecError(f"{where}: 'datasets' is given but grid.dataset is missing")
    for key in grid_in:
        if key not in datafiles.FILE_GRID:
            raise SpecError(f"{where}: grid.{key} does not apply to file datasets (the files "
                            f"give the data); allowed: {', '.join(datafiles.FILE_GRID)}")
    for key in datafiles.FILE_REQUIRED_GRID:
        if key not in grid_in:
            raise SpecError(f"{where}: missing key 'grid.{key}'")
    fixed_in = data.get("fixed") or {}
    if isinstance(fixed_in, dict):
        for key in fixed_in:
            if key in FIXED_DEFAULTS and key not in datafiles.FILE_FIXED:
                raise SpecError(f"{where}: fixed.{key} sets the planted problem: it does not "
                                "apply to file datasets")
    fixed = _parse_fixed(fixed_in, where)
    grid = {}
    for key in datafiles.FILE_GRID:
        values = grid_in.get(key, datafiles.FILE_GRID_DEFAULTS.get(key))
        if key == "dataset":
            grid[key] = _as_list(key, values, where)
            continue
        grid[key] = _check_grid_values(key, _as_list(key, values, where), where)
    unknown = [v for v in grid["dataset"] if v not in raw]
    if unknown:
        raise SpecError(f"{where}: grid.dataset: {unknown[0]!r} is not in datasets "
                        f"({', '.join(map(str, raw))})")
    for method in grid["method"]:
        if "files" not in METHODS[method].modes:
            raise SpecError(f"{where}: method={method!r} does not run on file datasets: "
                            "use method onebit")
    chosen = [q for q in grid["queries"] if q != "uniform"]
    for queries, step, threshold, n_iter in itertools.product(
            chosen, grid["step"], grid["threshold"], grid["n_iter"]):
        rule = steps.resolve(step, planted=False, partial=False, validation=False,
                             chosen=True)
        try:  # the settings a chosen policy refuses, before any work
            check_chosen(queries, rule or step, threshold, warmup=WARMUP_SHARE,
                         n_iter=n_iter)
        except ValueError as exc:
            raise SpecError(f"{where}: grid: {exc}") from None
    datasets, sizes = datafiles.check_file_datasets(raw, folder, where, DATASET_KEYS)
    for name in grid["dataset"] if chosen else ():
        if detect(datafiles.resolve(datasets[name]["train"], folder)) == "csr":
            raise SpecError(f"{where}: grid: queries={chosen[0]!r} is not allowed with "
                            f"datasets.{name}.train, a CSR store (read where the shards run, "
                            "with no copy of its labels to choose from): give a data file, "
                            "or queries: [uniform]")
    n_cells = math.prod(len(v) for v in grid.values())
    if n_cells > limits.MAX_CELLS and not allow_large:
        raise SpecError(f"{where}: the grid has {n_cells:,} cells, more than "
                        f"{limits.MAX_CELLS:,}: pass --allow-large (allow_large=True) if you "
                        "mean it")
    for name in grid["dataset"]:
        size = sizes[name]
        for rank in grid["rank"]:
            try:
                check_rank(rank, size["d1"], size["d2"])
            except ValueError as exc:
                raise SpecError(f"{where}: grid.rank: {exc} (datasets.{name})") from None
    n_iterations = max(grid["n_iter"]) + 1
    if n_cells * n_iterations > limits.MAX_CUBE_VALUES and not allow_large:
        raise SpecError(f"{where}: the cube would hold {n_cells:,} cells x {n_iterations:,} "
                        f"iterations = {n_cells * n_iterations:,} values per metric, more than "
                        f"{limits.MAX_CUBE_VALUES:,}: pass --allow-large (allow_large=True) if "
                        "you mean it")
    return SweepSpec(_name(data, where), grid, fixed, text,
                     str(data.get("description", "")), datasets, folder, sizes)



def _parse_fixed(fixed_in, where) -> dict:
    if not isinstance(fixed_in, dict):
        raise SpecError(f"{where}: 'fixed' must be a mapping")
    fixed = {**FIXED_DEFAULTS, **PLACEMENT_DEFAULTS}
    for key, value in fixed_in.items():
        if key not in fixed:
            raise SpecError(f"{where}: unknown key 'fixed.{key}'{_did_you_mean(key, fixed)}"
                            f"; allowed: {', '.join(fixed)}")
        choices = {"sampler": SAMPLERS, "distributed": DISTRIBUTED}.get(key)
        if choices is not None:
            if value not in choices:
                raise SpecError(f"{where}: fixed.{key}={value!r} is not allowed: choose "
                                f"from {', '.join(choices)}")
            fixed[key] = value
            continue
        try:
            fixed[key] = check_int(key, value, low=1)
            limits.check_hard(key, fixed[key])
        except (TypeError, ValueError) as exc:
            raise SpecError(f"{where}: fixed.{key}: {exc}") from None
    return fixed


def _parse_datasets(raw, grid_in, where):
    if raw is None:
        if "dataset" in grid_in:
            raise SpecError(f"{where}: grid.dataset needs a 'datasets' mapping")
        return None
    if not isinstance(raw, dict) or not raw:
        raise SpecError(f"{where}: 'datasets' must map names to settings")
    if "dataset" not in grid_in:
        raise SpecError(f"{where}: 'datasets' is given but grid.dataset is missing")
    out = {}
    for name, settings in raw.items():
        if not isinstance(settings, dict):
            raise SpecError(f"{where}: datasets.{name} must be a mapping")
        for key in settings:
            if key not in DATASET_KEYS:
                raise SpecError(f"{where}: unknown key 'datasets.{name}.{key}'"
                                f"{_did_you_mean(key, DATASET_KEYS)}; allowed: "
                                f"{', '.join(DATASET_KEYS)}")
            if key in grid_in:
                raise SpecError(f"{where}: {key} is set both in grid and in datasets.{name}")
        out[str(name)] = {k: _check_grid_values(k, [v], where)[0] for k, v in settings.items()}
    keys = [set(d) for d in out.values()]
    if any(k != keys[0] for k in keys):
        raise SpecError(f"{where}: every dataset must set the same keys")
    return out


def load_spec(path, *, allow_large: bool = False) -> SweepSpec:
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise SpecError(f"spec {path!r} does not exist: give a spec file or the name of "
                        "a shipped one (onebit-dask list shows them)")
    try:
        text = read_text(path)
    except YamlError as exc:
        raise SpecError(str(exc)) from None
    return parse_spec(text, path, allow_large=allow_large)
