"""Sweeps over data files: a spec's ``datasets`` that name a training and a test set.

::

    datasets:
      bibtex: {train: ../../shared/data/bibtex_train.txt, test: ../../shared/data/bibtex_test.txt}
    grid:
      dataset: [bibtex]
      rank: [10]
      batch_size: [10000]

``train`` and ``test`` are XC/svmlight text files or CSR stores
(:func:`onebit_dask.io.csr_store.convert`), relative to the spec file's folder. Each cell
fits :class:`~onebit_dask.estimator.OneBitMultiLabel` on the training set with
``eval_set`` the test set (:func:`run_files`), so its ``history_`` holds the held-out
ranking metrics (:data:`onebit_dask.metrics.names.RANKING`) per iteration.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

from ..metrics.names import RANKING
from ..utils.errors import SpecError

FILE_KEYS = ("train", "test")  # the keys of a file dataset
FILE_GRID = ("method", "dataset", "rank", "features", "step", "threshold", "queries",
             "batch_size", "n_iter", "seed")  # the grid keys that apply to file datasets
FILE_GRID_DEFAULTS = {"method": ["onebit"], "features": ["auto"], "step": ["auto"],
                      "threshold": ["auto"], "queries": ["uniform"], "n_iter": [10],
                      "seed": [0]}
FILE_REQUIRED_GRID = ("rank", "batch_size")
FILE_FIXED = ("n_shards",)  # the fixed settings that apply to file datasets (and placement)
FILE_SERIES = (*RANKING, "n_samples", "fit_s", "n_active")  # a cell's per-iteration values
SIZE_KEYS = ("n_train", "d1", "d2")  # read from the training set at parse time
FEATURES = ("auto", "none", "standardize", "ridge", "whiten")


def is_file_dataset(settings: dict) -> bool:
    """Whether a dataset's settings name files (any key of :data:`FILE_KEYS`)."""
    return any(key in settings for key in FILE_KEYS)


def resolve(path: str, folder: str) -> str:
    """``path`` (as written in the spec) relative to the spec's ``folder``, absolute."""
    return os.path.abspath(os.path.join(folder, os.path.expanduser(path)))


def data_sizes(path: str) -> tuple:
    """``(n, d1, d2)`` of the data file or CSR store at ``path`` (an existing path): a
    file's header or a store's attributes; a file without a header is read whole.

    Raises ``ValueError`` (a directory that is not a CSR store, a malformed file) or
    ``FileNotFoundError``.
    """
    from ..io.csr_store import is_csr_store, open_csr_store
    from ..io.xc import read_header

    if os.path.isdir(path):
        if not is_csr_store(path):
            raise ValueError("is a directory but not a CSR store: give a data file (XC or "
                             "svmlight format) or a store made by "
                             "onebit_dask.io.csr_store.convert")
        store = open_csr_store(path)
        return store.n, store.d1, store.d2
    header = read_header(path)
    if header is not None:
        return header
    from ..io.xc import read_features

    features, labels = read_features(path, labels=True)
    return features.shape[0], features.shape[1], labels.shape[1]


def content_digest(path: str) -> str:
    """SHA-256 of what the data at ``path`` holds: a file's bytes; a CSR store's files
    (their names, sizes and bytes), so a resumed sweep refuses data edited since its
    cube was started."""
    digest = hashlib.sha256()
    files = [path] if not os.path.isdir(path) else sorted(
        os.path.join(root, name) for root, _, names in os.walk(path) for name in names)
    for name in files:
        digest.update(os.path.relpath(name, path).encode() + b"\0")
        with open(name, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def check_file_datasets(raw: dict, folder: str, where: str,
                        planted_keys=()) -> tuple[dict, dict]:
    """Check the file datasets ``raw`` (name -> ``{train: PATH, test: PATH}``) before any
    work: both keys, paths that exist, data that can be read, a test set with the training
    set's features and labels. ``planted_keys``: a planted dataset's keys, named as such
    when a file dataset sets one.

    Returns
    -------
    datasets : dict
        name -> ``{"train": PATH, "test": PATH}`` as written in the spec.
    sizes : dict
        name -> ``{"n_train": n, "d1": d1, "d2": d2}`` of the training set.
    """
    datasets, sizes = {}, {}
    for name, settings in raw.items():
        for key in settings:
            if key not in FILE_KEYS:
                hint = (" (a planted problem's size: a file dataset takes its sizes from "
                        "its files)" if key in planted_keys else "")
                raise SpecError(f"{where}: unknown key 'datasets.{name}.{key}'{hint}; a file "
                                f"dataset takes {', '.join(FILE_KEYS)}")
        declared = {}
        for key in FILE_KEYS:
            value = settings.get(key)
            if value is None:
                raise SpecError(f"{where}: datasets.{name}: missing key {key!r}: a file "
                                "dataset names both a train and a test set")
            if not isinstance(value, str) or not value:
                raise SpecError(f"{where}: datasets.{name}.{key}={value!r} must be a path")
            path = resolve(value, folder)
            if not os.path.exists(path):
                raise SpecError(f"{where}: datasets.{name}.{key}: {value!r} does not exist "
                                f"(looked for {path!r}, relative to the spec's folder)")
            try:
                declared[key] = data_sizes(path)
            except (ValueError, OSError) as exc:
                raise SpecError(f"{where}: datasets.{name}.{key}: {value!r}: "
                                f"{str(exc).splitlines()[0]}") from None
        (n, d1, d2), (_, t1, t2) = declared["train"], declared["test"]
        if (t1, t2) != (d1, d2):
            raise SpecError(f"{where}: datasets.{name}: the test set has {t1} features and "
                            f"{t2} labels, the training set {d1} and {d2}: give a test set "
                            "with the training set's features and labels")
        datasets[str(name)] = {key: settings[key] for key in FILE_KEYS}
        sizes[str(name)] = {"n_train": int(n), "d1": int(d1), "d2": int(d2)}
    return datasets, sizes


def make_estimator(params: dict, fixed: dict, client=None):
    """The :class:`~onebit_dask.estimator.OneBitMultiLabel` a file cell fits."""
    from ..estimator import OneBitMultiLabel

    return OneBitMultiLabel(params["rank"], batch_size=params["batch_size"],
                            n_iter=params["n_iter"], step=params["step"],
                            threshold=params["threshold"], features=params["features"],
                            queries=params["queries"],
                            n_shards=fixed["n_shards"], random_state=params["seed"],
                            engine="local" if client is None else "dask")


def heldout_set(params: dict):
    """``(X_test, Y_test)`` of a file cell's test set."""
    from ..fit.evaluation import read_test_data

    return read_test_data(params["test_path"], params["d1"], params["d2"],
                          name=f"datasets.{params['dataset']}.test",
                          training=f"datasets.{params['dataset']}.train")


def run_files(params: dict, fixed: dict, client=None) -> dict:
    """Fit a file cell: the estimator of :func:`make_estimator` on ``train_path`` with
    ``eval_set`` the test set; its ``history_``'s held-out metrics, ``n_samples``,
    ``fit_s`` and ``n_active`` per iteration, and ``wall_s``."""
    import contextlib

    from ..estimator import use_client

    est = make_estimator(params, fixed, client)
    with contextlib.nullcontext() if client is None else use_client(client):
        est.fit(params["train_path"], eval_set=heldout_set(params))
    out = {key: np.array([h.get(key, np.nan) for h in est.history_], dtype=float)
           for key in FILE_SERIES}
    out["wall_s"] = est.history_[-1]["fit_s"]
    return out
