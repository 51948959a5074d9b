"""Choosing a regularisation weight on held-out training data (never the test set)."""

from __future__ import annotations

import numpy as np

from .._validation import as_generator


def held_out(n: int, fraction: float, random_state) -> np.ndarray:
    """A boolean mask of the rows held out for validation (each with probability ``fraction``)."""
    return as_generator(random_state).random(n) < fraction


def sign_error(scores: np.ndarray, truth: np.ndarray) -> float:
    """Fraction of entries where ``sign(scores)`` (``sign(0) = +1``) differs from ``truth``."""
    return float(np.mean(np.where(scores >= 0, 1.0, -1.0) != truth))


def best(errors: dict) -> float:
    """The value with the lowest held-out error; ties go to the larger (stronger) weight."""
    return min(errors, key=lambda v: (errors[v], -v))
