"""The step rules, one entry each: a new rule is one more :class:`StepRule` in :data:`RULES`.

A rule says, for step ``t`` (from 0) of a fit of ``n_iter`` steps, the step size
``eta_t`` (docs/ALGORITHM.md section 2), whether the step is a moment step (every row
counts: section 9c), whether the labels' shares take the Gaussian scale, whether
the fit runs two branches from a fork on (``"select"``: section 9e, :mod:`.select`),
and whether each step is the initial estimate of all the batches so far (``"pooled"``:
section 9f).
``step="auto"`` is not a rule: :func:`resolve` picks one by the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

T0 = 3
"""The steps ``"averaged"`` takes with size 1 before it averages."""


def _one(t: int) -> float:
    return 1.0


def _harmonic(t: int) -> float:
    return 1.0 / (t + 2)


def _averaged(t: int) -> float:
    return 1.0 if t < T0 else 1.0 / (t - T0 + 2)


def _never(t: int, n_iter: int) -> bool:
    return False


def _always(t: int, n_iter: int) -> bool:
    return True


def _first_half(t: int, n_iter: int) -> bool:
    return t < n_iter // 2


@dataclass(frozen=True)
class StepRule:
    """One step rule of ``OneBitMultiLabel(step=...)``."""

    size: Callable[[int], float]
    """``eta_t`` of step ``t``."""
    moment: Callable[[int, int], bool] = _never
    """Whether step ``t`` of ``n_iter`` is a moment step."""
    gaussian_scale: bool = True
    """Whether the labels' shares take the Gaussian scale (docs/ALGORITHM.md section 9d)."""
    branches: tuple[str, ...] = ()
    """The rules whose steps two branches take from the fork on (empty: one branch)."""
    pooled: Callable[[int, int], bool] = _never
    """Whether step ``t`` of ``n_iter`` is a pooled step: the initial estimate of batches
    ``0, ..., t + 1`` pooled, warm started from the last iterate (``size`` and
    ``moment`` are then unused; docs/ALGORITHM.md section 9f)."""

    @property
    def keeps_pool(self) -> bool:
        """Whether the label blocks keep the sums of the fit's batches (a step of this
        rule or of a branch pools)."""
        return self.pooled is not _never or any(RULES[b].keeps_pool for b in self.branches)

    def fork(self, n_iter: int) -> int | None:
        """The first iteration the branches take apart (the first residual step), or
        ``None`` for a rule of one branch."""
        return n_iter // 2 + 1 if self.branches else None


RULES = {
    "paper": StepRule(_one),
    "averaged": StepRule(_averaged),
    "harmonic": StepRule(_harmonic),
    "moment": StepRule(_harmonic, moment=_always),
    "refine": StepRule(_harmonic, pooled=_first_half, gaussian_scale=False),
    "select": StepRule(_harmonic, pooled=_first_half, branches=("pooled", "refine")),
    "pooled": StepRule(_one, pooled=_always),
}
"""The step rules by name (``"moment"`` is also another step: docs/ALGORITHM.md section
9c; ``"pooled"`` re-estimates from all the batches so far: section 9f; ``"refine"`` takes
pooled steps, then residual steps: section 9d; ``"select"`` runs ``"pooled"`` and
``"refine"`` side by side over the second half and keeps one: section 9e,
:mod:`onebit_dask.fit.select`)."""

STEP_RULES = tuple(RULES)
STEPS = ("auto", *STEP_RULES)
"""``OneBitMultiLabel``'s ``step`` values: a rule, or ``"auto"`` (:func:`resolve`)."""


def step_size(step: str, t: int) -> float:
    """``eta_t`` of rule ``step`` at step ``t`` (from 0)."""
    return RULES[step].size(t)


def is_moment_step(step: str, t: int, n_iter: int) -> bool:
    """Whether step ``t`` (from 0) of a fit of ``n_iter`` steps under ``step`` is a moment
    step."""
    return RULES[step].moment(t, n_iter)


def pools_after(step: str, t: int, n_iter: int) -> bool:
    """Whether a step ``t, ..., n_iter - 1`` (from 0) of rule ``step``, or of one of its
    branches, pools (the label blocks then keep their pools)."""
    rule = RULES[step]
    return (any(rule.pooled(u, n_iter) for u in range(t, n_iter))
            or any(pools_after(b, t, n_iter) for b in rule.branches))


def resolve(step: str, *, planted: bool, partial: bool, validation: bool,
            chosen: bool = False) -> str:
    """The rule ``step`` stands for: ``"auto"`` is ``"paper"`` on a planted problem; on data
    ``"select"``, or ``"moment"`` in ``partial_fit``, with validation bits (which then
    choose the iterate) and under ``chosen`` queries. A rule of two branches is refused
    there (``None``): its branches need the fit's whole schedule, the validation bits
    would choose within one branch, and its progressive scores take a batch's bits as a
    uniform sample, which chosen queries are not. ``"pooled"`` is refused in
    ``partial_fit`` (``None``): its steps re-estimate from the fit's own earlier
    batches, which ``partial_fit`` does not keep."""
    one_branch = partial or validation or chosen
    if step == "auto":
        return "paper" if planted else "moment" if one_branch else "select"
    if (RULES[step].branches and one_branch) or (RULES[step].keeps_pool and partial):
        return None
    return step
