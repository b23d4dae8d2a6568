"""How the template voice words the need: a first ask and the re-asks after it.

A first ask puts one part of the rubric question the way a user in a conversation would:
reworded (``paraphrase.py``), one sentence at a time with the statement it leans on
(``needs.py``: iKAT questions come as several sentences), and without what the conversation
already named.  Word for word only when the question is short: real users type about twelve
words (the rubric question of a ``from-ikat`` persona is a resolved utterance, often twice
that).

A re-ask changes approach instead of repeating itself: it asks another part of the need
(the next sentence or clause not yet asked), narrows the question to something it names
(a rubric keyword the user already has, what a "What is X" question is about, or a noun
phrase of the question that names its grammatical subject when it has one: "the corals",
not "reef animals", which alone asks for something else), or says what the user's
situation is.  A narrowing names what the question is about (its ``_anchor``: the phrase
naming its subject, else the one the topic's title names): "Siamese and dark ears", not
"dark ears", which alone finds the ear.  A user who keeps their facts to themselves does
not narrow to a detail of one ("big toe" for a gout attack).  When every approach was used,
the user names the anchor, the question's subject or a name it uses before the topic's
title ("Say something about mosquitoes.", not "... malaria in young children.").  The
question is put again
only when that wording was not used before.  Nothing the user already said in this
dialogue is said again as the request (``repeats``).  The weights below were set by hand:
the demo personas' forms as before, the rest on the ``from-ikat`` personas of
``2023_train_topics.json`` against that file's real users (``scripts/bench_realism.py``).
"""

from __future__ import annotations

import random

from ..schema import RubricQuestion
from ..text import STOPWORDS, content_terms, content_words, first_lower, stem, subject_word, words
from .cues import mentions_statement
from .needs import Ask, Need, brief, condense, leans_back, noun_phrases, resolve, split_need, trim, unframe
from .paraphrase import capital, casual, clauses, indirect, reframe, sentence, subject
from .policy import Action, SimContext
from .voice_lines import LINES, pick

__all__ = ["request", "follow_up", "known_stems", "known_keywords", "repeats", "WHOLE_MAX", "ASK_MAX"]

WHOLE_MAX = 14  # a longer rubric question is never typed word for word
WORD_FOR_WORD = 0.6  # the weight of the question as written, against 2-5 for each rewording
ASK_MAX = 14  # a longer ask loses trailing detail (needs.trim)
BRIEF_WEIGHT = 2.0  # "Which islands make up Polynesia?" for "..., where our ancestors sailed from?"
REFRAME_WEIGHT = 3.0  # "Can you tell me about X?" said as "Tell me more about X." and the like
SETUP_SHARE = 0.35  # how often an ask that stands alone still comes with its statement
_BACK = {"it", "its", "they", "them", "their", "that", "this", "those", "these"}
_LEADING = {"on", "about", "of", "for", "in", "to", "with", "at", "from", "regarding", "and", "or"}


def _phrase(term: str) -> str:
    """A keyword as a noun phrase: "on the origin of species" -> "the origin of species", so
    that "I need something on {kw}" never reads "on on"."""
    toks = term.split()
    while len(toks) > 1 and toks[0].lower() in _LEADING:
        toks = toks[1:]
    return " ".join(toks)


def _join(terms: list[str]) -> str:
    return terms[0] if len(terms) == 1 else ", ".join(terms[:-1]) + " and " + terms[-1]


def _vague(question: str) -> str:
    """What a user who cannot put the need into words types: the content words only."""
    kept = [w for w in question.rstrip("?.").split() if w.lower().strip(",.") not in STOPWORDS]
    return (" ".join(kept[:6]) or question).lower() + "?"


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return n > 0 and any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def repeats(text: str, said: list[str]) -> bool:
    """``text`` was said already: its words run, in order, inside an earlier utterance."""
    toks = words(text)
    return any(_contains(words(u), toks) for u in said)


