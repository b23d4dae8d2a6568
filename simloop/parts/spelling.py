"""Typos read the way the user meant them, checked against the index's own vocabulary.

A word the index has never seen ("Undreground", "mosqutoes") matches nothing in BM25, and
when it is the word the question is about, retrieval falls back on the rest of the question
("London" for the London Underground).  ``respell`` replaces such a word with the word one
typo away that the user most likely meant:

* only words the index does not hold are touched (document frequency 0), so a word of the
  corpus is never turned into another ("movies" stays "movies" though "moves" is one letter
  off); a real word the corpus lacks ("curious") only into a word of the dialogue;
* a hurried typist's slips are tried first: two neighbouring letters swapped, a letter
  dropped, a letter doubled; then a letter too many and one letter wrong;
* among the candidates, a word of the dialogue itself wins ("Tre, the city where I was
  born" after "I was born in Tyre"), then a stop word (a mistyped "whaat" is "what", not
  "wheat"), then the word the index holds in the most documents.

Capitalised words inside a sentence are respelled too (a typo can hit a name: "Tre",
"Vacso"), but only for a hurried typist's slip, and only to a word of the dialogue or,
for a name of five letters or more, to one at least ``NAME_MIN_DF`` documents hold, so
that a name the index lacks ("Bolacha", "Ren") is not turned into a look-alike ("Gaam"
is "Gama", never "Gram"; "Ren" stays "Ren", not "Rent").
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence

from ..text import STOPWORDS

__all__ = ["respell", "typo_candidates", "DocFreq", "NAME_MIN_DF"]

DocFreq = Callable[[Sequence[str]], Awaitable[dict[str, int]]]
"""Documents holding each word (0: unknown to the index, or a stop word it drops)."""

NAME_MIN_DF = 2
_MIN_LEN = 3  # "teh" is worth fixing; two letters are too little to tell a typo from an abbreviation
_NAME_MIN_LEN = 5  # "Ren" and "Ama" are names the index lacks, not typos of "rent" and "rama"
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_WORD = re.compile(r"[^\W\d_][\w'’-]*")


def typo_candidates(word: str) -> tuple[list[str], list[str]]:
    """(likely, other): words one typo away from ``word`` (lower case).  ``likely``: what a
    hurried typist gets wrong (swapped neighbours, a dropped letter, a doubled one);
    ``other``: a letter too many, one letter wrong."""
    w = word.lower()
    splits = [(w[:i], w[i:]) for i in range(len(w) + 1)]
    swapped = [a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1 and b[0] != b[1]]
    dropped = [a + c + b for a, b in splits for c in _LETTERS]
    undoubled = [a + b[1:] for a, b in splits if b and a[-1:] == b[:1]]
    extra = [a + b[1:] for a, b in splits if b and a[-1:] != b[:1]]
    wrong = [a + c + b[1:] for a, b in splits if b for c in _LETTERS if c != b[0]]
    likely = list(dict.fromkeys(x for x in (*swapped, *undoubled, *dropped) if x != w))
    seen = set(likely)
    return likely, [x for x in dict.fromkeys((*extra, *wrong)) if x != w and x not in seen]


def _choose(cands: Iterable[str], df: dict[str, int], known: set[str], named: bool, slips: bool) -> str | None:
    """The fix among ``cands`` (see the module notes); ``slips``: they are a hurried typist's
    slips, which alone may turn a word into a stop word ("whaat", "tere")."""
    cands = list(cands)
    for c in cands:
        if c in known:
            return c
    for c in cands if slips else ():
        if c in STOPWORDS and len(c) >= _MIN_LEN:
            return c
    held = [(df.get(c, 0), c) for c in cands if df.get(c, 0) >= (NAME_MIN_DF if named else 1)]
    return max(held, key=lambda x: (x[0], -cands.index(x[1])))[1] if held else None


async def respell(text: str, doc_freq: DocFreq, known: Iterable[str] = (), english: Collection[str] = ()) -> str:
    """``text`` with each word the index does not hold replaced by the word one typo away
    the user most likely meant (see the module notes); ``known``: the other words of the
    dialogue (the user's earlier ones, the assistant's, the user's profile), preferred,
    with the other words of ``text``, to any other; ``english``: real words (lower case)
    that are respelt only to a word of the dialogue, never to the index's ("curious" is
    no typo of "curium" because this corpus never says "curious").  Case follows the typed word's first
    letter.  Unchanged when nothing needs fixing.  Feed it what is asked (``request_text``),
    not the user's exclamations: an "Ugh" would become "Hugh"."""
    tokens = [m for m in _WORD.finditer(text) if len(m.group()) >= _MIN_LEN]
    known_words = {w.lower() for w in known} | {m.group().lower() for m in tokens}
    asked = list(dict.fromkeys(m.group().lower() for m in tokens if m.group().lower() not in STOPWORDS))
    if not asked:
        return text
    counts = await doc_freq(asked)
    unknown = [w for w in asked if counts.get(w, 0) == 0]
    if not unknown:
        return text
    options = {w: typo_candidates(w) for w in unknown}
    counts = await doc_freq(list(dict.fromkeys(c for likely, other in options.values() for c in (*likely, *other)
                                               if c not in STOPWORDS)))
    fixes: dict[str, str] = {}
    for m in tokens:
        w = m.group()
        low = w.lower()
        if low not in options or low in fixes:
            continue
        likely, other = options[low]
        named = w[:1].isupper() and m.start() > 0 and not re.search(r"[.!?]\s*$", text[:m.start()])
        if low in english:  # a real word the corpus lacks: only a word of the dialogue can say it was mistyped
            fix = next((c for c in likely if c in known_words), None)
        elif named:  # a name: a typist's slip to a word of the dialogue, or to a long enough word the index holds
            fix = _choose(likely, counts if len(low) >= _NAME_MIN_LEN else {}, known_words, named, True)
        else:
            fix = _choose(likely, counts, known_words, named, True) or _choose(other, counts, known_words, named, False)
        if fix:
            fixes[low] = fix
    if not fixes:
        return text

    def swap(m: re.Match[str]) -> str:
        fix = fixes.get(m.group().lower())
        if fix is None or len(m.group()) < _MIN_LEN:
            return m.group()
        return fix[:1].upper() + fix[1:] if m.group()[:1].isupper() else fix

    return _WORD.sub(swap, text)
