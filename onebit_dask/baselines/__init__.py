"""Competitors of the one-bit estimator, with the same ``fit``/``decision_function``
interface and fitted factors ``A_``, ``B_`` (``W = A_ @ B_.T`` with unit columns).

Single-label observations ``(X, labels, y)``:

* :class:`LEML`: low-rank squared loss, alternating minimisation (Yu et al., 2014);
* :class:`OneVsAll`: one logistic regression per label on that label's observations;
* :class:`ColumnwiseOneBit`: each column the normalised mean of ``y_i x_i`` (Plan and
  Vershynin's one-bit compressed sensing, column by column).
"""

from .colwise import ColumnwiseOneBit
from .leml import LEML
from .onevsall import OneVsAll

__all__ = ["LEML", "OneVsAll", "ColumnwiseOneBit"]
