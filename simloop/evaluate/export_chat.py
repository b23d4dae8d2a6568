"""Chat fine-tuning exports (`openai-chat`, `sharegpt`): a persona system prompt, then the
dialogue's user and assistant turns strictly alternating, each conversation checked."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..schema import Behaviour, Persona, Transcript

__all__ = ["chats", "validate_chat"]


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
        "happy to answer clarifying questions" if b.cooperativeness >= 0.5 else "reluctant to answer clarifying questions",
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


def _chat_messages(t: Transcript, sources: dict[str, Persona] | None) -> list[dict]:
    msgs = [{"role": "system", "content": _system_prompt(_ptkb((sources or {}).get(t.scenario.persona_id), t), t.scenario.behaviour)}]
    for x in t.turns:
        msgs += [{"role": "user", "content": x.user.utterance}, {"role": "assistant", "content": x.assistant.response}]
    return msgs


def validate_chat(messages: list[dict]) -> str | None:
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


def chats(ts: Sequence[Transcript], sources: dict[str, Persona] | None, sharegpt: bool, notes: list[str]) -> list[str]:
    """One JSON line per dialogue that is valid fine-tuning data; the others are noted as skipped."""
    lines = []
    for t in ts:
        msgs = _chat_messages(t, sources)
        problem = validate_chat(msgs)
        if problem:  # e.g. an errored dialogue whose last answer is empty: useless for training
            notes.append(f"skipped {t.dialogue_id}: {problem}")
            continue
        if sharegpt:
            obj: dict[str, Any] = {"id": t.dialogue_id,
                                   "conversations": [{"from": _SHAREGPT_FROM[m["role"]], "value": m["content"]} for m in msgs]}
        else:
            obj = {"messages": msgs}
        lines.append(json.dumps(obj, ensure_ascii=False))
    return lines
