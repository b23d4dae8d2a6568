"""Section ``grader`` — validity of the offline embedding grader on real iKAT answers.

Labelled sets come from the iKAT topic files, read at run time (nothing is copied).  For
each turn with a human response, the question is the turn's resolved utterance and the
candidates are:

* ``true``        the human response;
* ``other_topic`` the response of a turn of another topic (another base topic in 2023,
                  where "9-1" and "9-2" share one);
* ``other_turn``  the response of another turn of the same conversation;
* ``restated``    the question restated with filler (``fakes.adversaries.restate``);
* ``padded``      the human response with two sentences of other topics' responses inserted;
* ``clarify``     a clarifying question (``fakes.adversaries.clarifying_question``).

Turns whose human response only asks the user something (iKAT's assistant clarifying
rather than answering) are left out: the grader must fail a clarifying question, so they
are not positives; their count is reported.  Templates and draws are seeded (``SEED``).

The grader's parameters were chosen on ``2023_train_topics.json`` only; the figures are
measured on the pooled report sets (2023 test + 2024 test: 550 turns, 496 after the exclusion),
with each set also reported alone in the details.  Grading is without ``reference`` (the
human answer graded against itself would be trivial); the ``reference_mode`` details show
how the reference mode behaves, with the human response as the reference.

Evidence (bench_evidence.py): the human answer against its negation, its names
swapped and neighbour padding, graded *with* a reference, in two modes: ``issue`` (gold
response + passages: the answer is in its own reference; the headline figures) and
``honest`` (the answer is not in its reference; reported as ``*_honest`` figures and in the
details, as are the held-out generators).  ``earlier``: another answer of the same
conversation's earlier turns, graded knowing the earlier questions.  End to end, the
genuine ``bm25_extractive`` answers negated (``Negated``) must not satisfy the demo users.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_evidence as ev
from bench_common import ROOT, figure, ikat_dir, info
from bench_evidence import auc, base_topic, only_asks

SEED = 11
SETS = {"2023_train": "2023/2023_train_topics.json", "2023_test": "2023/2023_test_topics.json",
        "2024_test": "2024/2024_test_topics.json"}
REPORT = ("2023_test", "2024_test")
KINDS = ("true", "other_topic", "other_turn", "restated", "padded", "clarify")
THRESHOLD = 3.0  # the policy's pass mark: a grade strictly above it passes
# End to end over the demo personas: (assistant, figure, target, better).
E2E = [("simloop.fakes.adversaries:Parrot", "grader_e2e_parrot_satisfied", 0.05, "lower"),
       ("simloop.fakes.adversaries:OffTopic", "grader_e2e_offtopic_satisfied", 0.05, "lower"),
       ("simloop.fakes.adversaries:Asker", "grader_e2e_asker_satisfied", 0.05, "lower"),
       ("bm25_extractive", "grader_e2e_bm25_extractive_satisfied", 0.50, "higher"),
       ("simloop.fakes.adversaries:Negated", "grader_e2e_negated_satisfied", 0.10, "lower")]
TARGETS = {"grader_auc_true_vs_restated": 0.90, "grader_auc_true_vs_other_turn": 0.85,
           "grader_auc_true_vs_other_topic": 0.95, "grader_padding_penalised": 0.80,
           "grader_true_pass_rate": 0.60}
# Evidence figures: (figure, kind or kind/generator, mode, target); target None = informational.
EVIDENCE = [("grader_auc_true_vs_negated", "negated/tune", "issue", 0.90),
            ("grader_auc_true_vs_entity_swapped", "entity_swapped/tune", "issue", 0.90),
            ("grader_auc_true_vs_padded", "padded_neighbour/tune", "issue", 0.85),
            ("grader_auc_true_vs_earlier", "earlier", "issue", None)]
# The passage pool for neighbour padding: a set's own passages, or (2024: none) 2023 test's.
PASSAGES = {"2023_train": "2023_train", "2023_test": "2023_test", "2024_test": "2023_test"}
_PAD_MIN_WORDS, _PAD_MAX_WORDS = 6, 40
_E2E_MAX_S = 1800


@dataclass(frozen=True)
class Case:
    turn: str  # "<conversation>_<turn id>"
    kind: str
    question: str
    response: str


def build_cases(path: Path, seed: int = SEED) -> tuple[list[Case], dict[str, int]]:
    """The six labelled candidates of every usable turn of one topic file."""
    from simloop.fakes import clarifying_question, restate
    from simloop.inputs import load_ikat_topics
    from simloop.text import sentences, word_count

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
    padded = [(per_turn[(t, "padded")], per_turn[(t, "true")]) for t, k in per_turn if k == "true"]
    out: dict[str, Any] = {"n": {k: len(v) for k, v in by.items()}}
    out["pass_rate"] = {k: _rate(v) for k, v in by.items()}
    out["mean_grade"] = {k: round(sum(v) / len(v), 3) if v else None for k, v in by.items()}
    out["max_grade"] = {k: max(v) if v else None for k, v in by.items()}
    for k in ("restated", "other_turn", "other_topic", "clarify", "padded"):
        out[f"auc_true_vs_{k}"] = auc(true, by[k])
    out["padding_penalised"] = round(sum(p < t for p, t in padded) / len(padded), 4) if padded else None
    return out


async def grade_all(grader: Any, cases: list[Case], reference: dict[str, str] | None = None) -> list[float]:
    """Grades of ``cases`` (``reference``: turn -> reference answer, for the reference mode)."""
    from simloop.schema import RubricQuestion

    async def one(c: Case) -> float:
        ref = reference.get(c.turn) if reference else None
        grade, _ = await grader.grade(RubricQuestion(id=c.turn, question=c.question, reference=ref), c.response)
        return float(grade if grade is not None else 0.0)

    out: list[float] = []
    for i in range(0, len(cases), 64):  # concurrent calls coalesce into one MiniLM batch
        out += await asyncio.gather(*(one(c) for c in cases[i:i + 64]))
    return out


async def reference_mode(grader: Any, cases: list[Case]) -> dict[str, Any]:
    """With the human response as ``reference``: the negatives must still fail, and the first
    half of a long human answer (a partial but correct answer) should pass."""
    from simloop.text import sentences

    refs = {c.turn: c.response for c in cases if c.kind == "true"}
    halves = []
    for turn, text in refs.items():
        parts = sentences(text)
        if len(parts) >= 4:
            q = next(c.question for c in cases if c.turn == turn)
            halves.append(Case(turn, "half", q, " ".join(parts[: len(parts) // 2])))
    negatives = [c for c in cases if c.kind in ("other_topic", "other_turn", "restated", "clarify")]
    graded = negatives + halves
    grades = await grade_all(grader, graded, refs)
    rates: dict[str, Any] = {}
    for kind in ("other_topic", "other_turn", "restated", "clarify", "half"):
        g = [x for c, x in zip(graded, grades) if c.kind == kind]
        rates[kind] = {"n": len(g), "pass_rate": _rate(g)}
    rates["half_without_reference"] = {"n": len(halves), "pass_rate": _rate(await grade_all(grader, halves))}
    return rates


def _rate(grades: list[float]) -> float | None:
    return round(sum(g > THRESHOLD for g in grades) / len(grades), 4) if grades else None


def e2e(assistant: str, quick: bool) -> dict[str, Any]:
    """Stop reasons of a ``simloop run`` of ``assistant`` against the offline simulator over
    the demo personas: every topic, or (quick) each persona's first topic."""
    from simloop.inputs import load_personas
    from simloop.run import read_transcripts

    topics = [a for p in load_personas(ROOT / "personas") for a in ("--topic", p.topics[0].id)] if quick else []
    with tempfile.TemporaryDirectory(prefix="simloop-bench-") as tmp:
        cmd = [sys.executable, "-m", "simloop", "run", "--assistant", assistant, "--concurrency", "16",
               "--no-progress", "--out", tmp, "--run-id", "e2e", *topics]
        try:
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=_E2E_MAX_S)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {_E2E_MAX_S}s"}
        if proc.returncode != 0:
            return {"error": proc.stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]}
        transcripts = list(read_transcripts(Path(tmp) / "e2e"))
    grades = [t.user.grade for tr in transcripts for t in tr.turns if t.user.grade is not None]
    reasons = [tr.stop.reason for tr in transcripts]
    return {"dialogues": len(transcripts), "stop_reasons": {r: reasons.count(r) for r in sorted(set(reasons))},
            "satisfied": round(reasons.count("user_satisfied") / len(reasons), 4) if reasons else None,
            "turns": len(grades), "turn_pass_rate": _rate(grades)}


