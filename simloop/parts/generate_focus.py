"""Extractive answers that stay on the question and speak to the user.

``focused_answer`` builds on the lexical extractive answer (``generate.py``):

1. On the question, and only on it.  What is answered is the utterance's asking part
   (``rewrite.question_part``: "What is table salt made of?", not the "I love my salty
   soup." before it), with the context words of the rewrite when it points back ("And
   why is it important?").  The best-scoring sentences (``POOL`` of them) are embedded
   with MiniLM; a sentence must reach ``ON_TOPIC`` cosine to that question (or its
   rewrite) and share a word with it.  The answer is then built on one passage.
   When the passages have titles (the demo corpus titles its summaries), it is one whose
   title is about the question: MiniLM cosine of at least ``TITLE_ABOUT`` between the
   title and the question (for a follow-up such as "And teeth?", the question with the
   user's previous utterance, whose subject it continues; a short question that does not
   lean back, "When did tango start?", is read alone too), or a title that is a name the
   question uses ("Go (game)" for the board game Go) held by as many of the question's
   names as any passage holds.  Among those: the one holding most of the question's names,
   then one titled with the question's grammatical subject (``text.subject_word``:
   "Haiku", not "Syllable", for how many syllables a haiku has) or else with the
   question's words ("Cheese", not "Dairy", for how cheese is made from milk), then the
   closest title; and another passage takes the lead when its best sentence is
   ``CLOSER_SENTENCE`` closer to the question than any of that one's ("Yuri Gagarin"
   beside "Astronaut" for the first person in space).  The answer is that passage's
   sentences that reach ``ON_TOPIC``, and nothing else: a neighbour on something close
   ("Rugby league" beside "Rugby union", "French Polynesia" beside "Polynesia") would be
   padding.  Titles are read against the question, not its rewrite, whose context words
   would make "Celestial navigation" about "Who were the Moriori?".  With no title about
   the question the answer is built on the passage of the best sentence, alone when the
   passages are titled (a titled passage is about its own subject: "Cape Horn" beside
   "Tierra del Fuego"), and then with only its sentences as close as the best one must be
   (``ON_TOPIC`` + ``CONFIDENT_MARGIN``): with no title saying the passage is about the
   question, a sentence that is merely near it is more often about the passage's own
   subject ("Volcanoes are most often found where plates meet" for how lava gets out).
   Such a titled passage must hold a name the question's asking sentence uses (with the
   sentence before when it points back: "... who lived in Canada ...? Who were they?"), or be
   titled with its words ("Voyager program" does not answer what the voyagers found in
   Aotearoa; "Saffron" answers why the saffron from Iran is precious), and a follow-up the
   user did not turn down stays with the passage the last answer came from when it has
   something close ("Great white shark", not "Ivory", for "How about teeth?");
   without titles (most corpora) a sentence of another passage joins
   it when it shares a word with the question and reaches ``OTHER_SUBJECT``, and never
   when it opens on a pronoun ("He played 20 seasons ..." is about its own passage's
   subject).  An answer whose best sentence stays below ``ON_TOPIC`` +
   ``CONFIDENT_MARGIN`` is then no answer: retrieval missed, and passing on what it found
   would be padding.  The rest of the selection (relative floor, no repeats, word budget,
   reading order) is the lexical one's.
   Nothing the user has turned down is said again (``told``: the earlier answers): the
   answer just given is never given twice (what else was found, or ``NOTHING_NEW``), and
   after a complaint ("That's not it again.": ``rewrite.turns_down``) no sentence of any
   earlier answer comes back, nor any sentence of the passages the answer turned down came
   from (they are about something else than what the user wants: more of "Ivory" after
   "That's not it!" to an answer on ivory for a great white's teeth).  Otherwise an earlier
   sentence may answer a new question.
2. Personal.  An opening sentence names what the user told us that bears on the answer:
   the PTKB statements the PTKB stage chose whose cosine to the utterance reaches
   ``PTKB_FACT`` and to every earlier user utterance stays below it (a fact is named when
   it first comes up, not again on every later turn of the same subject: half the demo
   answers had opened with the same sentence), and the statements the memory strategy
   kept and recalled for this turn (already chosen by relevance in the agent; named
   whenever recalled, which is what the memory test reads).  Both arrive as structured
   values (the statements themselves), never parsed out of a prompt.  It opens with "Since
   you mentioned that" for what the user said in the dialogue (recalled facts) and with
   "Given that" when a PTKB statement is among the facts (the user may never have said it:
   the assistant knows it from the profile).  Only recalled facts are said to have been
   kept in mind ("I kept that in mind"), which is true of what the answer reads: their
   words weigh in choosing the sentences.  A PTKB statement's words reach neither the query
   nor the choice (``parts/rewrite.py`` says why), so with one among the facts the sentence
   claims no more than "here is what I found".
The whole answer, opening sentence included, is at most ``max_words`` words.

The cutoffs were chosen on the 2023 train topics and a hand-labelled demo sample
(``scripts/bench_answers.py --tune`` reruns the first; ``research/answer_padding/`` says how).
"""