def _pairs(text: str) -> set[tuple[str, str]]:
    toks = words(text)
    return set(zip(toks, toks[1:]))


def _novelty(text: str, said: set[tuple[str, str]]) -> float:
    """Share of the word pairs of ``text`` the user has not said yet."""
    pairs = _pairs(text)
    return len(pairs - said) / len(pairs) if pairs else 0.0


def known_keywords(rubric: RubricQuestion, context: SimContext) -> list[str]:
    """The rubric keywords the user already has: all their words are in the question,
    the topic title or an earlier turn of the user's (as noun phrases, ``_phrase``).  A
    real user does not know the answer's words, and the grader scores keyword coverage:
    a user who recited them would hand the assistant the answer (in a review: 13 of
    bm25_extractive's 45 passes on the demo came on such turns).  Both voices use this.
    Numbers count as words here: "15 players" is the answer to how many players a side
    fields, though "players" is in the question."""
    known = [rubric.question, context.scenario.topic.title, *context.user_utterances]
    have = {t for text in known for t in content_terms(text)}
    numbers = {n for text in known for n in _numbers(text)}
    terms = [_phrase(k) for k in rubric.keywords]
    return [t for t in terms if (stems := content_terms(t)) and set(stems) <= have and _numbers(t) <= numbers]


def _numbers(text: str) -> set[str]:
    """The numbers ``text`` says ("15", "1,000" as "1" and "000"): no content terms, but
    as telling as any."""
    return {w for w in words(text) if w.isdigit()}


def known_stems(action: Action, context: SimContext) -> set[str]:
    """Stems the conversation has made clear: the topic title's, and what earlier questions
    were about (their subject and noun phrases), when one of the last two user turns named
    them (an assistant's heuristic rewrite looks back that far, so "it" stays resolvable)."""
    topic = context.scenario.topic
    named = set(content_terms(topic.title))
    for q in topic.rubric:
        if action.rubric is not None and q.id == action.rubric.id:
            break
        named |= set(content_terms(subject(clauses(q.question)[0]) or ""))
        named |= {t for p in noun_phrases(q.question) for t in content_terms(p)}
    recent = {t for u in context.user_utterances[-2:] for t in content_terms(u)}
    return named & recent


def _forms(action: Action, context: SimContext, ask: Ask, known: set[str],
           rng: random.Random) -> list[tuple[float, str]]:
    """(weight, wording) candidates for putting ``ask`` at this point."""
    assert action.rubric is not None  # request and follow_up check it
    whole = action.rubric.question.strip()
    q = ask.text
    parts = clauses(q) or [q]
    forms: list[tuple[float, str]] = []
    if len(whole.split()) <= WHOLE_MAX:
        forms.append((WORD_FOR_WORD, sentence(whole)))  # kept rare
    fits = len(q.split()) <= ASK_MAX
    if q != whole and fits:
        forms.append((WORD_FOR_WORD, sentence(q)))
    if casual(q) != q and fits:
        forms.append((3.0, sentence(casual(q))))
    if len(parts) > 1:  # one thing at a time, as users ask; terse users more so
        weight = 4.0 if context.scenario.behaviour.verbosity < 0.3 else 3.0
        forms.append((weight, sentence(casual(trim(parts[0], ASK_MAX)))))
    short = trim(condense(q, known), ASK_MAX)
    if short != q:
        forms.append((5.0, sentence(casual(short))))
    topic = set(content_terms(context.scenario.topic.title))
    for shorter in dict.fromkeys((brief(q, keep=topic), unframe(q))):  # the question without the user's framing of it
        if shorter != q and shorter != short:
            forms.append((BRIEF_WEIGHT, sentence(casual(shorter))))
    alternatives = reframe(short if len(short.split()) < len(q.split()) else trim(q, ASK_MAX))
    forms += [(REFRAME_WEIGHT / len(alternatives), sentence(alt)) for alt in alternatives]
    about = subject(parts[0])
    if about and about.split()[0].lower() not in ("a", "an"):  # not "Tell me about an antibiotic."
        forms.append((2.5, pick(rng, "about").format(x=about)))
    embedded = indirect(parts[0])
    if embedded:
        forms.append((2.0, pick(rng, "indirect").format(x=embedded)))
    return forms or [(1.0, sentence(trim(q, ASK_MAX)))]


