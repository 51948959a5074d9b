"""The floor every other part stands on: argument checks and errors, no model and no data.

* :mod:`.checks`: NumPy-only checks of numbers and arrays, safe to import on a Dask worker;
* :mod:`.validation`: scikit-learn's array checks and parameter tables, on the client only;
* :mod:`.errors`: the exceptions of the error contract and the command line's exit statuses;
* :mod:`.limits`: the sizes a fit or a sweep may ask for before ``allow_large``;
* :mod:`.provenance`: versions, hosts and BLAS kernels recorded with a model or a cube;
* :mod:`.lazy`: names imported on first use (PEP 562);
* :mod:`.yaml`: the YAML reader of sweep specs and cluster configs;
* :mod:`.warnings`: warnings ignored one thread at a time.
"""
