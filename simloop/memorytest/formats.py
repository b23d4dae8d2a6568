"""The file `simloop memory` writes: ``memory.json`` (DESIGN §10.2).

``MemoryResults`` is the format: the test builds it, writing dumps it, `simloop report`
reads it back through it.  It lives here, with the code that owns the format, rather
than in ``schema.py``.  Extra keys are allowed on read; a file written before
``schema_version`` existed reads as version "1.0".
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..schema import PluginRef

__all__ = ["MEMORY_VERSION", "MemoryStatus", "ProbeVerdict", "ProbeResult", "StrategyResult", "MemoryResults"]

MEMORY_VERSION = "1.0"
MemoryStatus = Literal["finished", "interrupted", "failed", "running"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow")


class ProbeVerdict(BaseModel):
    """The LLM judge's verdict on one probe answer (its structured output, kept as it came)."""

    justification: str = Field("", description="one or two sentences")
    uses_fact: bool = Field(description="the answer takes the earlier statement into account")
    contradicts_fact: bool = Field(description="the answer recommends something the statement rules out")


class ProbeResult(_Record):
    """One probe: where the plan put it, how the dialogue ended, and the verdict."""

    strategy: str
    dialogue_id: str
    persona_id: str
    fact_id: str
    kind: str
    distance: int
    reveal_turn: int
    probe_turn: int
    question: str
    stop: str  # the dialogue's stop reason, "missing" when it was never recorded
    answered: bool = False
    passed: bool = False
    scored_by: str = "rules"
    rule: str | None = None
    mentioned: list[str] = Field(default_factory=list)
    recommended: list[str] = Field(default_factory=list)
    query_kept: bool | None = None  # was the fact still in the probe's rewritten query?
    rewritten_query: str | None = None
    context_tokens: int | None = None
    response: str | None = None
    judge: ProbeVerdict | None = None  # the LLM's verdict, with --judge
    judge_tokens: int | None = None
    judge_error: str | None = None


class StrategyResult(_Record):
    """One strategy's entry: recall per distance (keys are distances as strings) and costs."""

    recall_by_distance: dict[str, float]
    tokens_per_turn: float = 0.0
    recall: float = 0.0
    probes_by_distance: dict[str, int] = Field(default_factory=dict)
    query_recall_by_distance: dict[str, float | None] = Field(default_factory=dict)
    context_tokens_at_probe_by_distance: dict[str, float | None] = Field(default_factory=dict)
    llm_tokens_per_turn: float = 0.0
    turns: int = 0
    dialogues: int = 0
    errors: int = 0
    unanswered: int = 0
    run_dir: str | None = None
    memory_models: list[str] = Field(default_factory=list)  # who wrote the summaries (offline stand-in or a model)


class MemoryResults(_Record):
    """``memory.json``."""

    schema_version: str = MEMORY_VERSION
    run_id: str
    status: MemoryStatus = "finished"
    distances: list[int]
    reveal_turn: int
    scorer: Literal["rules", "judge"] = "rules"
    assistant: PluginRef | None = None  # the assistant and the params every strategy shared
    personas: list[str] = Field(default_factory=list)
    # Only the strategies that finished: after an interrupt the one running and those after it are left out.
    strategies: dict[str, StrategyResult] = Field(default_factory=dict)
    probes: list[ProbeResult] = Field(default_factory=list)  # of those strategies