from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..search import Embedder, cosine
from ..text import STOPWORDS, content_words, second_person, sentences, stem, subject_word, word_count
from .generate import NO_ANSWER, NOTHING_NEW, Sentence, compose, leans_on_previous, scored_sentences
from .rewrite import is_dependent, leans_back, question_part, request_text

__all__ = ["focused_answer", "personal_sentence", "ON_TOPIC", "PTKB_FACT", "POOL"]

ON_TOPIC = 0.20
PTKB_FACT = 0.40
# Cosine a sentence from another passage (untitled corpora) needs (chosen on a hand-labelled
# sample of demo answers before the demo's titles were read: research/answer_padding/).
OTHER_SUBJECT = 0.60
# Without a title naming the question, the best sentence must reach ON_TOPIC + this (0.30), or no answer.
CONFIDENT_MARGIN = 0.10
# Cosine between a passage's title and the question for the passage to be about it (chosen
# on hand-labelled demo runs of seeds 1-2: research/answer_padding/).
TITLE_ABOUT = 0.60
# How much closer to the question (cosine) another passage's best sentence must be for the
# answer to be built on it instead of the passage whose title is about the question (chosen
# on hand-labelled demo runs of seeds 1-4: research/answer_padding/).
CLOSER_SENTENCE = 0.20
POOL = 24  # sentences embedded per turn: the lexical best (a 220-word answer holds about 8-10)
_MAX_FACTS = 2  # more than two facts in one sentence reads as a list, not as attention


def personal_sentence(facts: Sequence[str], *, mentioned: bool = True) -> str:
    """"Since you mentioned that you ..., I kept that in mind." ("" for none).  ``mentioned``
    False: "Given that you ..., here is what I found.", for facts the user may never have
    said in this dialogue (PTKB statements the assistant knows from the profile)."""
    clauses = [c for c in (second_person(f) for f in facts) if c][:_MAX_FACTS]
    if not clauses:
        return ""
    facts_text = " and that ".join(clauses)
    if not mentioned:
        return f"Given that {facts_text}, here is what I found."
    return f"Since you mentioned that {facts_text}, I kept {'both' if len(clauses) > 1 else 'that'} in mind."


def _title_terms(hit: Any) -> set[str]:
    """The words of a passage's title, without its qualifier ("Go (game)" -> "go"), in the
    ``_light`` forms a question's words are matched in."""
    return _terms(re.sub(r"\s*\([^)]*\)", "", getattr(hit, "title", "") or ""), True, light=True)


def _about(titles: Sequence[str], sims: Any) -> dict[int, float]:
    """{passage rank: title cosine} of the passages whose title is about the question: a
    cosine of at least ``TITLE_ABOUT`` (``sims``: each titled passage's, in rank order,
    against the asking part, or for a follow-up against it with the utterance before)."""
    if sims is None:
        return {}
    ranks = [r for r, t in enumerate(titles) if t]
    return {r: float(s) for r, s in zip(ranks, sims) if float(s) >= TITLE_ABOUT}


def _names(question: str) -> set[str]:
    """Capitalised words inside the question's sentences: the names it asks about ("Go" in
    "the board game Go", "Big Ben")."""
    return {m.group(1) for m in re.finditer(r"(?<=[\w,;:'’] )([A-Z][\w'’-]*)", question)} - {"I"}


