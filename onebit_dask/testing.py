"""Equality helpers for tests (as :mod:`xarray.testing`): the same fit, the same cube.

The package promises bit-identical numbers for the same seed, whatever the engine and
the number of workers. What a run *measures* (seconds, bytes moved) and *where* it ran
(worker, host, engine) differ from run to run and are left out; everything computed is
compared exactly.
"""

from __future__ import annotations

import numpy as np

MEASURED = ("fit_s", "wall_s", "client_bytes", "eval_s")
"""Entries of a history or a cube that are measured, not computed (seconds, bytes)."""

PLACES = ("worker", "host", "engine")
"""Variables of a cube that say where a cell ran."""


def computed(history: list[dict]) -> list[dict]:
    """A fit's history (``history_``, or the CLI's ``"history"``) without the measured
    entries of :data:`MEASURED`."""
    return [{k: v for k, v in step.items() if k not in MEASURED} for step in history]


def assert_same_fit(a, b, X=None, history: bool = True, link: bool = True) -> None:
    """Two fitted :class:`~onebit_dask.OneBitMultiLabel` are the same fit, bit for bit.

    Compared exactly: the factors ``Q_``, ``V_``, ``A_`` and ``B_``, ``n_steps_`` and
    ``n_samples_seen_``, ``calibration_`` (``link=True``: the link of ``predict_proba``,
    or that neither has one; ``partial_fit`` fits none, nor a checkpoint before its
    last iteration), and
    (``history=True``) the histories without what is measured (:func:`computed`). With
    features ``X`` (``n x d1``), also ``decision_function(X)``
    and ``predict_top_k(X, 4)``.
    """
    for name in ("Q_", "V_", "A_", "B_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert (a.n_steps_, a.n_samples_seen_) == (b.n_steps_, b.n_samples_seen_)
    links = [getattr(m, "calibration_", None) for m in (a, b)]
    assert not link or (links[0] is None) == (links[1] is None), links
    if link and links[0] is not None:
        np.testing.assert_array_equal(*links, err_msg="calibration_")
    if X is not None:
        np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
        k = min(4, a.n_labels_)
        for got, want in zip(a.predict_top_k(X, k), b.predict_top_k(X, k)):
            np.testing.assert_array_equal(got, want)
    if history:
        assert len(a.history_) == len(b.history_)
        assert computed(a.history_) == computed(b.history_)


def cube_values(path):
    """A sweep cube's computed values: the loaded dataset without the measured and
    placement variables and without attributes."""
    from .sweep.cube import open_cube

    ds = open_cube(path).load()
    return ds.drop_vars([*MEASURED, *PLACES], errors="ignore").drop_attrs()


def assert_same_cube(a, b) -> None:
    """Two sweep cubes (paths) hold the same computed values, bit for bit: every variable
    and coordinate but the measured and placement ones (:func:`cube_values`), and the
    same spec fingerprint."""
    import xarray as xr

    from .sweep.cube import open_cube

    xr.testing.assert_identical(cube_values(a), cube_values(b))
    assert open_cube(a).attrs["spec_fingerprint"] == open_cube(b).attrs["spec_fingerprint"]