def _of_private_fact(phrase: str, context: SimContext) -> bool:
    """``phrase`` is a detail of one of the persona's facts and the user volunteers none: a
    user who keeps "my first gout attack was in my right big toe" to themselves does not
    narrow a question to "big toe" either."""
    if context.scenario.behaviour.reveal != "never" or not (terms := set(content_terms(phrase))):
        return False
    return any(terms <= set(content_terms(fact)) for fact in context.scenario.persona.ptkb)


def _private(text: str, context: SimContext) -> bool:
    """``text`` states one of the persona's facts and the user volunteers none (``reveal``
    never): a rubric question written in the persona's situation ("My blood tests showed
    high cholesterol; what is cholesterol?") is then asked without it."""
    if context.scenario.behaviour.reveal != "never":
        return False
    return any(mentions_statement(text, fact) for fact in context.scenario.persona.ptkb)


def _with_setup(text: str, ask: Ask, known: set[str], context: SimContext, rng: random.Random) -> str:
    """The statement an ask leans on goes first, sometimes; never twice in a dialogue.  An
    ask that points back at it ("What can I do there?") either comes with it or names what
    it points at instead ("What can I do in Doha?")."""
    said = context.user_utterances
    if not ask.setup or repeats(ask.setup, said) or repeats(ask.setup, [text]):
        return text
    setup = sentence(condense(ask.setup, known), ".")
    if _private(f"{setup} {text}", context):
        return resolve(text, ask.setup) or text if _points_back(text) else text
    if _points_back(text) or len(content_words(text)) <= 2:  # "What causes an attack?" needs its gout
        resolved = resolve(text, ask.setup)
        if resolved and (len(setup.split()) > ASK_MAX or rng.random() >= SETUP_SHARE):
            return resolved
    elif rng.random() >= SETUP_SHARE:
        return text
    return text if len(setup.split()) > ASK_MAX else f"{setup} {text}"  # a long story is left out


def _mark(ask: Ask) -> str:
    """The ask's own closing mark: a request said as a statement keeps its full stop."""
    return "." if ask.text.endswith(".") else "?"


def _points_back(text: str) -> bool:
    """``text`` has a pronoun ("there", "it", "them" ...) that needs the statement before it."""
    toks = words(text)
    return leans_back(text) or any(w in _BACK or (w == "there" and not _existential(toks, i))
                                   for i, w in enumerate(toks))


def _existential(toks: list[str], i: int) -> bool:
    """The "there" of "are there any", "is there", "there are": it points nowhere."""
    return bool({*toks[max(0, i - 1):i], *toks[i + 1:i + 2]} & {"is", "are", "was", "were", "be"})


def request(action: Action, context: SimContext, rng: random.Random) -> str:
    """The rubric question as this user would put it at this point of the dialogue: its
    first part not yet asked, in a wording not yet used."""
    if action.rubric is None:
        raise ValueError("a request needs the rubric question it asks")
    b = context.scenario.behaviour
    need = split_need(action.rubric.question)
    said = context.user_utterances
    known = known_stems(action, context) if action.turn > 1 else set()
    fresh = [a for a in need.asks if not repeats(condense(a.text, known), said)]
    ask = (fresh or list(need.asks))[0]
    forms = [(w, t) for w, t in _forms(action, context, ask, known, rng) if not _private(t, context)] \
        or _forms(action, context, ask, known, rng)
    new = [(w, t) for w, t in forms if not repeats(t, said)] or forms
    weights, texts = zip(*new)
    text = rng.choices(texts, weights=weights)[0]
    parts = clauses(ask.text)
    if text.endswith(".") and len(parts) > 1 and b.verbosity >= 0.3 and rng.random() < 0.5:
        text += " " + sentence(casual(capital(parts[1])))  # "Tell me about X. Where is it?"
    text = _with_setup(text, ask, known, context, rng)
    if b.language_skill < 0.5 and rng.random() < 1.0 - b.language_skill:
        text = _vague(text)
    if action.turn > 1 and text.endswith("?") and rng.random() < 0.25:
        # "And ..." continues a thread; a question on something new starts afresh ("Now, ...").
        key = "and" if _BACK & set(words(text)[:4]) else "next"
        text = pick(rng, key) + " " + first_lower(text)
    return text


