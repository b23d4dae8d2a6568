"""Chat fine-tuning exports (`openai-chat`, `sharegpt`): a persona system prompt, then the
dialogue's user and assistant turns strictly alternating, each conversation checked.

Both formats can live without the run's personas (``ExportJob.soft_sources``): the system
prompt then lists only the PTKB statements the assistant cited.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from ..schema import Behaviour, Persona, Transcript
from .export_job import ExportFormat, ExportJob, write_lines

__all__ = ["ChatMessage", "OPENAI_CHAT", "SHAREGPT", "chats", "validate_chat"]


class ChatMessage(TypedDict):
    """One message of an OpenAI chat fine-tuning line (``{"messages": [...]}``)."""

    role: str
    content: str


# One message of a ShareGPT conversation ("from" is a keyword, hence the functional form).
ShareGptMessage = TypedDict("ShareGptMessage", {"from": str, "value": str})


def _ptkb(persona: Persona | None, t: Transcript) -> list[str]:
    """The persona's PTKB, or, without a source, the statements the assistant cited."""
    if persona is not None:
        return list(persona.ptkb)
    cited = {p.index: p.statement for x in t.turns for p in x.assistant.ptkb_provenance}
    return [cited[i] for i in sorted(cited)]


def _behaviour_text(b: Behaviour) -> str:
    """The user's traits in plain words, for the fine-tuning system prompt."""
    parts = [
        "patient" if b.patience >= 3 else "quick to give up",
        "happy to answer clarifying questions" if b.cooperativeness >= 0.5
        else "reluctant to answer clarifying questions",
        "writes precisely" if b.language_skill >= 0.7 else "writes vaguely, sometimes with typos",
        "chatty" if b.verbosity >= 0.6 else "brief" if b.verbosity <= 0.3 else "moderately talkative",
        {"never": "rarely shares personal details", "relevant": "shares personal details when they matter",
         "eager": "shares personal details freely"}[b.reveal],
    ]
    return ", ".join(parts)


def _system_prompt(ptkb: list[str], b: Behaviour) -> str:
    facts = "\n".join(f"- {s}" for s in ptkb) or "- (nothing known yet)"
    return ("You are a personal assistant that searches the web and answers with the user's situation in mind.\n"
            f"What you know about the user:\n{facts}\n"
            f"How this user tends to talk: {_behaviour_text(b)}.")


def _chat_messages(t: Transcript, sources: dict[str, Persona] | None) -> list[ChatMessage]:
    persona = (sources or {}).get(t.scenario.persona_id)
    msgs = [ChatMessage(role="system", content=_system_prompt(_ptkb(persona, t), t.scenario.behaviour))]
    for x in t.turns:
        msgs += [ChatMessage(role="user", content=x.user.utterance),
                 ChatMessage(role="assistant", content=x.assistant.response)]
    return msgs


def validate_chat(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """Why a conversation is not valid fine-tuning data (None when it is): one system
    message, then user/assistant strictly alternating, ending with the assistant."""
    if not messages or messages[0].get("role") != "system":
        return "must start with a system message"
    rest = messages[1:]
    if not rest:
        return "has no turns"
    for i, m in enumerate(rest):
        want = "user" if i % 2 == 0 else "assistant"
        if m.get("role") != want:
            return f"message {i + 1} is {m.get('role')!r}, expected {want!r}"
        if not isinstance(m.get("content"), str) or not m["content"].strip():
            return f"message {i + 1} ({want}) is empty"
    if rest[-1]["role"] != "assistant":
        return "does not end with an assistant message"
    return None


_SHAREGPT_FROM = {"system": "system", "user": "human", "assistant": "gpt"}


def _sharegpt(messages: list[ChatMessage]) -> list[ShareGptMessage]:
    return [{"from": _SHAREGPT_FROM[m["role"]], "value": m["content"]} for m in messages]


def chats(ts: Sequence[Transcript], sources: dict[str, Persona] | None, sharegpt: bool, notes: list[str]) -> list[str]:
    """One JSON line per dialogue that is valid fine-tuning data; the others are noted as skipped."""
    lines = []
    for t in ts:
        msgs = _chat_messages(t, sources)
        problem = validate_chat(msgs)
        if problem:  # e.g. an errored dialogue whose last answer is empty: useless for training
            notes.append(f"skipped {t.dialogue_id}: {problem}")
            continue
        line = {"id": t.dialogue_id, "conversations": _sharegpt(msgs)} if sharegpt else {"messages": msgs}
        lines.append(json.dumps(line, ensure_ascii=False))
    return lines


def _writer(sharegpt: bool) -> Callable[[ExportJob, Path], int]:
    def write(job: ExportJob, out: Path) -> int:
        return write_lines(out, chats(job.transcripts, job.soft_sources(), sharegpt, job.notes))

    return write


OPENAI_CHAT = ExportFormat("openai-chat", "openai.jsonl", "dialogues", _writer(sharegpt=False))
SHAREGPT = ExportFormat("sharegpt", "sharegpt.jsonl", "dialogues", _writer(sharegpt=True))
