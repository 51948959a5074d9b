"""Where a sweep's cells run: as one task each, or, for a large ``onebit`` cell, fitted
with the Dask engine across the cluster.

The placement keys of a spec's ``fixed`` (:data:`PLACEMENT_DEFAULTS`) decide where a
cell runs, never its values (they are not part of the spec's fingerprint). Workers may
import this module: it needs the methods' table, not the runner.
"""

from __future__ import annotations

from .methods import METHODS

PLACEMENT_DEFAULTS = {"distributed": "auto", "distributed_batch": 2 ** 25,
                      "distributed_labels": 2 ** 17}
DISTRIBUTED = ("auto", "always", "never")  # the values of fixed.distributed


def runs_distributed(params: dict, fixed: dict) -> bool:
    """Whether a cell's fit runs with the Dask engine across the cluster (else one task).

    ``fixed["distributed"]``: ``always``/``never``, or ``auto``: a cell whose batch draws
    at least ``distributed_batch`` numbers (:func:`batch_numbers`) or whose label count
    ``d2`` reaches ``distributed_labels`` (a file dataset's cell: its ``d2`` only). Only
    methods with a Dask engine (``onebit``) can.
    """
    if not METHODS[params["method"]].distributable or fixed["distributed"] == "never":
        return False
    if fixed["distributed"] == "always":
        return True
    if "train_path" in params:  # a file dataset: its batches hold the files' non-zeros
        return params["d2"] >= fixed["distributed_labels"]
    return (batch_numbers(params, fixed["sampler"]) >= fixed["distributed_batch"]
            or params["d2"] >= fixed["distributed_labels"])


def batch_numbers(params: dict, sampler: str) -> int:
    """Random numbers a batch draws, at most: ``batch_size * d1`` (explicit),
    ``batch_size * 3k`` (projected), ``min(batch_size, d2) * d1`` (conditional: whole
    feature vectors for the labels with an active row, and nothing per observation)."""
    m, d1, d2 = params["batch_size"], params["d1"], params["d2"]
    return {"explicit": m * d1, "projected": m * min(3 * params["rank"], d1),
            "conditional": min(m, d2) * d1}[sampler]


def placement_text(fixed: dict, client) -> str:
    """The cube's ``placement`` attribute: where the last run ran the cells (per cell:
    ``engine``)."""
    if client is None:
        return "in-process: every cell in the runner with the in-process engine"
    rule = {"always": "every onebit cell", "never": "no cell",
            "auto": (f"onebit cells whose batch draws >= {fixed['distributed_batch']} numbers or "
                     f"d2 >= {fixed['distributed_labels']}")}[fixed["distributed"]]
    return (f"on a Dask cluster: {rule} fitted with the Dask engine across the workers "
            "(engine 'dask'), the others one task each (engine 'local')")
