"""Small text helpers shared by the simulator's voices and graders (no I/O, no models).

Deliberately crude: a stop list, a suffix-stripping stemmer and a sentence splitter are
enough to compare a rubric question with a response or an utterance, and they keep the
offline simulator free of NLP dependencies.
"""

from __future__ import annotations

import re
from typing import Iterable

__all__ = [
    "STOPWORDS",
    "words",
    "stem",
    "content_terms",
    "sentences",
    "first_lower",
    "assistant_question",
    "term_coverage",
    "mentions_statement",
]

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves also may might must shall can't
    don't i'm i've i'd i'll it's what's there's let's know tell like want need please get give
    much many way ways thing things one really best good well""".split()
)

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_SENT = re.compile(r"(?<=[.!?])\s+")
# Offers that end a reply ("Do you want me to list ...?") are not clarifying questions:
# iKAT reference responses end with them all the time and users simply go on.
_OFFER = re.compile(
    r"\b(would you like|do you want|want me to|like me to|shall i|should i|can i help|"
    r"anything else|is there anything|let me know|may i help|can i assist)\b"
)
_YOU = re.compile(r"\b(you|your|yours|you're|you've)\b")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def stem(word: str) -> str:
    """Strip common English suffixes so that plural/verb forms meet ("universities" ~
    "university", "travelling" ~ "travel")."""
    w = word.lower()
    for suffix, repl in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if len(w) > len(suffix) + 2 and w.endswith(suffix) and not w.endswith("ss"):
            w = w[: -len(suffix)] + repl
            break
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiou":  # travell -> travel
        w = w[:-1]
    return w


def content_terms(text: str) -> list[str]:
    """Stems of the non-stop words of ``text``, in order, without repeats."""
    out: list[str] = []
    for w in words(text):
        if w in STOPWORDS or len(w) < 2:
            continue
        s = stem(w)
        if s not in out:
            out.append(s)
    return out


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text.strip()) if s.strip()]


def first_lower(text: str) -> str:
    """Lower-case the first letter so a question can follow "And ...", unless it starts
    with "I" or looks like a name or acronym."""
    if not text:
        return text
    head = text.split(" ", 1)[0].strip("?,.!")
    if head in {"I", "I'm", "I've", "I'd", "I'll"} or (len(head) > 1 and head[1].isupper()):
        return text
    return text[0].lower() + text[1:]


def assistant_question(response: str) -> str | None:
    """The clarifying question the assistant asks the user, if any: a sentence ending in
    "?" that addresses the user and is not an offer to say more."""
    for sent in reversed(sentences(response)):
        if not sent.endswith("?"):
            continue
        low = sent.lower()
        if _YOU.search(low) and not _OFFER.search(low):
            return sent
    return None


def term_coverage(terms: Iterable[str], text: str) -> float:
    """Share of ``terms`` (phrases allowed: all their content words must occur) found in
    ``text``; 0 when there are no terms."""
    have = set(content_terms(text))
    phrases = [content_terms(t) for t in terms]
    phrases = [p for p in phrases if p]
    if not phrases:
        return 0.0
    hit = sum(1 for p in phrases if all(s in have for s in p))
    return hit / len(phrases)


def mentions_statement(utterance: str, statement: str, share: float = 0.7) -> bool:
    """Whether ``utterance`` already states ``statement`` (most of its content words occur),
    so a persona fact is not volunteered twice."""
    terms = content_terms(statement)
    if not terms:
        return False
    have = set(content_terms(utterance))
    return sum(1 for t in terms if t in have) >= share * len(terms)
