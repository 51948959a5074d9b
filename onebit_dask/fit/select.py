r"""``step="select"``: the pooled and the residual steps side by side, one kept by
progressive validation (``docs/ALGORITHM.md`` section 9e).

A fit with ``step="select"`` takes the pooled steps of ``step="refine"``'s first half,
then forks at iteration ``n_iter // 2 + 1``: from there two **branches** take a step on
each batch, the *pooled branch* (``step="pooled"``'s steps) and the *residual branch*
(``step="refine"``'s residual steps). Each branch is, bit for bit, the fit of its own
rule.

Before a branch takes its step on batch ``t``, its iterate scores the batch's bits,
``s_i = x_i^T A b_{j_i} + b_{j_i 0}``: the batch's macro AUC, the mean over the labels
with both classes among the batch's bits of each label's Mann-Whitney AUC
(:func:`~onebit_dask.metrics.label_auc_sums`, as the validation bits of section 9b score
an iterate). The iterate has not used these bits: this is *progressive validation*
(Blum, Kalai and Langford, COLT 1999), which spends no bit on validation. After the last
step the fit keeps the branch whose iterates scored the higher mean over the forked
batches (the pooled branch on a tie), and its history.

The label blocks hold the pooled branch's per-label state in their slots and the residual
branch's in ``alt_``-named slots (twice the blocks' memory from the fork on), and the
pools the pooled branch steps on; the client holds both branches' ``d1 x l`` tops and
feature maps (a pooled step re-estimates the ridge map's ``lambda``). Each branch's step
runs with its own state in the slots (:func:`~onebit_dask.engine.blocks.swap_state`,
which renames and copies nothing).
"""

from __future__ import annotations

import numpy as np

from ..engine import blocks
from .steps import RULES

ALT = "alt_"
"""Prefix of the slots that hold the residual branch's per-label state."""

BRANCHES = RULES["select"].branches
"""The branches, by the rule whose steps each takes: the pooled branch holds the slots
first and wins ties."""


def batch_auc(engine, data, model) -> float:
    """The macro AUC of a batch's bits (``data``, as prepared for the step) scored by the
    current iterate (``model``: a :class:`~onebit_dask.engine.blocks.StepModel` with the
    iterate's ``A`` and its feature map; scores without the thresholds, which shift all
    of a label's scores alike and leave its AUC as it is); each block scores its own
    labels' bits, the client adds four numbers per block in block order. NaN when no
    label has both classes."""
    outs = engine.map(blocks.bit_auc, model, per_block=engine.by_block(data, model,
                                                                       scored=True))
    _, _, macro, n_labels = np.sum(outs, axis=0)
    return float(macro / n_labels) if n_labels else float("nan")


class Branches:
    """The residual branch beside a fit's pooled branch, from the fork on.

    Parameters
    ----------
    engine
        The fit's engine; its blocks' state is copied into the residual branch's slots.
    top : TopState
        The client's state at the fork, which both branches start from.
    """

    def __init__(self, engine, top, feature_map):
        engine.map(blocks.copy_state, ALT)
        self.other = top  # the top state of the branch not in the blocks' main slots
        self.other_map = feature_map  # and its feature map
        self.records = {rule: [] for rule in BRANCHES}

    def swap(self, state, engine) -> None:
        """Exchange the branches: the other's state into the blocks' slots,
        ``state.top`` and ``state.feature_map``."""
        engine.map(blocks.swap_state, ALT)
        state.top, self.other = self.other, state.top
        state.feature_map, self.other_map = self.other_map, state.feature_map

    def add(self, records: dict) -> None:
        """One forked iteration's history records, by branch, each with its
        ``progressive_auc`` (the score of the iterate the step started from); every record
        gets both branches' scores."""
        scores = {f"progressive_auc_{rule}": records[rule].pop("progressive_auc")
                  for rule in BRANCHES}
        for rule in BRANCHES:
            self.records[rule].append({**records[rule], **scores, "branch": rule})

    def mean_scores(self) -> dict:
        """Each branch's mean score over the forked batches (NaN scores, batches where no
        label had both classes, left out; NaN if all are)."""
        means = {}
        for rule in BRANCHES:
            scores = np.array([r[f"progressive_auc_{rule}"] for r in self.records[rule]])
            scores = scores[~np.isnan(scores)]
            means[rule] = float(scores.mean()) if scores.size else float("nan")
        return means

    def selected(self) -> str:
        """The branch with the higher mean score (the pooled branch on a tie, or when
        a mean is NaN)."""
        means = self.mean_scores()
        return BRANCHES[1] if means[BRANCHES[1]] > means[BRANCHES[0]] else BRANCHES[0]

    def finish(self, state, engine) -> None:
        """Keep the selected branch (its state and its forked history records) and drop
        the other's copies, in one round over the blocks."""
        rule = self.selected()
        kept_other = rule != BRANCHES[0]
        engine.map(blocks.settle, ALT, kept_other)
        if kept_other:
            state.top, state.feature_map = self.other, self.other_map
        records = self.records[rule]
        state.history[-len(records):] = records
