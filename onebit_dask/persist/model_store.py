"""A fitted (or checkpointed) :class:`~onebit_dask.OneBitMultiLabel` in a zarr (v3) group.

Layout of a model store (no pickle)::

    MODEL.zarr/
        Q_top, V_top      (d1, 2k) float64: the client's share of the state (A_ = Q_top)
        feature_mean, feature_scale (d1,), feature_directions (d1, q), feature_factors (q,)
                          float64: the feature map (onebit_dask.features), when the
                          model has one (attrs feature_components = q)
        blocks/<s>/       one group per label block s, attrs {"lo", "hi"}:
            Q, V, B       (hi - lo, 2k) float64: the block's rows of Q_bot, V_bot and B_
        attrs:  format, version, params (get_params() without engine), n_features_in,
                n_labels, n_steps, n_samples_seen, fit_s, bounds, history (the list of
                dicts), data (what the model was fitted on: a synthetic problem's fields,
                an observations store's path and shape, ...; None after partial_fit),
                rng_state, feature_components (q, or None without a feature map),
                calibration ([alpha, beta], predict_proba's link; version 6),
                classes (a binary target's two classes, or null; version 7),
                versions (package, numpy, zarr, python), checksums (the SHA-256 of
                every array), in a checkpoint checkpoint = {"step": ..., "fingerprint": ...},
                and attrs_sha256: the SHA-256 of all the others (:data:`DIGESTED`)

Each block is written, and read back, by the task that holds it (:func:`write_block`,
:func:`read_block` run through ``engine.map``): on Dask every worker reads and writes its
own rows, so the path must be visible to the workers (a shared file system), and the
label side never passes through the client. The root attrs are written last, so a store
whose writer died is not taken for a model; the metadata are then consolidated into the
root's ``zarr.json`` (version 5), so that ``xarray.open_zarr`` reads the tops without a
warning. The package itself reads every array's own metadata (``use_consolidated=False``).

A store is written into a marked temporary directory next to ``PATH`` and moved into
place (:mod:`onebit_dask.io.stores.atomic`): a kill at any point leaves ``PATH`` whole, or
a marked old copy that the next open puts back; nothing the package did not create
is renamed or removed. One writer at a time holds ``PATH.lock``
(:class:`~onebit_dask.io.stores.lock.StoreLock`).

Reading checks the store as the observations store is checked: the format version (a
newer one is refused, an older one read with one warning), the digest of the attributes
(``attrs_sha256``: an edited, removed or damaged attribute is refused), the attributes'
types and their agreement (bounds from 0 to ``n_labels``, ``l = 2 rank`` columns),
each array's dtype, shape and chunks, finite values, and the SHA-256 of every array
recorded in ``checksums`` when it was written (a checkpoint whose writer died, or an
edited store, is not resumed). A damaged store raises
:class:`~onebit_dask.io.stores.zarr_format.DamagedStoreError` naming the store and the
part; a path that is not a model store raises :class:`ModelStoreError`.
"""

from __future__ import annotations

import hashlib
import math
import os
import platform

import numpy as np
import zarr

from ..io import FORMAT_OF
from ..engine.blocks import THRESHOLD_SLOTS as LABEL_SLOTS, Block
from ..io.stores import atomic, paths
from ..io.stores.zarr_format import (ALL_CHUNKS, DamagedStoreError, attr, attrs_digest,
                                     check_array, check_attrs_digest, check_stored_finite,
                                     check_version, checked_codecs, consolidate,
                                     format_attrs,
                                     unreadable_chunk)

FORMAT = FORMAT_OF["model"]
VERSION = 7  # 2: checksums, dimension names, rng_state integers as decimal strings;
#             3: the feature map; 4: attrs_sha256, the digest of the attributes, and
#             zstd chunks with their frame checksum; 5: consolidated metadata (for
#             xarray and other readers; the package reads each array's own); 6: calibration,
#             and a checkpoint's pairs asked under chosen queries; 7: classes (a
#             binary target's) and, in the stores written since it was added,
#             classes_dtype (their NumPy data type)
DIGEST_SINCE = 4  # the first version whose attributes carry their digest
DIGESTED = ("format", "version", "params", "n_features_in", "n_labels", "n_steps",
            "n_samples_seen", "fit_s", "bounds", "history", "data", "rng_state",
            "feature_components", "best_iteration", "validation_score", "blas", "versions",
            "checksums", "checkpoint",
            "calibration", "queries_asked", "classes", "classes_dtype")  # every attribute