def _own_terms(action: Action, context: SimContext, part: str, known: set[str]) -> list[list[str]]:
    """What a re-ask may name, as alternatives: the rubric keywords the user has
    (``known_keywords``, together), what the question part is about, its noun phrases."""
    assert action.rubric is not None  # request and follow_up check it
    out: list[list[str]] = []
    if keywords := [k for k in known_keywords(action.rubric, context) if not _of_private_fact(k, context)]:
        out.append(keywords)
    if about := subject(part):
        out.append([about])
    # A name or a phrase of several words narrows; a lone common word ("stars") is a last resort.
    # When the question has a grammatical subject, only a phrase naming it narrows: "the
    # corals", not "reef animals"; "Siamese", not "dark ears" (alone, they ask for another thing).
    said = _subject(part, action.rubric.question)
    named = _naming(noun_phrases(part, skip=known), said)
    strong = [p for p in named if " " in p or p[:1].isupper()]
    # A lone common word narrows only when it is what the question is about ("corals"),
    # never on its own ("attack" for what causes a gout attack).
    out += [[p] for p in (strong or (named[:1] if said else []))[:3]]
    # A narrowing that leaves out what the question is about asks for something else ("big
    # toe" alone is about toes, not gout; "dark ears" about ears): the user names that too.
    anchor = _anchor(action.rubric.question, context.scenario.topic.title)
    if anchor:
        out = [terms if set(content_terms(anchor)) <= {t for x in terms for t in content_terms(x)}
               else [anchor, *terms] for terms in out]
    return out


def _subject(*questions: str) -> str | None:
    """The grammatical subject of the first of ``questions`` that has one."""
    return next((w for w in map(subject_word, questions) if w), None)


def _anchor(question: str, title: str) -> str | None:
    """What the question is about: its first noun phrase naming its grammatical subject
    ("the corals", not "reef animals"), else its first one sharing a word with the topic's
    title ("gout" in "... the doctor said gout; what causes an attack?" under
    "Understanding gout"); None when neither is there."""
    phrases = noun_phrases(question)
    said = _subject(question)
    if said and (named := _naming(phrases, said)):
        return named[0]
    topic = set(content_terms(title))
    return next((p for p in phrases if topic & set(content_terms(p))), None)


def _naming(phrases: list[str], said: str | None) -> list[str]:
    """The ``phrases`` that name the subject ``said`` (all of them without one)."""
    return [p for p in phrases if stem(said) in content_terms(p)] if said else phrases


