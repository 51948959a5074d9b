"""The seeds of every random draw of a fit's data: one NumPy generator per tuple of words
(``[seed, t, tag]``), so a batch, a shard or the planted truth is drawn the same wherever
and in whatever order it is drawn.

The tags are the last word of the streams that are not a batch's: they stay as they are,
or every planted problem, batch and cube changes.
"""

from __future__ import annotations

import numpy as np

from ..utils.checks import check_int

TRUTH_TAG = 2**32 - 1
TEST_TAG = 2**32 - 2
FULL_TAG = 2**32 - 3
LABEL_SUBSET_TAG = 2**32 - 4
PRIOR_ORDER_TAG = 2**32 - 5
COUNT_TAG = 2**32 - 1
QUERY_TAG = 2**32 - 6


def rng(*words: int) -> np.random.Generator:
    """The generator of the stream ``words`` (NumPy's ``SeedSequence`` of them)."""
    return np.random.default_rng(np.random.SeedSequence(list(words)))


def block_bounds(d2: int, n_shards: int) -> list[int]:
    """The label blocks' bounds ``[0, ..., d2]``: ``min(n_shards, d2)`` contiguous blocks
    ``[s d2 // S, (s + 1) d2 // S)``."""
    S = min(n_shards, d2)
    return [s * d2 // S for s in range(S + 1)]


def label_blocks(problem, t, batch_size, n_shards):
    """``(t, s, n_obs, lo, hi)`` of each shard of batch ``t`` of ``problem`` (anything with
    ``seed`` and ``d2``): ``min(n_shards, d2)`` contiguous label blocks with multinomial
    counts from ``[seed, t, 2**32-1]``."""
    t = check_int("t", t, low=0, high=2**31)
    m = check_int("batch_size", batch_size, low=1)
    bounds = block_bounds(problem.d2, check_int("n_shards", n_shards, low=1))
    S = len(bounds) - 1
    counts = rng(problem.seed, t, COUNT_TAG).multinomial(m, np.diff(bounds) / problem.d2)
    return [(t, s, int(counts[s]), bounds[s], bounds[s + 1]) for s in range(S)]