# the attributes that versions before these do not digest
SINCE = {"calibration": 6, "queries_asked": 6, "classes": 7, "classes_dtype": 7}
WHEN_PRESENT = ("classes_dtype",)  # digested only where present (added within version 7)
KEY_CHUNK = 1 << 20  # pair keys per chunk of a checkpoint's asked_keys and asked_found
DIGESTED_TEXT = "params, history, bounds, rng_state, checksums and the rest"
SLOTS = ("Q", "V", "B")
CHUNK_ROWS = 65_536  # label rows per chunk of a block's arrays
BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")
TOP_DIMS = ("feature", "component")
FEATURE_ARRAYS = ("mean", "scale", "directions", "factors")  # FeatureMap's fields
BLOCK_DIMS = ("label", "component")


class ModelStoreError(ValueError):
    """A path that is not a (readable) onebit-dask model store."""


# -- paths -----------------------------------------------------------------------------
def store_path(path) -> str:
    """``path`` as an absolute local path, or a URL
    (:func:`onebit_dask.io.stores.paths.normalise`)."""
    return paths.normalise(path)


def check_store_target(path, *, overwrite: bool, kind: str, name: str = "path") -> str:
    """Check, before any work, that a store of ``kind`` can be written at ``path``;
    return it as :func:`store_path`.

    Parameters
    ----------
    path : str or os.PathLike
    overwrite : bool
        Whether a model store already at ``path`` may be replaced (``kind="model"``).
    kind : {"model", "checkpoint"}
        A checkpoint at ``path`` is resumed or refused by
        :class:`~onebit_dask.persist.Checkpoint`; anything else there is refused here.
    name : str
        The parameter named in the messages.

    Raises
    ------
    TypeError, ValueError
        ``path`` is not a path, is empty, its directory is missing or not writable.
    FileExistsError
        Something is at ``path`` (without ``overwrite``), or a file the package did not
        create is where its lock goes (:class:`~onebit_dask.io.stores.atomic.ForeignPathError`).
    ModelStoreError
        ``overwrite`` and ``path`` is not a model store.
    StoreLockedError
        Another live writer holds ``path``'s lock.
    """
    from ..io.stores.lock import StoreLock

    if kind not in ("model", "checkpoint"):
        raise ValueError(f"kind={kind!r} is not allowed: give 'model' or 'checkpoint'")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name}={path!r} is not allowed: give a path (str or os.PathLike)")
    if not os.fspath(path).strip():
        raise ValueError(f"{name}={os.fspath(path)!r} is not allowed: give the path of the "
                         f"{kind} store to write")
    full = store_path(path)
    if not paths.is_url(full):
        atomic.check_parent(full, name)
        StoreLock(full).probe()  # a foreign file where the lock goes, or a live holder
    if kind == "model" and paths.exists(full):
        if not overwrite:
            how = ("pass overwrite=True to replace the model there" if name == "path" else
                   "delete it first")
            raise FileExistsError(f"{name}={os.fspath(path)!r} exists: give a new path, or {how}")
        read_attrs(full, name)  # a model store may be replaced, nothing else
    if kind == "checkpoint" and not paths.is_url(full) and os.path.isfile(full):
        raise ModelStoreError(f"{name}={os.fspath(path)!r} is a file, not a checkpoint: give "
                              "another path")
    return full


def digest(array: np.ndarray) -> str:
    """SHA-256 of ``array``'s float64 values (C order, little-endian)."""
    return hashlib.sha256(np.ascontiguousarray(array, dtype="<f8").tobytes()).hexdigest()


def key_digest(keys: np.ndarray) -> str:
    """SHA-256 of integer keys as little-endian int64 (exact beyond 2**53)."""
    return hashlib.sha256(np.ascontiguousarray(keys, dtype="<i8").tobytes()).hexdigest()


