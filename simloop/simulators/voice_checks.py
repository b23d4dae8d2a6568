"""Is a message the user's own?  Three checks on what a chat model wrote as the user's next
message, used by the LLM voice's ``invalid_reason``:

* ``repeats_earlier``: it is one of the user's earlier messages of this dialogue again,
  word for word, or nearly all of it is (a part of one, or one with a word or two
  added): a small model that has lost the thread writes its last message again.
* ``repeats_itself``: it says something twice: a sentence, a run of words right after
  itself, or a long run of words anywhere (a doubled paragraph).
* ``assistant_voice``: a sentence anywhere in it speaks as the assistant, not only at its
  start ("I'm glad you like it. ... I'll be happy to help you with the next question.").

The assistant's voice is recognised by what the assistant *does* in a sentence, not by a
list of its sentences: it serves the user (I/we + help/assist/... + you), invites further
questions or feedback, receives thanks or praise for its answer, speaks of "your
question", presents a result ("Here are ..."), calls itself an AI, or labels a speaker
("Assistant:").  A user does the opposite: asks for help ("can you help me"), thanks,
and speaks of their own needs.  Every pattern was checked against every real iKAT user
utterance (2023 and 2024 topics, tests/simulators/test_voice_checks.py): none of them is
rejected.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from ..text import content_words, sentences, words

__all__ = ["repeats_earlier", "repeats_itself", "assistant_voice", "NEAR_COPY", "MIN_COPY_WORDS", "MIN_RUN"]

NEAR_COPY = 0.8  # share of the new message that, said before in the same order, makes it a repeat
MIN_COPY_WORDS = 4  # shorter messages may recur
_HALF = 0.5  # ... and at least this share of the earlier message
MIN_RUN = 8  # a run of this many words said twice in one message is a doubled passage
_MIN_ADJACENT = 4  # a run of this many words right after itself ("tell me about it tell me about it")
_MIN_SENTENCE = 3  # a sentence of this many words said twice ("What does it cost? What does it cost?")


def _overlap(a: Sequence[str], b: Sequence[str]) -> int:
    """Words ``a`` and ``b`` share, in any order (each as often as both have it)."""
    return sum((Counter(a) & Counter(b)).values())


def _common_words(a: Sequence[str], b: Sequence[str]) -> int:
    """How many words ``a`` and ``b`` share in the same order (their longest common
    subsequence): a word added, dropped or changed costs one, not a broken run."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, start=1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def repeats_earlier(text: str, earlier: Sequence[str]) -> str | None:
    """Which earlier message ``text`` repeats ("turn N"), or None.  A repeat: a message of
    ``MIN_COPY_WORDS`` words or more whose words, in order, are ``NEAR_COPY`` of its own
    and half of an earlier message's, and whose content words are ``NEAR_COPY`` that
    message's too: the same message again, with a word or two added, dropped or changed,
    or the single copy of a message that said itself twice.  The same sentence frame
    about other things ("Is X a good idea if I care about Y?") is a new message; so is a
    short part of a longer one ("Where should I start?"); and shorter messages ("Yes,
    please.", "Tell me more.") may recur: real iKAT users do all three."""
    new = words(text)
    if len(new) < MIN_COPY_WORDS:
        return None
    topic = set(content_words(text))
    for n, old_text in enumerate(earlier, start=1):
        old = words(old_text)
        # Cheap bounds first (the check runs on the event loop, against every earlier
        # reply too): the words in common, in any order, bound those in the same order.
        if not old or len(old) > len(new) / _HALF or _overlap(new, old) < NEAR_COPY * len(new):
            continue
        if topic and len(topic & set(content_words(old_text))) < NEAR_COPY * len(topic):
            continue
        shared = _common_words(new, old)
        if shared >= NEAR_COPY * len(new) and shared >= _HALF * len(old):
            return f"turn {n}"
    return None


