"""The names of the test metrics of a fit on a planted truth, in the order a fit's history,
the result cube and the command line list them (:mod:`onebit_dask.metrics` computes them)."""

METRICS = ("spectral_error", "frobenius_error", "hamming_loss", "auc")
