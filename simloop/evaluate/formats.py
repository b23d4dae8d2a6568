"""The files `simloop eval` writes: ``summary.json`` and ``scores.jsonl`` (DESIGN §10.2, §11).

These models are the formats: evaluation builds them, writing dumps them, reading
validates them.  They live with the code that owns the format (``schema.py`` holds the
transcript, the format every part of simloop shares).

Metric names with ``@`` (``"P@3"``, ``"nDCG@5"``) are the JSON keys, so the fields carry
them as aliases.  Extra keys are allowed on read: a file written by a newer simloop
still loads.  A file written before ``schema_version`` existed reads as version "1.0".
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..schema import Stage, Usage

__all__ = [
    "SUMMARY_VERSION", "Percentiles", "UsageTotals", "TurnCounts", "Latencies", "TokensPerTurn", "Grades",
    "TokenCounts", "RunStats", "PtkbMetrics", "PassageMetrics", "PtkbReference", "JudgeSummary", "EvaluatedInput",
    "ReadNotes", "RunSummary", "TurnScores", "RubricGroupScores", "DialogueJudgeScores", "DialogueScores",
]

SUMMARY_VERSION = "1.0"


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


# ----------------------------------------------------------------------------- stats


class Percentiles(_Record):
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


class UsageTotals(_Record):
    """LLM calls and tokens of one role or one model."""

    calls: int = 0
    cached: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens: int = 0
    cost_usd: float | None = None  # None: no stage carried a price ("unknown" is not "free")


class TurnCounts(_Record):
    total: int = 0
    mean: float = 0.0
    max: int = 0
    min: int = 0


class Latencies(_Record):
    turn: Percentiles = Field(default_factory=Percentiles)
    dialogue: Percentiles = Field(default_factory=Percentiles)


class TokensPerTurn(Percentiles):
    mean: float = 0.0
    context_mean: float = 0.0


class Grades(_Record):
    dialogues_graded: int = 0
    mean: float | None = None


class TokenCounts(_Record):
    prompt: int = 0
    completion: int = 0
    total: int = 0


class RunStats(_Record):
    """The ``"stats"`` block: how dialogues ended, how long turns took, what LLM calls cost."""

    dialogues: int = 0
    turns: TurnCounts = Field(default_factory=TurnCounts)
    stop_reasons: dict[str, int] = Field(default_factory=dict)
    stopped_by: dict[str, int] = Field(default_factory=dict)
    latency_ms: Latencies = Field(default_factory=Latencies)
    tokens_per_turn: TokensPerTurn = Field(default_factory=TokensPerTurn)
    grades: Grades = Field(default_factory=Grades)
    llm_calls: int = 0
    cached_calls: int = 0
    retries: int = 0
    tokens: TokenCounts = Field(default_factory=TokenCounts)
    cost_usd: float | None = None
    by_role: dict[str, UsageTotals] = Field(default_factory=dict)
    by_model: dict[str, UsageTotals] = Field(default_factory=dict)
    stage_errors: dict[str, int] = Field(default_factory=dict)
    errors: dict[str, int] = Field(default_factory=dict)  # error type -> dialogues


# ----------------------------------------------------------------------------- provenance


class PtkbMetrics(_Record):
    """The ``"ptkb"`` block.  Ranked metrics are means over turns with at least one
    relevant statement (``turns`` of them); P/R/F1 read the ``used`` set."""

    p_at_3: float | None = Field(None, alias="P@3")
    r_at_3: float | None = Field(None, alias="R@3")
    ndcg_at_3: float | None = Field(None, alias="nDCG@3")
    p_at_5: float | None = Field(None, alias="P@5")
    r_at_5: float | None = Field(None, alias="R@5")
    ndcg_at_5: float | None = Field(None, alias="nDCG@5")
    p: float | None = Field(None, alias="P")
    r: float | None = Field(None, alias="R")
    f1: float | None = Field(None, alias="F1")
    turns: int = 0
    judged_turns: int = 0
    overuse_turns: int = 0  # turns with no relevant statement where the assistant used one
    source: Literal["ptkb-qrels", "topic-file"] | None = None
    gold: str | None = None  # the gold's name: the --ptkb-qrels file, or "topic file <name>"

    def gold_label(self) -> str | None:
        """The gold's name; summaries written before ``gold`` existed name its kind only."""
        return self.gold or {"topic-file": "topic file", "ptkb-qrels": "a PTKB qrels file"}.get(self.source or "")


class PassageMetrics(_Record):
    """The ``"passages"`` block (``--qrels``)."""

    ndcg_at_3: float | None = Field(None, alias="nDCG@3")
    ndcg_at_5: float | None = Field(None, alias="nDCG@5")
    ndcg_at_10: float | None = Field(None, alias="nDCG@10")
    p_at_5: float | None = Field(None, alias="P@5")
    p_at_10: float | None = Field(None, alias="P@10")
    map: float | None = Field(None, alias="MAP")
    recall_at_100: float | None = Field(None, alias="Recall@100")
    turns: int = 0
    turns_total: int = 0
    matched_turns: int = 0
    rel_threshold: int = 2
    qrels: str | None = None  # the --qrels file's name
    note: str | None = None


