"""What the report reads off a run's transcripts beyond summary.json: latency with the
start-up excluded, and how dialogues ended (with their length and grades) per persona and
per topic.

Start-up: the first turns of a run wait for the JVM, the index, MiniLM and the PTKB
ranker's all-mpnet-base-v2 to load (tens of seconds), and every dialogue that started
before the first turn of the run came back shares that wait.  Their first turns are the
*start-up turns*: left out of the turn latency percentiles (counted and shown apart), and
in a start-up dialogue's wall time the first turn counts as a typical (median) turn.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Sequence

from ..schema import Transcript
from .stats import dialogue_latency_ms, mean_grade, percentiles

__all__ = ["Group", "RunDiagnostics", "diagnose", "startup_dialogues"]


@dataclass
class Group:
    """The dialogues of one persona (or topic): how they ended, their lengths and grades."""

    stops: Counter = field(default_factory=Counter)
    turns: list[int] = field(default_factory=list)
    grades: list[float] = field(default_factory=list)  # mean user grade per graded dialogue

    def add(self, t: Transcript) -> None:
        self.stops[t.stop.reason] += 1
        self.turns.append(len(t.turns))
        grade = mean_grade(t)
        if grade is not None:
            self.grades.append(grade)


@dataclass
class RunDiagnostics:
    turn_latency: dict[str, float | None]  # p50/p90/p99 of warm turns
    dialogue_latency: dict[str, float | None]
    warm_turns: list[float]  # every warm turn's latency (the plot)
    startup_turns: list[float]  # the start-up turns' latencies
    by_persona: dict[str, Group] = field(default_factory=dict)
    by_topic: dict[str, Group] = field(default_factory=dict)

    @property
    def startup_max(self) -> float | None:
        return max(self.startup_turns, default=None)


def startup_dialogues(transcripts: Sequence[Transcript]) -> set[str]:
    """Dialogues that started before any turn of the run had finished."""
    timed = [t for t in transcripts if t.turns]
    if not timed:
        return set()
    first_done = min(t.started_at + timedelta(milliseconds=t.turns[0].latency_ms) for t in timed)
    return {t.dialogue_id for t in timed if t.started_at < first_done}


def diagnose(transcripts: Sequence[Transcript]) -> RunDiagnostics:
    startup = startup_dialogues(transcripts)
    warm = [x.latency_ms for t in transcripts for i, x in enumerate(t.turns) if i or t.dialogue_id not in startup]
    cold = [t.turns[0].latency_ms for t in transcripts if t.dialogue_id in startup]
    typical = percentiles(warm, (50,))["p50"]
    walls = []
    for t in transcripts:
        wall = dialogue_latency_ms(t)
        if t.dialogue_id in startup and typical is not None:
            wall -= max(0.0, t.turns[0].latency_ms - typical)
        walls.append(wall)
    by_persona: dict[str, Group] = defaultdict(Group)
    by_topic: dict[str, Group] = defaultdict(Group)
    for t in transcripts:
        by_persona[t.scenario.persona_id].add(t)
        by_topic[t.scenario.topic_id].add(t)
    return RunDiagnostics(percentiles(warm), percentiles(walls), warm, cold, dict(by_persona), dict(by_topic))
