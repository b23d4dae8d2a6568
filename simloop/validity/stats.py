"""The statistics of the validity card: ROC-AUC, pass rates, and the bootstrap interval.

One implementation for the card and the benches (``scripts/bench_grader.py`` and
``scripts/bench_realism.py`` call these).  The interval is a percentile bootstrap over the
*units* a figure is made of (a turn with all its candidates, a dialogue with all its
utterances), so that items that belong together are drawn together; it is seeded, so a
card is reproducible.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

__all__ = ["THRESHOLD", "auc", "pass_rate", "bootstrap_ci", "RESAMPLES", "BOOT_SEED"]

THRESHOLD = 3.0  # the rubric policy's pass mark: a grade strictly above it passes
RESAMPLES = 1000
BOOT_SEED = 20240
U = TypeVar("U")


def auc(pos: Sequence[float], neg: Sequence[float]) -> float | None:
    """ROC-AUC (Mann-Whitney): the chance a positive outranks a negative, ties counted
    half; rounded to 4 places.  None when either side is empty."""
    if not len(pos) or not len(neg):
        return None
    p = np.asarray(pos, dtype=float)
    n = np.sort(np.asarray(neg, dtype=float))
    below = np.searchsorted(n, p, side="left")  # negatives strictly below each positive
    ties = np.searchsorted(n, p, side="right") - below
    wins = float(below.sum()) + 0.5 * float(ties.sum())
    return round(wins / (len(p) * len(n)), 4)


def pass_rate(grades: Sequence[float], threshold: float = THRESHOLD) -> float | None:
    """Share of grades strictly above ``threshold``, rounded to 4 places (None: no grades)."""
    return round(sum(g > threshold for g in grades) / len(grades), 4) if grades else None


def bootstrap_ci(units: Sequence[U], statistic: Callable[[list[U]], float | None], *, resamples: int = RESAMPLES,
                 seed: int | str = BOOT_SEED, level: float = 0.95) -> tuple[float, float] | None:
    """The percentile bootstrap interval of ``statistic`` over ``units`` drawn with
    replacement (``resamples`` times, seeded).  Resamples where the statistic is undefined
    are skipped; None when there are no units or no resample is defined."""
    if not units:
        return None
    rng = random.Random(f"{seed}|bootstrap")
    k = len(units)
    values = []
    for _ in range(resamples):
        v = statistic([units[rng.randrange(k)] for _ in range(k)])
        if v is not None:
            values.append(v)
    if not values:
        return None
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return round(float(lo), 4), round(float(hi), 4)
