"""The atomic writes and the locks of onebit_dask.io.stores as save and checkpoint use
them: what the user owns at or beside a model store's path is never renamed or removed."""

import os

import pytest

from onebit_dask import OneBitMultiLabel
from onebit_dask.io.stores.atomic import ForeignPathError

from tests.support.helpers import run_main
from tests.support.models import (FIT, PARAMS, PROBLEM, fit_reference, intact, mark_as_ours,
                                  no_leftovers, user_dir)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def reference():
    """The uninterrupted fit, in this process, without checkpoints."""
    return fit_reference()


# -- what the user owns is never renamed or removed --------------------------------------------
def test_user_directories_named_like_old_temporaries_are_left_alone(reference, tmp_path):
    """Issue 18 item 2: ``PATH.old`` and ``PATH.tmp`` were deleted by save and checkpoint."""
    model, ckpt = tmp_path / "model.zarr", tmp_path / "ckpt.zarr"
    mine = [f"{model}.old", f"{model}.tmp", f"{ckpt}.old", f"{ckpt}.tmp"]
    for path in mine:
        user_dir(path)
    reference.save(model)
    reference.save(model, overwrite=True)
    OneBitMultiLabel(2, **dict(PARAMS, n_iter=2)).fit(PROBLEM, checkpoint=ckpt)
    status, _, err = run_main(*FIT, "--n-iter", 1, "--save", tmp_path / "cli.zarr",
                              "--checkpoint", tmp_path / "cli-ckpt.zarr")
    assert status == 0, err
    for path in mine:
        assert intact(path), path
    assert no_leftovers(model) and no_leftovers(ckpt)
    assert OneBitMultiLabel.load(model).n_steps_ == reference.n_steps_


def test_a_foreign_file_where_the_lock_goes_is_refused_before_any_work(reference, tmp_path):
    model = tmp_path / "model.zarr"
    lock = tmp_path / "model.zarr.lock"
    lock.write_text("my notes")
    with pytest.raises(ForeignPathError, match="model.zarr.lock.*not an onebit-dask lock"):
        reference.save(model)
    status, out, err = run_main(*FIT, "--save", model)
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "model.zarr.lock" in err and "not an onebit-dask lock" in err
    ckpt_lock = tmp_path / "ckpt.zarr.lock"
    os.mkdir(ckpt_lock)
    status, out, err = run_main(*FIT, "--checkpoint", tmp_path / "ckpt.zarr")
    assert status == 2 and "ckpt.zarr.lock" in err, err
    assert lock.read_text() == "my notes" and ckpt_lock.is_dir()
    assert not model.exists() and not (tmp_path / "ckpt.zarr").exists()


def test_only_marked_temporaries_are_recovered_or_removed(reference, tmp_path):
    """A directory named like the package's temporaries but without its marker (or with
    another token) is the user's: kept."""
    model = tmp_path / "model.zarr"
    lookalikes = [tmp_path / ".model.zarr.onebit-old-aaaa", tmp_path / ".model.zarr.onebit-tmp-bbbb"]
    for path in lookalikes:
        user_dir(path)
    mark_as_ours(lookalikes[1], "cccc")  # a marker whose token is not the name's
    reference.save(model)
    reference.save(model, overwrite=True)
    for path in lookalikes:
        assert intact(path)
    assert OneBitMultiLabel.load(model).n_steps_ == reference.n_steps_
