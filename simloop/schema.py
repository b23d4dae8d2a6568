"""pydantic models: the transcript format and the inputs that produce it.

Field names of ``Transcript`` and everything under it are fixed (docs/transcript.md); extra
fields are allowed but never renamed.  Every record written to disk carries
``schema_version``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator

from .traits import Behaviour, BehaviourSpec, Reveal  # noqa: F401  (re-exported: part of the schema)

SCHEMA_VERSION = "1.0"

StopReason = Literal["user_satisfied", "user_gave_up", "max_turns", "timeout", "error"]
StopBy = Literal["simulator", "engine"]
ErrorSource = Literal["simulator", "assistant", "llm", "retrieval", "engine"]
RunStatus = Literal["running", "finished", "interrupted", "failed"]


def utcnow() -> datetime:
    return datetime.now(UTC)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    """Records read back from disk may carry extra fields (extras are welcome)."""

    model_config = ConfigDict(extra="allow")


# --------------------------------------------------------------------------- inputs


class RubricQuestion(_Model):
    """One question of a topic's rubric: what the simulated user wants to find out."""

    id: str
    question: str
    keywords: list[str] = Field(default_factory=list, description="terms an answer should mention")
    reference: str | None = Field(None, description="a reference answer; the graders compare answers with it")
    reference_doc: str | None = Field(None, description="the corpus document the reference came from, if any")


class GoldTurn(_Model):
    """One turn of an iKAT topic file (replay): the user side and the gold provenance."""

    turn_id: int
    utterance: str
    resolved_utterance: str = ""
    response: str = ""
    ptkb_provenance: list[int] = Field(default_factory=list, description="1-based PTKB indices")
    response_provenance: list[str] = Field(default_factory=list)


class Topic(_Model):
    """An information need: a title and the ordered rubric questions the user pursues."""

    id: str
    title: str
    need: str = Field("", description="the information need in one or two sentences")
    rubric: list[RubricQuestion] = Field(default_factory=list, description="ordered questions the user wants answered")
    gold_turns: list[GoldTurn] = Field(default_factory=list, description="replayed iKAT turns, if any")

    @model_validator(mode="after")
    def _has_questions_or_turns(self) -> Topic:
        if not self.rubric and not self.gold_turns:
            raise ValueError("a topic needs rubric questions (or replay turns)")
        return self


class Persona(_Model):
    """A simulated user: PTKB statements, behaviour traits and the topics they bring."""

    id: str
    name: str = ""
    ptkb: list[str] = Field(min_length=1, description="personal text knowledge base, first person")
    behaviour: BehaviourSpec = Field(default_factory=BehaviourSpec, description="traits, each a value or a range "
                                     "drawn per scenario")
    topics: list[Topic] = Field(default_factory=list)

    @field_validator("ptkb")
    @classmethod
    def _no_blank_statements(cls, v: list[str]) -> list[str]:
        if any(not s.strip() for s in v):
            raise ValueError("PTKB statements must not be empty")
        return v


class Scenario(_Model):
    """One dialogue to run: a persona, one of its topics, a behaviour and a seed."""

    dialogue_id: str
    persona: Persona
    topic: Topic
    behaviour: Behaviour
    seed: int
    repeat: int = 0

    def ref(self) -> ScenarioRef:
        return ScenarioRef(persona_id=self.persona.id, topic_id=self.topic.id, behaviour=self.behaviour, seed=self.seed)


# --------------------------------------------------------------------------- transcript


class ScenarioRef(_Open):
    """Which persona, topic and behaviour a transcript's dialogue ran with."""

    persona_id: str
    topic_id: str
    behaviour: Behaviour
    seed: int


