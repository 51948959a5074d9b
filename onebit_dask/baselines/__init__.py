"""Competitors of the one-bit estimator, with the same ``fit``/``decision_function``
interface and fitted factors ``A_``, ``B_`` (``W = A_ @ B_.T`` with unit columns).

Single-label observations ``(X, labels, y)``:

* :class:`LEML`: low-rank squared loss, alternating minimisation (Yu et al., 2014);
* :class:`OneVsAll`: one logistic regression per label on that label's observations;
* :class:`ColumnwiseOneBit`: each column the normalised mean of ``y_i x_i`` (Plan and
  Vershynin's one-bit compressed sensing, column by column).

Full label matrices ``(X, Y)`` (the paper's Sec. 5.2):

* :class:`OneVsRestSVM`: a linear SVM per label;
* :class:`TraceNormMultiLabel`: LRT (logistic loss) and SMT (squared loss) with a
  trace-norm penalty, by proximal gradient with singular value thresholding;
* :class:`LEML` also takes a full ``Y``.
"""

from .colwise import ColumnwiseOneBit
from .leml import LEML
from .onevsall import OneVsAll
from .svm import OneVsRestSVM
from .trace_norm import TraceNormMultiLabel, svt

__all__ = ["LEML", "OneVsAll", "ColumnwiseOneBit", "OneVsRestSVM", "TraceNormMultiLabel", "svt"]
