"""Extractive answers that stay on the question and speak to the user (issue 12, item 3).

``focused_answer`` builds on the lexical extractive answer (``generate.py``):

1. On the question.  The best-scoring sentences (``POOL`` of them) are embedded with
   MiniLM; a sentence is kept only when its cosine to the user's utterance or to the
   rewritten query (the assistant's view of the topic: the utterance plus context words)
   reaches ``ON_TOPIC``.  The rest of the selection (relative floor, no repeats, word
   budget, reading order) is the lexical one's.
2. Personal.  An opening sentence names what the user told us that bears on the answer:
   the PTKB statements the PTKB stage chose whose cosine to the utterance reaches
   ``PTKB_FACT``, and the statements the memory strategy kept and recalled for this turn
   (already chosen by relevance in the agent).  Both arrive as structured values (the
   statements themselves), never parsed out of a prompt.  The sentence ends with a
   caution ("skip anything below that does not fit"): an extractive answer cannot adapt
   the passages to the fact, so it says so.
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

from typing import Any, Sequence

from ..search import cosine
from ..search.embeddings import Embedder
from ..text import second_person, word_count
from .generate import NO_ANSWER, Sentence, compose, scored_sentences

__all__ = ["focused_answer", "personal_sentence", "ON_TOPIC", "PTKB_FACT", "POOL"]

ON_TOPIC = 0.20
PTKB_FACT = 0.40
POOL = 24  # sentences embedded per turn: the lexical best (a 220-word answer holds about 8-10)
_MAX_FACTS = 2  # more than two facts in one sentence reads as a list, not as attention


def personal_sentence(facts: Sequence[str]) -> str:
    """"Since you mentioned that you ..., skip anything below that does not fit." ("" for none)."""
    clauses = [c for c in (second_person(f) for f in facts) if c]
    if not clauses:
        return ""
    said = " and that ".join(clauses[:_MAX_FACTS])
    return f"Since you mentioned that {said}, skip anything below that does not fit."


async def focused_answer(embedder: Embedder, query: str, hits: Sequence[Any], *, utterance: str,
                         ptkb: Sequence[str] = (), remembered: Sequence[str] = (), max_words: int = 220,
                         passages: int = 5, focus: str | None = None, on_topic: float = ON_TOPIC,
                         ptkb_fact: float = PTKB_FACT) -> tuple[str, list[str]]:
    """(response, cited docids).  ``ptkb``: the statements the PTKB stage chose (filtered
    here by ``ptkb_fact``); ``remembered``: facts the memory strategy recalled for this
    turn (all named).  ``focus``: as in ``extractive_answer``."""
    ranked = scored_sentences(query, hits, passages, focus)[:POOL]
    texts = [utterance or query, query, *ptkb, *(c.text for c in ranked)]
    vectors = await embedder.encode(texts) if ranked or ptkb else None
    facts = list(dict.fromkeys(remembered))
    if ptkb and vectors is not None:
        sims = cosine(vectors[:1], vectors[2:2 + len(ptkb)])[0]
        facts += [s for s, sim in zip(ptkb, sims) if float(sim) >= ptkb_fact and s not in facts]
    opening = personal_sentence(facts[:_MAX_FACTS])
    if word_count(opening) > max_words // 2:  # a tiny budget goes to the answer itself
        opening = ""
    budget = max_words - word_count(opening)
    kept: list[Sentence] = []
    if ranked and vectors is not None:
        sims = cosine(vectors[:2], vectors[2 + len(ptkb):]).max(axis=0)
        kept = [c for c, sim in zip(ranked, sims) if float(sim) >= on_topic]
    if not kept:
        return (f"{opening} {NO_ANSWER}" if opening else NO_ANSWER), []
    body, used = compose(kept, budget)
    return (f"{opening} {body}" if opening else body), used