class PluginRef(_Open):
    """A plugin by name with the parameters it ran with."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class Stop(_Open):
    """Why and by whom a dialogue ended."""

    reason: StopReason
    by: StopBy
    detail: str = ""
    utterance: str | None = Field(
        None, description="the user's closing line (thanks, farewell, giving up); the assistant is not called for it")

    @classmethod
    def turn_cap(cls, max_turns: int) -> Stop:
        """The engine's end at ``max_turns`` (a simulator that sees it coming says the same)."""
        return cls(reason="max_turns", by="engine", detail=f"reached max_turns={max_turns}")

    @model_serializer(mode="wrap")
    def _utterance_always_present(self, handler: Any) -> dict[str, Any]:
        # Transcripts keep None fields, but some records drop them (Sim.API replies, a
        # session's checkpoint); this one is fixed by the transcript format as always present, so a
        # reader can tell "no closing line" from "an old run" there too.
        data = handler(self)
        if isinstance(data, dict):
            data.setdefault("utterance", None)
        return data


class UserTurn(_Open):
    """The user's side of a turn: the utterance and the simulator's grade of the answer."""

    utterance: str
    rubric_id: str | None = None
    grade: float | None = Field(None, description="the simulator's 0-5 grade of the assistant's answer to this turn")
    intent: str | None = None


class Passage(_Open):
    """A retrieved passage: its rank, docid and score, and whether the answer cited it."""

    rank: int
    docid: str
    score: float
    used: bool = False
    text: str | None = None


class PtkbUse(_Open):
    """A PTKB statement as the assistant ranked it; ``used`` = relied on in the answer."""

    index: int = Field(description="1-based position in the persona's PTKB")
    statement: str
    score: float | None = None
    # ``ptkb_provenance`` is a ranking; ``used`` marks the statements the answer
    # relies on (set metrics read it).  True by default: transcripts written before the
    # field existed listed only what was used, so they read the same.
    used: bool = True


class ContextInfo(_Open):
    """What the memory strategy put in the assistant's prompt (strategy, tokens, details)."""

    strategy: str = "none"
    tokens: int = 0


# Offline stand-ins (the extractive summariser, the offline rewriter) put a model name on their
# stages, "offline-...", so token figures compare with a real call's; they are not LLM calls.
OFFLINE_MODEL_PREFIX = "offline"


class Stage(_Open):
    """One pipeline step of a turn: its model, tokens, latency, retries, cost and error."""

    name: str
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    cached: bool = False
    retries: int = 0
    cost_usd: float | None = None
    role: str | None = None
    error: str | None = None

    def is_llm_call(self) -> bool:
        """Did this stage ask a language model (or find its answer in the cache)?  Only if it
        names a model, and that model is not an offline stand-in."""
        return self.model is not None and not self.model.startswith(OFFLINE_MODEL_PREFIX)


class AssistantTurn(_Open):
    """The assistant's side of a turn: response, rewritten query, passages, PTKB provenance."""

    response: str
    rewritten_query: str | None = None
    passages: list[Passage] = Field(default_factory=list)
    ptkb_provenance: list[PtkbUse] = Field(default_factory=list)
    context: ContextInfo = Field(default_factory=ContextInfo)


class Turn(_Open):
    """One answered user turn, with its stages and latency."""

    index: int = Field(ge=1)
    user: UserTurn
    assistant: AssistantTurn
    stages: list[Stage] = Field(default_factory=list)
    latency_ms: float = 0.0
    gold: GoldTurn | None = None


