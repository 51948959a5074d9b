"""Pure NumPy and SciPy kernels: no Dask, no data kind, no model (safe on a worker).

* :mod:`.kernels`: the algorithm's sums, residuals and products (dense or CSR ``X``);
* :mod:`.thresholds`: the per-label thresholds estimated from the bits;
* :mod:`.features`: the feature maps (standardize, whiten) applied through the factors;
* :mod:`.mips`: exact top-``k`` of a model's labels through a label index;
* :mod:`.label_auc`: each label's exact ROC AUC over held-out rows.
"""