def read_values(array, where: str, part: str) -> np.ndarray:
    """All of ``array`` (the array ``part`` of the store ``where``); a chunk that cannot be
    decoded (bytes changed, truncated, empty) is a :class:`DamagedStoreError` naming it."""
    try:
        return array[...]
    except Exception as exc:  # zarr and its codecs raise several types
        gone = unreadable_chunk(array)
        key, reason = gone if gone is not None else ("?", f"{type(exc).__name__}: {exc}")
        raise DamagedStoreError(f"{where} is damaged: the chunk {part}/{key} cannot be read "
                                f"({reason.splitlines()[0]})") from None


# -- block functions (run where the block lives) -----------------------------------------
def _block_path(path: str, s: int) -> str:
    return paths.join(path, "blocks", str(s))


def write_block(block: Block, s: int, path: str) -> Block:
    """Write the block's ``Q``, ``V``, ``B`` rows (and a thresholded model's ``b``, ``p``,
    ``v``) into ``PATH/blocks/<s>``; the block is unchanged,
    ``out = (lo, hi, {slot: sha256})``."""
    sums = {}
    with paths.reached(path):
        group = zarr.open_group(paths.store(_block_path(path, s)), mode="w", zarr_format=3,
                                attributes={"lo": block.lo, "hi": block.hi})
        for name in SLOTS + tuple(n for n in LABEL_SLOTS if n in block.slots):
            rows = block.slots[name]
            group.create_array(name, data=rows, config=ALL_CHUNKS, **checked_codecs(),
                               dimension_names=BLOCK_DIMS[: rows.ndim],
                               chunks=(max(1, min(CHUNK_ROWS, rows.shape[0])),
                                       *rows.shape[1:]))
            sums[name] = digest(rows)
    return block.evolve(out=(block.lo, block.hi, sums))


def read_block(block: Block, part: tuple, path: str) -> Block:
    """The block ``[lo, hi)`` with its state read from ``PATH/blocks/<s>``, checked;
    ``part = (s, l, {slot: sha256} or None, thresholded)``; ``out = None``."""
    s, width, sums, thresholded = part
    where = f"model store {path!r}"
    names = SLOTS + (LABEL_SLOTS if thresholded else ())
    try:
        with paths.reached(path):
            group = zarr.open_group(paths.store(_block_path(path, s), read_only=True),
                                    mode="r", zarr_format=3)
        stored = (group.attrs.get("lo"), group.attrs.get("hi"))
        arrays = {name: group[name] for name in names}
    except (OSError, KeyError, ValueError, FileNotFoundError) as exc:
        raise DamagedStoreError(f"{where} is damaged: block {s} (blocks/{s}) cannot be read "
                                f"({type(exc).__name__}: {exc}); save or fit it again") from None
    if stored != (block.lo, block.hi):
        raise DamagedStoreError(f"{where} is damaged: block {s} holds labels {stored}, "
                                f"expected [{block.lo}, {block.hi})")
    slots = {}
    for name, array in arrays.items():
        part_name = f"blocks/{s}/{name}"
        check_array(array, where, part_name, dtype=np.float64,
                    shape=(block.hi - block.lo, width)[: 2 if name in SLOTS else 1])
        values = read_values(array, where, part_name)
        if name == "v":  # a label without bits has an infinite variance
            check_stored_finite(np.where(values == np.inf, 0.0, values), where, part_name)
        else:
            check_stored_finite(values, where, part_name)
        if name in ("p", "v") and np.any(values < 0) or name == "p" and np.any(values > 1):
            raise DamagedStoreError(f"{where} is damaged: {part_name} holds values outside "
                                    f"{'[0, 1]' if name == 'p' else '[0, inf]'}")
        slots[name] = values
        if sums is not None and digest(slots[name]) != sums.get(name):
            raise DamagedStoreError(f"{where} is damaged: {part_name} differs from what was "
                                    "written (its SHA-256 does not match the checksums)")
    return Block(block.lo, block.hi, slots)


# -- whole stores --------------------------------------------------------------------------
def versions() -> dict:
    from .. import __version__

    return {"onebit_dask": __version__, "numpy": np.__version__, "zarr": zarr.__version__,
            "python": platform.python_version()}


