"""The extension of a result cube by a spec that appends grid values to its own
(:func:`~.plan.plan_output` decides that a sweep extends its cube; the runner calls
:func:`extend` under the store's lock): the cube of the new spec is built as a fresh one,
in a marked temporary next to the old cube (:func:`~.cube.build_aside`); the old cells'
values and their ``done`` and ``failed`` marks are copied into their places bit for bit,
what a user added along the dimensions that do not grow is carried over, and the
temporary replaces the old cube (:mod:`onebit_dask.io.stores.atomic`): the path holds
the old cube, whole, or the new one.
"""

from __future__ import annotations

import os

import numpy as np

from ..io.stores.zarr_format import ALL_CHUNKS
from .cube import (CELLS, FILE_VARIABLES, RENAMED, VARIABLES, XARRAY_ATTRS, array_key,
                   build_aside, dims, flags, noise_axes, quiet_zarr, variables)
from .spec import SweepSpec


def _axes(spec: SweepSpec) -> dict:
    """The values along each of the cube's dimensions for ``spec`` (its grid's, with
    ``noise`` as :func:`~.cube.noise_axes`, and ``iteration``)."""
    axes = {}
    for dim in spec.dims:
        if dim == "noise":
            models, levels, _ = noise_axes(spec)
            axes.update(noise_model=models, noise_level=levels)
        else:
            axes[RENAMED.get(dim, dim)] = list(spec.grid[dim])
    axes["iteration"] = list(range(spec.n_iterations))
    return axes


def changed_dims(old: SweepSpec, new: SweepSpec) -> set:
    """The cube's dimensions whose values differ between the cubes of ``old`` and
    ``new``."""
    was, now = _axes(old), _axes(new)
    return {dim for dim in now if was.get(dim) != now[dim]}


def user_entries(path: str, attrs: dict) -> dict:
    """What a user added to the cube at ``path`` (attributes ``attrs``): ``{name: its
    dimension names}`` of each entry of the store's directory that is not one of the
    package's arrays (its variables and the coordinates of ``coords_sha256``): an array's
    dimension names, ``()`` for a group or anything else."""
    import zarr

    kind = FILE_VARIABLES if attrs.get("data") == "files" else VARIABLES
    ours = {"zarr.json", CELLS, *kind, *(attrs.get("coords_sha256") or {})}
    found = {}
    with quiet_zarr():
        group = zarr.open_group(path, mode="r", use_consolidated=False)
        for name in sorted(set(os.listdir(path)) - ours):
            try:
                node = group[name]
            except Exception:  # not a zarr node: a file or directory of the user's
                node = None
            names = getattr(getattr(node, "metadata", None), "dimension_names", None)
            found[name] = tuple(names or ()) if hasattr(node, "shape") else ()
    return found


def extended_flags(path: str, old: SweepSpec, spec: SweepSpec):
    """The ``done`` and ``failed`` masks over the grid of ``spec``, which extends the
    cube's spec ``old`` by appended values: the cube's over its cells, False elsewhere."""
    done, failed = (np.zeros(spec.shape, dtype=bool) for _ in range(2))
    region = tuple(slice(0, n) for n in old.shape)
    done[region], failed[region] = flags(path, old)
    return done, failed


def extend(path: str, old: SweepSpec, spec: SweepSpec) -> None:
    """Replace the cube at ``path``, made from ``old``, by the cube of ``spec``, which
    extends ``old`` by appended grid values (:func:`~.plan.plan_output` has checked both:
    the caller holds the store's lock), with the old cells' values and ``done`` and
    ``failed`` marks bit for bit.

    The new cube is built as :func:`~.cube.create` builds one (:func:`~.cube.build_aside`),
    in a marked temporary next to ``path``; the old cells' values are copied into their
    places (:func:`_copy_cells`), a user's attributes, groups and arrays along the
    dimensions that do not grow are carried over, and the temporary replaces the old cube
    by the two renames of :func:`~onebit_dask.io.stores.atomic.replace`. Killed before
    them, ``path`` is the old cube, whole (the same command extends it again); after
    them, the new one, which the same command resumes. The failures file is kept (the
    failed marks are).
    """
    path = os.fspath(path).rstrip("/")

    def fill(tmp):
        _copy_cells(path, tmp, old, spec)
        _carry_over(path, tmp)

    build_aside(path, spec, fill)


