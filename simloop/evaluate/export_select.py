"""Which dialogues of a run `simloop export` keeps: its filters, checked against the run.

A filter value that can never match (a persona the run does not have, a grade off the
scale) is a typo, not an empty selection: it is bad input (exit 2) before anything is
written.  ``--min-judge`` reads the judge scores of ``simloop eval --judge`` and refuses
scores older than the run's transcripts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import get_args

from ..errors import BadInputError, check_known
from ..schema import StopReason, Transcript
from .stats import mean_grade
from .summary import load_scores, load_summary, stale_reason

__all__ = ["ExportFilter", "GRADE_SCALE", "check_filter", "judge_scores", "left_out_by", "select"]

# The simulator's grade of an answer (schema.UserTurn.grade).
GRADE_SCALE = (0.0, 5.0)
JudgeScores = dict[str, float | None]  # dialogue id -> normalised overall judge score


@dataclass
class ExportFilter:
    stop_reasons: list[str] = field(default_factory=list)
    min_grade: float | None = None
    min_turns: int | None = None
    personas: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    min_judge: float | None = None
    repeat: int | None = None

    def drops_topics(self) -> bool:
        """Can this filter leave out whole topics?  ``--repeat`` picks one dialogue of each
        topic; every other filter may drop a topic altogether."""
        return replace(self, repeat=None) != ExportFilter()


def judge_scores(run_dir: Path, transcripts: Sequence[Transcript]) -> JudgeScores:
    """The judge's overall score per dialogue, from scores.jsonl that describes these transcripts."""
    scores = load_scores(run_dir)
    if not scores or not any(line.judge is not None for line in scores):
        raise BadInputError(f"--min-judge needs judge scores: run `simloop eval {run_dir} --judge` first")
    judged = {line.dialogue_id: line.judge.overall if line.judge else None for line in scores}
    summary = load_summary(run_dir)
    stale = stale_reason(run_dir, summary, transcripts) if summary is not None else None
    missing = [t.dialogue_id for t in transcripts if t.dialogue_id not in judged]  # one set, not one per dialogue
    if stale is None and missing:  # scores.jsonl without its summary.json: its dialogues tell
        stale = f"{len(missing)} dialogue(s) of the run have no scores, e.g. {missing[0]}"
    if stale:  # filtering on another run's scores would silently drop or keep the wrong dialogues
        raise BadInputError(f"--min-judge: scores.jsonl is out of date ({stale}); "
                            f"re-run `simloop eval {run_dir} --judge`")
    return judged


def _repeat_of(t: Transcript) -> int | None:
    tail = t.dialogue_id.rsplit("--", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _passes(judge: JudgeScores | None, dialogue_id: str, threshold: float) -> bool:
    score = (judge or {}).get(dialogue_id)
    return score is not None and score >= threshold  # unjudged (a failed judge call) never passes


def check_filter(transcripts: Sequence[Transcript], f: ExportFilter) -> None:
    """A filter value that can never match is a typo, not an empty selection: say so."""
    check_known("--stop-reason", f.stop_reasons, list(get_args(StopReason)))
    check_known("--persona", f.personas, sorted({t.scenario.persona_id for t in transcripts}, key=_natural))
    check_known("--topic", f.topics, sorted({t.scenario.topic_id for t in transcripts}, key=_natural))
    repeats = sorted({r for t in transcripts if (r := _repeat_of(t)) is not None})
    check_known("--repeat", [] if f.repeat is None else [str(f.repeat)], [str(r) for r in repeats])
    _on_scale("--min-grade", f.min_grade, GRADE_SCALE, "user grades")
    _on_scale("--min-judge", f.min_judge, (0.0, 1.0), "normalised judge scores")
    if f.min_grade is not None and not any(mean_grade(t) is not None for t in transcripts):
        raise BadInputError(f"--min-grade {f.min_grade:g}: no dialogue of this run has a user grade")


def _on_scale(flag: str, value: float | None, scale: tuple[float, float], what: str) -> None:
    """A threshold off the scale can match no dialogue of any run: a typo, not a filter."""
    low, high = scale
    if value is not None and not low <= value <= high:
        raise BadInputError(f"{flag} {value:g}: {what} are {low:g}-{high:g}")


def _natural(value: str) -> list[int | str]:
    """Sort key that puts "9-1" before "10-1" (iKAT numbers are numbers)."""
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", value)]


def left_out_by(t: Transcript, f: ExportFilter, judge: JudgeScores | None = None) -> str | None:
    """The first filter flag that leaves ``t`` out, in the order `simloop export --help`
    lists them; None when every filter keeps it."""
    grade = mean_grade(t)
    tests = (
        ("--stop-reason", not f.stop_reasons or t.stop.reason in f.stop_reasons),
        ("--min-grade", f.min_grade is None or (grade is not None and grade >= f.min_grade)),
        ("--min-turns", f.min_turns is None or len(t.turns) >= f.min_turns),
        ("--persona", not f.personas or t.scenario.persona_id in f.personas),
        ("--topic", not f.topics or t.scenario.topic_id in f.topics),
        ("--min-judge", f.min_judge is None or _passes(judge, t.dialogue_id, f.min_judge)),
        ("--repeat", f.repeat is None or _repeat_of(t) == f.repeat),
    )
    return next((flag for flag, keeps in tests if not keeps), None)


def select(transcripts: Sequence[Transcript], f: ExportFilter, judge: JudgeScores | None = None
           ) -> tuple[list[Transcript], Counter[str]]:
    """The dialogues every filter keeps, in run order, and how many each flag left out
    (each dialogue counted once, under the first flag that leaves it out)."""
    kept: list[Transcript] = []
    dropped: Counter[str] = Counter()
    for t in transcripts:
        flag = left_out_by(t, f, judge)
        if flag is None:
            kept.append(t)
        else:
            dropped[flag] += 1
    return kept, dropped