async def run(quick: bool, out_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    from simloop.search import open_embedder

    data = ikat_dir(tuple(SETS.values()))
    if data is None:
        reason = "iKAT topic files not found (set SIMLOOP_IKAT_DATA or put them in ../shared/data/ikat)"
        info(f"grader: skipped: {reason}")
        return {}, {"skipped": reason}
    embedder = await open_embedder()
    try:
        return await _measure(quick, data, embedder)
    finally:
        await embedder.aclose()


async def _measure(quick: bool, data: Path, embedder: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    from simloop.simulators import EmbeddingGrader

    grader = EmbeddingGrader(embedder=embedder)
    details: dict[str, Any] = {"seed": SEED, "threshold": THRESHOLD, "data": str(data), "sets": {}}
    pooled: tuple[list[Case], list[float]] = ([], [])
    for name, rel in SETS.items():
        cases, counts = build_cases(data / rel)
        if quick:  # every third turn: the same kinds, a third of the MiniLM time
            keep = sorted({c.turn for c in cases})[::3]
            cases = [c for c in cases if c.turn in keep]
        grades = await grade_all(grader, cases)
        details["sets"][name] = {"turns": counts, **score(cases, grades)}
        info(f"grader: {name}: {len(cases)} candidates, true pass rate {details['sets'][name]['pass_rate']['true']}")
        if name in REPORT:
            pooled[0].extend(cases)
            pooled[1].extend(grades)
            if not quick:
                details["sets"][name]["reference_mode"] = await reference_mode(grader, cases)
    report = score(*pooled)
    details["report_pooled"] = {"sets": list(REPORT), **report}
    evidence = await _evidence(grader, data, embedder, quick, details)
    values = {"grader_auc_true_vs_restated": report["auc_true_vs_restated"],
              "grader_auc_true_vs_other_turn": report["auc_true_vs_other_turn"],
              "grader_auc_true_vs_other_topic": report["auc_true_vs_other_topic"],
              "grader_padding_penalised": report["padding_penalised"],
              "grader_true_pass_rate": report["pass_rate"]["true"]}
    figures = {name: figure(v, TARGETS[name], better="higher") for name, v in values.items()}
    for name, group, mode, target in EVIDENCE:
        figures[name] = figure(_auc_of(evidence, mode, group), target, better="higher")
        held = group.replace("/tune", "/held_out")
        if held != group:
            figures[f"{name}_held_out"] = figure(_auc_of(evidence, mode, held), None)
        figures[f"{name}_honest"] = figure(_auc_of(evidence, "honest", group), None)
    for mode, suffix in (("issue", "reference"), ("honest", "honest")):
        figures[f"grader_true_pass_rate_{suffix}"] = figure(evidence[mode].get("true", {}).get("pass_rate"), None)
    # Informational: how often each adversarial candidate would pass (the issue: never).
    for kind in ("restated", "clarify", "other_topic", "other_turn"):
        figures[f"grader_{kind}_pass_rate"] = figure(report["pass_rate"][kind], None)
    details["e2e"] = {}
    for assistant, name, target, better in E2E:
        row = await asyncio.to_thread(e2e, assistant, quick)
        details["e2e"][assistant] = row
        figures[name] = figure(row.get("satisfied"), target, better=better)
        info(f"grader: e2e {assistant}: {row}")
    return figures, details


async def _evidence(grader: Any, data: Path, embedder: Any, quick: bool, details: dict[str, Any]) -> dict[str, Any]:
    """The evidence kinds of every set, graded in both modes; pooled over the report sets
    (``{mode: {kind or kind/generator: {n, pass_rate, auc_true_vs}}}``)."""
    pooled: dict[str, list[tuple[Any, float]]] = {m: [] for m in ev.MODES}
    for name, rel in SETS.items():
        turns = ev.load_turns(data / rel, only_asks)
        if quick:
            turns = turns[::3]
        pool = ev.passage_pool(data / SETS[PASSAGES[name]])
        cases, skipped = await ev.build(turns, pool, embedder)
        cases += ev.earlier_cases(turns)
        row: dict[str, Any] = {"turns": len(turns), "skipped": skipped}
        for mode in ev.MODES:
            graded = await ev.grade(grader, turns, cases, mode)
            row[mode] = ev.score(graded, auc, _rate)
            if name in REPORT:
                pooled[mode].extend(graded)
        details["sets"][name]["evidence"] = row
        info(f"grader: {name}: evidence {len(cases)} candidates x {len(ev.MODES)} modes")
    out = {mode: ev.score(graded, auc, _rate) for mode, graded in pooled.items()}
    details["evidence_pooled"] = {"sets": list(REPORT), **out}
    return out


def _auc_of(evidence: dict[str, Any], mode: str, group: str) -> float | None:
    return evidence.get(mode, {}).get(group, {}).get("auc_true_vs")


if __name__ == "__main__":  # scripts/bench_grader.py [--quick]: this section alone, printed
    sys.path.insert(0, str(ROOT))
    figs, det = asyncio.run(run("--quick" in sys.argv, ROOT / "bench"))
    print(json.dumps({"figures": figs, "details": det}, indent=1))
