"""The iKAT Sim.API wire format (SIMULATION_API.md §1–§2), shared by `serve` and `rehearse`.

Both the 2025 fields (top-level ``track_persona``, ``ptkb_provenance``) and the 2026
variants (``extra``, ``meta``, ``user_meta``) are accepted; unknown fields are ignored, as
pydantic dataclasses in the organisers' server do.  Nothing here imports FastAPI, so the
client side stays light.

simloop extension: a server built by simloop answers with the header ``X-Simloop-Server``;
only then does ``rehearse`` add ``meta.simloop`` (full passages with ``used`` flags, PTKB
indices, stages), which the server copies into the transcript.  The official server
never sees the extension.  The other way, a simloop server's closing utterance carries
``user_meta.simloop.stop`` (why the session ended: reason and detail), which the official
server does not send; clients that do not know it ignore it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, get_args

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator

from ..errors import first_error
from ..schema import AssistantReply, ContextInfo, Passage, PtkbUse, Stage, StopReason

__all__ = [
    "SERVER_HEADER",
    "RunMeta",
    "AssistantResponse",
    "UserUtterance",
    "stop_meta",
    "remote_reply",
    "reply_payload",
    "RunStatus",
    "Budget",
    "DumpRow",
    "DumpMetadata",
    "DumpRecord",
    "dump_record",
]

SERVER_HEADER = "X-Simloop-Server"

# ----------------------------------------------------------------------------- requests


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


# Field limits (answered with 422): far above what a real client sends, low enough that one
# request cannot fill the disk (a run keeps the description in its run.json and sqlite row).
# The whole body is capped too (``simloop serve --max-body``, 413).
MAX_ID_CHARS = 256
MAX_DESCRIPTION_CHARS = 4096
MAX_RESPONSE_CHARS = 20_000  # the reply itself; --max-response-tokens judges its length later
MAX_LIST_ITEMS = 1000
MAX_STATEMENT_CHARS = 2000
_Id = Annotated[StrictStr, Field(max_length=MAX_ID_CHARS)]
_Statement = Annotated[StrictStr, Field(max_length=MAX_STATEMENT_CHARS)]


class RunMeta(_Lenient):
    """Body of ``/run/start``: 2025 ``track_persona`` or 2026 ``extra.track_persona``."""

    run_id: _Id
    description: StrictStr = Field(max_length=MAX_DESCRIPTION_CHARS)
    track_persona: bool = False
    extra: dict[str, Any] | None = None
    team_id: _Id | None = None

    def tracks_persona(self) -> bool:
        return bool(self.track_persona or (self.extra or {}).get("track_persona"))


class SimloopMeta(BaseModel):
    """``meta.simloop``: provenance the official fields cannot carry."""

    model_config = ConfigDict(extra="allow")

    passages: list[Passage] | None = None
    ptkb: list[PtkbUse] | None = None
    rewritten_query: str | None = None
    context: ContextInfo | None = None
    stages: list[Stage] = Field(default_factory=list)


class AssistantResponse(_Lenient):
    """Body of ``/run/continue``.  ``response`` may be empty or null when it is ignored
    (the call that opens the next topic)."""

    run_id: _Id
    response: StrictStr | None = Field(None, max_length=MAX_RESPONSE_CHARS)
    citations: (Annotated[dict[_Id, float], Field(max_length=MAX_LIST_ITEMS)]
                | Annotated[list[_Id], Field(max_length=MAX_LIST_ITEMS)] | None) = None
    ptkb_provenance: Annotated[list[_Statement], Field(max_length=MAX_LIST_ITEMS)] | None = None
    relevant_ptkbs: Annotated[list[_Statement], Field(max_length=MAX_LIST_ITEMS)] | None = None  # the guidelines' name
    meta: dict[str, Any] | None = None

    @field_validator("meta")
    @classmethod
    def _meta_ptkb_is_strings(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        ptkb = (v or {}).get("ptkb_provenance")
        if ptkb is not None and not (isinstance(ptkb, list) and all(isinstance(s, str) for s in ptkb)):
            raise ValueError("meta.ptkb_provenance must be a list of strings")
        return v

    def citation_scores(self) -> dict[str, float]:
        """Citations as ``{passage id: score}``; a plain list is ranked by position."""
        if isinstance(self.citations, list):
            n = len(self.citations)
            return {pid: float(n - i) for i, pid in enumerate(dict.fromkeys(self.citations))}
        return dict(self.citations or {})

    def ptkb_statements(self) -> list[str]:
        """Every PTKB statement named in any of the three places, first mention first."""
        meta = (self.meta or {}).get("ptkb_provenance") or []
        both = [*(self.ptkb_provenance or []), *(self.relevant_ptkbs or []), *meta]
        return list(dict.fromkeys(s for s in both if s.strip()))

    def simloop_meta(self) -> SimloopMeta | None:
        raw = (self.meta or {}).get("simloop")
        if raw is None:
            return None
        try:
            return SimloopMeta.model_validate(raw)
        except ValidationError as exc:
            where, msg = first_error(exc)
            raise ValueError(f"meta.simloop.{where}: {msg}") from None


# ----------------------------------------------------------------------------- responses


class UserUtterance(_Lenient):
    timestamp: str
    run_id: str
    topic_id: str
    user_id: str
    utterance: str
    history: list[dict[str, str]]
    last_response_of_session: bool = False
    last_response_of_run: bool = False
    user_meta: dict[str, Any] | None = None

    def ptkb(self) -> list[str]:
        return [s for s in (self.user_meta or {}).get("ptkb") or [] if isinstance(s, str)]

    def server_stop(self) -> tuple[StopReason, str] | None:
        """Why the session ended, when a simloop server says so (``user_meta.simloop.stop``);
        None from any other server, or for a reason this version does not know."""
        told: Any = self.user_meta or {}
        for key in ("simloop", "stop"):  # any other shape is not ours: ignored, as unknown fields are
            told = told.get(key) if isinstance(told, dict) else None
        if not isinstance(told, dict) or told.get("reason") not in get_args(StopReason):
            return None
        return told["reason"], str(told.get("detail") or "")


def stop_meta(reason: str, detail: str) -> dict[str, Any]:
    """The ``user_meta`` entry by which a simloop server says why a session ended."""
    return {"simloop": {"stop": {"reason": reason, "detail": detail}}}


class UserTopic(BaseModel):
    user_id: str
    topic_id: str


class RunStatus(BaseModel):
    """Reply of ``/run/status``: where a run stands in its queue of persona x topic pairs."""

    run_id: str
    status: str  # active | inactive | complete
    open_topics: list[str]
    done_topics: list[str]
    open_user_topic_pairs: list[UserTopic]
    done_user_topic_pairs: list[UserTopic]


class Remaining(BaseModel):
    remaining: int
    unit: str


class BudgetLeft(BaseModel):
    debug: Remaining
    run: Remaining


class Budget(BaseModel):
    """Reply of ``/budget/check``: what a team has left of each API."""

    remaining: BudgetLeft


# ----------------------------------------------------------------------------- provenance


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def remote_reply(body: AssistantResponse, ptkb: list[str]) -> AssistantReply:
    """What a team sent, as the reply that answers the session's open turn.

    Passages come from ``meta.simloop`` when present (they know which were used);
    otherwise from ``citations``, ranked by score, ``used`` unknown (False).  PTKB
    statements are matched to the persona's PTKB by text; a statement the system
    extracted itself (not in the PTKB) gets index 0.
    """
    ext = body.simloop_meta()
    if ext is not None and ext.passages is not None:
        passages = ext.passages
    else:
        ranked = sorted(body.citation_scores().items(), key=lambda kv: -kv[1])
        passages = [Passage(rank=i, docid=pid, score=score) for i, (pid, score) in enumerate(ranked, start=1)]
    if ext is not None and ext.ptkb is not None:
        uses = ext.ptkb
    else:
        where = {_norm(s): i for i, s in enumerate(ptkb, start=1)}
        uses = [PtkbUse(index=where.get(_norm(s), 0), statement=s) for s in body.ptkb_statements()]
    return AssistantReply(
        response=body.response or "",
        rewritten_query=ext.rewritten_query if ext else None,
        passages=passages,
        ptkb_provenance=uses,
        context=(ext.context if ext and ext.context else ContextInfo(strategy="remote")),
        stages=ext.stages if ext else [],
    )


def reply_payload(run_id: str, reply: AssistantReply | None, *, extension: bool) -> dict[str, Any]:
    """A ``/run/continue`` body for ``reply`` (None: the ignored reply to a farewell).

    The PTKB statements go in both the 2025 field and ``meta`` (2026); servers ignore
    the field they do not know.  Passage scores become the citation dict; a duplicate
    passage id keeps its best score.
    """
    if reply is None:
        return {"run_id": run_id, "response": "", "citations": {}, "ptkb_provenance": [],
                "meta": {"ptkb_provenance": []}}
    citations: dict[str, float] = {}
    for p in reply.passages:
        citations[p.docid] = max(float(p.score), citations.get(p.docid, float("-inf")))
    statements = list(dict.fromkeys(u.statement for u in reply.ptkb_provenance if u.used))  # a set, as Sim.API has it
    meta: dict[str, Any] = {"ptkb_provenance": statements}
    if extension:
        meta["simloop"] = {
            "passages": [p.model_dump(mode="json", exclude={"text"}) for p in reply.passages],
            "ptkb": [u.model_dump(mode="json") for u in reply.ptkb_provenance],
            "rewritten_query": reply.rewritten_query,
            "context": reply.context.model_dump(mode="json"),
            "stages": [s.model_dump(mode="json", exclude_none=True) for s in reply.stages],
        }
    return {"run_id": run_id, "response": reply.response, "citations": citations,
            "ptkb_provenance": statements, "meta": meta}


# ----------------------------------------------------------------------------- /run/dump

Citations = dict[str, float] | list[str]  # as the team sent them: scored, or ranked by position


@dataclass(frozen=True)
class DumpRow:
    """What one step of a session adds to the dump: a user utterance with the rubric
    question it pursued and the grade of the answer it got, and the team's answer (none
    for the closing line)."""

    utterance: str
    rubric: str | None = None
    score: float | None = None
    text: str | None = None
    citations: Citations = field(default_factory=dict)
    ptkb: list[str] = field(default_factory=list)


class DumpMetadata(BaseModel):
    team_id: str
    run_id: str
    description: str
    track_persona: bool
    user_id: str
    type: str = "interactive"
    topic_id: str  # "<topic>_<i>", i counting the records of the user x topic pair from 1


class DumpResponse(BaseModel):
    rank: int = 1
    user_utterance: str
    user_rubrik: str | None  # sic: the organisers' field names
    user_rubrik_score: float | None
    text: str | None
    citations: Citations
    ptkb_provenance: list[str]


class DumpRecord(BaseModel):
    """One line of ``/run/dump`` in the organisers' format (C25)."""

    metadata: DumpMetadata
    responses: list[DumpResponse]
    references: Citations


def dump_record(meta: DumpMetadata, row: DumpRow) -> DumpRecord:
    response = DumpResponse(user_utterance=row.utterance, user_rubrik=row.rubric, user_rubrik_score=row.score,
                            text=row.text, citations=row.citations, ptkb_provenance=row.ptkb)
    return DumpRecord(metadata=meta, responses=[response], references=row.citations)