class PtkbReference(_Record):
    """Official iKAT 2023 PTKB figures a replay of 2023 topics is shown against, and how
    much of its topic file the run covered: the official runs were scored over all of it,
    so a run over part of it (``--limit``, ``--topic``, an interrupted run) compares only
    partly (``partial``)."""

    baseline: dict[str, float]
    best: dict[str, float]
    source: str
    conversations: int | None = None  # the run's conversations with scored PTKB turns
    conversations_total: int | None = None  # the replayed topic file's conversations (None: not readable)

    def partial(self) -> str | None:
        """Why the comparison is partial, in a few words; None when it is not (or unknown)."""
        n, total = self.conversations, self.conversations_total
        if n is None or total is None or n >= total:
            return None
        return (f"partial: only {n} of the topic file's {total} conversations were scored; "
                "the official runs were scored over all of them")


# ----------------------------------------------------------------------------- judge


class JudgeSummary(_Record):
    """The ``"judge"`` block: run means of the normalised judge scores, per level.
    ``rubric`` / ``dialogue`` map a scale name (and ``score``) to its mean, plus ``n``."""

    rubric: dict[str, float | int | None] = Field(default_factory=dict)
    dialogue: dict[str, float | int | None] = Field(default_factory=dict)
    overall: float | None = None
    overall_of_means: float | None = None
    dialogues: int = 0
    model: str | None = None
    usage: Usage = Field(default_factory=Usage)
    errors: dict[str, int] = Field(default_factory=dict)


class EvaluatedInput(_Record):
    """What an evaluation read: the transcripts (their count and a digest of
    ``dialogues.jsonl``, so report and export can tell a summary older than the run, as
    after a ``--resume``) and the gold files (so the report can score again alike)."""

    dialogues: int = 0
    dialogues_sha256: str | None = None
    qrels: str | None = None
    ptkb_qrels: str | None = None
    judge: bool = False


class ReadNotes(_Record):
    torn_tail: bool = False
    bad_lines: list[int] = Field(default_factory=list)


# ----------------------------------------------------------------------------- summary.json


class RunSummary(_Record):
    """``summary.json``: a header, ``stats`` always, the other blocks when measured."""

    schema_version: str = SUMMARY_VERSION
    run_dir: str | None = None
    evaluated_at: datetime | None = None
    run_id: str | None = None
    assistant: str | None = None
    simulator: str | None = None
    status: str | None = None
    read_notes: ReadNotes | None = None
    evaluated: EvaluatedInput | None = None
    stats: RunStats = Field(default_factory=RunStats)
    ptkb: PtkbMetrics | None = None
    ptkb_reference: PtkbReference | None = None
    passages: PassageMetrics | None = None
    judge: JudgeSummary | None = None

    def to_json(self) -> str:
        """The file's text: metric names as keys; blocks not measured are left out."""
        data = self.model_dump(mode="json", by_alias=True)
        for key in ("read_notes", "evaluated", "ptkb", "ptkb_reference", "passages", "judge"):
            if data.get(key) is None:
                data.pop(key, None)
        return _dumps(data)

    def lookup(self, *path: str) -> Any:
        """A value by its path in the file (``lookup("ptkb", "nDCG@3")``); None when absent."""
        node: Any = self.model_dump(mode="json", by_alias=True)
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node


# ----------------------------------------------------------------------------- scores.jsonl


class TurnScores(_Record):
    index: int
    qid: str
    grade: float | None = None
    rubric_id: str | None = None
    latency_ms: float = 0.0
    ptkb: dict[str, float] | None = None  # metric -> value, for turns with gold PTKB
    passages: dict[str, float] | None = None  # metric -> value, for turns in the qrels


class RubricGroupScores(_Record):
    """One rubric question's turns as the judge scored them (scale scores are extra keys)."""

    rubric_id: str | None = None
    turns: list[int] = Field(default_factory=list)
    score: float | None = None
    justification: str = ""


class DialogueJudgeScores(_Record):
    """A dialogue's judge scores (``--judge``): level scores, their harmonic mean, details."""

    rubric: float | None = None
    dialogue: float | None = None
    overall: float | None = None
    rubric_groups: list[RubricGroupScores] = Field(default_factory=list)
    dialogue_scores: dict[str, float | str | None] | None = None
    errors: list[str] = Field(default_factory=list)
    stages: list[Stage] = Field(default_factory=list)


class DialogueScores(_Record):
    """One line of ``scores.jsonl``: a dialogue and its per-turn values."""

    schema_version: str = SUMMARY_VERSION
    run_id: str
    dialogue_id: str
    persona_id: str
    topic_id: str
    stop_reason: str
    turn_count: int
    mean_grade: float | None = None
    turns: list[TurnScores] = Field(default_factory=list)
    judge: DialogueJudgeScores | None = None

    def to_json_line(self) -> str:
        data = self.model_dump(mode="json", by_alias=True)
        if data.get("judge") is None:
            data.pop("judge", None)
        for turn in data["turns"]:  # a turn without gold has no metric keys at all
            for key in ("ptkb", "passages"):
                if turn.get(key) is None:
                    turn.pop(key, None)
        return _dumps(data, indent=None) + "\n"


def _dumps(data: Any, indent: int | None = 2) -> str:
    return json.dumps(data, indent=indent, ensure_ascii=False) + ("\n" if indent else "")
