"""The evidence sets: wrong facts and padding in real iKAT answers.

For every usable turn (as ``labelled.build_cases``: a human response that does not only
ask), the question is the resolved utterance and the candidates are:

* ``true``             the human response;
* ``negated``          every statement of it said the other way round (fakes.falsify.negate);
* ``entity_swapped``   its names replaced by others of the same kind (the nearest in MiniLM
                       among the candidates' names);
* ``padded_neighbour`` it with 1-2 sentences on a neighbouring subject inserted at random
                       places: the sentences nearest the question of text from another
                       base topic.

Two generators per kind, so that what is tuned on one is checked on the other (the
project keeps adversaries of its own as well): the first (``tune``) is what thresholds
were chosen on, the second (``held_out``) is reported as a check:

=================  ==============================  ===================================
kind               tune                            held_out
=================  ==============================  ===================================
negated            "auxiliary": is -> is not,      "lexical": opposites (its own list),
                   numbers doubled                 never / no longer, numbers shifted
entity_swapped     names of other base topics      names of the same conversation's
                                                   other turns (may be in the reference)
padded_neighbour   the nearest passage of another  the nearest human response sentences
                   base topic (web text)           of another base topic
=================  ==============================  ===================================

Two reference modes (the grader gets ``RubricQuestion.reference``):

* ``issue``: the gold response and the turn's passages (``inputs.ikat.turn_reference``),
  as ``personas from-ikat`` writes it.  The graded human answer is then *in* its own
  reference, so telling it from its negation is easy: the issue's protocol, reported;
* ``honest``: the answer is not in its reference.  2023: the turn's passages only (turns
  citing none are left out); 2024 has no passage texts: the gold responses of the
  conversation's *other* turns (nearest first, as much as a reference holds): what a user
  who followed the whole conversation knows.  Thresholds are chosen in this mode, on 2023
  train (``scripts/bench_evidence.py --tune``).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .labelled import SEED, base_topic, only_asks
from .stats import auc, pass_rate

if TYPE_CHECKING:
    from ..fakes import NegationStyle

__all__ = ["KINDS", "GENERATORS", "MODES", "TRAIN", "EvTurn", "EvCase", "load_turns", "build", "passage_pool",
           "earlier_cases", "earlier_questions", "grade", "score"]

KINDS = ("true", "negated", "entity_swapped", "padded_neighbour")
NEGATION_STYLES: tuple[NegationStyle, NegationStyle] = ("auxiliary", "lexical")
GENERATORS = {"negated": NEGATION_STYLES, "entity_swapped": ("other_topic", "same_topic"),
              "padded_neighbour": ("passage", "response")}
MODES = ("issue", "honest")
TRAIN = "2023/2023_train_topics.json"
_PAD_MIN_WORDS, _PAD_MAX_WORDS = 6, 40
_PASSAGE_HEAD = 120  # words of a passage encoded to find the one nearest a question


@dataclass(frozen=True)
class EvTurn:
    key: str  # "<conversation>_<turn id>"
    conv: str
    question: str
    response: str
    refs: dict[str, str | None] = field(default_factory=dict)  # mode -> reference


@dataclass(frozen=True)
class EvCase:
    turn: str
    kind: str
    generator: str  # "tune", "held_out", or "" for the true answer
    question: str
    response: str


def load_turns(path: Path, only_asks: Any = only_asks) -> list[EvTurn]:
    """The usable turns of a topic file, with their reference in each mode."""
    from ..inputs import REFERENCE_PASSAGE_WORDS, load_ikat_topics, load_passage_texts, turn_reference

    passages = load_passage_texts(path)
    turns: list[EvTurn] = []
    for persona in load_ikat_topics(path):
        gold = persona.topics[0].gold_turns
        for t in gold:
            if not t.response.strip() or not t.resolved_utterance.strip() or only_asks(t.response):
                continue
            if passages:
                honest = turn_reference(t, passages, gold=False)
            else:  # leave the answer out: the other turns' answers, nearest turns first
                others = sorted((o for o in gold if o.turn_id != t.turn_id and o.response.strip()),
                                key=lambda o: abs(o.turn_id - t.turn_id))
                words, kept = 0, []
                for o in others:
                    if words >= REFERENCE_PASSAGE_WORDS:
                        break
                    kept.append(o.response.strip())
                    words += len(o.response.split())
                honest = " ".join(kept) or None
            refs = {"issue": turn_reference(t, passages), "honest": honest}
            turns.append(EvTurn(f"{persona.id}_{t.turn_id}", persona.id, t.resolved_utterance, t.response, refs))
    return turns


async def build(turns: list[EvTurn], pool_passages: dict[str, tuple[str, str]], embedder: Any,
                seed: int = SEED) -> tuple[list[EvCase], dict[str, int]]:
    """Every candidate of every turn (cases a generator has no handle on are counted, not made)."""
    from ..fakes import negate, swap_entities
    from ..simulators import entities, name_terms, name_words
    from ..text import sentences, word_count

    rng = random.Random(f"{seed}|evidence|{len(turns)}")
    names = {t.key: entities(t.response, name_words(t.response, t.question)) for t in turns}
    all_names = sorted({n for ns in names.values() for n in ns if name_terms(n)})
    name_vec = dict(zip(all_names, np.asarray(await embedder.encode(all_names)))) if all_names else {}
    questions = np.asarray(await embedder.encode([t.question for t in turns]))
    # Neighbour text: passages (their heads) and response sentences of other base topics.
    pids = sorted(pool_passages)
    heads = [" ".join(pool_passages[p][1].split()[:_PASSAGE_HEAD]) for p in pids]
    head_vecs = np.asarray(await embedder.encode(heads)) if heads else np.zeros((0, 1))
    psg_base = [pool_passages[p][0] for p in pids]
    resp_sents = [(base_topic(t.conv), s) for t in turns for s in sentences(t.response)
                  if not s.endswith("?") and _PAD_MIN_WORDS <= word_count(s) <= _PAD_MAX_WORDS]
    resp_vecs = np.asarray(await embedder.encode([s for _, s in resp_sents])) if resp_sents else np.zeros((0, 1))

    cases: list[EvCase] = []
    skipped = {"entity_swapped_no_names": 0, "negated_unchanged": 0}
    for i, t in enumerate(turns):
        base, q = base_topic(t.conv), t.question
        cases.append(EvCase(t.key, "true", "", q, t.response))
        for gen, style in zip(("tune", "held_out"), NEGATION_STYLES):
            neg = negate(t.response, random.Random(f"{seed}|{t.key}|{style}"), style)
            if neg == t.response:
                skipped["negated_unchanged"] += 1
                continue
            cases.append(EvCase(t.key, "negated", gen, q, neg))
        mine = [n for n in names[t.key] if n in name_vec]
        for gen, source in zip(("tune", "held_out"), GENERATORS["entity_swapped"]):
            pool = [n for o in turns if (base_topic(o.conv) != base if source == "other_topic"
                                         else o.conv == t.conv and o.key != t.key) for n in names[o.key]]
            swapped = swap_entities(t.response, mine, partial(_nearest_name, pool=pool, vecs=name_vec, text=t.response))
            if swapped == t.response:
                skipped["entity_swapped_no_names"] += 1
                continue
            cases.append(EvCase(t.key, "entity_swapped", gen, q, swapped))
        # padding: 1-2 sentences nearest the question, from the nearest passage of another base topic
        n_pad = rng.choice((1, 2))
        far = [k for k, b in enumerate(psg_base) if b != base]
        pads_p: list[str] = []
        if far:
            best = far[int(np.argmax(head_vecs[far] @ questions[i]))]
            pads_p = await _nearest_sentences(pool_passages[pids[best]][1], questions[i], n_pad, embedder)
        others = [k for k, (b, _) in enumerate(resp_sents) if b != base]
        pads_r = [resp_sents[k][1] for k in sorted(others, key=lambda k: -float(resp_vecs[k] @ questions[i]))[:n_pad]]
        for gen, pads in (("tune", pads_p), ("held_out", pads_r)):
            if pads:
                parts = sentences(t.response)
                for pad in pads:
                    parts.insert(rng.randint(0, len(parts)), pad)
                cases.append(EvCase(t.key, "padded_neighbour", gen, q, " ".join(parts)))
    return cases, skipped


def passage_pool(path: Path) -> dict[str, tuple[str, str]]:
    """The passages of a topic file's ``_psg_text.jsonl``: id -> (base topic citing it, text)."""
    from ..inputs import load_ikat_topics, load_passage_texts

    texts = load_passage_texts(path)
    pool: dict[str, tuple[str, str]] = {}
    for persona in load_ikat_topics(path):
        for t in persona.topics[0].gold_turns:
            for pid in t.response_provenance:
                if pid in texts:
                    pool.setdefault(pid, (base_topic(persona.id), texts[pid]))
    return pool


