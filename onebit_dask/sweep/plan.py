"""What a sweep does with its output (``--out``), decided before any work and touching
nothing (:func:`plan_output`): create a cube (none there, or ``overwrite``), resume it (the
same spec), extend it (a spec that appends grid values to the cube's own, everything else
the same: :mod:`.extension`), or refuse, naming why (not a sweep store, another spec, an
older or newer format, a damaged cube).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..io.stores import atomic
from ..io.stores.zarr_format import (DamagedStoreError, group_attrs, newer_message,
                                     NewerFormatError)
from .cube import FORMAT, FORMAT_VERSION, StoreError, cube_problem, damage, quiet_zarr
from .extension import changed_dims, user_entries
from .spec import NotAnExtension, SweepSpec, grid_extension, parse_spec


@dataclass(frozen=True)
class OutputPlan:
    """What a sweep does with its output (:func:`plan_output`)."""

    action: str  # "create" (a new store), "resume" (the same spec) or "extend"
    old: SweepSpec | None = None  # "extend": the cube's own spec
    added: dict | None = None  # "extend": the grid values the spec appends to it


def check_output(path: str, spec: SweepSpec, overwrite: bool) -> bool:
    """Check the output before any work; return True if a store must be created (False:
    the store is resumed, or extended: :func:`plan_output` says which). Nothing is
    touched here."""
    return plan_output(path, spec, overwrite).action == "create"


def plan_output(path: str, spec: SweepSpec, overwrite: bool) -> OutputPlan:
    """Check the output before any work, and say what the sweep does with it.

    A missing or read-only parent directory, a path that is not one of our
    stores, or one of ours made from another spec or an older format (without
    ``overwrite``) is a :class:`~.cube.StoreError`; one of ours that is damaged and holds
    results is a :class:`DamagedStoreError` (``overwrite`` replaces it); one that
    holds no results yet is recreated (``"create"``). A cube of the same spec is resumed
    (``"resume"``); one whose spec ``spec`` extends by grid values appended after its own,
    everything else the same (:func:`~.spec.grid_extension`), is extended (``"extend"``,
    :func:`~.extension.extend`). Nothing is touched here.
    """
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise StoreError(f"--out {path!r}: the directory {parent!r} does not exist")
    if not atomic.writable(parent):
        raise StoreError(f"--out {path!r}: the directory {parent!r} is not writable")
    if not os.path.lexists(path):
        return OutputPlan("create")
    if not os.path.isdir(path):
        raise StoreError(f"--out {path!r} exists and is a file, not a sweep store: choose "
                         "another path for the cube (nothing was changed)")
    attrs = group_attrs(path)
    if attrs is None or attrs.get("format") != FORMAT:
        if attrs is None and _ours_without_attributes(path):
            return OutputPlan("create")  # a store we started to make and that holds nothing yet
        raise StoreError(f"--out {path!r} exists and is not an onebit-dask sweep store: "
                         "choose another path (nothing was changed)")
    if not os.access(path, os.W_OK):
        raise StoreError(f"--out {path!r} is not writable")
    if overwrite:
        return OutputPlan("create")
    found = attrs.get("format_version")
    if isinstance(found, int) and not isinstance(found, bool) and found > FORMAT_VERSION:
        raise NewerFormatError(newer_message(f"the result cube {path!r}", found,
                                             FORMAT_VERSION))
    if attrs.get("spec_fingerprint") != spec.fingerprint():
        old, added = _extension(path, attrs, spec)
        return OutputPlan("extend", old, added)
    if attrs.get("format_version") != FORMAT_VERSION:
        raise StoreError(f"--out {path!r} was made by an older onebit-dask (store format "
                         f"{attrs.get('format_version')}, this one writes {FORMAT_VERSION}): "
                         "use a new path, or --overwrite to recompute it")
    problem = damage(path, spec)
    if problem is None:
        return OutputPlan("resume")
    raise _damaged(path, problem)


def _damaged(path: str, problem: str) -> DamagedStoreError:
    return DamagedStoreError(f"the store {path!r} is damaged ({problem}): run again with "
                             "--overwrite to recompute it, or choose another --out")


def _another_spec(path: str, attrs: dict, spec: SweepSpec, differs: str) -> StoreError:
    """The refusal of a cube made from another spec that ``spec`` does not extend
    (``differs``: what differs)."""
    was, now = attrs.get("sampler"), spec.fixed.get("sampler")
    hint = (f"; its onebit cells were drawn with sampler {was!r} and this spec uses "
            f"{now!r} (the default is 'conditional'): write 'sampler: {was}' under "
            "fixed to resume it" if was is not None and was != now else "")
    if spec.files and not hint:
        hint = " (or of data files that changed since it was started)"
    return StoreError(f"--out {path!r} holds the results of another spec "
                      f"({attrs.get('spec_name')!r}){hint}: use a new path, or "
                      f"--overwrite to replace them. It differs from this spec in {differs}: "
                      "a sweep extends a cube only by grid values appended after the "
                      "cube's own (each kept, in its order; everything else the same)")


def _extension(path: str, attrs: dict, spec: SweepSpec) -> tuple:
    """``(old, added)`` when ``spec`` extends the cube at ``path`` (attributes ``attrs``,
    of another fingerprint): its own spec and the grid values appended to it
    (:func:`~.spec.grid_extension`), once the cube is found whole; else the refusal."""
    import zarr

    version = attrs.get("format_version")
    if version != FORMAT_VERSION:
        raise _another_spec(path, attrs, spec, f"the store format ({version}; only a cube "
                                               f"of format {FORMAT_VERSION} is extended)")
    with quiet_zarr():
        try:
            group = zarr.open_group(path, mode="r", use_consolidated=False)
            problem = cube_problem(group, attrs)
        except Exception as exc:  # unreadable metadata
            problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if problem is not None:
        raise _damaged(path, problem)
    text = attrs.get("spec_text")
    try:
        old = parse_spec(text if isinstance(text, str) else "", f"{path} (its spec)",
                         allow_large=True, folder=spec.folder or None)
    except ValueError as exc:
        raise _another_spec(path, attrs, spec, f"its spec, which cannot be read here "
                                               f"({exc})") from None
    if old.fingerprint() != attrs.get("spec_fingerprint"):
        raise _another_spec(path, attrs, spec, "the data files' contents (changed since the "
                            "cube was made)" if old.files else "its spec's fingerprint "
                            "(computed otherwise by this onebit-dask)")
    try:
        added = grid_extension(old, spec)
    except NotAnExtension as exc:
        raise _another_spec(path, attrs, spec, str(exc)) from None
    problem = damage(path, old, whole=False)
    if problem is not None:
        raise _damaged(path, problem)
    grown = changed_dims(old, spec)
    along = {name: [d for d in dims_of if d in grown]
             for name, dims_of in user_entries(path, attrs).items() if dims_of}
    along = {name: found for name, found in along.items() if found}
    if along:
        listed = ", ".join(f"{name!r} (along {', '.join(found)})"
                           for name, found in sorted(along.items()))
        raise StoreError(
            f"--out {path!r}: this spec extends its cube, which holds arrays that onebit-dask "
            f"did not write along the dimensions the extension grows: {listed}; their "
            "values for the new cells cannot be made, so the cube is not extended (nothing "
            "was changed): move them out of the cube (each is a directory in it) and run "
            "again, then compute them anew; arrays along the other dimensions, groups and "
            "attributes of yours are carried over")
    return old, added


def _ours_without_attributes(path: str) -> bool:
    """A directory with nothing but zarr metadata in it (an interrupted ``to_zarr`` of an
    older version): safe to recreate."""
    for _, _, files in os.walk(path):
        if any(f != "zarr.json" for f in files):
            return False
    return True