class Usage(_Open):
    """LLM calls, tokens, retries and cost summed over a dialogue's stages: what the servers
    billed.  A stage stands for 1 + ``retries`` requests, so calls + retries = requests sent;
    a cached answer is no call and bills no tokens (runs before this recorded its tokens)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    cost_usd: float | None = None

    @classmethod
    def from_stages(cls, stages: list[Stage]) -> Usage:
        billed = [s for s in stages if not s.cached]
        calls = [s for s in billed if s.is_llm_call()]
        costs = [s.cost_usd for s in stages if s.cost_usd is not None]
        return cls(calls=len(calls), retries=sum(s.retries for s in stages),
                   prompt_tokens=sum(s.prompt_tokens for s in billed),
                   completion_tokens=sum(s.completion_tokens for s in billed),
                   cost_usd=round(sum(costs), 6) if costs else None)


class ErrorInfo(_Open):
    """The error that ended a dialogue and where it came from."""

    type: str
    message: str
    source: ErrorSource | None = Field(None, description="which side failed (None in runs made before it was recorded)")


class Transcript(_Open):
    """One dialogue as recorded: a line of ``dialogues.jsonl``."""

    schema_version: str = SCHEMA_VERSION
    run_id: str
    dialogue_id: str
    scenario: ScenarioRef
    simulator: PluginRef
    assistant: PluginRef
    started_at: datetime
    ended_at: datetime
    stop: Stop
    turns: list[Turn] = Field(default_factory=list)
    # Billed stages on no answered turn: an unanswered utterance's, a failed assistant step's, ...
    loose_stages: list[Stage] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    error: ErrorInfo | None = None

    def all_stages(self) -> list[Stage]:
        """Every stage the dialogue recorded: its turns', then the loose ones."""
        return [*(s for turn in self.turns for s in turn.stages), *self.loose_stages]


StructuredMode = Literal["json_schema", "json_object", "text"]
# How a capability became known: a request sent at preflight to find out (``probe``), an
# error answer that named it (``refusal``), an ordinary answer that showed it (``response``),
# or not yet at all (``assumed``: the OpenAI behaviour, until something says otherwise).
LearntBy = Literal["probe", "refusal", "response", "assumed"]


class LearntHow(_Open):
    """How each capability of an ``LLMCapabilities`` record was learnt."""

    structured: LearntBy = "assumed"
    n: LearntBy = "assumed"
    seed: LearntBy = "assumed"
    usage: LearntBy = "assumed"
    context_window: LearntBy = "assumed"
    parallel: LearntBy = "assumed"


class LLMCapabilities(_Open):
    """What one server accepts for one model: ``run.json`` ``llm.capabilities``.

    ``structured``: how a JSON answer is asked for (``json_schema``; ``json_object`` with the
    schema next to it; ``text``: the schema described in the prompt).  ``n``: more than one
    choice per request honoured (else n single requests).  ``seed``: accepted (else dropped).
    ``usage``: token counts reported (else estimated).  ``context_window``: tokens, when the
    server said.  ``overflows``: role -> the prompt size (tokens) the server refused as too
    long for the window.  ``parallel``: how many requests the server works on at once, when
    known (llama-cpp-python's server: one; llama-server: its slots); simloop keeps no more
    than that in flight, so that a request's timeout counts the server's work on it, not
    its wait behind the others.  ``probe_requests``: requests the preflight sent to learn
    these (not in the run's usage)."""

    endpoint: str
    model: str
    structured: StructuredMode = "json_schema"
    n: bool = True
    seed: bool = True
    usage: bool = True
    context_window: int | None = None
    answers_as: str | None = None  # the model name the server answers with, when it is another
    parallel: int | None = Field(None, ge=1)
    overflows: dict[str, int] = Field(default_factory=dict)
    probe_requests: int = 0
    learnt: LearntHow = Field(default_factory=LearntHow)


class RunLLM(_Open):
    """``run.json`` ``llm``: what the run learnt about its LLM servers."""

    capabilities: list[LLMCapabilities] = Field(default_factory=list)


class ValiditySummary(_Open):
    """The validity card of a simulator configuration, in short (``simloop validate``):
    what ``run.json`` records under ``validity`` and ``report`` shows.  The
    card itself is at ``path``."""

    digest: str  # the simulator configuration's digest (run/manifest.py simulator_digest)
    path: str
    created_at: datetime
    grader: Literal["valid", "not valid", "not measured"]
    voice: Literal["valid", "not valid", "not measured"]
    failing: list[str] = Field(default_factory=list)  # the criteria that failed
    sample: int | None = None  # items per criterion (None: every item)
    line: str = ""  # the card's closing line


