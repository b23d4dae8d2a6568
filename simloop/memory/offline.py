"""An offline stand-in for the ``assistant.summary`` model, so ``simloop memory`` runs the
``summary`` strategy without an LLM.

It answers the summary update of ``simloop.memory.summary.SummaryMemory`` (structured
values, never a prompt to parse back) the way a careful summariser would, extractively:
it keeps what the user said about themselves (first-person statements from the exchange,
plus those already in the memory), notes what the user asked last, and drops the oldest
statements when the word budget runs out.
It never invents anything, so offline ``summary`` recall is an upper bound on what an
LLM summary of the same length could keep; a real model (``--base-url``/``--model``)
is the honest measurement.  Its stages carry ``model="offline-extractive"`` and the
prompt/completion sizes a real call would have.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..schema import Stage
from ..text import content_words, count_tokens, sentences
from .summary import SummaryUpdate, summary_messages

__all__ = ["OfflineSummariser", "extractive_summary", "MODEL_NAME"]

MODEL_NAME = "offline-extractive"
_LAST = "The user last asked about"
_FIRST_PERSON = frozenset("i i'm i've i'll i'd me my mine we we're we've our ours".split())


def _statements(text: str) -> list[str]:
    """First-person, declarative sentences: what a user says about themselves."""
    out = []
    for s in sentences(text):
        words = {w.strip(".,;:!").lower() for w in s.split()}
        if not s.endswith("?") and words & _FIRST_PERSON and content_words(s):  # "I can't have lactose."
            out.append(s)
    return out


def extractive_summary(memory: str, user_utterances: Sequence[str], max_words: int) -> str:
    """The new memory: earlier statements, new user statements, the latest question's
    subject; the oldest statements go first when over ``max_words`` (the caller clips a
    single statement that is longer on its own)."""
    kept = [s for s in sentences(memory) if not s.startswith(_LAST)]
    for s in (s for u in user_utterances for s in _statements(u)):
        if s not in kept:
            kept.append(s)
    subjects = [content_words(s) for u in user_utterances for s in sentences(u) if s.endswith("?")]
    subjects = [words for words in subjects if words]  # "Why?" names no subject
    last = f"{_LAST} {', '.join(dict.fromkeys(subjects[-1]))}." if subjects else ""
    # The user's statements come first; the note on the last question only if room is left.
    while len(kept) > 1 and len(" ".join(kept).split()) > max_words:
        kept.pop(0)
    if last and len(" ".join([*kept, last]).split()) <= max_words:
        kept.append(last)
    return " ".join(kept)


class OfflineSummariser:
    """A ``Summariser`` (and what ``Context.chat("assistant.summary")`` hands out in its
    place): the extractive summary of an update."""

    model = MODEL_NAME

    async def summarise(self, update: SummaryUpdate, *, stage: str) -> tuple[str, Stage]:
        t0 = time.perf_counter()
        text = extractive_summary(update.summary, [t.user.utterance for t in update.turns], update.max_words)
        # Billed as a real call of the same prompt would be, so token figures compare.
        prompt = " ".join(m["content"] for m in summary_messages(update))
        return text, Stage(name=stage, model=MODEL_NAME, prompt_tokens=count_tokens(prompt),
                           completion_tokens=count_tokens(text),
                           latency_ms=round((time.perf_counter() - t0) * 1000, 3))