async def _nearest_sentences(text: str, question: np.ndarray, n: int, embedder: Any) -> list[str]:
    from ..text import sentences, word_count

    sents = [s for s in sentences(text) if not s.endswith("?") and _PAD_MIN_WORDS <= word_count(s) <= _PAD_MAX_WORDS]
    if not sents:
        return []
    vecs = np.asarray(await embedder.encode(sents))
    order = np.argsort(-(vecs @ question))[:n]
    return [sents[k] for k in sorted(order)]


def _nearest_name(span: str, pool: list[str], vecs: dict[str, np.ndarray], text: str) -> str | None:
    """The name of ``pool`` most like ``span`` (MiniLM): another name of the same kind,
    sharing no word with ``span`` and not already in ``text``."""
    from ..simulators import name_terms

    if span not in vecs:
        return None
    mine, low = name_terms(span), text.lower()
    options = [n for n in dict.fromkeys(pool) if n in vecs and not name_terms(n) & mine and n.lower() not in low]
    if not options:
        return None
    return max(options, key=lambda n: float(vecs[n] @ vecs[span]))


def earlier_cases(turns: list[EvTurn], seed: int = SEED) -> list[EvCase]:
    """``earlier``: the answer of an earlier turn of the same conversation (the issue's
    assistant that answers every turn with its first answer), graded knowing the earlier
    questions (``earlier_questions``)."""
    rng = random.Random(f"{seed}|earlier")
    out = []
    for i, t in enumerate(turns):
        before = [o for o in turns[:i] if o.conv == t.conv and o.response != t.response]
        if before:
            out.append(EvCase(t.key, "earlier", "", t.question, rng.choice(before).response))
    return out


