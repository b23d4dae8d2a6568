"""Extractive answers that stay on the question and speak to the user (issue 12, item 3).

``focused_answer`` builds on the lexical extractive answer (``generate.py``):

1. On the question.  The best-scoring sentences (``POOL`` of them) are embedded with
   MiniLM; a sentence is kept only when its cosine to the user's utterance or to the
   rewritten query (the assistant's view of the topic: the utterance plus context words)
   reaches ``ON_TOPIC``.  The rest of the selection (relative floor, no repeats, word
   budget, reading order) is the lexical one's.
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

How the cutoffs were chosen (2023 train topics only; ``scripts/bench_answers.py --tune``
reruns it):
- ``ON_TOPIC``: the human response sentences of each of the 95 train turns (on the
  question by construction) against the sentences of the responses of the other train
  conversations (off it), scored as here: max cosine to the utterance and to the
  heuristic rewrite.  Grid 0.05-0.50 (step 0.05), objective Youden J (own kept - other
  kept).  0.20 is best (J 0.667): it keeps 75% of a turn's own sentences and 8.7% of other
  conversations'; 0.15 gives J 0.654 (82% / 17%), 0.25 J 0.620 (66% / 4.3%).
- ``PTKB_FACT``: every (turn, statement) pair, "in the turn's ptkb_provenance" against the
  statement's cosine to the utterance; objective F0.5 (naming an irrelevant fact is worse
  than leaving a relevant one out), averaged with the neighbouring cutoffs because only 64
  statements are relevant.  0.40 is best (precision 0.22, recall 0.16): iKAT's relevant
  statements are mostly implicit (a quarter score below 0.10), so few are named.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..search import Embedder, cosine
from ..text import second_person, word_count
from .generate import NO_ANSWER, Sentence, compose, scored_sentences

__all__ = ["focused_answer", "personal_sentence", "ON_TOPIC", "PTKB_FACT", "POOL"]

ON_TOPIC = 0.20
PTKB_FACT = 0.40
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


async def focused_answer(embedder: Embedder, query: str, hits: Sequence[Any], *, utterance: str,
                         ptkb: Sequence[str] = (), remembered: Sequence[str] = (), earlier: Sequence[str] = (),
                         max_words: int = 220, passages: int = 5, focus: str | None = None,
                         on_topic: float = ON_TOPIC, ptkb_fact: float = PTKB_FACT) -> tuple[str, list[str]]:
    """(response, cited docids).  ``ptkb``: the statements the PTKB stage chose (named when
    they reach ``ptkb_fact`` with the utterance and with none of the ``earlier`` user
    utterances); ``remembered``: facts the memory strategy recalled for this turn (all
    named).  ``focus``: as in ``extractive_answer``."""
    ranked = scored_sentences(query, hits, passages, focus)[:POOL]
    said = [utterance or query, *(earlier if ptkb else ())]  # the earlier ones come from the embedder's cache
    texts = [*said, query, *ptkb, *(c.text for c in ranked)]
    vectors = await embedder.encode(texts) if ranked or ptkb else None
    at = len(said) + 1  # where the statements start
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
        sims = cosine(vectors[[0, len(said)]], vectors[at + len(ptkb):]).max(axis=0)  # utterance, query
        kept = [c for c, sim in zip(ranked, sims) if float(sim) >= on_topic]
    if not kept:
        return (f"{opening} {NO_ANSWER}" if opening else NO_ANSWER), []
    body, used = compose(kept, budget)
    return (f"{opening} {body}" if opening else body), used
