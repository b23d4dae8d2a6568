"""An offline stand-in for the ``assistant.summary`` model, so ``simloop memory`` runs the
``summary`` strategy without an LLM.

It answers the summary update request of ``simloop.memory.strategies.SummaryMemory`` the way a
careful summariser would, extractively: it keeps what the user said about themselves
(first-person statements from the exchange, plus those already in the memory), notes
what the user asked last, and drops the oldest statements when the word budget runs out.
It never invents anything, so offline ``summary`` recall is an upper bound on what an
LLM summary of the same length could keep; a real model (``--base-url``/``--model``)
is the honest measurement.  Its stages carry ``model="offline-extractive"`` and the
prompt/completion sizes a real call would have.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any, Sequence

from ..llm.client import ChatResult
from .strategies import TOKENS_PER_WORD, count_tokens
from ..text import content_words, sentences
from ..schema import Stage

__all__ = ["OfflineSummariser", "extractive_summary", "MODEL_NAME"]

MODEL_NAME = "offline-extractive"
_SECTION = re.compile(r"^(Memory so far|Previous exchange|The user now says):\s*$", re.M)
_USER_LINE = re.compile(r"^User(?: \(turn \d+\))?:\s*(.+)$", re.M)
_LAST = "The user last asked about"
_FIRST_PERSON = frozenset("i i'm i've i'll i'd me my mine we we're we've our ours".split())


def _sections(prompt: str) -> dict[str, str]:
    """The update request's parts by heading; the whole prompt is the exchange when the
    headings are not there (a changed prompt degrades the summary, it does not break it)."""
    marks = list(_SECTION.finditer(prompt))
    if not marks:
        return {"Previous exchange": prompt}
    out: dict[str, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(prompt)
        out[m.group(1)] = prompt[m.end():end].strip()
    return out


def _statements(text: str) -> list[str]:
    """First-person, declarative sentences: what a user says about themselves."""
    out = []
    for s in sentences(text):
        words = {w.strip(".,;:!").lower() for w in s.split()}
        if not s.endswith("?") and words & _FIRST_PERSON and content_words(s):  # "I can't have lactose."
            out.append(s)
    return out


def extractive_summary(memory: str, exchange: str, max_words: int) -> str:
    """The new memory: earlier statements, new user statements, the latest question's
    subject; the oldest statements go first when over ``max_words`` (the caller clips a
    single statement that is longer on its own)."""
    kept = [s for s in sentences(memory) if not s.startswith(("(", _LAST))]
    users = _USER_LINE.findall(exchange)
    for s in (s for u in users for s in _statements(u)):
        if s not in kept:
            kept.append(s)
    subjects = [content_words(s) for u in users for s in sentences(u) if s.endswith("?")]
    subjects = [words for words in subjects if words]  # "Why?" names no subject
    last = f"{_LAST} {', '.join(dict.fromkeys(subjects[-1]))}." if subjects else ""
    # The user's statements come first; the note on the last question only if room is left.
    while len(kept) > 1 and len(" ".join(kept).split()) > max_words:
        kept.pop(0)
    if last and len(" ".join([*kept, last]).split()) <= max_words:
        kept.append(last)
    return " ".join(kept)


class OfflineSummariser:
    """ChatModel-shaped (``chat`` only): the extractive summary of an update request."""

    model = MODEL_NAME

    async def chat(self, messages: Sequence[dict[str, Any]], *, stage: str, temperature: float | None = None,
                   max_tokens: int | None = None, **_: Any) -> ChatResult:
        t0 = time.perf_counter()
        user = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        parts = _sections(user)
        # SummaryMemory asks for max_words * 1.3 * 1.5 tokens: undo that to get its word limit.
        max_words = max(10, math.floor((max_tokens or 300) / (TOKENS_PER_WORD * 1.5)))
        text = extractive_summary(parts.get("Memory so far", ""), parts.get("Previous exchange", ""), max_words)
        prompt = " ".join(str(m.get("content", "")) for m in messages)
        st = Stage(name=stage, model=MODEL_NAME, prompt_tokens=count_tokens(prompt),
                   completion_tokens=count_tokens(text), latency_ms=round((time.perf_counter() - t0) * 1000, 3))
        return ChatResult(text, [text], st)
