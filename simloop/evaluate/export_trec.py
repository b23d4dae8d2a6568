"""TREC run exports (`trec-run`: passages, `ptkb-run`: PTKB statements), for trec_eval.

One line per ranked item, ``qid Q0 docid rank score run_id``, with the iKAT qid of the
turn (``<topic>_<turn_id>``).  trec_eval reorders a ranking by score, so the lines carry
scores under which it reads each ranking in the order the assistant gave it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import TypeVar

from ..errors import BadInputError
from ..schema import Transcript
from .export_job import ExportFormat, ExportJob, write_lines
from .provenance import ikat_qid

__all__ = ["PTKB_RUN", "TREC_RUN", "trec_lines", "trec_scores"]

T = TypeVar("T")


def _first_of_each(items: Sequence[T], key: Callable[[T], Hashable]) -> list[T]:
    """Drop repeats, keeping first occurrences in order (trec_eval rejects duplicate docids)."""
    seen: set[Hashable] = set()
    out = []
    for x in items:
        if key(x) not in seen:
            seen.add(key(x))
            out.append(x)
    return out


def trec_scores(scores: Sequence[float | None]) -> list[float]:
    """Scores under which trec_eval reads a ranking in the given order.

    trec_eval sorts a query's lines by score, then by docid descending (form_res_rels.c),
    so scores that tie or rise with the rank would reorder it: those lists get rank-based
    scores (n, n-1, ..., 1); lists whose scores strictly fall keep them.
    """
    finite = [s for s in scores if s is not None and math.isfinite(s)]
    if len(finite) < len(scores) or any(a <= b for a, b in zip(finite, finite[1:])):
        return [float(len(scores) - i) for i in range(len(scores))]
    return [float(s) for s in finite]


def trec_lines(ts: Sequence[Transcript], ptkb: bool, notes: list[str]) -> list[str]:
    """The run's lines: every turn's passages (or, with ``ptkb``, its whole PTKB ranking)."""
    lines = []
    owner: dict[str, str] = {}  # qid -> dialogue id: trec_eval would merge two dialogues' rankings
    rescored = 0
    for t in ts:
        for x in t.turns:
            qid = ikat_qid(t, x)
            if owner.setdefault(qid, t.dialogue_id) != t.dialogue_id:
                raise BadInputError(f"qid {qid} occurs in {owner[qid]} and {t.dialogue_id} (the run repeats topics); "
                                    "pick one with --repeat K or --persona ID")
            items: list[tuple[str, float | None]]
            if ptkb:  # the whole ranking
                statements = _first_of_each(x.assistant.ptkb_provenance, lambda p: p.index)
                items = [(str(p.index), p.score) for p in statements]
            else:
                passages = _first_of_each(sorted(x.assistant.passages, key=lambda p: p.rank), lambda p: p.docid)
                items = [(p.docid, p.score) for p in passages]
            scores = trec_scores([s for _, s in items])
            rescored += scores != [s for _, s in items]
            # repr: the shortest text that reads back as the same float, so no two
            # distinct scores round to a tie (4.7114 for both 4.711400 and 4.711399)
            lines += [f"{qid} Q0 {docid} {rank} {score!r} {t.run_id}"
                      for rank, ((docid, _), score) in enumerate(zip(items, scores), start=1)]
    if rescored:
        notes.append(f"{rescored} turn(s) had scores that tie or rise with the rank; wrote rank-based scores "
                     "so trec_eval keeps the run's order")
    return lines


def _writer(ptkb: bool) -> Callable[[ExportJob, Path], int]:
    def write(job: ExportJob, out: Path) -> int:
        return write_lines(out, trec_lines(job.transcripts, ptkb, job.notes))

    return write


TREC_RUN = ExportFormat("trec-run", "run", "lines", _writer(ptkb=False))
PTKB_RUN = ExportFormat("ptkb-run", "ptkb.run", "lines", _writer(ptkb=True))
