"""Grader criteria: a simulator's grader on the labelled iKAT sets (labelled.py, evidence.py).

The figures are measured on the pooled report sets (2023 test + 2024 test); 2023 train,
where the offline grader's parameters were chosen, is graded only for the details
(``details=True``, the bench).  Every figure comes with a bootstrap interval over turns: a
turn is drawn with all its candidates.  ``keep`` picks the turns graded (``--sample``);
the labelled candidates of a kept turn are the ones the full card grades, while evidence
candidates are built among the kept turns only (names to swap and neighbour text come from
them and from a seeded share of the passages, so MiniLM encodes a sample's text, not a whole
file's), the same for every configuration measured on that sample.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from . import evidence as ev
from .card import Criterion, criterion
from .labelled import REPORT, SEED, SETS, Case, build_cases, grade_all, graded, reference_mode, score
from .stats import RESAMPLES, auc, bootstrap_ci, pass_rate

__all__ = ["GRADER_TARGETS", "EVIDENCE", "PASSAGES", "GraderFindings", "measure_grader", "sample_turns"]

# name -> (what, threshold); every one "higher is better"
GRADER_TARGETS: dict[str, tuple[str, float]] = {
    "grader_auc_true_vs_restated": ("human answer ranked above the question restated with filler", 0.90),
    "grader_auc_true_vs_other_turn": ("human answer ranked above another turn's answer of the same conversation",
                                      0.85),
    "grader_auc_true_vs_other_topic": ("human answer ranked above an answer from another topic", 0.95),
    "grader_padding_penalised": ("human answer padded with off-topic sentences graded below the plain answer", 0.80),
    "grader_true_pass_rate": ("human answers that pass (grade > 3)", 0.60),
}
# Evidence figures: (figure, kind or kind/generator, mode, target; None = informational, meaning).
EVIDENCE: list[tuple[str, str, str, float | None, str]] = [
    ("grader_auc_true_vs_negated", "negated/tune", "issue", 0.90, "human answer ranked above it negated"),
    ("grader_auc_true_vs_entity_swapped", "entity_swapped/tune", "issue", 0.90,
     "human answer ranked above it with its names swapped"),
    ("grader_auc_true_vs_padded", "padded_neighbour/tune", "issue", 0.85,
     "human answer ranked above it padded with a neighbouring subject"),
    ("grader_auc_true_vs_earlier", "earlier", "issue", None, "human answer ranked above an earlier turn's answer"),
]
# The passage pool for neighbour padding: a set's own passages, or (2024: none) 2023 test's.
PASSAGES = {"2023_train": "2023_train", "2023_test": "2023_test", "2024_test": "2023_test"}
Keep = Callable[[str, list[str]], set[str]]  # (set name, its turn keys) -> the turns graded


@dataclass
class GraderFindings:
    criteria: list[Criterion]
    details: dict[str, Any]
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def sample_turns(data: Path, n: int, seed: int = SEED) -> Keep:
    """A seeded sample of ``n`` turns of the pooled report sets, the same for every
    configuration (it depends only on the data)."""
    pooled = sorted((name, c.turn) for name in REPORT for c in build_cases(data / SETS[name])[0] if c.kind == "true")
    chosen = set(random.Random(f"{seed}|sample").sample(pooled, min(n, len(pooled))))
    return lambda name, keys: {k for k in keys if (name, k) in chosen}


def _units(pooled: list[tuple[str, Case, float]]) -> list[dict[str, float]]:
    """Per turn (set-qualified): kind -> grade."""
    by: dict[tuple[str, str], dict[str, float]] = {}
    for name, c, g in pooled:
        by.setdefault((name, c.turn), {})[c.kind] = g
    return list(by.values())


def _penalised(pairs: list[tuple[float, float]]) -> float:
    return sum(p < t for p, t in pairs) / len(pairs)


def _auc_units(units: list[dict[str, float]], neg: str, pos: str = "true") -> float | None:
    return auc([u[pos] for u in units if pos in u], [u[neg] for u in units if neg in u])


async def measure_grader(grader: Any, data: Path, embedder: Any, *, keep: Keep | None = None, quick: bool = False,
                         details: bool = False, batch: int = 64, resamples: int = RESAMPLES,
                         info: Callable[[str], None] = lambda _: None) -> GraderFindings:
    """Grade the labelled and evidence sets with ``grader``; the criteria and the details
    (per set, pooled).  ``quick``: every third turn of each file (the bench's quick mode)."""
    names = list(SETS) if details else list(REPORT)
    value: float | None
    det: dict[str, Any] = {"seed": SEED, "threshold": 3.0, "data": str(data), "sets": {}}
    pooled: list[tuple[str, Case, float]] = []
    errors = 0
    kept: dict[str, set[str]] = {}
    for name in names:
        cases, counts = build_cases(data / SETS[name])
        keys = sorted({c.turn for c in cases})
        kept[name] = set(keys[::3]) if quick else keep(name, keys) if keep else set(keys)
        cases = [c for c in cases if c.turn in kept[name]]
        got, grades, failed = graded(cases, await grade_all(grader, cases, batch=batch))
        errors += failed
        det["sets"][name] = {"turns": counts, **score(got, grades)}
        info(f"grader: {name}: {len(cases)} candidates, true pass rate {det['sets'][name]['pass_rate']['true']}")
        if name in REPORT:
            pooled += [(name, c, g) for c, g in zip(got, grades)]
            if details and not quick and keep is None:
                det["sets"][name]["reference_mode"] = await reference_mode(grader, got, batch=batch)
    report = score([c for _, c, _ in pooled], [g for _, _, g in pooled])
    det["report_pooled"] = {"sets": list(REPORT), **report}
    units = _units(pooled)
    criteria: list[Criterion] = []
    for name, (meaning, target) in GRADER_TARGETS.items():
        if name == "grader_padding_penalised":
            pairs = [(u["padded"], u["true"]) for u in units if "padded" in u and "true" in u]
            ci = bootstrap_ci(pairs, _penalised, resamples=resamples, seed=name)
            n, value = len(pairs), report["padding_penalised"]
        elif name == "grader_true_pass_rate":
            true = [u["true"] for u in units if "true" in u]
            ci, n = bootstrap_ci(true, pass_rate, resamples=resamples, seed=name), len(true)
            value = report["pass_rate"]["true"]
        else:
            kind = name.removeprefix("grader_auc_true_vs_")
            mine = [u for u in units if kind in u and "true" in u]
            ci = bootstrap_ci(units, partial(_auc_units, neg=kind), resamples=resamples, seed=name)
            n, value = len(mine), report[f"auc_true_vs_{kind}"]
        criteria.append(criterion(name, "grader", value, ci, n, "turns", target, "higher", meaning))
    evidence, ev_units, ev_errors = await _evidence(grader, data, embedder, names, kept, quick, keep is not None, det,
                                                    batch, info)
    errors += ev_errors
    for name, group, mode, bound, meaning in EVIDENCE:
        criteria.append(_ev_criterion(name, group, mode, bound, meaning, evidence, ev_units, resamples))
        held = group.replace("/tune", "/held_out")
        if held != group:
            criteria.append(_ev_criterion(f"{name}_held_out", held, mode, None, meaning + " (held-out generator)",
                                          evidence, ev_units, resamples))
        criteria.append(_ev_criterion(f"{name}_honest", group, "honest", None,
                                      meaning + " (reference without the answer)", evidence, ev_units, resamples))
    for mode, suffix in (("issue", "reference"), ("honest", "honest")):
        trues = [u["true"] for u in ev_units[mode] if "true" in u]
        criteria.append(criterion(f"grader_true_pass_rate_{suffix}", "grader",
                                  evidence[mode].get("true", {}).get("pass_rate"),
                                  bootstrap_ci(trues, pass_rate, resamples=resamples, seed=f"true_{suffix}"),
                                  len(trues), "turns", None, None,
                                  f"human answers that pass with the {mode} reference"))
    # Informational: how often each adversarial candidate would pass (the issue: never).
    for kind in ("restated", "clarify", "other_topic", "other_turn"):
        grades = [u[kind] for u in units if kind in u]
        criteria.append(criterion(f"grader_{kind}_pass_rate", "grader", report["pass_rate"][kind],
                                  bootstrap_ci(grades, pass_rate, resamples=resamples, seed=kind), len(grades),
                                  "turns", None, None, f"{kind.replace('_', ' ')} candidates that pass"))
    notes = [f"{errors} candidates left out: the grader failed on them (an error, not a grade)"] if errors else []
    det["grade_errors"] = errors
    files = [data / SETS[n] for n in names]
    return GraderFindings(criteria, det, files, notes)


def _ev_criterion(name: str, group: str, mode: str, target: float | None, meaning: str, evidence: dict[str, Any],
                  units: dict[str, list[dict[str, float]]], resamples: int) -> Criterion:
    value = evidence.get(mode, {}).get(group, {}).get("auc_true_vs")
    mine = units.get(mode, [])
    n = sum(1 for u in mine if group in u and "true" in u)
    ci = bootstrap_ci(mine, partial(_auc_units, neg=group), resamples=resamples, seed=f"{name}|{mode}") if n else None
    return criterion(name, "grader", value, ci, n, "turns", target, "higher" if target is not None else None, meaning)


async def _evidence(grader: Any, data: Path, embedder: Any, names: list[str], kept: dict[str, set[str]], quick: bool,
                    sampled: bool, det: dict[str, Any], batch: int, info: Callable[[str], None],
                    ) -> tuple[dict[str, Any], dict[str, list[dict[str, float]]], int]:
    """The evidence kinds of every set, graded in both modes; pooled over the report sets
    (``{mode: {kind or kind/generator: {n, pass_rate, auc_true_vs}}}``), with the units
    (per mode, per turn: group -> grade) and the count of grader errors."""
    pooled: dict[str, list[tuple[str, Any, float]]] = {m: [] for m in ev.MODES}
    errors = 0
    for name in names:
        turns = ev.load_turns(data / SETS[name])
        turns = turns[::3] if quick else [t for t in turns if t.key in kept[name]]
        pool = ev.passage_pool(data / SETS[PASSAGES[name]])
        if sampled:  # neighbour passages: a seeded share of the pool, as many as a sample needs
            ids = sorted(pool)
            chosen = random.Random(f"{SEED}|passages|{name}").sample(ids, min(len(ids), 40 + 4 * len(turns)))
            pool = {pid: pool[pid] for pid in sorted(chosen)}
        cases, skipped = await ev.build(turns, pool, embedder)
        cases += ev.earlier_cases(turns)
        turn_of = {t.key: t for t in turns}
        row: dict[str, Any] = {"turns": len(turns), "skipped": skipped}
        for mode in ev.MODES:
            todo = [c for c in cases if turn_of[c.turn].refs[mode]]
            got = await ev.grade(grader, turns, cases, mode, batch=batch)
            errors += sum(1 for c in todo if hasattr(grader, "explain") or c.kind != "earlier") - len(got)
            row[mode] = ev.score(got)
            if name in REPORT:
                pooled[mode] += [(name, c, g) for c, g in got]
        det["sets"][name]["evidence"] = row
        info(f"grader: {name}: evidence {len(cases)} candidates x {len(ev.MODES)} modes")
    out = {mode: ev.score([(c, g) for _, c, g in graded]) for mode, graded in pooled.items()}
    det["evidence_pooled"] = {"sets": list(REPORT), **out}
    units: dict[str, list[dict[str, float]]] = {}
    for mode, graded_ in pooled.items():
        by: dict[tuple[str, str], dict[str, float]] = {}
        for name, c, g in graded_:
            by.setdefault((name, c.turn), {})[c.kind if not c.generator else f"{c.kind}/{c.generator}"] = g
        units[mode] = list(by.values())
    return out, units, errors
