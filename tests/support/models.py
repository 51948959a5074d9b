"""The model stores' tests share these (tests/persist/, tests/io/stores/test_atomic.py,
tests/cli/test_models.py): the problem and the fit they save, load and checkpoint, what a
store leaves beside it, the user's own directories, and the damages a store is refused for."""

import glob
import json
import os

import numpy as np
import zarr

from onebit_dask import OneBitMultiLabel, SyntheticProblem
from onebit_dask.testing import assert_same_fit
from onebit_dask.persist.model_store import signed_attrs

from .helpers import fit_args

PROBLEM = SyntheticProblem(20, 30, 2, flip=0.02, seed=3, n_test=300)
# Across engines, the explicit sampler: projected draws depend on the bits of A, and the
# engines' initial states may differ in the last bits (see the report to the lead)
EXPLICIT = SyntheticProblem(20, 30, 2, flip=0.02, seed=3, n_test=300, sampler="explicit")
PARAMS = dict(batch_size=4000, n_iter=4, n_shards=4, random_state=0)
X_NEW = np.random.default_rng(5).standard_normal((9, 20))


def fit_reference(problem=PROBLEM):
    """The uninterrupted fit of ``problem``, in this process, without checkpoints (each
    test module's ``reference`` fixture)."""
    return OneBitMultiLabel(2, **PARAMS).fit(problem)


def assert_same_model(a, b, history=True):
    assert_same_fit(a, b, X_NEW, history)


def no_leftovers(path):
    """No temporary, replaced copy or lock of the store at ``path`` is left beside it."""
    head, tail = os.path.split(str(path))
    return not glob.glob(os.path.join(head, f".{tail}.onebit-*")) and not os.path.exists(
        f"{path}.lock")


def temporaries(path, kind="tmp"):
    head, tail = os.path.split(str(path))
    return glob.glob(os.path.join(head, f".{tail}.onebit-{kind}-*"))


def mark_as_ours(directory, token):
    """What :mod:`onebit_dask.io.stores.atomic` writes into its own temporaries."""
    with open(os.path.join(directory, ".onebit-dask-temporary.json"), "w") as fh:
        json.dump({"format": "onebit-dask/temporary", "token": token}, fh)


FIT = fit_args("--quiet", "--json", workers=0, d2=30, batch_size=4000, n_iter=3, n_test=300,
               flip=0.02, seed=3)
"""The command line's fit of :data:`PROBLEM` (fewer steps)."""


def user_dir(path):
    """A directory of the user's at ``path``, with a file in it (see :func:`intact`)."""
    os.makedirs(path)
    with open(os.path.join(path, "f"), "w") as fh:
        fh.write("x")


def intact(path):
    """The directory :func:`user_dir` made is still there, its file unchanged."""
    with open(os.path.join(path, "f")) as fh:
        return fh.read() == "x"


def _edit_attrs(path, **changes):
    """Edit the model store's attributes and sign them again (``attrs_sha256``), as a
    writer would: what the checks after the digest see."""
    group = zarr.open_group(path, mode="r+")
    attrs = {k: v for k, v in group.attrs.items() if k != "attrs_sha256"}
    group.attrs.put(signed_attrs({**attrs, **changes}))


def _drop_chunk(path, part):
    os.remove(os.path.join(path, *part.split("/")))


def _as_int8(path):
    group = zarr.open_group(os.path.join(path, "blocks", "0"), mode="r+")
    group.create_array("B", data=group["B"][...].astype(np.int8), overwrite=True)


def set_value(path, value):
    """Overwrite one value of a label block's ``B`` in the store at ``path``."""
    zarr.open_array(os.path.join(path, "blocks", "1", "B"), mode="r+")[0, 0] = value


DAMAGES = {  # issue 18 item 3, each case: (how, what the message says)
    "chunk of blocks/2/B": (lambda p: _drop_chunk(p, "blocks/2/B/c/0/0"),
                            r"the chunk blocks/2/B/c/0/0 \(rows 0\.\.6\) is missing"),
    "chunk of Q_top": (lambda p: _drop_chunk(p, "Q_top/c/0/0"),
                       r"the chunk Q_top/c/0/0 \(rows 0\.\.19\) is missing"),
    "n_labels edited": (lambda p: _edit_attrs(p, n_labels=1000),
                        r"bounds=\[0, 7, 15, 22, 30\] does not cut the n_labels=1000 labels"),
    "params.rank edited": (lambda p: _edit_attrs(
        p, params=dict(zarr.open_group(p).attrs["params"], rank=5)),
        r"Q_top has shape \(20, 4\), expected \(20, 10\)"),
    "params with an unknown key": (lambda p: _edit_attrs(
        p, params=dict(zarr.open_group(p).attrs["params"], bogus=1)),
        r"its params hold 'bogus', which OneBitMultiLabel does not take"),
    "params.step not a rule": (lambda p: _edit_attrs(
        p, params=dict(zarr.open_group(p).attrs["params"], step="fastest")),
        r"its params do not make a OneBitMultiLabel \(step='fastest' is not allowed"),
    "n_steps a string": (lambda p: _edit_attrs(p, n_steps="four"),
                         r"n_steps='four' is not an int"),
    "B as int8": (_as_int8, r"blocks/0/B has dtype int8, expected float64"),
    "NaN in B": (lambda p: set_value(p, np.nan), r"blocks/1/B\[0, 0\] is nan"),
    "B edited": (lambda p: set_value(p, 0.5),
                 r"blocks/1/B differs from what was written \(its SHA-256"),
    "bit_generator not NumPy's": (lambda p: _edit_attrs(
        p, rng_state=dict(zarr.open_group(p).attrs["rng_state"], bit_generator="SeedSequence")),
        r"rng_state.bit_generator='SeedSequence' is not one of NumPy's bit generators"),
    "bit_generator a function": (lambda p: _edit_attrs(
        p, rng_state={"bit_generator": "default_rng"}), r"bit_generator='default_rng'"),
}
