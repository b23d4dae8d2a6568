"""What the report reads off a run's transcripts beyond summary.json: latency with the
start-up excluded, how dialogues ended (with their length and grades) per persona and
per topic, and the outliers (``outliers.py``).

Start-up: the first turns of a session (a ``simloop run``, or each ``--resume`` of it) wait
for the JVM, the index, MiniLM and the PTKB ranker's all-mpnet-base-v2 to load (tens of
seconds), and every dialogue that started before the session's first turn came back
shares that wait.  Their first turns are the *start-up turns*: left out of the turn
latency percentiles (counted and shown apart), and in a start-up dialogue's wall time the
first turn counts as a typical (median) turn.  Sessions are read off the transcripts:
within one the engine starts a dialogue as soon as a slot frees, so an idle stretch of
``SESSION_GAP`` with no dialogue in flight means a new process.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from ..schema import Transcript
from .outliers import Outliers, find_outliers
from .stats import dialogue_latency_ms, mean_grade, percentiles

__all__ = ["Group", "RunDiagnostics", "diagnose", "sessions", "startup_dialogues", "SESSION_GAP"]


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
    outliers: Outliers = field(default_factory=Outliers)

    @property
    def startup_max(self) -> float | None:
        return max(self.startup_turns, default=None)


SESSION_GAP = timedelta(seconds=2)


def sessions(transcripts: Sequence[Transcript]) -> list[list[Transcript]]:
    """Dialogues with turns, by start time, split where nothing ran for ``SESSION_GAP``."""
    out: list[list[Transcript]] = []
    busy_until = None
    for t in sorted((t for t in transcripts if t.turns), key=lambda t: t.started_at):
        if busy_until is None or t.started_at - busy_until > SESSION_GAP:
            out.append([])
        out[-1].append(t)
        busy_until = t.ended_at if busy_until is None else max(busy_until, t.ended_at)
    return out


def startup_dialogues(transcripts: Sequence[Transcript]) -> set[str]:
    """Dialogues that started before any turn of their session had finished."""
    startup: set[str] = set()
    for session in sessions(transcripts):
        first_done = min(t.started_at + timedelta(milliseconds=t.turns[0].latency_ms) for t in session)
        startup |= {t.dialogue_id for t in session if t.started_at < first_done}
    return startup


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
    return RunDiagnostics(percentiles(warm), percentiles(walls), warm, cold, dict(by_persona), dict(by_topic),
                          find_outliers(transcripts, startup))
