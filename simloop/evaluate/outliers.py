"""The dialogues and turns of a run worth reading first (`simloop report`): what a mean
hides.  Three lists, each short:

* satisfied with low grades: the user ended ``user_satisfied`` although the mean grade of
  the answers is at or below the simulator's pass threshold (its ``threshold`` parameter as
  the transcript records it; 3 on iKAT's 0-5 scale by default).  Either the grades or the
  ending are wrong, and a mean over the run does not show which dialogue it is;
* lowest grades: the dialogues with the lowest mean grade, however they ended (at most a
  fifth of the graded dialogues: in a small run the rest is not "lowest");
* slowest turns: the turns that took more than twice the median turn, start-up turns left
  out (they wait for the index and models to load: see ``diagnostics.py``), with their
  slowest stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.console import Group
from rich.text import Text

from ..schema import Transcript, Turn
from .stats import mean_grade

__all__ = ["Outlier", "Outliers", "find_outliers", "rich_outliers", "DEFAULT_THRESHOLD", "SHOWN"]

DEFAULT_THRESHOLD = 3.0  # the rubric policy's: a grade passes when it is above it
SHOWN = 5  # per list


@dataclass
class Outlier:
    """One dialogue (or one of its turns, ``turn``) and why it stands out, in a few words."""

    dialogue_id: str
    why: str
    brief: str  # the few words a terminal line has room for
    turn: int | None = None


@dataclass
class Outliers:
    satisfied_low: list[Outlier] = field(default_factory=list)
    lowest: list[Outlier] = field(default_factory=list)
    slowest: list[Outlier] = field(default_factory=list)
    satisfied_low_total: int = 0  # how many there are (the list shows the first SHOWN)

    def lists(self) -> list[tuple[str, list[Outlier]]]:
        """(title, outliers) of each list that has any, in the order the report shows them."""
        more = self.satisfied_low_total - len(self.satisfied_low)
        named = [(f"satisfied with low grades ({self.satisfied_low_total}"
                  + (f", the {len(self.satisfied_low)} lowest shown)" if more else ")"), self.satisfied_low),
                 ("lowest mean grades", self.lowest), ("slowest turns (start-up excluded)", self.slowest)]
        return [(title, items) for title, items in named if items]


def _threshold(t: Transcript) -> float:
    value = t.simulator.params.get("threshold", DEFAULT_THRESHOLD)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else DEFAULT_THRESHOLD


def _grades(t: Transcript) -> list[float]:
    return [x.user.grade for x in t.turns if x.user.grade is not None]


def _graded(t: Transcript, grade: float) -> Outlier:
    passed, grades = _threshold(t), _grades(t)
    failed = sum(g <= passed for g in grades)
    why = f"{t.stop.reason}, mean grade {grade:.2f}, {failed} of {len(grades)} answers failed (<= {passed:g})"
    return Outlier(t.dialogue_id, why, f"{grade:.2f}, {failed}/{len(grades)} failed, {t.stop.reason}")


def find_outliers(transcripts: Sequence[Transcript], startup: set[str] | frozenset[str] = frozenset(),
                  shown: int = SHOWN) -> Outliers:
    """The three lists over ``transcripts``; ``startup`` names the dialogues whose first
    turn waited for the start-up (left out of the slowest turns)."""
    graded = sorted(((g, t) for t in transcripts if (g := mean_grade(t)) is not None),
                    key=lambda gt: (gt[0], gt[1].dialogue_id))
    satisfied_low = [_graded(t, g) for g, t in graded if t.stop.reason == "user_satisfied" and g <= _threshold(t)]
    lowest = [_graded(t, g) for g, t in graded[:min(shown, max(1, len(graded) // 5))]]
    turns = sorted(((x.latency_ms, t, x) for t in transcripts for i, x in enumerate(t.turns)
                    if i or t.dialogue_id not in startup), key=lambda lt: (-lt[0], lt[1].dialogue_id, lt[2].index))
    median = turns[len(turns) // 2][0] if turns else 0.0
    slowest = [_slow(t, x) for latency, t, x in turns[:shown] if latency > 2 * median]
    return Outliers(satisfied_low[:shown], lowest, slowest, satisfied_low_total=len(satisfied_low))


def _slow(t: Transcript, x: Turn) -> Outlier:
    stage = max(x.stages, key=lambda s: s.latency_ms, default=None)
    most = f"; slowest stage {stage.name} {stage.latency_ms:,.0f} ms" if stage is not None else ""
    brief = f"turn {x.index}: {x.latency_ms / 1000:,.1f} s" + (f", {stage.name}" if stage is not None else "")
    return Outlier(t.dialogue_id, f"turn {x.index}: {x.latency_ms:,.0f} ms{most}", brief, turn=x.index)


def rich_outliers(name: str, outliers: Outliers, per_list: int = 3) -> Group | None:
    """A few lines for a terminal, ``per_list`` outliers on each list's line (the HTML
    report lists them all, each linked to its dialogue)."""
    lists = outliers.lists()
    if not lists:
        return None
    lines = [Text(f"{name}: outliers (details in the HTML report)", style="bold")]
    for title, items in lists:
        shown = "; ".join(f"{o.dialogue_id} ({o.brief})" for o in items[:per_list])
        lines.append(Text.assemble("  ", (title, "bold"), f": {shown}" + (" ..." if len(items) > per_list else "")))
    return Group(*lines)
