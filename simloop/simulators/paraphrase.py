"""Rewordings of a rubric question, the way a user in a conversation would put it.

Rubric questions are written like encyclopedia prompts ("What is glycogen and where does
the body store it?").  Real iKAT users ask one thing at a time, drop what the conversation
already made clear ("where is it stored?"), use contractions, and often say what they want
instead of asking it ("Tell me about glycogen.").  Everything here is plain string work on
one question (no models, no randomness): the template voice draws among the results with
its seeded RNG.  Each function returns None when its rewording would not be good English,
so a caller can always fall back to the question itself.
"""

from __future__ import annotations

import random
import re

from ..text import stem, words

__all__ = ["clauses", "casual", "subject", "indirect", "elide_topic", "misspell", "sentence", "capital", "reframe",
           "AUXILIARIES", "PREPOSITIONS"]

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")
_WH = "what|where|when|why|how|who|which"
AUXILIARIES = "is|are|was|were|does|do|did|can|could|should|has|have|will|would"
# A clause starts where "and" or a comma is followed by a question word or an auxiliary:
# "What is X and where does ..." / "Where does X come from, is it ...".
_ASKS = re.compile(rf"(?:{_WH}|{AUXILIARIES})\b", re.I)  # how a clause that asks something begins
_CLAUSE_BREAK = re.compile(rf",?\s+and\s+(?={_ASKS.pattern})|,\s+(?={_ASKS.pattern})", re.I)
_CONTRACT = [(re.compile(rf"^({w}) is\b", re.I), r"\1's") for w in ("what", "who", "where", "how")] + [
    (re.compile(rf"\b{a}\b(?=\s+[A-Za-z])", re.I), b)
    for a, b in (("I am", "I'm"), ("I have been", "I've been"), ("do not", "don't"),
                 ("does not", "doesn't"), ("is not", "isn't"), ("it is", "it's"),
                 ("I would", "I'd"), ("we are", "we're"), ("they are", "they're"))]
_FILLERS = re.compile(r"\s*(?:\b(?:exactly|really|actually|also|still|ever|at all|such(?! as))\b"
                      r"|,\s*biologically speaking)", re.I)
# "What is X" / "Who was X": X must be a plain noun phrase, not "London like as a city".
_WH_BE = re.compile(r"^(what|who|where)\s+(is|are|was|were)\s+(?P<np>[^,]+?)$", re.I)
_NOT_NP = {"it", "they", "this", "that", "there", "he", "she", "its", "their"}
_NP_BAD_TAIL = {"like", "of", "in", "for", "to", "from", "with", "and", "or", "about", "at", "on"}
# Words that show the "noun phrase" is really a predicate: "What is London like as a city",
# "Where is Singapore located", "What is New Zealand made up of".
_NP_VERBY = {"like", "made", "up", "called", "used", "known", "located", "different", "related", "famous",
             "important", "dangerous", "safe", "good", "bad", "true", "possible", "better", "worse", "there"}
# "Where does X come from" -> "where X comes from": only verbs whose third person is regular here.
_DO = re.compile(r"^(what|where|when|why|how)\s+(does|do)\s+(?P<np>.+?)\s+(?P<verb>\w+)"
                 r"(?P<tail>\s+(?:from|to|in|on|for|with))?$", re.I)
_DO_VERBS = {"come", "live", "eat", "work", "grow", "mean", "originate", "flow", "happen", "do", "go", "begin"}

# Topic elision: which words may surround a noun phrase that "it" can replace.
_DETS = {"the", "a", "an", "my", "this", "that", "these", "those", "your", "our"}
PREPOSITIONS = {"of", "for", "in", "about", "with", "on", "to", "at", "from", "into", "during", "regarding"}
_AUX_WORDS = set(AUXILIARIES.split("|"))
_LEAD_IT = (PREPOSITIONS - {"to"}) | {"take", "use", "learn", "visit", "play", "buy", "get", "try", "start", "find",
                                     "choose", "discovered", "invented", "founded", "built", "made", "make", "cook",
                                     "treat", "prevent"}
_BOUNDARY = PREPOSITIONS | _AUX_WORDS | {"and", "or", "but", "if", "when", "so", "than", "as", "before", "after",
                                        "while"}
_WH_WORDS = {"what", "who", "which", "where"}
_NAME_LINKS = {"of", "de", "di", "del", "la", "van", "von"}
_IRREGULAR_PLURALS = {"people", "children", "men", "women", "police", "cattle", "data", "teeth", "feet", "mice"}


def sentence(text: str, mark: str = "?") -> str:
    """``text`` with one closing punctuation mark (its own if it has one)."""
    text = text.strip().rstrip(",;:")
    return text if text[-1:] in ".!?" else text + mark


def capital(text: str) -> str:
    """``text`` with its first letter upper-cased."""
    return text[:1].upper() + text[1:]


