"""Noise settings of a sweep grid: ``none``, ``flip=P``, ``gaussian=XI``."""

from __future__ import annotations

import re

from ..utils.checks import check_float
from ..utils.errors import SpecError

NOISE = re.compile(r"^(none|flip=(?P<flip>[0-9.eE+-]+)|gaussian=(?P<gauss>[0-9.eE+-]+))$")


def parse_noise(label: str) -> tuple[str, float]:
    """``"none"`` / ``"flip=P"`` / ``"gaussian=XI"`` -> ``(model, level)``, checked."""
    match = NOISE.match(str(label))
    if not match:
        raise SpecError(f"grid.noise: {label!r} is not allowed: use 'none', 'flip=P' with P in "
                        "[0, 0.5) or 'gaussian=XI' with XI >= 0")
    try:
        if match["flip"] is not None:
            return "flip", check_float("flip", float(match["flip"]), low=0.0, high=0.5,
                                       high_open=True)
        if match["gauss"] is not None:
            return "gaussian", check_float("noise_std", float(match["gauss"]), low=0.0)
    except ValueError as exc:
        raise SpecError(f"grid.noise: {label!r}: {exc}") from None
    return "none", 0.0
