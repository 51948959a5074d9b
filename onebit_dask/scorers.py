"""Scorers for scikit-learn's model selection (``GridSearchCV(..., scoring=...)``).

A scorer is a callable ``scorer(estimator, X, Y) -> float``, greater is better, as
scikit-learn's ``scoring=`` takes (``sklearn.metrics.check_scoring`` accepts it):

- :func:`macro_auc`: the mean over labels with both classes of each label's ROC AUC of
  the scores ``decision_function(X)``; what ``OneBitMultiLabel.score`` returns.
- :func:`precision_at_k`, :func:`ndcg_at_k`: the ranking metrics of
  :mod:`onebit_dask.metrics.ranking` over each row's ``k`` best labels
  (``estimator.predict_top_k(X, k)``), which never forms the dense ``n x d2`` scores.

An estimator's ``score`` is macro AUC rather than scikit-learn's subset accuracy: with
hundreds of labels a row's whole label set is almost never predicted exactly, so subset
accuracy is about 0 for every candidate and a search could not tell them apart.

Examples
--------
>>> from sklearn.model_selection import GridSearchCV
>>> from onebit_dask import OneBitMultiLabel, scorers
>>> search = GridSearchCV(OneBitMultiLabel(2), {"rank": [2, 4]},
...                       scoring={"auc": scorers.macro_auc,
...                                "p@1": scorers.precision_at_k(1)}, refit="auc")
"""

from __future__ import annotations

from .metrics import ranking
from .utils.checks import check_int

__all__ = ["macro_auc", "precision_at_k", "ndcg_at_k"]


def macro_auc(estimator, X, Y) -> float:
    """Macro-averaged ROC AUC of ``estimator`` on the label matrix ``Y``
    (``estimator.score(X, Y)``)."""
    return float(estimator.score(X, Y))


class _TopKScorer:
    """``metric(Y, top k labels of each row, k)``; picklable, with a readable repr."""

    def __init__(self, metric, k: int):
        self.metric, self.k = metric, check_int("k", k, low=1)

    def __call__(self, estimator, X, Y) -> float:
        labels, _ = estimator.predict_top_k(X, self.k)
        return float(self.metric(Y, labels, self.k))

    def __repr__(self) -> str:
        return f"onebit_dask.scorers.{self.metric.__name__}({self.k})"


def precision_at_k(k: int = 1) -> _TopKScorer:
    """A scorer: precision@k of each row's ``k`` best labels (:func:`ranking.precision_at_k`)."""
    return _TopKScorer(ranking.precision_at_k, k)


def ndcg_at_k(k: int = 5) -> _TopKScorer:
    """A scorer: nDCG@k of each row's ``k`` best labels (:func:`ranking.ndcg_at_k`)."""
    return _TopKScorer(ranking.ndcg_at_k, k)
