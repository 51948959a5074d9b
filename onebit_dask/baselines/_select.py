"""Choosing a regularisation weight on held-out training data (never the test set)."""

from __future__ import annotations

import numpy as np

from ..utils.checks import as_generator


def held_out(n: int, fraction: float, random_state, name: str) -> np.ndarray:
    """A boolean mask of the rows held out for validation (each with probability
    ``fraction``); refused when either side is empty, for the weight ``name``."""
    held = as_generator(random_state).random(n) < fraction
    k = int(held.sum())
    if k == 0 or k == n:
        raise ValueError(f"{name}='auto' is not allowed here: it is chosen on a held-out "
                         f"validation_fraction={fraction} of the {n} training rows, which "
                         f"holds out {k} and leaves {n - k} to train; pass more rows or a "
                         f"fixed {name}")
    return held


def sign_error(scores: np.ndarray, truth: np.ndarray) -> float:
    """Fraction of entries where ``sign(scores)`` (``sign(0) = +1``) differs from ``truth``."""
    return float(np.mean(np.where(scores >= 0, 1.0, -1.0) != truth))


def best(errors: dict) -> float:
    """The value with the lowest held-out error; ties go to the larger (stronger) weight."""
    return min(errors, key=lambda v: (errors[v], -v))