def clauses(question: str) -> list[str]:
    """The question's parts, each without its final "?": "What is X and where does the
    body store it?" -> ["What is X", "where does the body store it"]."""
    body = question.strip().rstrip("?.! ")
    split = [p for p in (p.strip(" ,") for p in _CLAUSE_BREAK.split(body)) if p]
    if len(split) > 1 and not _ASKS.match(split[0]):
        # A lead phrase that asks nothing is the user's framing ("For my exam, what is ..."):
        # never a part of its own ("For my exam?"), nor words for the search of the next one.
        split = split[1:]
    parts: list[str] = []
    for p in split:
        if parts and len(parts[-1].split()) < 3:  # "Where and when was Go invented": one clause
            parts[-1] = f"{parts[-1]} and {p}"
        else:
            parts.append(p)
    return parts


def casual(text: str) -> str:
    """Spoken forms: "What is" -> "What's", "I am" -> "I'm" (never at the end: "what it
    is"), filler adverbs dropped."""
    out = _FILLERS.sub("", text)
    for pattern, repl in _CONTRACT:
        out = pattern.sub(repl, out, count=1)
    return re.sub(r"\s{2,}", " ", out).strip()


def subject(clause: str) -> str | None:
    """What a "What is X" / "Who was X" clause is about (X), or None."""
    m = _WH_BE.match(clause.strip().rstrip("?"))
    if not m:
        return None
    np = m.group("np").strip()
    toks = np.lower().split()
    if not toks or toks[0] in _NOT_NP or toks[-1] in _NP_BAD_TAIL or len(toks) > 7:
        return None
    if any(t in _NP_VERBY or (len(t) > 4 and t.endswith(("ed", "ly"))) for t in toks):
        return None
    return np


def indirect(clause: str) -> str | None:
    """The clause as an embedded question: "Where is Fiji" -> "where Fiji is", "Where does
    cinnamon come from" -> "where cinnamon comes from"; None when unsure of the grammar."""
    c = clause.strip().rstrip("?")
    m = _WH_BE.match(c)
    if m and subject(c) is not None:
        return f"{m.group(1).lower()} {m.group('np')} {m.group(2).lower()}"
    m = _DO.match(c)
    # A short subject only: in "How does a pipe organ produce sound" the last word is no verb.
    np = [t for t in m.group("np").lower().split() if t not in _DETS] if m else []
    if m and m.group("verb").lower() in _DO_VERBS and 0 < len(np) <= 3 and np[0] not in _NOT_NP:
        verb = m.group("verb")
        if m.group(2).lower() == "does":
            verb = {"do": "does", "go": "goes"}.get(verb.lower(), verb + "s")
        return f"{m.group(1).lower()} {m.group('np')} {verb}{m.group('tail') or ''}"
    return None


def elide_topic(question: str, known_stems: set[str]) -> str | None:
    """Drop a noun phrase the conversation already made clear: "What are the side effects
    of ibuprofen?" -> "What are the side effects?"; elsewhere it becomes "it".  None when
    nothing (sensible) can be dropped."""
    toks = list(_TOKEN.finditer(question))
    span = _known_span(toks, known_stems)
    if span is None:
        return None
    i, j = span
    opens_phrase = toks[i].group().lower() in _DETS and j < len(toks) and toks[j].group().lower() not in _BOUNDARY
    if _cuts_a_name(toks, i, j) or _verb_like(toks[i].group()) or opens_phrase:
        # "a rugby union side": the known words only qualify the noun after them.
        return None  # "the University" of "the University of Toronto"; "finding a hotel" is no noun phrase
    start, end = toks[i].start(), toks[j - 1].end()
    rest = question[end:]
    before = toks[i - 1].group().lower() if i > 0 else ""
    after = toks[j].group().lower() if j < len(toks) else ""
    if (not rest.strip(" ?.!") and before in PREPOSITIONS - {"to"}) or (before == "for" and after == "to"):
        # "... of ibuprofen?" -> "...?";  "take for aspirin to work" -> "take to work"
        new = question[: toks[i - 1].start()].rstrip() + (" " + rest.strip() if rest.strip(" ?.!") else rest.strip())
    elif i >= 2 and before in {"is", "are", "was"} and toks[i - 2].group().lower() in _WH_WORDS:
        return None  # "What is a stroke?" asks what the thing is: "What is it?" would lose it
    elif _pronoun_fits(before, after) and not _plural(toks[j - 1].group()):
        # "it" only where English allows a pronoun: "Is ibuprofen safe" -> "Is it safe",
        # never "How much ibuprofen" -> "How much it" or "on a rugby team" -> "on it team".
        new = question[:start] + ("It" if start == 0 else "it") + question[end:]
    else:
        return None
    return new if len(words(new)) >= 3 and new != question else None


