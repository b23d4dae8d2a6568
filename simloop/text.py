"""Cheap text helpers shared by the offline parts: tokens, stop words, sentences."""

from __future__ import annotations

import re

__all__ = ["STOPWORDS", "words", "content_words", "stem", "sentences", "word_count"]

_WORD = re.compile(r"[^\W_][\w'’\-]*")  # Unicode letters: "Belém" is one word
# A sentence ends at . ! ? followed by space and a capital, digit or quote; newlines also
# end one (the wiki corpus puts the title on its own line).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'“(\[A-Z0-9])|\n+")

STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be because been before being below
    between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each else
    ever every few for from further get gets getting give go going got had hadn't has hasn't have haven't having he
    her here hers herself him himself his how i i'd i'll i'm i've if in into is isn't it it's its itself just know
    let let's like likes make many may me might more most much must my myself need no nor not now of off on once only
    or other ought our ours ourselves out over own please quite rather really same say says shall she should so some
    such tell than thank thanks that that's the their theirs them themselves then there there's these they they're
    thing things think this those though through to too under until up upon us very want wants was wasn't way we we're
    were weren't what what's when where which while who whom whose why will with won't would wouldn't yes yet you
    you'd you'll you're you've your yours yourself yourselves explain describe mean means okay ok well one two also
    kind sort lot bit actually exactly still even use used using us well something anything everything anyone someone
    come comes came goes went take takes took find found happen happens happened start started work works keep
    look looks see seen show shows try tried told ask asked called call new good best better great usually often
    along around across within without among
    """.split()
)


def words(text: str) -> list[str]:
    """Lower-cased word tokens (apostrophes kept inside words, so "don't" is one)."""
    return [w.lower().replace("’", "'").strip("'-") for w in _WORD.findall(text)]


def stem(word: str) -> str:
    """A crude plural folding, enough to treat "sharks" and "shark" as one term."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def content_words(text: str) -> list[str]:
    """Words minus stop words, adverbs, one-letter tokens and possessive endings, in order."""
    out = []
    for w in words(text):
        w = w[:-2] if w.endswith("'s") else w
        if w.isdigit():
            if len(w) == 4:  # years are informative, counts and list numbers are not
                out.append(w)
        elif len(w) > 1 and w not in STOPWORDS and not (len(w) > 5 and w.endswith("ly")):
            out.append(w)  # -ly adverbs ("currently", "mostly") carry no topic
    return out


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def word_count(text: str) -> int:
    return len(text.split())
