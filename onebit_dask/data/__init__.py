"""Where a fit's data come from: one :class:`~.source.Source` protocol.

* :mod:`.source`: the protocol the fit loop and the engines ask;
* :mod:`.shards`: the two shard kinds of a batch and what reads them;
* :mod:`.arrays`: single-label observations in memory;
* :mod:`.label_matrix`: a label matrix ``Y`` (fully labelled instances) in memory;
* :mod:`.problems`: the synthetic problems (:mod:`onebit_dask.synthetic`) as sources;
* :mod:`.inputs`: :func:`~.inputs.as_source`, the source of what ``fit`` was given;
* :mod:`.csr_source`: a label matrix in a CSR store, read by row ranges on the workers;
* :mod:`.heldout`: the ranking metrics on held-out data, block by block.

Observations stores are :class:`onebit_dask.io.ZarrSource`; real data files and stores:
:mod:`.xc` (XC/svmlight text), :mod:`.csr_store` (CSR stores).
"""

from .shards import ShardKind
from .source import Source

__all__ = ["ShardKind", "Source"]
