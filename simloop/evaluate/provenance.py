"""PTKB and passage provenance metrics, computed by ir_measures (pytrec_eval underneath).

Nothing here ranks or counts by hand: every turn becomes a query, the gold becomes qrels
and the assistant's ordered provenance becomes a run, and ir_measures scores them.

Query ids.  The iKAT qid of a turn is ``<topic>_<turn_id>`` (gold turn id when the turn
was replayed, else the turn index); it is how qrels files name turns.  A run with
``--repeat`` holds the same iKAT qid several times, so inside this module each turn is
evaluated under a private id ``<dialogue_id>#<index>`` and the gold of its iKAT qid is
copied to it.

Averaging.  PTKB ranked metrics and the set-based P/R/F1 are means over the turns with at
least one relevant statement (grade ≥ 1), as trec_eval averages over queries with
relevant documents; a turn whose gold is empty cannot be scored for recall, and the ones
where the assistant still cited statements are counted apart (``overuse_turns``).
Passage metrics are means over the turns whose qid the qrels judge at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

import ir_measures
from ir_measures import AP, P, R, SetF, SetP, SetR, nDCG

from ..errors import DataFileError
from ..files import read_text
from ..schema import Transcript, Turn

__all__ = [
    "ikat_qid", "turn_key", "read_ptkb_qrels", "read_passage_qrels", "ptkb_scores", "passage_scores",
    "ProvenanceResult", "PTKB_MEASURES", "PTKB_RANKED", "PTKB_SET", "PASSAGE_MEASURES", "PASSAGE_REL",
    "ptkb_ranked_ids", "ptkb_used_ids",
]

# Our summary keys → ir_measures measures (names fixed by DESIGN §11).  Ranked measures
# read a turn's whole ``ptkb_provenance`` (the assistant's ranking); set measures read
# only the statements marked ``used`` (DESIGN §4).
PTKB_RANKED = {
    "P@3": P @ 3, "R@3": R @ 3, "nDCG@3": nDCG @ 3,
    "P@5": P @ 5, "R@5": R @ 5, "nDCG@5": nDCG @ 5,
}
PTKB_SET = {"P": SetP, "R": SetR, "F1": SetF}
PTKB_MEASURES = {**PTKB_RANKED, **PTKB_SET}
# iKAT binarises passage grades at 2 ("moderately meets") for P, MAP and recall;
# nDCG uses the graded judgments as they are.
PASSAGE_REL = 2
PASSAGE_MEASURES = {
    "nDCG@3": nDCG @ 3, "nDCG@5": nDCG @ 5, "nDCG@10": nDCG @ 10,
    "P@5": P(rel=PASSAGE_REL) @ 5, "P@10": P(rel=PASSAGE_REL) @ 10,
    "MAP": AP(rel=PASSAGE_REL), "Recall@100": R(rel=PASSAGE_REL) @ 100,
}

Qrels = dict[str, dict[str, int]]  # qid -> docid -> grade
# A summary block under summary.json's names: metric -> mean (None: nothing to average),
# and the counts and notes that say what the means cover.
Block = dict[str, float | int | str | None]
B = TypeVar("B", Block, Block | None)
_PTKB25 = re.compile(r"^ptkb-(?P<topic>.+)-(?P<i>\d+)$")


def ikat_qid(t: Transcript, turn: Turn) -> str:
    turn_id = turn.gold.turn_id if turn.gold is not None else turn.index
    return f"{t.scenario.topic_id}_{turn_id}"


def turn_key(t: Transcript, turn: Turn) -> str:
    """Unique per turn even when a run repeats a topic (see the module docstring)."""
    return f"{t.dialogue_id}#{turn.index}"


# ----------------------------------------------------------------------------- qrels files
def _qrel_lines(path: Path) -> Iterable[tuple[int, str, str, int]]:
    text = read_text(path, "qrels file", error=DataFileError)
    for lineno, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 4:
            raise DataFileError(f"{path}:{lineno}: expected 'qid 0 docid grade', got {line.strip()!r}")
        try:
            grade = int(float(parts[3]))
        except ValueError:
            raise DataFileError(f"{path}:{lineno}: grade {parts[3]!r} is not a number") from None
        yield lineno, parts[0], parts[2], grade


def read_passage_qrels(path: Path) -> Qrels:
    """iKAT passage qrels: ``qid 0 doc_id:passage_no grade``."""
    qrels: Qrels = {}
    for _, qid, docid, grade in _qrel_lines(path):
        qrels.setdefault(qid, {})[docid] = grade
    if not qrels:
        raise DataFileError(f"{path}: no judgments in the qrels file")
    return qrels


def _ptkb_key(raw: str, path: Path, lineno: int) -> str:
    """A PTKB qrels docid as our 1-based key string.

    2023 files name statements by their 1-based ``ptkb`` key; 2025 files by
    ``ptkb-<topic>-<0-based index>``.
    """
    if raw.isdigit():
        return str(int(raw))
    m = _PTKB25.match(raw)
    if m:
        return str(int(m["i"]) + 1)
    raise DataFileError(f"{path}:{lineno}: PTKB key {raw!r} is neither a 1-based number nor ptkb-<topic>-<i>")


def read_ptkb_qrels(path: Path) -> Qrels:
    """PTKB qrels (2023: ``9-1_3 0 2 1``; 2025: ``1-1_3 0 ptkb-1-1-0 1``), keys made 1-based."""
    qrels: Qrels = {}
    for lineno, qid, docid, grade in _qrel_lines(path):
        qrels.setdefault(qid, {})[_ptkb_key(docid, path, lineno)] = grade
    if not qrels:
        raise DataFileError(f"{path}: no judgments in the PTKB qrels file")
    return qrels


# ----------------------------------------------------------------------------- scoring
@dataclass
class ProvenanceResult(Generic[B]):
    """A summary block (for PTKB, None when there was nothing to score) and per-turn values."""

    summary: B
    per_turn: dict[str, dict[str, float]] = field(default_factory=dict)  # turn_key -> metric -> value


def _ranked(ids: Sequence[str], key: str) -> list[ir_measures.ScoredDoc]:
    """A run in the given order.  Scores are synthetic and strictly decreasing because
    trec_eval sorts by score and breaks ties by docid: the assistant's order must win."""
    seen: list[str] = []
    for docid in ids:
        if docid not in seen:
            seen.append(docid)
    return [ir_measures.ScoredDoc(key, d, float(len(seen) - i)) for i, d in enumerate(seen)]