def _known_span(toks: list[re.Match], known: set[str]) -> tuple[int, int] | None:
    """The longest run of determiners and known words that holds at least one known word."""
    span: tuple[int, int] | None = None
    i = 0
    while i < len(toks):
        j, has = i, False
        while j < len(toks) and (toks[j].group().lower() in _DETS or stem(toks[j].group()) in known):
            has = has or stem(toks[j].group()) in known
            j += 1
        while j > i and toks[j - 1].group().lower() in _DETS:  # never end on "the"
            j -= 1
        if has and (span is None or j - i > span[1] - span[0]):
            span = (i, j)
        i = max(j, i + 1)
    return span


def _cuts_a_name(toks: list[re.Match], i: int, j: int) -> bool:
    """The span ``toks[i:j]`` is part of a longer name: a capitalised word (not opening the
    sentence) right before it, or right after it, possibly after "of"/"de"."""
    def capital(k: int) -> bool:
        return 0 <= k < len(toks) and toks[k].group()[:1].isupper()

    if i > 0 and capital(i - 1) and capital(i):
        return True
    after = toks[j].group().lower() if j < len(toks) else ""
    return capital(j) or (after in _NAME_LINKS and capital(j + 1))


def _verb_like(word: str) -> bool:
    """A lower-case -ing or -ed form starts a verb phrase, not a noun phrase ("finding a hotel")."""
    return word[:1].islower() and len(word) > 4 and word.lower().endswith(("ing", "ed"))


def _pronoun_fits(before: str, after: str) -> bool:
    """Whether the noun phrase between ``before`` and ``after`` is a whole phrase that
    "it" can stand for: the subject after an auxiliary ("Does X work"), or an object
    that ends where a clause or preposition starts ("about X and ...")."""
    if before in _AUX_WORDS:
        return True
    if before == "" or before in _LEAD_IT:
        return after == "" or after in _BOUNDARY
    return False


def _plural(word: str) -> bool:
    w = word.lower()
    return w in _IRREGULAR_PLURALS or (w.endswith("s") and not w.endswith(("ss", "us", "is")))


def misspell(word: str, rng: random.Random) -> str:
    """One deterministic typo: swapped, dropped or doubled letter."""
    if len(word) < 4 or not word.isalpha():
        return word
    k = rng.randrange(1, len(word) - 1)
    op = rng.randrange(3)
    if op == 0:
        return word[:k] + word[k + 1] + word[k] + word[k + 2 :]
    if op == 1:
        return word[:k] + word[k + 1 :]
    return word[:k] + word[k] + word[k:]


# Request openers and other ways a user puts the same request ({x}: the rest of it).
_REFRAMES: list[tuple[re.Pattern, tuple[str, ...]]] = [
    (re.compile(r"^(?:can|could) you (?:please )?tell me (?:more )?about (?P<x>.+)$", re.I),
     ("Tell me more about {x}.", "I'd like to know more about {x}.", "What can you tell me about {x}?",
      "More about {x}, please.")),
    (re.compile(r"^(?:can|could) you (?:please )?tell me (?P<x>.+)$", re.I),
     ("Tell me {x}.", "I'd like to know {x}.", "Do you know {x}?")),
    (re.compile(r"^(?:can|could) you (?:please )?(?:give|provide) me (?P<x>.+)$", re.I),
     ("Give me {x}, please.", "I'd like {x}.", "Do you have {x}?")),
    (re.compile(r"^(?:can|could) you (?:please )?(?:suggest|recommend) (?:me )?(?P<x>.+)$", re.I),
     ("Any suggestions for {x}?", "What would you suggest for {x}?", "I'd like some ideas for {x}.")),
    (re.compile(r"^(?:can|could) you (?:please )?help me (?:with )?(?P<x>.+)$", re.I),
     ("I need help with {x}.", "Help me with {x}, please.", "Could you help with {x}?")),
    (re.compile(r"^(?:are|is) there any (?P<x>.+)$", re.I), ("Any {x}?", "Do you know any {x}?")),
    (re.compile(r"^what are some (?P<x>.+)$", re.I), ("Any {x}?", "Can you name a few {x}?")),
    (re.compile(r"^(?:can|could) you (?:please )?(?P<verb>compare|explain|describe|list) (?P<x>.+)$", re.I),
     ("Please {verb} {x}.", "I'd like you to {verb} {x}.", "How would you {verb} {x}?")),
]


def reframe(question: str) -> list[str]:
    """Other ways to put a request: "Can you tell me about X?" -> "Tell me more about X.",
    "Are there any X?" -> "Any X?" ([] when no opener is recognised)."""
    body = question.strip().rstrip("?.! ")
    for pattern, forms in _REFRAMES:
        m = pattern.match(body)
        if m:
            x = m.group("x").strip()
            verb = (m.groupdict().get("verb") or "").lower()
            if len(x.split()) < 1 or x.lower() in ("it", "me"):
                return []
            bare = re.sub(r"^(?:any|some)\s+", "", x, flags=re.I)  # "ideas for any X" -> "ideas for X"
            return [f.format(x=bare if " for {x}" in f else x, verb=verb) for f in forms]
    return []