def _lead(about: dict[int, float], hits: Sequence[Any], names: set[str], question: str) -> int | None:
    """The rank of the passage the answer is built on, among those ``about`` the question
    (None when none is): the one holding the most of the question's names (the board game
    Go, not "Board game"; the Palace of Westminster for Big Ben, not "Parliament"), then
    one whose title is made of the question's words ("Cheese", not "Dairy", for how cheese
    is made from milk), the question's grammatical subject first ("Haiku", not "Syllable",
    for how many syllables a haiku has; "Lava", not "Volcano", for how lava gets out of a
    volcano), then the one whose title is closest to the question, then the better
    ranked."""
    words = {_light(w.lower()) for w in re.findall(r"[^\W_][\w'’-]*", question)}
    said = subject_word(question)
    subject = _light(said) if said else None

    def named(rank: int) -> int:
        title = _title_terms(hits[rank])
        if not title or not title <= words:
            return 0
        return 2 if subject in title else 1
    return max(about, key=lambda r: (_held(hits[r], names), named(r), about[r], -r)) if about else None


def _closer(lead: int, ranked: Sequence[Sentence], sims: Any, asked: set[str]) -> int:
    """``lead``, or the passage whose best sentence (sharing a word with the question) is
    ``CLOSER_SENTENCE`` closer to the question than any of the lead's: a title can be about
    the question while another passage answers it ("Astronaut" and "Yuri Gagarin" for the
    first person in space)."""
    best: dict[int, float] = {}
    for c, sim in zip(ranked, sims):
        if c.terms & asked:
            best[c.rank] = max(best.get(c.rank, -1.0), float(sim))
    top = max(best, key=lambda r: best[r], default=lead)
    return top if best.get(top, -1.0) >= best.get(lead, -1.0) + CLOSER_SENTENCE else lead


def _fallback(close: list[Sentence], hits: Sequence[Any], names: set[str], question: str,
              told: Sequence[str]) -> list[Sentence]:
    """The close sentences a titled fallback answer may be built on, best first.  A passage
    that holds none of the ``names`` of the ``question`` (its asking sentence: "the Mount"
    in a statement before it only sets the scene) and is not titled with its words is about
    something else ("Voyager program" for what the voyagers found when they reached
    Aotearoa; "Saffron" still answers why the saffron from Iran is precious).  A follow-up the user did not
    turn down (``told``: the earlier answers, empty otherwise) stays with the passage the
    last answer came from when it has something close ("Great white shark", not "Ivory",
    for "How about teeth?" after an answer on how big great whites get)."""
    if names:
        words = {_light(w.lower()) for w in re.findall(r"[^\W_][\w'’-]*", question)}
        close = [c for c in close if _held(hits[c.rank], names) or (_title_terms(hits[c.rank]) or {""}) <= words]
    thread = _sources(hits, told[-1]) if told else set()
    return [c for c in close if c.rank in thread] or close


def _asking_sentence(question: str) -> str:
    """The sentence of ``question`` that asks: its last, with the one before when it points
    back at it ("... who lived in Canada before the Europeans arrived. Who were they?")."""
    parts = sentences(question) or [question]
    return " ".join(parts[-2:]) if len(parts) > 1 and leans_back(parts[-1]) else parts[-1]


def _sources(hits: Sequence[Any], answer: str) -> set[int]:
    """The ranks of the passages that hold a sentence of ``answer``: where it came from."""
    said = [x.strip() for x in sentences(answer)]
    return {r for r, h in enumerate(hits) if any(x in (getattr(h, "text", "") or "") for x in said)}


def _held(hit: Any, names: set[str]) -> int:
    """How many of the question's ``names`` the passage's text holds."""
    text = getattr(hit, "text", "") or ""
    return sum(1 for n in names if re.search(rf"\b{re.escape(n)}\b", text))


def _light(word: str) -> str:
    """A word as a title must match it: singular, no final "e" ("Carbohydrate" meets
    "carbohydrates", "Museum" meets "museums"), but never cut to its stem ("Ironing" is
    not about "iron")."""
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        word = word[:-1]
    return word[:-1] if word.endswith("e") and len(word) > 4 else word


