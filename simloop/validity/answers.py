"""The off-topic measure of answers: the grader's focus rule against hand labels.

An assistant's answer sentences are judged off topic by the grader's focus rule: support
(best MiniLM cosine with a sentence of the rubric question's reference, or with one of the
user's own facts, ``simulators.evidence``) below the middle of the grader's focus ramp.  A
hand-labelled set (``LabelledSentence`` lines: each sentence read and labelled on/off the
question's subject, with a reason) gives the share a reader calls off, and the rule's
precision and recall against the reader: how far the grader's notion of focus can be
trusted.  ``scripts/bench_answers.py`` reports these figures on the demo's answers.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

__all__ = ["OPENINGS", "LabelledSentence", "load_labels", "sentence_support", "judged_sentences", "off_cut",
           "score_run"]

OPENINGS = ("Since you mentioned that ", "Given that ")  # a recalled fact / a PTKB statement (generate_focus.py)


class LabelledSentence(BaseModel):
    """One line of ``bench/labels/offtopic_sentences.jsonl``."""

    model_config = ConfigDict(extra="forbid")
    answer: str  # "<dialogue id>#<turn index>" of the demo run it was read in
    topic: str
    rubric: str
    question: str
    sentence: str
    label: Literal["on", "off"]  # about the question's subject, or about another one
    reason: str


def load_labels(path: Path) -> list[LabelledSentence]:
    return [LabelledSentence.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


async def sentence_support(items: list[tuple[str, str, str | None]], embedder: Any,
                           facts: list[tuple[str, ...]] | None = None) -> list[float]:
    """Per (question, sentence, reference): the sentence's best cosine with a sentence of the
    reference (with the question alone when there is none) or, as the grader reads focus,
    with one of the user's own facts (``facts``, per item: the persona's PTKB)."""
    from ..simulators import prepare

    known = facts or [() for _ in items]
    goals = {(q, r): list(prepare(r, q).pieces) if r else [q] for q, _, r in items}
    texts = list(dict.fromkeys([s for _, s, _ in items] + [p for ps in goals.values() for p in ps]
                               + [f for fs in known for f in fs]))
    vecs = dict(zip(texts, await embedder.encode(texts))) if texts else {}
    out = []
    for (q, s, r), fs in zip(items, known):
        g = np.stack([vecs[p] for p in [*goals[(q, r)], *fs]])
        out.append(float((g @ vecs[s]).max()))
    return out


def judged_sentences(answer: str) -> tuple[list[str], int]:
    """The sentences of ``answer`` that the off-topic figures judge, and how many honest
    "nothing found" lines (``parts.NO_ANSWER``, ``parts.NOTHING_NEW``) were left out: such a line is about no
    subject at all, and an assistant that admits a miss must not look padded for it.
    Questions asked back are left out as the grader leaves them out."""
    from ..parts import NO_ANSWER, NOTHING_NEW
    from ..simulators import is_asking
    from ..text import sentences

    said = [s for s in sentences(answer) if s.strip() not in (NO_ANSWER, NOTHING_NEW)]
    return [s for s in said if not is_asking(s)], len(sentences(answer)) - len(said)


def off_cut() -> float:
    """Support below this is off topic: the middle of the grader's focus ramp."""
    from ..simulators import EmbeddingGrader

    floor, full = EmbeddingGrader().focus_ramp
    return (floor + full) / 2


async def score_run(run_dir: Path, embedder: Any, personas_dir: Path, labels: Path,
                    only: set[str] | None = None) -> dict[str, Any]:
    """The figures for the answers of ``run_dir`` (questions and references looked up in
    ``personas_dir``, hand labels in ``labels``); ``only``: just these dialogue ids (to
    compare two runs on the same dialogues)."""
    from ..inputs import load_personas
    from ..run import read_transcripts
    from ..text import word_count

    personas = load_personas(personas_dir)
    rubric = {(t.id, q.id): q for p in personas for t in p.topics for q in t.rubric}
    ptkb = {t.id: tuple(p.ptkb) for p in personas for t in p.topics}
    rows = [(tr.scenario.topic_id, t.user.rubric_id or "", t.assistant.response)
            for tr in read_transcripts(run_dir) if only is None or tr.dialogue_id in only for t in tr.turns]
    items, keys, facts = [], [], []
    lengths, personal, no_answer = [], 0, 0
    for topic, rid, answer in rows:
        lengths.append(word_count(answer))
        personal += answer.startswith(OPENINGS)
        q = rubric.get((topic, rid))
        if q is None:
            continue
        said, missed = judged_sentences(answer)
        no_answer += missed
        for s in said:
            items.append((q.question, s, q.reference))
            keys.append((topic, q.question, s))
            facts.append(ptkb.get(topic, ()))
    support = await sentence_support(items, embedder, facts)
    cut = off_cut()
    flagged = [x < cut for x in support]
    known = {(x.topic, x.question, x.sentence): x.label for x in load_labels(labels)}
    judged = [(known[k], f) for k, f in zip(keys, flagged) if k in known]
    hand_off = sum(lab == "off" for lab, _ in judged)
    both = sum(lab == "off" and f for lab, f in judged)
    examples = [{"question": i[0], "sentence": i[1]} for i, f in zip(items, flagged) if f][:5]
    n = max(1, len(rows))
    return {"answers": len(rows), "sentences": len(items), "no_answer_lines": no_answer, "off_cut": cut,
            "offtopic_sentences": sum(flagged),
            "answer_offtopic_sentence_share": round(sum(flagged) / max(1, len(items)), 4),
            "labelled_coverage": len(judged), "labelled_off": hand_off,
            "answer_offtopic_labelled_share": round(hand_off / len(judged), 4) if judged else None,
            "measure_precision": round(both / max(1, sum(f for _, f in judged)), 4) if judged else None,
            "measure_recall": round(both / hand_off, 4) if hand_off else None,
            "words_max": max(lengths, default=0), "words_mean": round(statistics.fmean(lengths), 1) if lengths else 0,
            "personal_share": round(personal / n, 4), "examples": examples}
