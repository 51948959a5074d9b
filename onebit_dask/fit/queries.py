"""The batches of a fit under a query policy (:mod:`onebit_dask.data.queries`): batch ``t``
asks what the policy chooses from the model after batch ``t - 1``.

The client draws the pairs (:func:`~onebit_dask.data.queries.choose`), with the
model's candidates from the label blocks where they live (the top-``k`` engine,
:func:`onebit_dask.engine.topk.predict_top_k`: no ``rows x d2`` score matrix), reads
their bits from its copy of the label matrix into the record of pairs asked
(:class:`~onebit_dask.data.queries.Asked`), and hands every positive pair found so far,
each once, to the label blocks' shards, which read the same bits where they run: each
step takes the estimate of all the positives found (``docs/ALGORITHM.md`` section 11),
the uniform batches' included. A pair asked again (a uniform or explored draw can
repeat one) adds nothing.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.special

from ..data.queries import Asked, choose, unseen_share
from ..engine import topk
from ..ops.features import project


class QueriedBatches:
    """Batch ``t``'s shards of a label-matrix ``source`` under ``settings.policy``.

    Parameters
    ----------
    settings : FitSettings
    source : LabelMatrixSource
        The source as given (the client's copy of ``X`` and ``Y``).
    placed : LabelMatrixSource
        The same source placed on the engine (what the shards read).
    """

    def __init__(self, settings, source, placed):
        self.settings, self.source, self.placed = settings, source, placed
        self.asked = Asked(source.d2)
        self.last = {}
        self._floor = None

    def floor(self) -> float | None:
        """The least threshold a label takes in the model's query rule: ``Phi^{-1}`` of the
        Good-Turing share of a label the uniform batches ``0, ..., warmup - 1`` never saw
        positive (:func:`~onebit_dask.data.queries.unseen_share`, ``docs/ALGORITHM.md``
        section 11); ``None`` where it is 0. Drawn again from the seed, so a resumed fit
        has the same (nothing to checkpoint)."""
        if self._floor is None:
            s, labels, n_bits = self.settings, [], 0
            for t in range(s.policy.warmup):
                rows, cols = self.source.uniform_pairs(t, s.batch_size, s.n_shards)
                labels.append(cols[self.source.bits_at(rows, cols) > 0])
                n_bits += rows.size
            share = unseen_share(np.concatenate(labels), n_bits, self.source.d2)
            self._floor = (float(scipy.special.ndtri(share)) if share > 0 else None,)
        return self._floor[0]

    def __call__(self, t: int, state, engine) -> list:
        """The shards of batch ``t``, chosen from the model in ``state`` on ``engine``
        (the blocks after batch ``t - 1``); the pairs are added to :attr:`asked`, the
        time to ``state.fit_s`` (choosing is training)."""
        start = time.perf_counter()
        s = self.settings
        if not s.policy.chooses(t):
            rows, labels = self.source.uniform_pairs(t, s.batch_size, s.n_shards)
            explored = np.ones(rows.size, dtype=bool)
        else:
            def candidates(unique, k):
                XA = project(self.source.X[unique], state.top.Q, state.feature_map)
                return topk.predict_top_k(engine, XA, k, state.bounds, self.floor())[0]

            rows, labels, explored = choose(s.policy, self.source.seed, t, self.source.n,
                                            s.batch_size, self.asked, candidates)
        y = self.source.bits_at(rows, labels)
        new = self.asked.add(rows, labels, y)  # a repeat tells nothing new
        shards = self.placed.chosen_batch(t, *self.asked.found_pairs(), state.bounds)
        self.last = {"n_samples": self.asked.n_asked,
                     "positive_bits": int(np.count_nonzero(y[new] > 0)),
                     "explored_bits": int(explored.sum()),
                     "repeated_pairs": int(new.size - new.sum())}
        state.fit_s += time.perf_counter() - start  # choosing is training
        return shards