def _evaluate(measures: dict[str, ir_measures.Measure], qrels: list[ir_measures.Qrel],
              run: list[ir_measures.ScoredDoc]) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Means (ir_measures.calc_aggregate) and per-query values (iter_calc) under our names."""
    names = {m: name for name, m in measures.items()}
    agg = ir_measures.calc_aggregate(list(measures.values()), qrels, run)
    means = {names[m]: round(float(v), 4) for m, v in agg.items()}
    per: dict[str, dict[str, float]] = {}
    for metric in ir_measures.iter_calc(list(measures.values()), qrels, run):
        per.setdefault(metric.query_id, {})[names[metric.measure]] = round(float(metric.value), 4)
    return {name: means[name] for name in measures}, per


def _ptkb_gold(t: Transcript, turn: Turn, qrels: Qrels | None) -> dict[str, int] | None:
    """Judged PTKB keys of a turn, or None when the turn has no gold at all."""
    if qrels is not None:
        return qrels.get(ikat_qid(t, turn))
    if turn.gold is not None:
        return {str(i): 1 for i in turn.gold.ptkb_provenance}
    return None


def ptkb_ranked_ids(turn: Turn) -> list[str]:
    """The turn's PTKB ranking as qrels keys, best first (what ranked metrics read)."""
    return [str(p.index) for p in turn.assistant.ptkb_provenance]


def ptkb_used_ids(turn: Turn) -> list[str]:
    """The statements the answer relies on, in ranking order (what set metrics read)."""
    return [str(p.index) for p in turn.assistant.ptkb_provenance if p.used]


def ptkb_scores(transcripts: Sequence[Transcript], qrels: Qrels | None = None) -> ProvenanceResult[Block | None]:
    """The ``"ptkb"`` block: ``--ptkb-qrels`` when given, else the replayed topics' gold."""
    gold_qrels: list[ir_measures.Qrel] = []
    ranked: list[ir_measures.ScoredDoc] = []
    used: list[ir_measures.ScoredDoc] = []
    judged = scored = overuse = 0
    for t in transcripts:
        for turn in t.turns:
            gold = _ptkb_gold(t, turn, qrels)
            if gold is None:
                continue
            judged += 1
            if not any(g >= 1 for g in gold.values()):
                overuse += bool(ptkb_used_ids(turn))
                continue  # no relevant statement: excluded from the means, counted above
            scored += 1
            key = turn_key(t, turn)
            gold_qrels += [ir_measures.Qrel(key, k, g) for k, g in gold.items()]
            ranked += _ranked(ptkb_ranked_ids(turn), key)
            used += _ranked(ptkb_used_ids(turn), key)
    if judged == 0:
        return ProvenanceResult(None)
    summary: Block = {name: None for name in PTKB_MEASURES}
    per: dict[str, dict[str, float]] = {}
    if scored:
        means, per = _evaluate(PTKB_RANKED, gold_qrels, ranked)
        set_means, set_per = _evaluate(PTKB_SET, gold_qrels, used)
        summary.update(means)
        summary.update(set_means)
        for key in set(per) | set(set_per):
            per[key] = {**per.get(key, {}), **set_per.get(key, {})}
    summary.update(turns=scored, judged_turns=judged, overuse_turns=overuse,
                   source="ptkb-qrels" if qrels is not None else "topic-file")
    return ProvenanceResult(summary, per)


def passage_scores(transcripts: Sequence[Transcript], qrels: Qrels) -> ProvenanceResult[Block]:
    """The ``"passages"`` block: iKAT passage qrels against each turn's ranked passages."""
    gold_qrels: list[ir_measures.Qrel] = []
    run: list[ir_measures.ScoredDoc] = []
    total = judged = matched = 0
    for t in transcripts:
        for turn in t.turns:
            total += 1
            gold = qrels.get(ikat_qid(t, turn))
            if gold is None:
                continue
            judged += 1
            key = turn_key(t, turn)
            docids = [p.docid for p in sorted(turn.assistant.passages, key=lambda p: p.rank)]
            matched += any(d in gold for d in docids)
            gold_qrels += [ir_measures.Qrel(key, d, g) for d, g in gold.items()]
            run += _ranked(docids, key)
    summary: Block = {name: None for name in PASSAGE_MEASURES}
    per: dict[str, dict[str, float]] = {}
    if judged:
        means, per = _evaluate(PASSAGE_MEASURES, gold_qrels, run)
        summary.update(means)
    summary.update(turns=judged, turns_total=total, matched_turns=matched, rel_threshold=PASSAGE_REL)
    if judged == 0:
        summary["note"] = "no turn of this run has a qid in the qrels file"
    elif matched == 0:
        summary["note"] = "no retrieved passage is judged in the qrels (is the index the qrels' collection?)"
    return ProvenanceResult(summary, per)
