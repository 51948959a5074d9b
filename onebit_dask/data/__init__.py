"""Where a fit's data come from: one :class:`~.source.Source` protocol.

* :mod:`.source`: the protocol the fit loop and the engines ask;
* :mod:`.shards`: the two shard kinds of a batch and what reads them;
* :mod:`.inputs`: :func:`~.inputs.as_source`, the source of what ``fit`` was given;
* :mod:`.arrays`: single-label observations in memory;
* :mod:`.label_matrix`: a label matrix ``Y`` (fully labelled instances) in memory;
* :mod:`.csr`: a label matrix in a CSR store, read by row ranges on the workers;
* :mod:`.observations`: an observations store;
* :mod:`.synthetic`: the planted problems and their samplers;
* :mod:`.dask_inputs` and :mod:`.chunked_rows`: dask arrays given to ``fit``;
* :mod:`.queries`: the query policies' draws; :mod:`.seeding`: the batches' seeds.

The formats themselves (XC files, CSR and observations stores) are :mod:`onebit_dask.io`'s.
"""

from .shards import ShardKind
from .source import Source

__all__ = ["ShardKind", "Source"]