def write_store(path: str, top, engine, attrs: dict, features=None, asked=None) -> None:
    """Write a whole store at ``path`` (a new, empty, marked directory): the tops, the
    feature map (``None``: none) and a checkpoint's pairs asked under chosen queries
    (``asked``, :class:`~onebit_dask.data.queries.Asked`; ``None``: none) from this
    process, each block from the task that holds it on ``engine``, then ``attrs`` (with the
    format and the checksums), which mark the store complete."""
    root = zarr.open_group(paths.store(path), mode="a", zarr_format=3)
    sums = {}
    arrays = [("Q_top", top.Q), ("V_top", top.V)]
    if features is not None:
        arrays += [(f"feature_{name}", getattr(features, name)) for name in FEATURE_ARRAYS]
    for name, array in arrays:
        root.create_array(name, data=array, config=ALL_CHUNKS, **checked_codecs(),
                          dimension_names=TOP_DIMS[: array.ndim])
        sums[name] = digest(array)
    if asked is not None:
        for name, keys in (("asked_keys", asked.keys), ("asked_found", asked.found)):
            root.create_array(name, data=keys, config=ALL_CHUNKS, **checked_codecs(),
                              dimension_names=("pair",),
                              chunks=(max(1, min(KEY_CHUNK, keys.size)),))
            sums[name] = key_digest(keys)
        attrs = {**attrs, "queries_asked": {"n_asked": asked.n_asked, "d2": asked.d2}}
    root.create_group("blocks")
    written = engine.map(write_block, path, per_block=list(range(len(attrs["bounds"]) - 1)))
    bounds = attrs["bounds"]
    if [w[0] for w in written] != bounds[:-1] or [w[1] for w in written] != bounds[1:]:
        raise RuntimeError(f"the label blocks written to {path!r} do not match the bounds "
                           f"{bounds}: {written}")
    sums["blocks"] = [w[2] for w in written]
    root.update_attributes(signed_attrs({**attrs, **format_attrs(FORMAT, VERSION),
                                         "versions": versions(), "checksums": sums}))
    consolidate(path)  # after the commit: one more rewrite of the root's zarr.json


def signed_attrs(attrs: dict) -> dict:
    """``attrs`` as JSON reads them back, with ``attrs_sha256``: the digest of the
    attributes :data:`DIGESTED` (:func:`~onebit_dask.io.stores.zarr_format.attrs_digest`),
    checked by :func:`read_attrs`."""
    import json

    unknown = set(attrs) - set(DIGESTED)
    if unknown:
        raise ValueError(f"the model store attributes {sorted(unknown)} are not in DIGESTED")
    attrs = json.loads(json.dumps(attrs))
    return {**attrs, "attrs_sha256": attrs_digest(attrs, digested(attrs))}


def digested(attrs: dict) -> tuple:
    """The attributes whose digest a store with the attributes ``attrs`` carries
    (:data:`DIGESTED`, less those added after its version, :data:`SINCE`, and those of
    :data:`WHEN_PRESENT` it does not have: a version-7 store written before
    ``classes_dtype`` was added digests without it; one that has it digests it, so
    removing or adding it is seen as an edit)."""
    version = attrs["version"]
    return tuple(k for k in DIGESTED if SINCE.get(k, 0) <= version
                 and (k not in WHEN_PRESENT or k in attrs))


def write_store_atomic(path: str, top, engine, attrs: dict, features=None,
                       asked=None) -> None:
    """:func:`write_store` into a marked temporary next to ``path``, then moved into place
    (:func:`onebit_dask.io.stores.atomic.replace`); on any failure (a Ctrl-C too) the
    temporary is removed once the block writes on ``engine`` have ended, and what was at
    ``path`` is unchanged. The caller holds ``path``'s lock.

    At a URL (an object store has no rename) the store is written in place: the old
    store's root metadata goes first (it is then no model), its objects next, and the
    new root attributes, with the checksums, last; an interrupted write leaves a store
    that is refused, never one read as a model."""
    if paths.is_url(path):
        if paths.exists(path):
            paths.remove(paths.join(path, "zarr.json"))
            paths.remove(path)
        write_store(path, top, engine, attrs, features, asked)
        return
    atomic.recover(path, temporaries=True)
    tmp = atomic.temporary_name(path)
    try:
        atomic.make_temporary(tmp)
        write_store(tmp, top, engine, attrs, features, asked)
        atomic.replace(tmp, path)
    except BaseException:
        try:  # the block writes still running on the workers (after a Ctrl-C) end first
            engine.settle()
        finally:
            atomic.discard(tmp)
        raise