def earlier_questions(turns: list[EvTurn], key: str, mode: str) -> list[Any]:
    """The rubric questions before turn ``key`` in its conversation, with their references."""
    from ..schema import RubricQuestion

    i = next(n for n, t in enumerate(turns) if t.key == key)
    conv = turns[i].conv
    return [RubricQuestion(id=o.key, question=o.question, reference=o.refs[mode]) for o in turns[:i] if o.conv == conv]


async def grade(grader: Any, turns: list[EvTurn], cases: list[EvCase], mode: str, *,
                batch: int = 64) -> list[tuple[EvCase, float]]:
    """Each case graded with its turn's reference in ``mode`` (cases whose turn has none in
    that mode are left out), ``batch`` at a time.  ``earlier`` cases also get the earlier
    questions, which only a grader with ``explain`` (the embedding grader) takes: for
    another grader they are left out.  A grader error leaves the case out (``grade_errors``
    counts them); no grade counts as 0."""
    from ..schema import RubricQuestion

    by = {t.key: t for t in turns}
    explains = hasattr(grader, "explain")
    todo = [c for c in cases if by[c.turn].refs[mode] and (explains or c.kind != "earlier")]

    async def one(c: EvCase) -> float | None:
        q = RubricQuestion(id=c.turn, question=c.question, reference=by[c.turn].refs[mode])
        try:
            if explains:
                before = earlier_questions(turns, c.turn, mode) if c.kind == "earlier" else None
                return float((await grader.explain(q, c.response, earlier=before)).grade)
            got, _ = await grader.grade(q, c.response)
        except Exception:  # left out and counted, as labelled.grade_all
            return None
        return float(got if got is not None else 0.0)

    out: list[float | None] = []
    for i in range(0, len(todo), batch):
        out += await asyncio.gather(*(one(c) for c in todo[i:i + batch]))
    return [(c, g) for c, g in zip(todo, out) if g is not None]


def score(graded: list[tuple[EvCase, float]], auc: Any = auc, rate: Any = pass_rate) -> dict[str, Any]:
    """Per kind and generator: n, pass rate and AUC of the true answer against it."""
    groups: dict[str, list[float]] = {}
    for c, g in graded:
        groups.setdefault(c.kind if not c.generator else f"{c.kind}/{c.generator}", []).append(g)
    true = groups.get("true", [])
    out: dict[str, Any] = {}
    for name, grades in sorted(groups.items()):
        row: dict[str, Any] = {"n": len(grades), "pass_rate": rate(grades)}
        if name != "true":
            row["auc_true_vs"] = auc(true, grades)
        out[name] = row
    return out


build_evidence = build  # the name the face gives it
