"""Metrics: a fit against a planted truth (:mod:`.planted`), ranking metrics of held-out
data (:mod:`.ranking`), and the names both report (:mod:`.names`).

``from onebit_dask import metrics`` offers the planted problem's metrics, as before.
"""

from .planted import (auc, auc_per_label, auc_rows, evaluate, evaluate_factored,
                      frobenius_error, hamming_loss, label_auc_sums, spectral_error)

__all__ = ["auc", "auc_per_label", "auc_rows", "evaluate", "evaluate_factored",
           "frobenius_error", "hamming_loss", "label_auc_sums", "spectral_error"]