def read_attrs(path: str, name: str = "model") -> dict:
    """The attrs of the model store at ``path``, checked (``name`` is the parameter
    named in the errors): :class:`ModelStoreError` if it is not a model store,
    :class:`DamagedStoreError` if it is of a newer format or its attributes are damaged
    (their digest, types and agreement); a store of a format before :data:`DIGEST_SINCE`
    is read with one warning."""
    path = os.fspath(path)
    if not paths.exists(path):
        if not paths.is_url(path) and atomic.leftovers(store_path(path), "old"):
            raise FileNotFoundError(
                f"{name}={path!r} does not exist, but the copy that an interrupted write "
                f"moved aside does ({atomic.leftovers(store_path(path), 'old')[0]!r}): rerun "
                f"the fit with checkpoint={path!r} (it puts the copy back and resumes), or "
                "save the model again")
        raise FileNotFoundError(f"{name}={path!r} does not exist: give the path of a model "
                                "written by OneBitMultiLabel.save or onebit-dask fit --save")
    try:
        attrs = dict(zarr.open_group(paths.store(path, read_only=True), mode="r",
                                     zarr_format=3, use_consolidated=False).attrs)
    except Exception as exc:  # zarr raises several types for a path that is not a group
        raise ModelStoreError(f"{name}={path!r} is not an onebit-dask model store (not a zarr "
                              f"v3 group: {type(exc).__name__})") from None
    if attrs.get("format") != FORMAT:
        raise ModelStoreError(f"{name}={path!r} is not an onebit-dask model store (attrs format="
                              f"{attrs.get('format')!r}, expected {FORMAT!r}; a store whose "
                              "writer was interrupted has none)")
    where = f"model store {path!r}"
    if check_version(attrs, VERSION, DIGEST_SINCE, where, lacks="a digest of its attributes"):
        check_attrs_digest(attrs, digested(attrs), where, DIGESTED_TEXT)
    check_attrs(attrs, where)
    return attrs


def _holds(classes, kind: str) -> bool:
    """Whether the NumPy data type ``kind`` (a ``dtype.str``: booleans, integers, floats,
    fixed-length or object strings) holds the values ``classes`` unchanged."""
    try:
        dtype = np.dtype(kind)
        return (classes is not None and dtype.kind in "biufUO"
                and np.asarray(classes, dtype=dtype).tolist() == classes)
    except (TypeError, ValueError, OverflowError):  # no dtype, or one the values cannot be
        return False


def check_attrs(attrs: dict, where: str) -> None:
    """Raise :class:`DamagedStoreError` unless the attributes have their types and agree."""
    params = attr(attrs, "params", dict, where)
    attr(params, "rank", int, where + " (params)", low=1)
    attr(attrs, "n_features_in", int, where, low=1)
    d2 = attr(attrs, "n_labels", int, where, low=1)
    attr(attrs, "n_steps", int, where, low=0)
    attr(attrs, "n_samples_seen", int, where, low=0)
    attr(attrs, "fit_s", float, where, low=0)
    history = attr(attrs, "history", list, where)
    if not all(isinstance(h, dict) for h in history):
        raise DamagedStoreError(f"{where} is damaged: the attribute 'history' is not a list "
                                "of records")
    attr(attrs, "data", dict, where, optional=True)
    attr(attrs, "blas", str, where, optional=True)
    for name, since in SINCE.items():
        if attrs["version"] < since and name in attrs:
            raise DamagedStoreError(f"{where} is damaged: it has the attribute {name!r}, which "
                                    f"version {attrs['version']} stores do not have")
    attr(attrs, "queries_asked", dict, where, optional=True)
    link = attr(attrs, "calibration", list, where, optional=True)
    if link is not None and not (len(link) == 2 and all(
            isinstance(v, float) and math.isfinite(v) for v in link)):
        raise DamagedStoreError(f"{where} is damaged: the attribute calibration={link!r} is "
                                "not two finite numbers")
    classes = attr(attrs, "classes", list, where, optional=True)
    if classes is not None and not (
            d2 == 1 and len(classes) == 2 and classes[0] != classes[1]
            and len({type(c) for c in classes}) == 1
            and all(isinstance(c, (str, int, float)) for c in classes)):
        raise DamagedStoreError(f"{where} is damaged: the attribute classes={classes!r} is not "
                                "the two distinct classes of a one-label model")
    kind = attr(attrs, "classes_dtype", str, where, optional=True)
    if kind is not None and not _holds(classes, kind):
        raise DamagedStoreError(f"{where} is damaged: the attribute classes_dtype={kind!r} is "
                                f"not a data type of its classes {classes!r}")
    bounds = attr(attrs, "bounds", list, where)
    if (len(bounds) < 2 or not all(isinstance(b, int) and not isinstance(b, bool)
                                   for b in bounds)
            or bounds[0] != 0 or bounds[-1] != d2
            or any(a >= b for a, b in zip(bounds, bounds[1:]))):
        raise DamagedStoreError(f"{where} is damaged: the attribute bounds={bounds!r} does not "
                                f"cut the n_labels={d2} labels into blocks")
    if attrs["version"] >= 2:
        sums = attr(attrs, "checksums", dict, where)
        blocks = attr(sums, "blocks", list, where + " (checksums)")
        if len(blocks) != len(bounds) - 1 or not all(isinstance(b, dict) for b in blocks):
            raise DamagedStoreError(f"{where} is damaged: checksums.blocks does not have one "
                                    f"record per block ({len(bounds) - 1})")
    q = attr(attrs, "feature_components", int, where, low=0, optional=True)
    kind = params.get("features", "none")
    if (kind == "none" and q is not None) or (kind not in ("none", "auto") and q is None):
        raise DamagedStoreError(f"{where} is damaged: the attribute feature_components={q!r} "
                                f"does not go with params features={params.get('features')!r}")
    rng_state(attrs, where)


