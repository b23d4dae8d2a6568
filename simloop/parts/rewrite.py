"""Heuristic query rewriting: no LLM, deterministic.

Conversational questions lean on what came before ("what about its cost?").  BM25 only
sees the words it is given, so the rewrite appends salient content words from the last
one or two user turns (when the utterance looks dependent on them) and from facts the
caller passes, without stop words or duplicates.  The utterance stays first and verbatim,
less its sentences of pure feedback or thanks ("Thanks for that suggestion!"), so the
rewrite is easy to read in a transcript.  Words from earlier turns leave their feedback,
small talk and request frames behind ("sure", "vague", "It matters to me.", "The part
about") and take the spelling of the assistant's earlier answers, which come from the
corpus: a misspelt "fihsing" becomes "fishing", a mistyped stop word ("waht") is dropped.
``turns_down`` reads whether the user opens by turning the last answer down; the answer
then repeats nothing said before (``generate_focus.py``).

How much it helps BM25 on real iKAT turns, and how its rules were chosen (2023 train
only), is in ``research/rewrite/``.

The agents pass no PTKB statements here: on the 2023 train topics (BM25 over the
topics' provenance passages, each turn's own as relevant) the rewrite without PTKB words
scored MRR 0.345 / nDCG@10 0.351, with them 0.315 / 0.323.  The memory path passes the
facts the user stated earlier and the strategy recalled.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..text import STOPWORDS, content_words, is_asking, stem, words

__all__ = ["heuristic_rewrite", "is_dependent", "leans_back", "request_text", "question_part", "turns_down"]

# Words that point back at an earlier turn.
_ANAPHORA = frozenset(
    "it its it's they them their theirs this that these those he him his she her former latter".split())
_FOLLOW_UP = re.compile(r"^\s*(and|but|so|also|what about|how about|and what|what else|how come|really)\b", re.I)
_SHORT = 2  # an utterance with this few content words rarely stands on its own
# Words of feedback and small talk: they say how the conversation goes, not what it is about.
_FEEDBACK = frozenset(
    """sure yeah fine great thanks thank cool nice wow hmm hello hi hey alright interesting helpful useful sorry
    vague general wrong useless frustrating answer answers answering question questions asking asked ask
    again skip forget never mind meant clear confusing lost missed missing point points detail details detailed
    suggestion suggestions information sounds sound delicious wonderful excellent valuable intriguing appreciate
    makes sense perfect awesome brilliant lovely ugh nope seriously whatever getting ah oh""".split()
)
# Words of chit-chat around a request ("I'm taking notes.", "It came up at dinner."): a
# sentence made of nothing else (and of feedback words) is dropped from the request, but
# the words themselves are kept elsewhere ("dinner" may be the subject of a question).
_CHIT_CHAT = frozenset(
    """curious matters matter helps help mixed reading basic friend friends rush wondered wonder ages dinner
    everyone taking notes want right keep things came really""".split()
)


def _pronoun_first(utterance: str) -> bool:
    """A pronoun before any content word has nothing in the utterance to point at
    ("is it safe?", "what about its cost?"); after one, it usually points inside
    ("what is glycogen and where is it stored?")."""
    content = set(content_words(utterance))
    for w in words(utterance):
        w = w[:-2] if w.endswith("'s") else w
        if w in _ANAPHORA:
            return True
        if w in content:
            return False
    return False


def is_dependent(utterance: str) -> bool:
    """Does the utterance need earlier turns to make sense (pronoun, ellipsis, follow-up)?"""
    return len(content_words(utterance)) <= _SHORT or leans_back(utterance)


def leans_back(utterance: str) -> bool:
    """The utterance points back in so many words: a follow-up opener ("and", "what
    about") or a pronoun before anything it could stand for.  Unlike ``is_dependent``, a
    short question that names its subject ("Tell me about the Moriori.") does not."""
    return bool(_FOLLOW_UP.search(utterance)) or _pronoun_first(utterance)


def _one_edit(a: str, b: str) -> bool:
    """``a`` and ``b`` differ by one typo of a hurried typist: two neighbouring letters
    swapped ("fihsing"), or one letter doubled or undoubled ("cholesterool").  A letter
    added or dropped elsewhere is not taken for a typo: "movies" and "moves", "ranking" and
    "rankings" are different words."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
    long, short = (a, b) if len(a) > len(b) else (b, a)
    return any(long[:i] + long[i + 1:] == short and long[i] in long[max(0, i - 1):i] + long[i + 1:i + 2]
               for i in range(len(long)))


def _respelled(word: str, vocabulary: set[str]) -> str | None:
    """``word`` as the corpus spells it: itself when the answers used it (or when there is
    nothing to check against), the answers' word one typo away ("fihsing" -> "fishing"),
    None when it is a mistyped stop word ("waht"); else itself (a word the answers did not
    need is still the user's)."""
    if not vocabulary or word in vocabulary or len(word) < 4:
        return word
    if any(_one_edit(word, s) for s in STOPWORDS if len(s) >= 3):
        return None
    if len(word) >= 5:
        near = sorted(v for v in vocabulary if _one_edit(word, v))
        if near:
            return near[0]
    return word


def _history_terms(history: Sequence[tuple[str, str]], turns: int = 2) -> list[str]:
    """Content words of the last user utterances, most recent first.  An older turn is
    used only when the newer one was itself a follow-up (a chain of "and its ...?").

    Words of feedback and small talk ("sure", "vague") say nothing about the topic and
    stay behind; a misspelt word is written as the assistant's earlier answers spell it
    (those come from the corpus, whose vocabulary is what BM25 can match), or dropped when
    it is a mistyped stop word (``_respelled``)."""
    vocabulary = {w for _, assistant in history for w in content_words(assistant)}
    terms: list[str] = []
    for user, _assistant in reversed(list(history)[-turns:]):
        for w in content_words(request_text(user)):
            spelled = None if w in _FEEDBACK else _respelled(w, vocabulary)
            if spelled:
                terms.append(spelled)
        if not is_dependent(user):
            break
    return terms


def _salience(statement: str) -> dict[str, int]:
    """Long words and names mid-sentence are the specific ones ("anaemia", "Lisbon"):
    a cheap stand-in for IDF that needs no corpus statistics."""
    named = {w.lower() for w in re.findall(r"(?<=[a-z,;] )[A-Z]\w+", statement)}
    return {w: len(w) + (3 if w in named else 0) for w in content_words(statement)}


def _fact_terms(statements: Sequence[str], per_statement: int = 1) -> list[str]:
    """The most salient content words of each statement, in statement order."""
    terms: list[str] = []
    for statement in statements:
        score = _salience(statement)
        cands = list(score)
        best = sorted(range(len(cands)), key=lambda i: (-score[cands[i]], i))[:per_statement]
        terms.extend(cands[i] for i in sorted(best))
    return terms


def _new_terms(candidates: list[str], seen: set[str], limit: int) -> list[str]:
    out: list[str] = []
    for term in candidates:
        key = stem(term)
        if key not in seen and len(out) < limit:
            seen.add(key)
            out.append(term)
    return out


# A complaint about the answer just given ("That's not it again.", "Seriously, that's useless!",
# "Close, but no."), not a "No rush." or "Doesn't matter." of small talk; its words beside
# the cue are feedback and chit-chat, or these (``_COMPLAINT_ONLY``).
_COMPLAINT = re.compile(
    r"^\W*(?:no|nope|hmm,? no|come on|ugh)\b(?!\W+(?:rush|matter|problem|worries))"
    r"|n't\b(?!\s+(?:know|matter))|\bno\W*$"
    r"|\b(?:not(?! sure)|nothing|wrong|useless|unhelpful|vague|too general|miss(?:es|ed|ing)?"
    r"|off(?: the mark| topic)?|frustrating|beside the point|same thing|something else|different topic)\b",
    re.IGNORECASE,
)
_COMPLAINT_ONLY = _FEEDBACK | _CHIT_CHAT | frozenset(
    """thing closer close exactly hoping mark topic quite really else different answer answers say see help think
    still nothing need needed already said point get either once told misses beside""".split()
)
_SMALL_TALK = _FEEDBACK | _CHIT_CHAT


def _sentences(utterance: str, clauses: bool = False) -> list[str]:
    """``utterance`` split at every full stop (a user typing in lower case, "i was born
    there. warsaw?", ends sentences too), and with ``clauses`` at every semicolon."""
    return [s for s in re.split(r"(?<=[.!?;])\s+" if clauses else r"(?<=[.!?])\s+", utterance.strip()) if s]


def turns_down(utterance: str) -> bool:
    """Does the utterance open by turning the last answer down?  Its first sentence is a
    complaint and asks nothing itself ("That's not it again. Who founded Carthage?")."""
    first = next(iter(_sentences(utterance)), "")
    return "?" not in first and bool(_COMPLAINT.search(first)) and set(content_words(first)) <= _COMPLAINT_ONLY


def request_text(utterance: str) -> str:
    """``utterance`` without its sentences of pure feedback, thanks or chit-chat ("Thanks for
    that suggestion!", "That's still too vague.", "I'm taking notes."), and without the
    words that only frame a request ("Could you focus on", "The part about ..., please",
    "Another thing:", "My point is:"; the request left ends as a question: "Veena?"): they
    add nothing a search could use, and BM25 would match them ("focus" finds optics).  An
    utterance that is nothing but feedback or frame is kept whole."""
    parts = _sentences(utterance)  # "ugh! my point is: ..." too
    kept = [s for s in parts if "?" in s or not set(content_words(s)) <= _SMALL_TALK]
    bare = [u for u in (_unframed(s) for s in kept) if words(u)]
    return " ".join(bare) if bare else (" ".join(kept) if kept else utterance)


# Words that only frame a request: a lead-in ("Another thing:", "So,", "My point is:",
# "Could you focus on"), and a polite tail (", please", "then").
_LEAD_FRAME = re.compile(
    r"^\W*(?:(?:oh|ok|okay|so|and|but|well|now|next|then|also|again|really|basically|put simply|simply put"
    r"|in short|once more|one more thing|another thing|one more|my point is|my question (?:is|was)"
    r"|i(?:'m)? ask(?:ed|ing)|just tell me|let me put it again|what i want to know is)\b[\s,:;]*)+",
    re.IGNORECASE,
)
_ASK_FRAME = re.compile(
    r"^(?:(?:could|can|would) you |please )?(?:focus on|(?:i'?m )?interested in|i care about"
    r"|let'?s (?:stick to|talk about)|the part about|say something about|(?:i want |any )?details on|cover"
    r"|does (?:it|that) (?:mention|cover)|shouldn'?t it mention|is there anything (?:on|about)|anything (?:on|about)"
    r"|what do you have on|i need something (?:on|about)|i'?m after|i was asking about|i meant?|specifically|mainly"
    r"|only|just(?! so you know)|can we talk about|tell me (?:more )?about)\s+",
    re.IGNORECASE,
)
_TAIL_FRAME = re.compile(r"(?:,?\s+(?:please|then))+(?=\W*$)", re.IGNORECASE)


def _unframed(sentence: str) -> str:
    """``sentence`` without the words that frame the request (see ``request_text``); a
    request stripped of its frame ends as the question it is ("Tell me about Chopin's
    nocturnes." -> "Chopin's nocturnes?"), so that ``question_part`` still finds it."""
    bare = _LEAD_FRAME.sub("", sentence, count=1)
    framed = _ASK_FRAME.search(bare)
    bare = _ASK_FRAME.sub("", bare, count=1)
    bare = _TAIL_FRAME.sub("", bare)
    if framed and words(bare):
        bare = re.sub(r"[.!?]*$", "?", bare.rstrip(), count=1)
    return bare[:1].upper() + bare[1:] if bare and sentence[:1].isupper() else bare


# How a user asks without a question mark ("Tell me about X.", "I'd like to know where X is.").
_USER_REQUEST = re.compile(
    r"^\W*(?:(?:please |so |ok,? |and )?(?:tell|give|show|explain|describe|list)\b"
    r"|i(?:'d| would) like (?:to know|to learn)"
    r"|i (?:want|need|wish) to (?:know|learn|find|understand)|i wonder"
    r"|i'?m (?:curious|asking|after|looking for|reading up)"
    r"|i (?:was asking|asked|mean|meant)|i need (?:something|info|details|help)|what i want|all i want|my question"
    r"|some background|(?:any )?(?:info|details|background) on|more about|what about|how about"
    r"|just\b(?! so you know)|only|mainly"
    r"|specifically|focus on|let'?s (?:stick to|talk about)|cover|say something about|i care about"
    r"|i'?m interested in)",
    re.IGNORECASE,
)


_POINTER = frozenset("it its they them their this that these those there he him his she her".split())


def question_part(utterance: str) -> str:
    """What ``utterance`` asks: its asking sentences (a question, or a request such as
    "Tell me about X."; with the sentence or clause before when the first one points back at it),
    else the sentence with the most content words.  The rest is context ("I love salty
    food.") or small talk ("It came up at dinner."), not the question."""
    # Also at a semicolon, so that "Chopin grew up in Warsaw; what kind of city is it?" points
    # back at its own first clause, not at the sentence before.
    parts = _sentences(utterance, clauses=True)
    at = [i for i, s in enumerate(parts) if is_asking(s) or _USER_REQUEST.match(s)]
    if at:
        # "... what the board game Go is. How do you win it?": "it" needs the sentence before.
        first = at[0] - 1 if at[0] > 0 and _POINTER & set(words(parts[at[0]])) else at[0]
        return " ".join(parts[first:at[0]] + [parts[i] for i in at])
    # Ties go to the later sentence: people give the context first and the request last.
    return max(reversed(parts), key=lambda s: len([w for w in content_words(s) if w not in _FEEDBACK]),
               default=utterance)


def heuristic_rewrite(
    utterance: str,
    history: Sequence[tuple[str, str]],
    facts: Sequence[str] = (),
    max_history_terms: int = 6,
    max_fact_terms: int = 3,
) -> str:
    """``utterance`` plus context terms: its own misspelt words and the words of the last
    1-2 user turns when the utterance depends on them, spelt as the corpus spells them
    (``_history_terms``), and the most salient word of each of ``facts``."""
    utterance = request_text(" ".join(utterance.split()))
    seen = {stem(w) for w in content_words(utterance)}
    added: list[str] = []
    if history:  # the user's own misspelt words, as the earlier answers spell them ("blatic" -> "baltic")
        vocabulary = {w for _, assistant in history for w in content_words(assistant)}
        added += _new_terms([v for w in content_words(utterance) if (v := _respelled(w, vocabulary)) and v != w],
                            seen, max_history_terms)
    if history and is_dependent(utterance):
        # A bare "why?" needs the whole previous question; a longer one only its topic.
        limit = max_history_terms if len(seen) <= _SHORT else max(1, max_history_terms // 2)
        added += _new_terms(_history_terms(history), seen, limit)
    added += _new_terms(_fact_terms(facts), seen, max_fact_terms)
    asked = question_part(utterance)
    if asked != utterance:
        # What is asked counts twice against what the user only says around it ("I love
        # history and taught my pupils about the Asante kings. Is the British Museum worth
        # a visit?"): 2023 train MRR 0.457 -> 0.472, R@10 0.512 -> 0.516.
        added += content_words(asked)
    return " ".join([utterance, *added]) if added else utterance