def repeats_itself(text: str) -> str | None:
    """What ``text`` says twice (a short quote), or None."""
    seen: set[tuple[str, ...]] = set()
    for sentence in sentences(text):
        key = tuple(words(sentence))
        if len(key) >= _MIN_SENTENCE:
            if key in seen:
                return _quote(key)
            seen.add(key)
    w = words(text)
    for size in range(_MIN_ADJACENT, len(w) // 2 + 1):  # a run right after itself
        for i in range(len(w) - 2 * size + 1):
            if w[i:i + size] == w[i + size:i + 2 * size]:
                return _quote(w[i:i + size])
    first: dict[tuple[str, ...], int] = {}
    for i in range(len(w) - MIN_RUN + 1):  # a long run anywhere, the two not overlapping
        gram = tuple(w[i:i + MIN_RUN])
        j = first.setdefault(gram, i)
        if i - j >= MIN_RUN:
            return _quote(gram)
    return None


def _quote(run: Sequence[str], most: int = 8) -> str:
    return '"' + " ".join(run[:most]) + (" ..." if len(run) > most else "") + '"'


# The assistant's acts, each a family of wordings.  Matched per sentence, case-insensitive.
_I = r"(?:i|we)(?:'ll|'d|'m|'re| will| would| can| could| am| are| shall| may| might)?"
_SERVE = r"(?:help|assist|support|guide|serve|recommend|suggest)\w*"
_ACTS: list[tuple[str, re.Pattern[str]]] = [
    # "I'll be happy to help you", "I can help you with", "we could assist you"; not "can you help me"
    ("offers its help", re.compile(rf"\b{_I}\b[^.?!]{{0,40}}?\b{_SERVE}\s+you\b", re.I)),
    ("offers its help", re.compile(r"\b(?:happy|glad|pleased|delighted|here|ready)\s+to\s+(?:help|assist)\b"
                                   r"|\bhow (?:can|may|might|could) (?:i|we) (?:help|assist)\b"
                                   r"|\banything else (?:i|we) can\b|\blet (?:me|us) (?:help|assist)\b", re.I)),
    # "I can offer you another way", "we could share a few ideas": the assistant's options;
    # a user offers facts about themselves ("I can give you more details"), not options,
    # and shares ideas with others ("my sister and I want to share some ideas")
    ("offers its help", re.compile(
        r"\b(?:i|we)(?:'ll|'d| can| could| will| would| may| might| am happy to| are happy to)(?: also| gladly)? "
        r"(?:offer|provide|give|share|show)\b(?: you)? (?:another|other|more|some|a few|"
        r"several|an?) (?:\w+ )?(?:ways?|options?|ideas?|suggestions?|tips?|alternatives?|recommendations?)\b",
        re.I)),
    # "If you have any other questions", "feel free to ask", "let me know if you ..."
    ("invites more questions", re.compile(
        r"\bfeel free to\b|\bdon'?t hesitate to\b|\b(?:let (?:me|us) know|tell me) (?:if|whether|when) you\b"
        r"|\bif you (?:have|'ve got) (?:any|more|other|further|additional) (?:\w+ )?(?:questions|concerns|feedback)\b"
        r"|\bif you need (?:anything|any (?:more|other|further) (?:help|information|assistance))\b", re.I)),
    # "your next question", "your questions"
    ("speaks of the user's question", re.compile(
        r"\byour (?:next |other |further |follow-up |first |last |previous )?(?:question|query|request)s?\b", re.I)),
    # "You're welcome", "I'm glad you like it", "glad I could help", "Great question", "hope this helps"
    ("receives thanks", re.compile(
        r"\byou(?:'re| are) (?:very |most |so )?welcome\b"
        r"|\b(?:glad|happy|pleased|delighted) (?:to (?:hear|see|know) )?(?:that )?you(?:'re| are|'ve| have)? "
        r"(?:\w+ )?(?:lik|enjoy|found|find|lov|understood|understand|appreciat)\w*"
        r"|\b(?:glad|happy|pleased) (?:i|we) (?:could|was able to|were able to) help\b"
        r"|\b(?:great|good|excellent|interesting) question\b"
        r"|\bhope (?:this|that|it|these|my answer) (?:helps|helped|was helpful|is helpful|answers)\b", re.I)),
    # "I'm sorry for any confusion", "I apologize for the inconvenience" (a user says "sorry, I meant ...")
    ("apologises for its answer", re.compile(
        r"\b(?:sorry|apologi[sz]e) for any\b|\bapologi[sz]e for (?:the|my) (?:confusion|inconvenience|misunderstanding|"
        r"mistake|error)\b", re.I)),
    # "Here are some options", "Sure! Here's what I found"; not "Here in Porto ..." nor "Here is my question"
    ("presents an answer", re.compile(
        r"^\W*(?:(?:sure|certainly|of course|absolutely)\W+)?here(?:'s| is| are) (?:a|an|the|some|what|how|few)\b",
        re.I)),
    ("calls itself an AI", re.compile(
        r"\bas an? (?:ai|language model|assistant|virtual assistant|chatbot)\b"
        r"|\bi(?:'m| am) (?:just )?(?:an? )?(?:ai|language model|virtual assistant|chatbot|search assistant)\b", re.I)),
]
# A speaker label where a line or sentence starts: the model writes the other side's lines.
_LABEL = re.compile(r"(?:^|\n|[.!?]\s+)\W{0,3}(?:assistant|system|ai|bot|chatbot|response)\W{0,3}:", re.I)


def assistant_voice(text: str) -> str | None:
    """What in ``text`` the assistant would say (the act and the sentence), or None."""
    if _LABEL.search(text):
        return "it labels a speaker as the assistant"
    for sentence in sentences(text):
        for act, pattern in _ACTS:
            if pattern.search(sentence):
                return f'{act}: "{_clip(sentence)}"'
    return None


def _clip(sentence: str, most: int = 60) -> str:
    return sentence if len(sentence) <= most else sentence[: most - 1] + "…"
