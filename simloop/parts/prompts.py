"""The user-message layout shared by every LLM part, so all prompts read the same way."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["prompt_sections", "NEWEST"]

NEWEST = "Newest user message"


def prompt_sections(utterance: str, context: str = "", ptkb: Sequence[str] = (),
                    extra: Sequence[tuple[str, str]] = ()) -> str:
    """Facts about the user, the conversation so far, titled ``extra`` sections (empty ones
    left out), and the newest user message last - what the reply is about comes at the end,
    where models attend best."""
    parts = []
    if ptkb:
        parts.append("Facts about the user:\n" + "\n".join(f"- {s}" for s in ptkb))
    if context:
        parts.append(f"Conversation so far:\n{context}")
    parts += [f"{title}:\n{body}" for title, body in extra if body]
    parts.append(f"{NEWEST}:\n{utterance}")
    return "\n\n".join(parts)