def _addresses(c: Sentence, sim: float, asked: set[str], lead: int, on_topic: float) -> bool:
    """A sentence answers the question when it is close to it (``on_topic``) and comes from
    the passage the answer is built on (``lead``).  From another passage (untitled
    corpora only) it must share a word with the question and be plainly about it
    (``OTHER_SUBJECT``: "He shared the Nobel Prize for the discovery of penicillin" for who
    discovered penicillin); such a passage otherwise only lends a shared word ("Ivory ...
    teeth" for the great white shark's teeth, "Burmese is spoken in Myanmar" for where Malay
    is spoken).  One that opens on a pronoun ("He played 20 seasons in the NHL") speaks of
    its own passage's subject, not of the question's, and is never taken from another
    passage."""
    if sim < on_topic:
        return False
    if c.rank == lead:
        return True
    return not leans_on_previous(c) and bool(c.terms & asked) and sim >= OTHER_SUBJECT


def _terms(text: str, title: bool = False, light: bool = False) -> set[str]:
    """Stems (``light``: the lighter ``_light`` forms) of the words that can name a subject:
    content words, and a capitalised stop word inside a sentence or a title ("Go" in "the
    board game Go", the title "Go (game)" without its qualifier).  (content_words drops
    "Monopoly" as an adverb in -ly.)"""
    out = set()
    for k, tok in enumerate(re.findall(r"[^\W_][\w'’-]*", text)):
        low = re.sub(r"['’]s$", "", tok.lower())  # "Mendel's" names Mendel
        named = tok[:1].isupper() and (title or k > 0)
        if (len(low) > 1 and low not in STOPWORDS) or named:
            out.add(_light(low) if light else stem(low))
    return out


