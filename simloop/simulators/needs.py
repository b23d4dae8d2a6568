"""A rubric question taken apart into what a user asks one turn at a time.

Questions converted from iKAT topics (``personas from-ikat``) are resolved utterances: the
user's turn with everything the conversation had made clear written back in, often in
several sentences ("I know the tuition fee of UVA is around 2K Euros per semester. Can you
tell me the tuition fee for the master's program of computer science at Delft and Eindhoven
universities?").  Real users type about twelve words: one question at a time, a fact about
themselves now and then, and what the conversation already named left out ("Oh, do I need
a visa?").  ``split_need`` separates what a question asks from what it states, and
``condense`` shortens an asking sentence the way the conversation allows (no aside, no
list of names the assistant gave, no known noun phrase).  Hand-written demo questions are
one sentence: they come back whole, as one ask.

Plain string work, no models, no randomness (the template voice draws among the results);
the rules were written while reading the 2023 train topics only.
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from ..text import content_terms, sentences, words
from .claims import entities
from .paraphrase import AUXILIARIES, capital, elide_topic, sentence

__all__ = ["Ask", "Need", "split_need", "condense", "trim", "brief", "unframe", "noun_phrases", "leans_back", "resolve"]

# Words that open a sentence without adding to it: greetings, hesitation, yes/no, "by the way".
_FILLER = re.compile(
    r"^(?:(?:hey|hello|hi|hmm+|well|oh|ok|okay|yes|yeah|no|sure|actually|anyways?|by the way|one last thing|"
    r"now|alright|indeed|also)\b[,!.:]?\s+)+",
    re.IGNORECASE,
)
# A sentence asks when it ends with "?" or makes a request in another form.
_ASKING = re.compile(
    r"\?\s*[\"”']?\s*$|^(?:please\s+)?(?:tell|give|show|list|suggest|recommend|compare|explain|describe|help|find|name)\b"
    r"|\b(?:can|could|would|will) you\b|\bi(?:'d| would) like to (?:know|learn|find|see)\b"
    r"|\bi (?:want|need) to (?:know|learn|find)\b|\bi(?:'m| am) (?:looking for|curious|wondering)\b"
    r"|(?:^|[,;:]\s*)(?:what|which|who|where|when|why|how|is there|are there|any)\b",
    re.IGNORECASE,
)
# Where a long sentence turns from a statement into its question: "I have a budget of
# 3,000 dollars, what is ..." / "I have a 48-hour layover in Doha; what can I do there?"
_TURN = re.compile(
    r"(?:,|;|:)\s+(?=(?:what|which|who|where|when|why|how|can you|could you|would you|do you|is there|are there|"
    r"is|are|does|do|did|should|could|can|any)\b)",
    re.IGNORECASE,
)
# "If I visit one or two malls, which should I visit?" is one question, not a statement and a question.
_SUBORDINATE = re.compile(r"^\s*(?:if|when|since|because|although|though|while|as|once|unless|whether)\b", re.I)
# A short lead phrase led by a preposition frames the question ("For my genetics exam, what
# is DNA?"); said alone it would be a fragment ("For my genetics exam."), not a statement.
_FRAME = re.compile(r"^\s*(?:for|in|on|at|with|during|after|before|about|from|to)\b(?:\W+\w[\w'’-]*){0,4}\W*$", re.I)
# A clause that opens like a yes/no question asks itself ("Could we see the Rocky Mountains
# from Vancouver, how far do they stretch?"): never the statement of the question after it.
_YES_NO = re.compile(rf"^\s*(?:{AUXILIARIES}|shall|may|might)\s+"
                     r"(?:i|we|you|he|she|it|they|there|the|a|an|my|our|this|that|these|those)\b", re.I)
_SPLIT_WORDS = 12  # a shorter sentence is said in one go, statement and question together
_ASIDE = re.compile(r"\s*\([^()]*\)")
# Words that may sit inside a name ("University of Amsterdam", "Piazza di Spagna").
_NAME_GLUE = {"of", "the", "de", "di", "del", "della", "la", "le", "du", "van", "von", "al", "el", "&", "-"}
_LIST_END = {"and", "or"}
_BACK = {"it", "its", "they", "them", "their", "that", "this", "those", "these", "there"}


@dataclass(frozen=True)
class Ask:
    """One asking sentence and the statement it leans on, if any ("I have a 48-hour layover
    in Doha." for "What can I do there?")."""

    text: str
    setup: str = ""


@dataclass(frozen=True)
class Need:
    asks: tuple[Ask, ...]  # in the question's order; never empty
    context: tuple[str, ...] = ()  # the other statements (about the user or the situation)


def _strip_filler(text: str) -> str:
    return capital(_FILLER.sub("", text.strip()).strip())


def _pieces(question: str) -> list[str]:
    """The question's sentences without filler openers; a trailing scrap such as "Army."
    (a sentence split at an abbreviation) rejoins the sentence before it."""
    out: list[str] = []
    for sent in sentences(question):
        if out and len(words(sent)) <= 1 and not _ASKING.search(sent):
            out[-1] = f"{out[-1]} {sent}"
            continue
        sent = _strip_filler(sent)
        if words(sent):
            out.append(sent)
    return out


def _is_list(text: str) -> bool:
    """A sentence that is an enumeration ("1) the University of ..., 2) ..."): nothing to say."""
    return text.count(",") >= 2 and bool(re.match(r"^\s*(?:1\)|1\.|-)", text))


def split_need(question: str) -> Need:
    """The asking sentences of ``question`` (each with the statement it follows) and its
    other statements.  A question with nothing that asks is one ask, whole."""
    asks: list[Ask] = []
    context: list[str] = []
    pending: list[str] = []  # statements since the last ask
    for sent in _pieces(question):
        if not _ASKING.search(sent):
            if not _is_list(sent):
                pending.append(sentence(sent, "."))
            continue
        setup = ""
        turn = _TURN.search(sent)
        head = sent[: turn.start()] if turn else ""
        # A semicolon or colon always ends the statement ("Our choir sings the Passion; who was Bach?").
        long_enough = len(sent.split()) > _SPLIT_WORDS or sent[turn.start():turn.start() + 1] in ";:" if turn else False
        if turn and long_enough and not _ASKING.search(head) and not _SUBORDINATE.match(head) \
                and not _FRAME.match(head) and not _YES_NO.match(head):
            setup, sent = sentence(sent[: turn.start()], "."), capital(sent[turn.end():])
        setup = setup or (pending[-1] if pending else "")
        context += [p for p in pending if p != setup]
        pending = []
        asks.append(Ask(sentence(sent, "?"), setup))
    context += pending
    if not asks:
        return Need((Ask(sentence(question.strip(), "?")),))
    return Need(tuple(asks), tuple(context))


def _name_token(tok: str) -> bool:
    core = tok.strip("\"“”'(),.?!")
    return bool(core) and (core[0].isupper() or core[0].isdigit() or core.lower() in _NAME_GLUE)


def _name_run(toks: list[str], k: int) -> int:
    """The index after the run of name tokens starting at ``k`` (``k`` itself when none)."""
    while k < len(toks) and _name_token(toks[k]) and toks[k].lower() not in _LIST_END:
        k += 1
        if toks[k - 1].endswith((",", "?", ".", "!")):
            break
    return k


def _collapse_names(text: str) -> str:
    """A list of three or more names becomes "these" ("among the Delft University of
    Technology, ..., and the University of Twente" -> "among these"): names the assistant
    gave, which a user refers to rather than types out again.  Only "A, B, and C" or
    "A, B and C" of capitalised names; "Rome, Italy, in December" is no list."""
    toks = text.split()
    commas = [i for i, t in enumerate(toks) if t.endswith(",")]
    if len(commas) < 2:
        return text
    start = commas[0]  # the first item: the name tokens that end at the first comma
    while start > 0 and _name_token(toks[start - 1]) and not toks[start - 1].endswith(",") \
            and toks[start - 1].lower() != "the":
        start -= 1
    while start < commas[0] and toks[start].lower() in _NAME_GLUE:
        start += 1
    if not toks[start].strip("\"“(")[:1].isupper():
        return text
    k = commas[0] + 1  # middle items: each a name run ending in a comma
    while k <= commas[-1]:
        nxt = _name_run(toks, k + (toks[k].lower() == "the"))
        if nxt == k or not toks[nxt - 1].endswith(","):
            return text
        k = nxt
    last = _name_run(toks, k)  # "B and C" (no Oxford comma) or "and C"
    if last < len(toks) and toks[last].lower() in _LIST_END:
        k = last
    if k >= len(toks) or toks[k].lower() not in _LIST_END:
        return text
    k += 1
    k += k < len(toks) and toks[k].lower() == "the"
    end = _name_run(toks, k)
    if end == k:
        return text
    mark = toks[end - 1].rstrip("\"”'")
    tail = mark[len(mark.rstrip("?.!")):]
    lead = toks[:start]
    if lead and lead[-1].lower() == "the":
        lead = lead[:-1]
    out = " ".join([*lead, "these" + tail, *toks[end:]])
    return out if len(words(out)) >= 3 else text


def condense(ask: str, known: set[str]) -> str:
    """``ask`` as said in a conversation that has named ``known`` (stems): without asides in
    brackets, with a list of names as "these", and known noun phrases dropped or made "it"
    (``elide_topic``, at most twice)."""
    text = _ASIDE.sub("", ask).strip()
    text = _collapse_names(text)
    for _ in range(2):
        shorter = elide_topic(text, known) if known else None
        if not shorter or shorter == text:
            break
        text = shorter
    return text


# Stop words that open a noun phrase as adjectives ("great whites", "first date").
_ADJECTIVES = {"great", "big", "small", "new", "old", "first", "last", "good", "best", "long", "high", "low"}
# Verbs of telling that run into a noun phrase ("the doctor said gout").
_SAID = {"said", "says", "told", "tells", "asked", "asks"}
# Words that open a verb's object: the word before one ends a noun phrase ("composers play the veena").
_OBJECT_LEAD = {"me", "us", "him", "her", "them", "the", "a", "an", "my", "your", "our"}
_ABBREVIATION = re.compile(r"\b(St|Dr|Mr|Mrs|Ms|Mt|Ft)\.(?=\s+[A-Z])")
_NP_LEAD = {"the", "a", "an", "any", "some", "my", "your", "our", "their", "its", "this", "that", "these",
            "those", "other", "more", "about", "of", "for", "on", "in", "at", "with", "from", "into", "and", "or",
            "between", "among", "like", "best", "good", "new", "specific", "what", "which", "have", "has", "had",
            "got", "says", "said", "called", "named", "mentioned", "mentioning", "loves", "love"}


def noun_phrases(text: str, skip: AbstractSet[str] = frozenset()) -> list[str]:
    """Noun phrases of ``text`` a user can narrow a question to, in its own words ("the
    tuition fee", "Valentine's Day"): runs of content words after a determiner or a
    preposition, and runs of capitalised words; longest first, without runs whose stems
    are all in ``skip``."""
    text = _ABBREVIATION.sub(r"\1", text)  # "St. Valentine" is one name
    toks = re.findall(r"[\w'’-]+|[^\w\s]", text)
    found: list[str] = []
    run: list[str] = []
    for k, tok in enumerate(toks + ["."]):
        inside_name = tok.lower() in _NAME_GLUE and run and run[-1][:1].isupper() and toks[k + 1:k + 2] \
            and toks[k + 1][:1].isupper()  # "University of Toronto" is one name
        adjective = tok.lower() in _ADJECTIVES and toks[k + 1:k + 2] and content_terms(toks[k + 1])
        verb = tok[:1].islower() and (tok in _SAID or (len(tok) > 4 and tok.endswith("ed")))  # "toe swelled up"
        if (content_terms(tok) and tok.lower() not in _BACK and not verb) or inside_name or adjective:
            run.append(tok)
            continue
        if run:
            at = k - len(run)
            if tok.lower() in _OBJECT_LEAD and run[-1][:1].islower():
                run = run[:-1]  # "the rink makes me wheeze", "causes an attack": a verb before its object
        if run:
            after_lead = at > 0 and toks[at - 1].lower() in _NP_LEAD
            names = [t for t in run if t[:1].isupper()] if at > 0 or len(run) > 1 else []
            if after_lead:
                # "Souk Waqif sounds wonderful": a name and then its verb; the name is the phrase.
                lead_caps = next((i for i, t in enumerate(run) if not t[:1].isupper() and t.lower() not in _NAME_GLUE),
                                 len(run))
                found.append(" ".join(run[:lead_caps] if 0 < lead_caps < len(run) else run[-4:]))
            elif names and run[-1] == names[-1]:  # the capitalised tail of the run
                tail = run[len(run) - next(i for i, t in enumerate(reversed(run)) if not t[:1].isupper()):] \
                    if any(not t[:1].isupper() for t in run) else run
                found.append(" ".join(tail[-4:]))
        run = []
    # A lone lower-case -ing word is a verb ("finding"), not something to ask about.
    found = [p for p in found if set(content_terms(p)) - skip and len(p) > 2
             and not (" " not in p and p[:1].islower() and p.endswith("ing"))]
    return sorted(dict.fromkeys(found), key=lambda p: -len(p.split()))


def leans_back(text: str) -> bool:
    """The sentence points back before it names anything ("What can I do there?", "Is it
    safe?"); the "there" of "are there any ..." points nowhere."""
    toks = words(text)
    for i, w in enumerate(toks):
        near = set(toks[max(0, i - 1):i]) | set(toks[i + 1:i + 2])
        if w in _BACK and not (w == "there" and near & {"is", "are", "was", "were", "be"}):
            return True
        if content_terms(w):
            return False
    return False


_TRIM_AT = {"in", "at", "for", "of", "on", "with", "from", "during", "near", "along", "around", "within", "between",
            "among", "if", "while", "when", "because", "since", "as"}


def trim(text: str, max_words: int, min_words: int = 6) -> str:
    """``text`` without trailing detail until it has at most ``max_words`` words: the last
    phrase led by a preposition or a conjunction ("... at Delft and Eindhoven universities")
    or set off by a comma goes first, as long as ``min_words`` remain.  A user leaves such
    detail to the conversation; the question itself stays."""
    toks = text.split()
    mark = toks[-1][len(toks[-1].rstrip("?.!")):] if toks else ""
    while len(toks) > max_words:
        # The last phrase led by a preposition or conjunction, or the last comma's aside.
        cut = next((k for k in range(len(toks) - 1, min_words - 1, -1)
                    if toks[k].lower() in _TRIM_AT or toks[k - 1].endswith(",")), None)
        if cut is None:
            break
        toks = toks[:cut]
    if len(toks) == len(text.split()):
        return text
    return " ".join(toks).rstrip(",;:") + (mark or "?")


_SUBJECT_PRONOUNS = {"it", "they", "them", "he", "she", "him", "her"}
_PLACE_LEADS = {"in", "to", "at", "from", "near", "around", "visiting", "visit"}


def resolve(ask: str, setup: str) -> str | None:
    """``ask`` with its first pronoun replaced by what ``setup`` names, so that it stands
    without the statement: "What can I do there?" after "I have a layover in Doha." ->
    "What can I do in Doha?"; "How big do they get?" after "... ask me about great whites."
    -> "How big do great whites get?".  None when nothing fits."""
    names = noun_phrases(setup)
    if not names:
        return None
    named = [n for n in names if n[:1].isupper()] or names
    toks = ask.split()
    for i, tok in enumerate(toks):
        core = tok.strip(",.?!;:").lower()
        tail = tok[len(tok.rstrip(",.?!;:")):]
        if core == "there" and not (set(w.lower() for w in toks[max(0, i - 1):i + 2]) & {"is", "are", "was", "were"}):
            place = next((n for n in named if re.search(rf"\b(?:{'|'.join(_PLACE_LEADS)})\s+(?:the\s+)?{re.escape(n)}",
                                                         setup, re.I)), None)
            if place is None:
                return None
            toks[i] = f"in {place}{tail}"
            return " ".join(toks)
        if core in {"they", "them"} and re.search(r"\S\s+who\b", setup, re.I):
            # "... learning at school who lived in Canada before the Europeans arrived; who
            # were they?": they are the people the "who" clause asks about, whom no noun
            # phrase of the statement names (not "the Europeans").
            return None
        if core in _SUBJECT_PRONOUNS:
            # "he" is a person's name; "it" a name if any (a place: "London"), else the last
            # phrase; "they" the last plural phrase ("great whites").
            if core in {"he", "she", "him", "her"}:
                # A person: the name the statement opens with ("Zidane grew up near my
                # restaurant"), else a name in it; never a common noun ("restaurant").
                ref = _opening_name(setup) or next(reversed(entities(setup)), "")
                if not ref:
                    return None
            elif core == "it":
                # A name: the last one inside the statement, else the one it opens with
                # ("Fiji is my other option for the dive semester; where is it?").
                capitals = [n for n in names if n[:1].isupper()]
                ref = capitals[-1] if capitals else _opening_name(setup, topic=True) or _last_phrase(setup, names)
            else:
                ref = _last_phrase(setup, [n for n in names if n.endswith("s")] or names)
            ref = f"the {ref}" if re.search(rf"\bthe {re.escape(ref)}", setup, re.I) else ref
            toks[i] = f"{ref}{tail}" if i else capital(ref) + tail
            return " ".join(toks)
    return None


def _opening_name(text: str, topic: bool = False) -> str:
    """The name ``text`` opens with, its subject ("Johann Sebastian Bach" of "Johann
    Sebastian Bach wrote ..."); "" when it opens with anything else ("My", "The", "I").
    ``topic``: only a name the statement is about ("Fiji is my other option ...")."""
    toks = text.split()
    run = toks[:_name_run(toks, 0)]
    if not run or not content_terms(run[0]) or run[0].lower() in _OWN:
        return ""
    if topic and toks[len(run):len(run) + 1] not in (["is"], ["are"], ["was"], ["were"], ["has"]):
        return ""
    return " ".join(run).rstrip(",.?!;:")


def _last_phrase(text: str, phrases: list[str]) -> str:
    """Of ``phrases`` (found in ``text``), the one that ends last in it."""
    return max(phrases, key=lambda p: text.rfind(p) + len(p))


_QUESTION_START = re.compile(r"^(?:what|which|who|whom|whose|where|when|why|how|is|are|was|were|do|does|did|can|could"
                             r"|should|would|will|has|have)\b", re.I)
_OWN = {"my", "our", "me", "i", "i'm", "we", "us", "mine"}
_OWN_LEADS = {"for", "with", "like", "in", "since", "as", "because", "so"}


def brief(question: str, keep: AbstractSet[str] = frozenset(), min_words: int = 3) -> str:
    """``question`` without the user's framing of it: the aside after a comma once the
    question before it is whole ("Which islands make up Polynesia, where our ancestors
    sailed from?" -> "Which islands make up Polynesia?"), a lead phrase about the user ("For my
    thesis, how old are sharks?" -> "How old are sharks?"), or a last phrase about the user
    ("Does cooking spinach change it for my diet?" -> "Does cooking spinach change it?"), unless
    it holds one of the ``keep`` stems (the topic's).
    The question itself comes back when neither applies ("If I see a hammerhead, what is
    its head for?" keeps its "if")."""
    text = question.strip()
    mark = text[-1] if text[-1:] in "?.!" else "?"
    body = text.rstrip("?.! ")
    head, comma, rest = body.partition(", ")
    if comma and body.count(", ") == 1 and _QUESTION_START.match(head) and len(head.split()) >= min_words:
        return head + mark
    # "For my thesis introduction, how far back do sharks go?": a lead phrase about the user.
    lead = [t.lower().strip("'’s") for t in head.split()]
    if comma and lead and lead[0] in _OWN_LEADS and _OWN & set(lead) and len(lead) <= 5 \
            and _QUESTION_START.match(rest) and len(rest.split()) >= min_words \
            and not set(content_terms(head)) & keep:
        return rest[:1].upper() + rest[1:] + mark
    toks = body.split()
    for k in range(len(toks) - 1, min_words - 1, -1):
        # "... tips for going on my first date": what is left must not end on its verb.
        tail = {t.lower().strip(",") for t in toks[k + 1:]}
        if toks[k].lower() in _OWN_LEADS and _OWN & tail and not toks[k - 1].lower().endswith(("ing", "ed")) \
                and not set(content_terms(" ".join(tail))) & keep:
            return " ".join(toks[:k]).rstrip(",;:") + mark
    return text


# "the black pepper I grind every day come from" -> "the black pepper come from": a clause
# about the user inside the question, ended by the verb's particle.
_ABOUT_ME = re.compile(r"\b(the|my|our)\s+((?:[\w'-]+\s+){0,2}?[\w'-]+?)\s+(?:that\s+)?(?:I|we)\b(?:'m|'re|'ve|'ll)?"
                       r"\s+[^?,;]*?(?=\s+(?:come from|made of|made from|come)\b)")
_KIN_WORDS = (r"son|daughter|granddaughter|grandson|grandmother|grandfather|wife|husband|partner|mother|father"
              r"|friend|coach|teacher|dog|cat|koro|kids?|children|family|parents?|brother|sister|baby")
_KIN = re.compile(rf"\b(?:my|our) (?:{_KIN_WORDS}) (?=[A-Z])")
# "the interest a bank pays on my deposit" -> "... on the deposit": a thing of the user's
# asked about in general; a person ("my grandson") stays the user's.
_MINE = re.compile(rf"(?<=\s)(?:my|our) (?!(?:{_KIN_WORDS})\b)(?=[a-z])")


def unframe(question: str) -> str:
    """``question`` without what it says about the user on the way: "my granddaughter Ama"
    -> "Ama", "the tango my grandmother taught me come from" stays, "the black pepper I
    grind every day come from" -> "the black pepper come from", "the pipe organ that
    accompanies our choir" -> "... accompanies the choir"."""
    out = _ABOUT_ME.sub(lambda m: f"{m.group(1)} {m.group(2)}", question)
    return _MINE.sub("the ", _KIN.sub("", out))