def _candidates(action: Action, context: SimContext, need: Need, known: set[str],
                rng: random.Random) -> list[tuple[float, str]]:
    """(weight, wording) of the re-asks open at this point (see the module notes)."""
    assert action.rubric is not None  # follow_up checks it
    b = context.scenario.behaviour
    said = context.user_utterances
    parts = [(a, p) for a in need.asks for p in (clauses(a.text) or [a.text.rstrip("?.")])]
    # The attempt picks the part (the second ask takes the second part ...); one already
    # asked word for word gives way to the next.
    order = [parts[(action.attempt - 1 + k) % len(parts)] for k in range(len(parts))]
    fresh = [(a, p) for a, p in order if not repeats(condense(p, known), said)]
    ask_of, part = (fresh or order)[0]
    ask = sentence(casual(capital(trim(condense(part, known), ASK_MAX))), _mark(ask_of))
    out: list[tuple[float, str]] = []
    specs = []
    for terms in _own_terms(action, context, condense(part, known), known):
        terms = terms[:1] if b.language_skill < 0.5 else terms[:3]
        spec = pick(rng, "spec").format(kw=_join(terms))
        if not repeats(spec, said):
            specs.append(spec)
    if len(parts) > 1 and fresh and not repeats(ask, said):
        # Another part of the need; a statement goes first so the turn still ends on the question.
        out.append((1.0, _with_setup(ask, ask_of, known, context, rng)))
        if specs:
            out.append((1.0, f"{specs[0]} {ask}" if specs[0].endswith(".") else f"{ask} {specs[0]}"))
    out += [(2.0 / len(specs), spec) for spec in specs]
    statements = [c for c in (*need.context, ask_of.setup) if c and not repeats(c, said) and not _private(c, context)]
    statements = [sentence(condense(c, known), ".") for c in statements]
    statements = [c for c in statements if len(c.split()) <= ASK_MAX]
    if statements:  # the situation, then the question short (or narrowed, when it was asked already)
        follow = ask if not repeats(ask, said) else (specs[0] if specs else "")
        if follow:
            out.append((0.5, f"{statements[0]} {follow}"))
    if not repeats(ask, said):
        embedded = indirect(part)
        line = pick(rng, "restate.indirect").format(x=embedded) if embedded and rng.random() < 0.5 \
            else pick(rng, "restate").format(q=first_lower(ask))
        out.append((0.5 if out else 1.0, line))
    # Other wordings of the part the user has not used yet ("Tell me about X." after "What is X?").
    others = [(w, t) for w, t in _forms(action, context, Ask(sentence(capital(part), _mark(ask_of))), known, rng)
              if not repeats(t, said) and t != sentence(action.rubric.question.strip())]
    out += [(0.5 * w / sum(w for w, _ in others), t) for w, t in others]
    return [(w, t) for w, t in out if not repeats(t, said) and not _private(t, context)]


def follow_up(action: Action, context: SimContext, rng: random.Random) -> str:
    """A re-ask that changes approach (see the module notes); deterministic for ``rng``.
    Only when every wording was used already does one come back."""
    rubric = action.rubric
    if rubric is None:
        raise ValueError("a re-ask needs the rubric question it narrows")
    need = split_need(rubric.question)
    known = known_stems(action, context)
    cands = _candidates(action, context, need, known, rng)
    if not cands:  # every approach was used: name something of the need not named that way yet
        said = context.user_utterances
        anchor = _anchor(rubric.question, context.scenario.topic.title)
        said_subject = _subject(rubric.question)
        # What the question is about as the topic names it ("gout"), else something the
        # question names; its subject when it names no phrase ("mosquitoes" in "Why do
        # mosquitoes bite us at all?"), else a name it uses ("Canada"); the topic's title
        # only as a last resort.
        phrases = [p for p in noun_phrases(rubric.question) if not _of_private_fact(p, context)]
        terms = ([anchor] if anchor else []) or _naming(phrases, said_subject) \
            or ([said_subject] if said_subject and not phrases else []) \
            or [p for p in phrases if p[:1].isupper()][:2] or [first_lower(context.scenario.topic.title)]
        lines = rng.sample(LINES["spec"], len(LINES["spec"]))
        fresh = [line.format(kw=t) for t in terms for line in lines if not repeats(line.format(kw=t), said)]
        return fresh[0] if fresh else lines[0].format(kw=terms[0])
    # Words not said yet weigh in: a user trying again reaches for what they have not said.
    said_pairs = {p for u in context.user_utterances for p in _pairs(u)}
    weights = [w * (0.2 + _novelty(t, said_pairs)) ** 2 for w, t in cands]
    return rng.choices([t for _, t in cands], weights=weights)[0]