async def focused_answer(embedder: Embedder, query: str, hits: Sequence[Any], *, utterance: str,
                         ptkb: Sequence[str] = (), remembered: Sequence[str] = (), earlier: Sequence[str] = (),
                         max_words: int = 220, passages: int = 5, focus: str | None = None,
                         asked: str | None = None, on_topic: float = ON_TOPIC,
                         ptkb_fact: float = PTKB_FACT, told: Sequence[str] = (),
                         turned_down: bool = False) -> tuple[str, list[str]]:
    """(response, cited docids).  ``ptkb``: the statements the PTKB stage chose (named when
    they reach ``ptkb_fact`` with the utterance and with none of the ``earlier`` user
    utterances); ``remembered``: facts the memory strategy recalled for this turn (all
    named).  ``focus``: as in ``extractive_answer``.  ``asked``: the question to answer
    with the context it needs (the rewrite of the utterance's asking part; default the
    query): a kept sentence shares a word with it and is close to it or to the asking
    part, so that what the user only mentioned ("I love palm-nut soup.") draws no sentence
    of its own.  ``told``: the assistant's earlier answers in this dialogue;
    ``turned_down``: the utterance turns the last one down (``rewrite.turns_down``)."""
    asked = asked or query
    ranked = scored_sentences(query, hits, passages, focus)[:POOL]
    question = question_part(utterance) if utterance else query
    # The words a kept sentence must share one of: the question's own, and the context's
    # only when the question points back at it ("And why is it important?").
    focus_text = asked if leans_back(question) or not content_words(question) else question
    asked_terms = _terms(focus_text)
    said = [utterance or query, *(earlier if ptkb else ())]  # the earlier ones come from the embedder's cache
    titles = [getattr(h, "title", "") or "" for h in hits[:passages]] if ranked else []
    titled = [t for t in titles if t]
    # Whether a title is about the question is read against the question itself, not its
    # rewrite (whose context words, "navigation stars" for "Who were the Moriori?", would
    # make "Celestial navigation" about it); a follow-up ("Mainly the causes.") is about
    # what the user asked before it as well.
    prior = [f"{request_text(earlier[-1])} {question}"] if titled and earlier and is_dependent(question) else []
    texts = [*said, question, asked, *ptkb, *(c.text for c in ranked), *titled, *prior]
    vectors = await embedder.encode(texts) if ranked or ptkb else None
    at = len(said) + 2  # where the statements start
    facts = list(dict.fromkeys(remembered))
    if ptkb and vectors is not None:
        sims = cosine(vectors[:len(said)], vectors[at:at + len(ptkb)])
        before = sims[1:].max(axis=0) if len(said) > 1 else np.full(len(ptkb), -1.0)
        facts += [s for s, now, then in zip(ptkb, sims[0], before)
                  if float(now) >= ptkb_fact > float(then) and s not in facts]
    named = facts[:_MAX_FACTS]
    opening = personal_sentence(named, mentioned=all(f in remembered for f in named))
    if word_count(opening) > max_words // 2:  # a tiny budget goes to the answer itself
        opening = ""
    budget = max_words - word_count(opening)
    kept: list[Sentence] = []
    if ranked and vectors is not None:
        asking = vectors[[len(said), len(said) + 1]]  # asking part, asked
        start = at + len(ptkb)
        sims = cosine(asking, vectors[start:start + len(ranked)]).max(axis=0)
        close = [c for c in ranked if c.terms & asked_terms and float(sims[ranked.index(c)]) >= on_topic]
        heads = vectors[start + len(ranked):start + len(ranked) + len(titled)]
        # The question in context when it depends on the turn before; a short one that names
        # its subject ("When did tango start?") is matched alone too.
        alone = not prior or (not leans_back(question) and len(content_words(question)) > 1)
        subjects = vectors[[len(said)] * alone + [len(texts) - 1] * bool(prior)]
        about = _about(titles, cosine(subjects, heads).max(axis=0) if titled else None)
        names = _names(question)
        # A passage titled with a name the question uses ("Go (game)" for the board game Go) is
        # about it, unless another passage holds more of the question's names ("Parliament" for
        # "Big Ben, at the Houses of Parliament", beside "Palace of Westminster").
        light_names = {_light(n.lower()) for n in names}
        held = [_held(h, names) for h in hits[:passages]]
        most = max(held, default=0)
        about |= {r: about.get(r, 0.0) for r, h in enumerate(hits[:passages])
                  if (title := _title_terms(h)) and title <= light_names and held[r] >= most}
        lead = _lead(about, hits, names, question)
        if lead is not None:
            lead = _closer(lead, ranked, sims, asked_terms)
        if lead is not None:
            # A passage is about the question: the answer is built on it alone.  Its
            # neighbours, even about something close ("Rugby league" beside "Rugby union",
            # "French Polynesia" beside "Polynesia"), would only pad it.
            kept = [c for c, sim in zip(ranked, sims) if c.rank == lead and float(sim) >= on_topic]
        if lead is None and titled:
            asked_in = _asking_sentence(question)
            close = _fallback(close, hits[:passages], _names(asked_in), asked_in,
                              told if prior and not turned_down else ())
        if lead is None and close and float(sims[ranked.index(close[0])]) >= on_topic + CONFIDENT_MARGIN:
            # No title is about the question (or there are none: most corpora but the demo's):
            # built on the passage of the best sentence; without titles, with others' sentences
            # that are plainly about the question too (a titled passage is about its own
            # subject: "Cape Horn" beside "Tierra del Fuego", and only its sentences as close as
            # the best must be say something on the question).  Nothing that close: retrieval missed.
            kept = [c for c, sim in zip(ranked, sims)
                    if _addresses(c, float(sim), asked_terms, close[0].rank, on_topic + CONFIDENT_MARGIN * bool(titled))
                    and not (titled and c.rank != close[0].rank)]
    if not kept:
        return (f"{opening} {NO_ANSWER}" if opening else NO_ANSWER), []
    # Nothing is said again that the user has turned down: after "That's not it!" no
    # sentence of an earlier answer (``told``) comes back, and the answer just given is
    # never given again.  Otherwise an earlier sentence may answer the new question too.
    refused = {s.strip() for answer in (told if turned_down else told[-1:]) for s in sentences(answer)}
    if turned_down and told:
        # What the user turned down came from passages that are not about what they want:
        # none of them answers again (Ivory's other sentences after "That's not it!").
        rejected = _sources(hits[:passages], told[-1])
        kept = [c for c in kept if c.rank not in rejected]
    body, used = compose([c for c in kept if c.text.strip() not in refused] if turned_down else kept, budget)
    if refused and (not used or set(sentences(body)) <= refused):
        body, used = compose([c for c in kept if c.text.strip() not in refused], budget)
        if not used:
            return (f"{opening} {NOTHING_NEW}" if opening else NOTHING_NEW), []
    return (f"{opening} {body}" if opening else body), used
