"""The names of the test metrics, in the order a fit's history, the result cube and the
command line list them.

:data:`METRICS`: a fit on a planted truth (:mod:`onebit_dask.metrics` computes them);
:data:`RANKING`: a fit with held-out data (:mod:`onebit_dask.ranking` computes the
top-``k`` ones, at each ``k`` of :data:`RANKING_KS`)."""

METRICS = ("spectral_error", "frobenius_error", "hamming_loss", "auc")

RANKING_KS = (1, 3, 5)

RANKING = ("auc", *(f"{name}_at_{k}" for name in ("precision", "ndcg", "psp")
                    for k in RANKING_KS))
