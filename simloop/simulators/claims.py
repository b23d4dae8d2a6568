"""What a sentence claims, in the pieces a contradiction changes.

A user who holds a reference checks an answer's claims against it (evidence.py aligns
the sentences).  Within one aligned pair, a contradiction is a *substitution*, never a
mere addition of facts:

* **polarity**: a word is negated on one side and stated on the other ("is safe" /
  "is not safe", "can be frozen" / "cannot be frozen", "never visited" / "visited");
* **antonym**: one side has a word, the other its opposite and not the word ("rises" /
  "falls"), from ``ANTONYMS`` below, written for simloop (no word list package with an
  offline antonym dataset and a clear licence exists on PyPI: the WordNet packages there
  fetch their data at run time, or ship none);
* **number**: the answer has a number the whole reference lacks, where the aligned
  reference sentence has one the answer lacks (a changed count, price or year);
* **entity**: likewise for names (capitalised spans): another city, person, month.

Everything here is plain text processing on ``simloop.text``; no model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..text import STOPWORDS, stem, words

__all__ = ["ANTONYMS", "Claim", "Known", "claim", "conflicts", "core_overlap", "numbers", "entities", "name_words",
           "name_terms", "antonym_of", "NEGATORS"]

# Words that negate what follows them (contractions end in n't and are caught as such).
NEGATORS = frozenset("not no never none nobody nothing neither nor cannot nowhere without".split())
# Function words skipped when looking for what a negator negates ("is not *very* safe",
# "can't *be* used", "no longer *sold*").
_SCOPE_SKIP = frozenset("""a an the be been being is are was were am to of as so too very really quite always
longer necessarily all any some much many more most only just even yet that this these those it its there here
i me my you your we our they them their he him his she her what which who how when where one ever""".split())
_SCOPE = 3  # a negator's scope: the next content words up to this many tokens on
_CLAUSE_END = frozenset(", ; : ( ) but and or because although while whereas which who that".split())

# Opposites, one pair per line of thought; each word's inflections are derived below.
ANTONYMS_TEXT = """
increase decrease; increase reduce; rise fall; rise drop; raise lower; grow shrink; expand contract;
gain lose; win lose; add remove; include exclude; accept reject; allow forbid; allow prohibit; allow ban;
permit forbid; enable prevent; approve oppose; agree disagree; support oppose; help harm; help hurt;
benefit harm; improve worsen; strengthen weaken; succeed fail; pass fail; start stop; begin end; open close;
open closed; arrive depart; enter exit; buy sell; borrow lend; give take; push pull; attack defend;
remember forget; love hate; like dislike; respect disrespect; trust distrust; obey disobey; appear disappear;
high low; higher lower; highest lowest; large small; big small; bigger smaller; biggest smallest;
larger smaller; largest smallest; long short; longer shorter; longest shortest; tall short; wide narrow;
thick thin; heavy light; deep shallow; fast slow; faster slower; fastest slowest; quick slow; early late;
earlier later; earliest latest; old young; older younger; oldest youngest; old new; ancient modern;
hot cold; warm cool; warmer cooler; hotter colder; wet dry; full empty; hard soft; hard easy; easy difficult;
easier harder; simple complex; simple complicated; cheap expensive; cheaper dearer; cheapest dearest;
rich poor; strong weak; stronger weaker; strongest weakest; safe dangerous; safe unsafe; safe risky;
safer riskier; healthy unhealthy; clean dirty; good bad; better worse; best worst; right wrong; correct incorrect;
true false; positive negative; possible impossible; likely unlikely; legal illegal; common rare; usual unusual;
frequent rare; frequently rarely; often rarely; often seldom; always never; many few; more less; more fewer;
most least; much little; maximum minimum; max min; majority minority; all none; everything nothing;
everyone nobody; first last; before after; above below; over under; inside outside; internal external;
upper lower; top bottom; front back; north south; east west; northern southern; eastern western;
left right; up down; in out; on off; day night; summer winter; spring autumn; morning evening; sunrise sunset;
light dark; bright dim; loud quiet; noisy quiet; happy sad; calm anxious; friendly hostile; kind cruel;
polite rude; honest dishonest; public private; rural urban; domestic foreign; local foreign; male female;
men women; boys girls; natural artificial; natural synthetic; organic synthetic; raw cooked; fresh stale;
sweet bitter; sweet sour; alive dead; live die; living dead; birth death; born died; wild domestic; wild tame;
active inactive; active passive; present absent; visible invisible; available unavailable; necessary unnecessary;
required optional; mandatory optional; important unimportant; relevant irrelevant; useful useless; helpful harmful;
effective ineffective; efficient inefficient; successful unsuccessful; popular unpopular; known unknown;
famous obscure; certain uncertain; clear unclear; accurate inaccurate; complete incomplete; equal unequal;
fair unfair; free paid; same different; similar different; identical different; together apart; together separately;
inner outer; maximum minimal; minor major; junior senior; beginner advanced; beginner expert; amateur professional;
success failure; profit loss; advantage disadvantage; pro con; strength weakness; asset liability; import export;
input output; supply demand; question answer; cause prevent; odd even; plus minus; add subtract; multiply divide;
acid alkaline; acidic alkaline; acidic basic; solid liquid; freeze melt; frozen melted; float sink; wake sleep;
awake asleep; sober drunk; innocent guilty; guilty innocent; vertical horizontal; positive neutral; ascend descend;
upstream downstream; inbound outbound; uphill downhill; overestimate underestimate; overweight underweight;
increase lower; accelerate decelerate; tighten loosen; inhale exhale; include omit; encourage discourage;
maximize minimize; lengthen shorten; widen narrow; heat cool; warm chill; dense sparse; thick sparse;
fertile barren; generous stingy; brave cowardly; wise foolish; smart stupid; clever stupid; sharp dull;
interesting boring; exciting boring; beautiful ugly; pleasant unpleasant; comfortable uncomfortable;
expensive affordable; legal banned; edible poisonous; edible inedible; toxic harmless; harmful harmless;
cure cause; recommended discouraged; recommend discourage; advisable inadvisable; suitable unsuitable;
appropriate inappropriate; sufficient insufficient; enough insufficient; adequate inadequate; lawful unlawful;
""".strip()


def _pairs() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for item in ANTONYMS_TEXT.replace("\n", " ").split(";"):
        pair = item.split()
        if len(pair) != 2:
            continue
        a, b = pair
        out.setdefault(a, set()).add(b)
        out.setdefault(b, set()).add(a)
    return out


ANTONYMS = _pairs()


def _forms(word: str) -> set[str]:
    """``word`` and the inflections a sentence may carry (rise: rises, rising, risen, rose ...)."""
    forms = {word, word + "s", word + "es", word + "ed", word + "d", word + "ing", word + "er", word + "est"}
    if word.endswith("e"):
        forms |= {word[:-1] + "ing", word[:-1] + "ed"}
    if word.endswith("y"):
        forms |= {word[:-1] + "ies", word[:-1] + "ied"}
    if len(word) > 2 and word[-1] not in "aeiouwy" and word[-2] in "aeiou" and word[-3] not in "aeiou":
        forms |= {word + word[-1] + "ing", word + word[-1] + "ed"}
    return forms


_IRREGULAR = {"rose": "rise", "risen": "rise", "fell": "fall", "fallen": "fall", "grew": "grow", "grown": "grow",
              "shrank": "shrink", "shrunk": "shrink", "won": "win", "lost": "lose", "gave": "give", "given": "give",
              "took": "take", "taken": "take", "sold": "sell", "bought": "buy", "began": "begin", "begun": "begin",
              "forgot": "forget", "forgotten": "forget", "lent": "lend", "froze": "freeze", "sank": "sink",
              "sunk": "sink", "woke": "wake", "slept": "sleep", "hid": "hide", "men": "men", "women": "women"}
_FORM_OF: dict[str, str] = {}
for _word in sorted(ANTONYMS, key=len, reverse=True):  # a base word wins over another word's inflection
    for _f in _forms(_word):
        _FORM_OF.setdefault(_f, _word)
for _word in ANTONYMS:
    _FORM_OF[_word] = _word
_FORM_OF.update({k: v for k, v in _IRREGULAR.items() if v in ANTONYMS})


def antonym_of(word: str) -> set[str]:
    """The base forms opposite to ``word`` (any inflection of a listed word), else empty."""
    base = _FORM_OF.get(word.lower())
    return ANTONYMS.get(base, set()) if base else set()


# ----------------------------------------------------------------------------- numbers
_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if i >= 2}
_WORD_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "trillion": 10**12, "dozen": 12,
                "decade": 10, "decades": 10}
_SCALES = {**_WORD_SCALES, "k": 1000, "bn": 10**9}
_NUM = re.compile(r"\d+(?:[.,:]\d+)*|[A-Za-z]+")


_LIST_MARK = re.compile(r"(?:^|(?<=[\s:;]))\(?\d{1,2}[.)](?=\s+\S)")


def numbers(text: str) -> set[float]:
    """The numeric values ``text`` states: digits ("1,200", "3.5", "1990-2000" gives two),
    number words ("twenty-five", "two hundred and five") and digits with a scale ("2
    million" is 2e6).  List markers ("1. Delft") are not claims; "one" counts only before a
    scale word (as a pronoun it is no number)."""
    out: set[float] = set()
    tokens = _NUM.findall(_LIST_MARK.sub(" ", text).replace("-", " "))
    cur: float | None = None
    worded = False  # ``cur`` was read from words, so "twenty" + "five" add up

    def flush() -> None:
        nonlocal cur
        if cur is not None:
            out.add(cur)
        cur = None

    for i, tok in enumerate(tokens):
        low = tok.lower()
        nxt = tokens[i + 1].lower() if i + 1 < len(tokens) else ""
        if tok[0].isdigit():
            flush()
            cur, worded = _digits(tok), False
        elif low in _SCALES and cur is not None and (low in _WORD_SCALES or not worded):
            cur *= _SCALES[low]
        elif low in _WORD_SCALES and cur is None:
            cur, worded = float(_SCALES[low]), True
        elif low in _TENS or (low in _UNITS and (low != "one" or nxt in _SCALES)):
            value = _TENS.get(low) or _UNITS[low]
            if cur is not None and worded and cur >= 20 and cur % (100 if low in _TENS else 10) == 0:
                cur += value
            else:
                flush()
                cur, worded = float(value), True
        elif low == "and" and cur is not None and worded and cur >= 100 and (nxt in _UNITS or nxt in _TENS):
            continue
        else:
            flush()
    flush()
    return out


def _digits(tok: str) -> float:
    if ":" in tok:  # a time of day, 10:30 -> 1030
        return float(tok.replace(":", ""))
    if re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", tok):
        tok = tok.replace(",", "")
    tok = tok.replace(",", ".")
    try:
        return float(tok)
    except ValueError:
        return float(re.sub(r"\D", "", tok) or 0)


# ----------------------------------------------------------------------------- names
_TOKEN = re.compile(r"[^\W_][\w'’.\-&]*")
_CONNECT = frozenset("of de la le van von der del da di du".split())
# Capitalised words that open sentences or stand for the speaker, not names.
_NOT_NAMES = frozenset(
    """i i'm i've i'd i'll however also additionally furthermore moreover overall generally typically yes no
    here there these those this that it its they their you your we our he she his her mr mrs ms dr st
    finally first second third next then lastly firstly secondly thirdly instead otherwise meanwhile
    although though while when if because since unless until after before during""".split()
)


def _tokens(text: str) -> list[tuple[str, bool, bool]]:
    """Word tokens of ``text``, each with whether it opens a sentence and whether
    punctuation separates it from the word before ("Hotel Golden, Hotel Fellini": two names)."""
    out, first, end = [], True, 0
    for m in _TOKEN.finditer(text):
        gap = text[end:m.start()]
        before = text[max(0, m.start() - 2):m.start()]
        after_colon = bool(re.search(r"[:\n]\s*$", before))
        out.append((m.group(), first or after_colon, bool(re.search(r"[,;()\[\]/\"“”|]", gap))))
        first = m.group().endswith((".", "!", "?")) and not _ABBREVIATION.fullmatch(m.group())
        end = m.end()
    return out


_ABBREVIATION = re.compile(r"[A-Z][a-z]?\.|(?:[A-Z]\.)+")


def name_words(*texts: str) -> frozenset[str]:
    """Lower-cased words that ``texts`` write capitalised inside a sentence and never in
    lower case: the evidence that a sentence's capitalised first word is a name."""
    upper, lower = set(), set()
    for text in texts:
        for tok, starts, _ in _tokens(text):
            w = tok.strip(".'’-").lower()
            if tok[:1].islower():
                lower.add(w)
            elif not starts:
                upper.add(w)
    return frozenset(upper - lower - STOPWORDS)


def entities(text: str, names: frozenset[str] | None = None) -> list[str]:
    """Capitalised spans ("Delft University of Technology", "Egypt", "March"), in order.
    A sentence's first word belongs to a span only when ``names`` (``name_words`` of the
    texts being compared; by default of ``text``) says it is a name: "Egypt is ..." where
    Egypt is named elsewhere, never "Visiting ..." or "Overall ..."."""
    names = name_words(text) if names is None else names
    out: list[str] = []
    span: list[str] = []
    for raw, starts, apart in _tokens(text):
        if apart:
            _close(span, out)
            span = []
        tok = raw.strip(".'’-")
        low = tok.lower()
        acronym = len(tok) >= 2 and tok.isupper() and tok.isalpha()
        capital = tok[:1].isupper() and low not in _NOT_NAMES and (not starts or low in names or acronym)
        if capital:
            span.append(tok)
        elif span and low in _CONNECT and tok.islower():
            span.append(tok)
        else:
            _close(span, out)
            span = []
        if raw.endswith((".", "!", "?")) and not _ABBREVIATION.fullmatch(raw):
            _close(span, out)
            span = []
    _close(span, out)
    return out


def _close(span: list[str], out: list[str]) -> None:
    while span and span[-1].lower() in _CONNECT:
        span.pop()
    if span:
        out.append(" ".join(span))


def name_terms(entity: str) -> set[str]:
    """The words that identify a name: "University of Amsterdam" -> {"university", "amsterdam"}."""
    return {w for w in words(entity) if len(w) >= 3 and w not in STOPWORDS and w not in _CONNECT}


# ----------------------------------------------------------------------------- one sentence
@dataclass(frozen=True)
class Claim:
    """The pieces of one sentence that a contradiction would change."""

    text: str
    terms: frozenset[str]  # content-word stems
    plain: frozenset[str]  # lower-cased words
    negated: frozenset[str]  # stems inside a negator's scope
    negators: int  # how many negators the sentence has
    numbers: frozenset[float]
    names: tuple[str, ...]


def claim(text: str, names: frozenset[str] | None = None) -> Claim:
    """The claim pieces of one sentence; ``names``: see ``entities``."""
    toks = [w for w in re.findall(r"[A-Za-z0-9'’\-]+|[,;:()]", text)]
    low = [t.lower().replace("’", "'") for t in toks]
    negated: set[str] = set()
    negators = 0
    for i, w in enumerate(low):
        if w in NEGATORS or w.endswith("n't"):
            negators += 1
            # What is negated: the first content word after the negator, within ``_SCOPE``
            # tokens and the same clause ("is not *safe*", "can't be *frozen*").
            for nxt in low[i + 1:i + 1 + _SCOPE]:
                if nxt in _CLAUSE_END or nxt in NEGATORS or nxt.endswith("n't"):
                    break
                if nxt not in _SCOPE_SKIP and len(nxt) >= 3:
                    negated.add(stem(nxt))
                    break
    plain = frozenset(w for w in words(text))
    terms = frozenset(stem(w) for w in plain if w not in STOPWORDS and len(w) > 1)
    return Claim(text, terms, plain, frozenset(negated), negators, frozenset(numbers(text)),
                 tuple(entities(text, names)))


@dataclass(frozen=True)
class Known:
    """What a whole reference (and the question) states: a number or a name found anywhere
    in it is no substitution."""

    numbers: frozenset[float]
    words: frozenset[str]


def core_overlap(answer: Claim, ref: Claim) -> float:
    """Share of the answer sentence's content stems, names and numbers aside, that the
    reference sentence has: high when the two say the same thing about other values."""
    named = {stem(w) for n in answer.names for w in words(n)}
    core = {t for t in answer.terms if t not in named and not t[:1].isdigit()}
    return len(core & ref.terms) / len(core) if core else 0.0


def conflicts(answer: Claim, ref: Claim, known: Known, tight: bool, same_frame: bool,
              exact_frame: bool = False) -> list[str]:
    """How ``answer`` contradicts its aligned reference sentence ``ref``: substitutions only.

    ``tight``: the pair is close enough that a negation on one side only is a flip of the
    whole statement (not one clause of a longer sentence); ``same_frame``: the pair says the
    same thing about other values (``core_overlap``), so a number or name the reference
    lacks stands where the reference has another (not an added fact); ``exact_frame``: all
    of it is the reference sentence's, so even a name found elsewhere in the reference is
    a substitution."""
    found = []
    positive_ref, positive_ans = ref.terms - ref.negated, answer.terms - answer.negated
    if (answer.negated - ref.negated) & positive_ref or (ref.negated - answer.negated) & positive_ans:
        found.append("polarity")
    elif tight and bool(answer.negators) != bool(ref.negators):
        found.append("polarity")
    for w in answer.plain - ref.plain:
        opposites = antonym_of(w)
        if any(_has(ref.plain, o) for o in opposites) and not any(_has(answer.plain, o) for o in opposites):
            found.append("antonym")
            break
    if same_frame and answer.numbers - known.numbers and ref.numbers - answer.numbers:
        found.append("number")
    lost = [n for n in ref.names if name_terms(n) and not name_terms(n) & answer.plain]
    other = [n for n in answer.names if name_terms(n) and not name_terms(n) & ref.plain]
    # A name the whole reference lacks, where the reference sentence has another; or, in a
    # pair that is otherwise one statement, a name from elsewhere in the reference.
    if lost and other and same_frame and (tight or exact_frame or any(not name_terms(n) & known.words for n in other)):
        found.append("entity")
    return found


def _has(plain: frozenset[str], base: str) -> bool:
    return any(f in plain for f in _forms(base))


def foreign_subject(c: Claim, known: Known) -> str | None:
    """The name ``c`` is about, when the reference never speaks of it: a name among the
    sentence's first words (its grammatical subject, mostly) with a word the reference and
    the question lack ("The ICC Men's *Cricket* World Cup is ..." against a reference on the
    rugby World Cup).  None when the sentence opens with no name or a known one."""
    head = {w.strip(".,;:()'\"’").lower() for w in c.text.split()[:_SUBJECT_WORDS]}
    for name in c.names:
        terms = name_terms(name)
        first = words(name)[0] if words(name) else ""
        if first in head and terms:
            return name if terms - known.words else None
    return None


_SUBJECT_WORDS = 4  # a sentence's subject starts among its first words ("The ICC Men's ...")
