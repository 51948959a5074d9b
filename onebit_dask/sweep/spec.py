"""Sweep specs (``pipelines/*.yaml``): parsed with ``yaml.safe_load`` and checked whole
before any work.

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
    fixed:                     # the same for every cell
      n_test: 2000
      n_shards: 4
      max_eval_labels: 1000

A scalar in ``grid`` is a one-value list. Missing grid keys take the defaults of
:data:`GRID_DEFAULTS`.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import os
import re
from dataclasses import dataclass

import yaml

from .._validation import check_float, check_int, check_rank, check_seed

GRID_ORDER = ("method", "d1", "d2", "rank", "noise", "step", "batch_size", "n_iter", "seed")
GRID_DEFAULTS = {"method": ["onebit"], "noise": ["none"], "step": ["paper"], "n_iter": [10],
                 "seed": [0]}
REQUIRED_GRID = ("d1", "d2", "rank", "batch_size")
FIXED_DEFAULTS = {"n_test": 10_000, "n_shards": 4, "max_eval_labels": 1000}
TOP_KEYS = ("name", "description", "grid", "fixed")
NOISE = re.compile(r"^(none|flip=(?P<flip>[0-9.eE+-]+)|gaussian=(?P<gauss>[0-9.eE+-]+))$")


class SpecError(ValueError):
    """A sweep spec that cannot run; the message names the key."""


def _did_you_mean(key, allowed) -> str:
    close = difflib.get_close_matches(str(key), list(allowed), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_noise(label: str) -> tuple[str, float]:
    """``"none"`` / ``"flip=P"`` / ``"gaussian=XI"`` -> ``(model, level)``, checked."""
    match = NOISE.match(str(label))
    if not match:
        raise SpecError(f"grid.noise: {label!r} is not allowed: use 'none', 'flip=P' with P in "
                        "[0, 0.5) or 'gaussian=XI' with XI >= 0")
    try:
        if match["flip"] is not None:
            return "flip", check_float("flip", float(match["flip"]), low=0.0, high=0.5,
                                       high_open=True)
        if match["gauss"] is not None:
            return "gaussian", check_float("noise_std", float(match["gauss"]), low=0.0)
    except ValueError as exc:
        raise SpecError(f"grid.noise: {label!r}: {exc}") from None
    return "none", 0.0


@dataclass(frozen=True)
class SweepSpec:
    name: str
    grid: dict  # key -> list of values, keys in GRID_ORDER
    fixed: dict
    text: str  # the spec file as written
    description: str = ""

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(self.grid)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(v) for v in self.grid.values())

    @property
    def n_iterations(self) -> int:
        return max(self.grid["n_iter"]) + 1

    def cells(self):
        """``(index, params)`` of every cell, in C order of the grid."""
        ranges = [range(n) for n in self.shape]
        for index in itertools.product(*ranges):
            yield index, {k: self.grid[k][i] for k, i in zip(self.dims, index)}

    def fingerprint(self) -> str:
        """Hash of the grid and the fixed settings (not of comments or layout)."""
        canonical = json.dumps({"grid": self.grid, "fixed": self.fixed}, sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _as_list(key, value):
    values = value if isinstance(value, list) else [value]
    if not values:
        raise SpecError(f"grid.{key}: an empty list is not allowed")
    if len(set(map(str, values))) != len(values):
        raise SpecError(f"grid.{key}: repeated values in {values!r}")
    return values


def _check_grid_values(key, values):
    from .methods import METHODS

    checks = {
        "d1": lambda v: check_int("d1", v, low=1),
        "d2": lambda v: check_int("d2", v, low=1),
        "rank": lambda v: check_int("rank", v, low=1),
        "batch_size": lambda v: check_int("batch_size", v, low=1),
        "n_iter": lambda v: check_int("n_iter", v, low=0),
        "seed": lambda v: check_seed("seed", v),
    }
    out = []
    for v in values:
        try:
            if key in checks:
                v = checks[key](v)
            elif key == "noise":
                parse_noise(v)
                v = str(v)
            elif key == "step" and v not in ("paper", "averaged"):
                raise ValueError(f"step={v!r} is not allowed: choose 'paper' or 'averaged'")
            elif key == "method" and v not in METHODS:
                raise ValueError(f"method={v!r} is not allowed{_did_you_mean(v, METHODS)}: "
                                 f"choose from {', '.join(METHODS)}")
        except (TypeError, ValueError) as exc:
            raise SpecError(f"grid.{key}: {exc}") from None
        out.append(v)
    return out


def parse_spec(text: str, where: str = "<spec>") -> SweepSpec:
    """Parse and check a spec given as YAML text."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"{where}: not valid YAML: {str(exc).splitlines()[0]}") from None
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
    for key in REQUIRED_GRID:
        if key not in grid_in:
            raise SpecError(f"{where}: missing key 'grid.{key}'")
    grid = {}
    for key in GRID_ORDER:
        values = grid_in.get(key, GRID_DEFAULTS.get(key))
        grid[key] = _check_grid_values(key, _as_list(key, values))
    for d1, d2, rank in itertools.product(grid["d1"], grid["d2"], grid["rank"]):
        try:
            check_rank(rank, d1, d2)
        except ValueError as exc:
            raise SpecError(f"{where}: grid.rank: {exc}") from None
    fixed_in = data.get("fixed") or {}
    if not isinstance(fixed_in, dict):
        raise SpecError(f"{where}: 'fixed' must be a mapping")
    fixed = dict(FIXED_DEFAULTS)
    for key, value in fixed_in.items():
        if key not in FIXED_DEFAULTS:
            raise SpecError(f"{where}: unknown key 'fixed.{key}'{_did_you_mean(key, FIXED_DEFAULTS)}"
                            f"; allowed: {', '.join(FIXED_DEFAULTS)}")
        try:
            fixed[key] = check_int(key, value, low=1)
        except (TypeError, ValueError) as exc:
            raise SpecError(f"{where}: fixed.{key}: {exc}") from None
    name = data.get("name", os.path.splitext(os.path.basename(where))[0])
    if not isinstance(name, str):
        raise SpecError(f"{where}: name={name!r} must be a string")
    return SweepSpec(name, grid, fixed, text, str(data.get("description", "")))


def load_spec(path) -> SweepSpec:
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise SpecError(f"spec {path!r} does not exist (see pipelines/)")
    with open(path) as fh:
        return parse_spec(fh.read(), path)