class RunManifest(_Open):
    """``run.json``: what ran, with what, and how far it got."""

    schema_version: str = SCHEMA_VERSION
    run_id: str
    config: dict[str, Any]
    config_hash: str
    simulator: PluginRef
    assistant: PluginRef
    versions: dict[str, str] = Field(default_factory=dict)
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    status: RunStatus = "running"
    counts: dict[str, int] = Field(default_factory=dict)
    llm: RunLLM = Field(default_factory=RunLLM)
    validity: ValiditySummary | None = None  # the simulator configuration's validity card, when one exists


# --------------------------------------------------------------------------- plugin I/O


class SimulatorTurn(_Model):
    """What a simulator says next: an utterance, or the end (``end``; its optional
    ``utterance`` is the closing line the assistant is not called for).  ``grade`` and
    ``grade_stages`` judge the answer just given: the session files both on that turn.
    ``stages`` produced what is said now (the closing line's go on the last turn)."""

    utterance: str | None = None
    end: Stop | None = None
    rubric_id: str | None = None
    intent: str | None = None
    grade: float | None = None
    grade_stages: list[Stage] = Field(default_factory=list)
    stages: list[Stage] = Field(default_factory=list)
    gold: GoldTurn | None = None

    @model_validator(mode="after")
    def _one_of(self) -> SimulatorTurn:
        if (self.utterance is None) == (self.end is None):
            raise ValueError("a simulator turn has either an utterance or an end")
        if self.utterance is not None and not self.utterance.strip():
            raise ValueError("empty utterance")
        return self

    @classmethod
    def say(cls, utterance: str, **kw: Any) -> SimulatorTurn:
        return cls(utterance=utterance, **kw)

    @classmethod
    def capped(cls, max_turns: int, **kw: Any) -> SimulatorTurn:
        """The last answer judged (``grade``, ``grade_stages`` in ``kw``) and nothing more to
        say: the turn cap is reached, so an utterance written now would never be put."""
        return cls(end=Stop.turn_cap(max_turns), **kw)

    @classmethod
    def stop(cls, reason: StopReason, detail: str = "", utterance: str | None = None, **kw: Any) -> SimulatorTurn:
        """The end; ``utterance`` is the closing line (blank counts as none)."""
        closing = utterance.strip() if utterance and utterance.strip() else None
        return cls(end=Stop(reason=reason, by="simulator", detail=detail, utterance=closing), **kw)


class AssistantReply(_Model):
    """What an assistant plugin returns for one turn (it becomes the turn's ``assistant``)."""

    response: str
    rewritten_query: str | None = None
    passages: list[Passage] = Field(default_factory=list)
    ptkb_provenance: list[PtkbUse] = Field(default_factory=list)
    context: ContextInfo = Field(default_factory=ContextInfo)
    stages: list[Stage] = Field(default_factory=list)

    def to_turn(self) -> AssistantTurn:
        return AssistantTurn(response=self.response, rewritten_query=self.rewritten_query, passages=self.passages,
                             ptkb_provenance=self.ptkb_provenance, context=self.context)


class DialogueState(BaseModel):
    """What plugins see on each call; the assistant's is redacted (run/view.py).  ``turns``
    are finished turns; ``user`` is the utterance to answer now (None for the simulator).

    ``assistant_memory`` and ``simulator_memory`` are per-dialogue scratch space, so one
    plugin instance can serve many dialogues at once without shared mutable state.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    dialogue_id: str
    scenario: Scenario
    turns: list[Turn] = Field(default_factory=list)
    user: UserTurn | None = None
    max_turns: int = 20
    assistant_memory: dict[str, Any] = Field(default_factory=dict)
    simulator_memory: dict[str, Any] = Field(default_factory=dict)

    @property
    def ptkb(self) -> list[str]:
        return self.scenario.persona.ptkb

    def history(self) -> list[tuple[str, str]]:
        """(user utterance, assistant response) pairs of finished turns."""
        return [(t.user.utterance, t.assistant.response) for t in self.turns]


# --------------------------------------------------------------------------- retrieval results


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result (``Retriever.search``).  A plain dataclass, not a model: thousands
    are made per second and none is written as it is (``Passage`` is what is recorded)."""

    docid: str
    score: float
    text: str
    title: str = ""