def _width(attrs: dict) -> int:
    """``l = 2 rank``, the columns of every array of the store."""
    return 2 * attrs["params"]["rank"]


def encode_rng_state(state: dict | None):
    """A bit generator's state with integers beyond 2**53 as decimal strings (a 128-bit
    PCG64 state would be rounded by readers that take JSON numbers as doubles)."""
    if isinstance(state, dict):
        return {k: encode_rng_state(v) for k, v in state.items()}
    if isinstance(state, int) and not isinstance(state, bool) and abs(state) >= 2 ** 53:
        return str(state)
    return state


def _decode(value):
    if isinstance(value, dict):
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return value


def rng_state(attrs: dict, where: str):
    """The random generator saved in ``attrs`` (``None`` if none); only NumPy's bit
    generators (:data:`BIT_GENERATORS`) are accepted."""
    state = attrs.get("rng_state")
    if state is None:
        return None
    name = state.get("bit_generator") if isinstance(state, dict) else None
    if name not in BIT_GENERATORS:
        raise DamagedStoreError(f"{where} is damaged: rng_state.bit_generator={name!r} is not "
                                f"one of NumPy's bit generators {list(BIT_GENERATORS)}")
    bit_generator = getattr(np.random, name)()
    try:
        bit_generator.state = _decode(state)
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        raise DamagedStoreError(f"{where} is damaged: rng_state is not a {name} state "
                                f"({type(exc).__name__}: {exc})") from None
    return np.random.Generator(bit_generator)


def read_top(path: str, attrs: dict):
    """``(Q_top, V_top)`` of the store at ``path`` (whose checked attrs are ``attrs``)."""
    where = f"model store {path!r}"
    shape = (attrs["n_features_in"], _width(attrs))
    sums = attrs.get("checksums")
    try:
        root = zarr.open_group(paths.store(path, read_only=True), mode="r", zarr_format=3,
                                use_consolidated=False)
        arrays = [root[name] for name in ("Q_top", "V_top")]
    except (OSError, KeyError, ValueError) as exc:
        raise DamagedStoreError(f"{where} is damaged: Q_top or V_top cannot be read "
                                f"({type(exc).__name__}: {exc})") from None
    out = []
    for name, array in zip(("Q_top", "V_top"), arrays):
        check_array(array, where, name, dtype=np.float64, shape=shape)
        values = check_stored_finite(read_values(array, where, name), where, name)
        if sums is not None and digest(values) != sums.get(name):
            raise DamagedStoreError(f"{where} is damaged: {name} differs from what was written "
                                    "(its SHA-256 does not match the checksums)")
        out.append(values)
    return tuple(out)


