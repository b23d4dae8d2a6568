"""Labelled grading sets from the iKAT topic files: a human answer against its adversaries.

For each turn with a human response, the question is the turn's resolved utterance and
the candidates are:

* ``true``        the human response;
* ``other_topic`` the response of a turn of another topic (another base topic in 2023,
                  where "9-1" and "9-2" share one);
* ``other_turn``  the response of another turn of the same conversation;
* ``restated``    the question restated with filler (``fakes.restate``);
* ``padded``      the human response with two sentences of other topics' responses inserted;
* ``clarify``     a clarifying question (``fakes.clarifying_question``).

Turns whose human response only asks the user something (iKAT's assistant clarifying
rather than answering) are left out: a grader must fail a clarifying question, so they are
not positives; their count is reported.  Templates and draws are seeded (``SEED``), so
every simulator configuration is graded on the same candidates.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .stats import auc, pass_rate

__all__ = ["SEED", "SETS", "REPORT", "KINDS", "Case", "build_cases", "score", "grade_all", "reference_mode",
           "graded", "only_asks", "base_topic"]

SEED = 11
SETS = {"2023_train": "2023/2023_train_topics.json", "2023_test": "2023/2023_test_topics.json",
        "2024_test": "2024/2024_test_topics.json"}
REPORT = ("2023_test", "2024_test")  # the sets figures are measured on (2023 train: where parameters were chosen)
KINDS = ("true", "other_topic", "other_turn", "restated", "padded", "clarify")
_PAD_MIN_WORDS, _PAD_MAX_WORDS = 6, 40


@dataclass(frozen=True)
class Case:
    turn: str  # "<conversation>_<turn id>"
    kind: str
    question: str
    response: str


def only_asks(response: str) -> bool:
    """The response asks and states nothing: every sentence of it is a question."""
    from ..text import sentences

    parts = sentences(response)
    return bool(parts) and all(s.rstrip().endswith("?") for s in parts)


def base_topic(conv: str) -> str:
    return conv.split("-")[0]


def build_cases(path: Path, seed: int = SEED) -> tuple[list[Case], dict[str, int]]:
    """The six labelled candidates of every usable turn of one topic file."""
    from ..fakes import clarifying_question, restate
    from ..inputs import load_ikat_topics
    from ..text import sentences, word_count

    convs = [(p.id, t) for p in load_ikat_topics(path) for t in p.topics[0].gold_turns]
    answered = [(c, t) for c, t in convs if t.response.strip() and t.resolved_utterance.strip()]
    usable = [(c, t) for c, t in answered if not only_asks(t.response)]
    pad_pool = [(c, s) for c, t in usable for s in sentences(t.response)
                if not s.endswith("?") and _PAD_MIN_WORDS <= word_count(s) <= _PAD_MAX_WORDS]
    rng = random.Random(f"{seed}|{path.name}")
    cases: list[Case] = []
    for conv, t in usable:
        key, q = f"{conv}_{t.turn_id}", t.resolved_utterance
        others = [r for c, r in usable if base_topic(c) != base_topic(conv)]
        same = [r for c, r in usable if c == conv and r.turn_id != t.turn_id and r.response != t.response]
        foreign = [s for c, s in pad_pool if base_topic(c) != base_topic(conv)]
        parts = sentences(t.response)
        for pad in rng.sample(foreign, 2):  # at random places, the ends included
            parts.insert(rng.randint(0, len(parts)), pad)
        cases += [Case(key, "true", q, t.response),
                  Case(key, "other_topic", q, rng.choice(others).response),
                  Case(key, "restated", q, restate(q, rng)),
                  Case(key, "padded", q, " ".join(parts)),
                  Case(key, "clarify", q, clarifying_question(q, rng))]
        if same:
            cases.append(Case(key, "other_turn", q, rng.choice(same).response))
    return cases, {"turns": len(convs), "with_response": len(answered),
                   "only_asking_left_out": len(answered) - len(usable), "used": len(usable)}


def score(cases: list[Case], grades: list[float]) -> dict[str, Any]:
    """Per-kind pass rates and mean grades, the AUCs and the padding figure of one set."""
    by: dict[str, list[float]] = {k: [] for k in KINDS}
    per_turn: dict[tuple[str, str], float] = {}
    for c, g in zip(cases, grades):
        by[c.kind].append(g)
        per_turn[(c.turn, c.kind)] = g
    true = by["true"]
    padded = [(per_turn[(t, "padded")], per_turn[(t, "true")]) for t, k in per_turn
              if k == "true" and (t, "padded") in per_turn]
    out: dict[str, Any] = {"n": {k: len(v) for k, v in by.items()}}
    out["pass_rate"] = {k: pass_rate(v) for k, v in by.items()}
    out["mean_grade"] = {k: round(sum(v) / len(v), 3) if v else None for k, v in by.items()}
    out["max_grade"] = {k: max(v) if v else None for k, v in by.items()}
    for k in ("restated", "other_turn", "other_topic", "clarify", "padded"):
        out[f"auc_true_vs_{k}"] = auc(true, by[k])
    out["padding_penalised"] = round(sum(p < t for p, t in padded) / len(padded), 4) if padded else None
    return out


async def grade_all(grader: Any, cases: list[Case], reference: dict[str, str] | None = None, *,
                    batch: int = 64) -> list[float | None]:
    """Grades of ``cases`` (``reference``: turn -> reference answer, for the reference mode),
    ``batch`` at a time (concurrent embedding calls coalesce into one MiniLM batch; an LLM
    endpoint is given fewer).  No grade (None) counts as 0: the candidate did not pass.  A
    grader that failed (an error, such as an LLM reply that would not parse even after its
    repair) gives None: the caller leaves it out and counts it, rather than scoring an
    outage as a bad answer."""
    from ..schema import RubricQuestion

    async def one(c: Case) -> float | None:
        ref = reference.get(c.turn) if reference else None
        try:
            grade, _ = await grader.grade(RubricQuestion(id=c.turn, question=c.question, reference=ref), c.response)
        except Exception:  # counted by the caller as not graded
            return None
        return float(grade if grade is not None else 0.0)

    out: list[float | None] = []
    for i in range(0, len(cases), batch):
        out += await asyncio.gather(*(one(c) for c in cases[i:i + batch]))
    return out


def graded(cases: list[Case], grades: list[float | None]) -> tuple[list[Case], list[float], int]:
    """The cases that got a grade, their grades, and how many did not."""
    kept = [(c, g) for c, g in zip(cases, grades) if g is not None]
    return [c for c, _ in kept], [g for _, g in kept], len(cases) - len(kept)


async def reference_mode(grader: Any, cases: list[Case], *, batch: int = 64) -> dict[str, Any]:
    """With the human response as ``reference``: the negatives must still fail, and the first
    half of a long human answer (a partial but correct answer) should pass."""
    from ..text import sentences

    refs = {c.turn: c.response for c in cases if c.kind == "true"}
    halves = []
    for turn, text in refs.items():
        parts = sentences(text)
        if len(parts) >= 4:
            q = next(c.question for c in cases if c.turn == turn)
            halves.append(Case(turn, "half", q, " ".join(parts[: len(parts) // 2])))
    negatives = [c for c in cases if c.kind in ("other_topic", "other_turn", "restated", "clarify")]
    kept, grades, _ = graded(negatives + halves, await grade_all(grader, negatives + halves, refs, batch=batch))
    rates: dict[str, Any] = {}
    for kind in ("other_topic", "other_turn", "restated", "clarify", "half"):
        g = [x for c, x in zip(kept, grades) if c.kind == kind]
        rates[kind] = {"n": len(g), "pass_rate": pass_rate(g)}
    _, bare, _ = graded(halves, await grade_all(grader, halves, batch=batch))
    rates["half_without_reference"] = {"n": len(bare), "pass_rate": pass_rate(bare)}
    return rates