def _blocks(shape: tuple, block: tuple):
    """The slices of the blocks of shape ``block`` that tile ``shape``."""
    import itertools

    return itertools.product(*(
        [slice(start, min(start + step, size)) for start in range(0, size, step)]
        for size, step in zip(shape, block)))


def _copy_cells(path: str, tmp: str, old: SweepSpec, spec: SweepSpec) -> None:
    """Copy every variable of the cube at ``path`` (of ``old``) into the new cube at
    ``tmp`` (of ``spec``), each position to the one of the same coordinates; a method
    without a step rule (stored along every step) also to the steps ``spec`` appends, as
    a run stores its cells. The new cube is written a block of its chunks at a time (the
    steps whole), each chunk once, whole (what the old cube does not hold: the fill
    value); a block with nothing of the old cube is left as the build wrote it."""
    import zarr

    from .methods import METHODS

    src = zarr.open_group(path, mode="r", use_consolidated=False)
    dst = zarr.open_group(tmp, mode="r+", use_consolidated=False)
    was, now = _axes(old), _axes(spec)
    names = dims(spec)
    inverse = []  # for each dimension: the old position of each new one (-1: none)
    for d in (*names, "iteration"):
        position = {v: i for i, v in enumerate(was[d])}
        inverse.append(np.array([position.get(v, -1) for v in now[d]], dtype=np.intp))
    step, est = names.index("step"), names.index("estimator")
    once = np.array([not METHODS[m].uses_step for m in was["estimator"]])
    for name in variables(spec):
        source, target = src[array_key(name)], dst[array_key(name)].with_config(ALL_CHUNKS)
        block = list(target.chunks)
        block[step] = target.shape[step]
        for region in _blocks(target.shape, tuple(block)):
            back = [m[r] for m, r in zip(inverse, region)]  # old positions, -1: new
            held = [np.flatnonzero(b >= 0) for b in back]
            if not all(len(h) for h in held):
                continue  # nothing of the old cube here
            values = np.full(tuple(r.stop - r.start for r in region), target.fill_value,
                             dtype=target.dtype)
            values[np.ix_(*held)] = source.get_orthogonal_selection(
                tuple(b[h] for b, h in zip(back, held)))
            rows = held[est][once[back[est][held[est]]]]
            added = np.flatnonzero(back[step] < 0)
            if len(rows) and len(added):  # stored at step 0, so at each appended step
                where = [b[h] for b, h in zip(back, held)]
                where[est], where[step] = back[est][rows], np.zeros(1, dtype=np.intp)
                first = source.get_orthogonal_selection(tuple(where))
                at = list(held)
                at[est], at[step] = rows, added
                values[np.ix_(*at)] = np.repeat(first, len(added), axis=step)
            target[region] = values


def _carry_over(path: str, tmp: str) -> None:
    """Copy into the new cube at ``tmp`` what a user added to the cube at ``path``
    (:func:`~.plan.plan_output` refused those along a dimension that grows): each entry of the
    store's directory that is not the package's, as it is, and the attributes outside
    ``attrs_digested`` (not xarray's own, which it writes again)."""
    import shutil

    import zarr

    group = zarr.open_group(path, mode="r", use_consolidated=False)
    attrs = dict(group.attrs)
    for name in user_entries(path, attrs):
        source, target = os.path.join(path, name), os.path.join(tmp, name)
        if os.path.isdir(source) and not os.path.islink(source):
            shutil.copytree(source, target, symlinks=True)
        else:
            shutil.copy2(source, target, follow_symlinks=False)
    signed = set(attrs.get("attrs_digested") or ()) | {"attrs_digested", "attrs_sha256",
                                                       *XARRAY_ATTRS}
    new = zarr.open_group(tmp, mode="r+", use_consolidated=False)
    mine = {k: v for k, v in attrs.items() if k not in signed and k not in new.attrs}
    if mine:
        new.attrs.update(mine)