def read_feature_map(path: str, attrs: dict):
    """The :class:`~onebit_dask.features.FeatureMap` of the store at ``path`` (``None``
    without one): each array's dtype, shape, finite values and checksum checked, and
    positive scales and factors."""
    from ..ops.features import FeatureMap

    q = attrs.get("feature_components")
    if q is None:
        return None
    where = f"model store {path!r}"
    d1 = attrs["n_features_in"]
    shapes = {"mean": (d1,), "scale": (d1,), "directions": (d1, q), "factors": (q,)}
    sums = attrs.get("checksums") or {}
    try:
        root = zarr.open_group(paths.store(path, read_only=True), mode="r", zarr_format=3,
                                use_consolidated=False)
        arrays = {name: root[f"feature_{name}"] for name in FEATURE_ARRAYS}
    except (OSError, KeyError, ValueError) as exc:
        raise DamagedStoreError(f"{where} is damaged: its feature map cannot be read "
                                f"({type(exc).__name__}: {exc})") from None
    values = {}
    for name, array in arrays.items():
        part = f"feature_{name}"
        check_array(array, where, part, dtype=np.float64, shape=shapes[name])
        values[name] = check_stored_finite(read_values(array, where, part), where, part)
        if digest(values[name]) != sums.get(part):
            raise DamagedStoreError(f"{where} is damaged: {part} differs from what was written "
                                    "(its SHA-256 does not match the checksums)")
        if name in ("scale", "factors") and np.any(values[name] <= 0):
            raise DamagedStoreError(f"{where} is damaged: {part} holds values <= 0")
    return FeatureMap(**values)


def read_asked(path: str, attrs: dict):
    """A checkpoint's pairs asked under chosen queries
    (:class:`~onebit_dask.data.queries.Asked`), or ``None`` when it holds none: the keys
    checked for dtype, checksum, strict order and sign, the positives found among them."""
    from ..data.queries import Asked

    meta = attrs.get("queries_asked")
    if meta is None:
        return None
    where = f"model store {path!r}"
    n_asked = attr(meta, "n_asked", int, where + " (queries_asked)", low=0)
    d2 = attr(meta, "d2", int, where + " (queries_asked)", low=1)
    if d2 != attrs["n_labels"]:
        raise DamagedStoreError(f"{where} is damaged: queries_asked.d2={d2} is not "
                                f"n_labels={attrs['n_labels']}")
    sums = attrs.get("checksums") or {}
    try:
        root = zarr.open_group(paths.store(path, read_only=True), mode="r", zarr_format=3,
                                use_consolidated=False)
        arrays = {name: root[name] for name in ("asked_keys", "asked_found")}
    except (OSError, KeyError, ValueError) as exc:
        raise DamagedStoreError(f"{where} is damaged: its pairs asked cannot be read "
                                f"({type(exc).__name__}: {exc})") from None
    values = {}
    for name, array in arrays.items():
        check_array(array, where, name, dtype=np.int64)
        values[name] = read_values(array, where, name)
        keys = values[name]
        if key_digest(keys) != sums.get(name):
            raise DamagedStoreError(f"{where} is damaged: {name} differs from what was written "
                                    "(its SHA-256 does not match the checksums)")
        if keys.ndim != 1 or np.any(keys[1:] <= keys[:-1]) or (keys.size and keys[0] < 0):
            raise DamagedStoreError(f"{where} is damaged: {name} is not sorted distinct "
                                    "pair keys")
    keys, found = values["asked_keys"], values["asked_found"]
    if keys.size > n_asked or not np.isin(found, keys).all():
        raise DamagedStoreError(f"{where} is damaged: its positives found are not among its "
                                "pairs asked, or more pairs than asked")
    asked = Asked(d2)
    asked.keys, asked.found, asked.n_asked = keys, found, n_asked
    return asked


def read_blocks(path: str, engine, attrs: dict) -> None:
    """Start ``engine``'s blocks at ``attrs["bounds"]``; each block reads its own rows."""
    bounds = attrs["bounds"]
    sums = (attrs.get("checksums") or {}).get("blocks") or [None] * (len(bounds) - 1)
    width = _width(attrs)
    engine.start(bounds)
    thresholded = attrs["params"].get("threshold", "none") != "none"
    engine.map(read_block, path, per_block=[(s, width, sums[s], thresholded)
                                            for s in range(len(bounds) - 1)])
