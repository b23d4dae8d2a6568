"""`simloop export --format ikat25-run`: the TREC iKAT 2025 run format (DESIGN §11).

One JSON object per line and per turn of the replayed topic file::

    {"metadata": {"team_id", "run_id", "run_type"}, "turn_id": "<topic number>_<turn_id>",
     "responses": [{"rank", "text", "citations": {docid: score}, "ptkb_provenance": [statement, ...]}],
     "references": {docid: score}}

The organisers check runs with a validation script that is not shipped here, so its rules
are written down once, in ``validate_ikat25``, which the export runs on every file it
writes and the tests run on what they read back:

* ``metadata`` has ``team_id``, ``run_id`` and ``run_type`` (automatic | manual | generation-only);
* every response has ``rank``, ``text``, ``citations`` (a dict) and ``ptkb_provenance`` (a list);
  every citation is also a reference;
* ``references`` is a dict from passage id to score, best first, at most 1,000, no duplicate key;
* the texts of a turn's responses total at most 250 words, counted as the organisers do
  (NFKC, then split on whitespace);
* exactly one line for every turn of the topic file, no more;
* passage ids that are not ClueWeb22 segment ids are a warning, not an error (the demo
  index has Wikipedia ids).

``ptkb_provenance`` holds statement *texts*: the 2025 topic files, the Sim.API and the
guidelines all name PTKB statements by their text (the 2025 PTKB qrels' ``ptkb-<topic>-<i>``
ids are the organisers' bookkeeping, not a run field).  Only the statements the assistant
relied on (``used``) go in; a transcript written before ``used`` existed counts every
listed statement as used.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args

from pydantic import BaseModel, ConfigDict, Field

from ..errors import BadInputError, SimloopError
from ..schema import Passage, Persona, Transcript, Turn
from ..text import sentences, word_count
from .export_job import ExportFormat, ExportJob, RunTag, write_lines

__all__ = [
    "RUN_TYPES", "MAX_WORDS", "MAX_REFERENCES", "Ikat25Metadata", "Ikat25Response", "Ikat25Entry", "Ikat25Check",
    "IKAT25_RUN", "validate_ikat25", "ikat25_run", "response_words", "trim_words", "expected_turn_ids",
]

RunType = Literal["automatic", "manual", "generation-only"]
RUN_TYPES: tuple[str, ...] = get_args(RunType)
MAX_WORDS = 250
MAX_REFERENCES = 1000
_CLUEWEB = re.compile(r"^clueweb22-en\d{4}-\d{2}-\d{5}:\d+$")


# ----------------------------------------------------------------------------- the format
class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Ikat25Metadata(_Line):
    team_id: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    run_type: RunType


class Ikat25Response(_Line):
    rank: int = Field(ge=1)
    text: str
    citations: dict[str, float]  # required even when empty: the organisers' validator checks the key
    ptkb_provenance: list[str]


class Ikat25Entry(_Line):
    """One line of an ikat25-run file."""

    metadata: Ikat25Metadata
    turn_id: str
    responses: list[Ikat25Response] = Field(min_length=1)
    references: dict[str, float]


# ----------------------------------------------------------------------------- the rules
def response_words(text: str) -> int:
    """Words as the organisers count them: NFKC, then whitespace split."""
    return word_count(unicodedata.normalize("NFKC", text))


def trim_words(text: str, limit: int = MAX_WORDS) -> str:
    """``text`` cut from the end to at most ``limit`` words: whole sentences when a sentence
    boundary leaves something, else at a word boundary.  Unchanged when short enough."""
    if response_words(text) <= limit:
        return text
    kept: list[str] = []
    for s in sentences(text):
        if response_words(" ".join([*kept, s])) > limit:
            break
        kept.append(s)
    if kept:
        return " ".join(kept)
    # One sentence longer than the limit: the longest word prefix that fits.
    ends = [m.end() for m in re.finditer(r"\S+", text)]
    lo, hi = 0, len(ends)
    while lo < hi:  # NFKC can split a word in two, so count the candidate, not the words
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if response_words(text[: ends[mid - 1]]) <= limit else (lo, mid - 1)
    return text[: ends[lo - 1]] if lo else ""


@dataclass
class Ikat25Check:
    """What ``validate_ikat25`` found: errors make a run invalid, warnings do not."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    dup = next((k for k in keys if keys.count(k) > 1), None)
    if dup is not None:
        raise ValueError(f"duplicate key {dup!r}")
    return dict(pairs)


def _entry_problems(entry: Ikat25Entry) -> list[str]:
    problems = []
    refs = list(entry.references.items())
    if len(refs) > MAX_REFERENCES:
        problems.append(f"{len(refs)} references (at most {MAX_REFERENCES})")
    if any(not math.isfinite(s) for _, s in refs):
        problems.append("a reference score is not a finite number")
    elif any(a[1] < b[1] for a, b in zip(refs, refs[1:])):
        problems.append("references are not best first (scores must not increase)")
    for r in entry.responses:
        missing = [c for c in r.citations if c not in entry.references]
        if missing:
            problems.append(f"response {r.rank} cites {missing[0]!r}, which is not in references")
    words = sum(response_words(r.text) for r in entry.responses)
    if words > MAX_WORDS:
        problems.append(f"responses total {words} words (at most {MAX_WORDS})")
    return problems


def validate_ikat25(lines: Iterable[str], expected: Sequence[str]) -> Ikat25Check:
    """Check ikat25-run lines against every rule of the format and against ``expected``,
    the turn ids of the topic file (``"<number>_<turn_id>"``) in file order."""
    check = Ikat25Check()
    seen: dict[str, int] = {}
    non_clueweb = 0
    for n, line in enumerate(lines, start=1):
        try:
            entry = Ikat25Entry.model_validate(json.loads(line, object_pairs_hook=_no_duplicate_keys))
        except ValueError as exc:  # JSONDecodeError and pydantic's ValidationError are ValueErrors
            check.errors.append(f"line {n}: {_one_line(exc)}")
            continue
        if entry.turn_id in seen:
            check.errors.append(f"line {n}: turn_id {entry.turn_id} repeats line {seen[entry.turn_id]}")
        seen.setdefault(entry.turn_id, n)
        check.errors += [f"line {n} ({entry.turn_id}): {p}" for p in _entry_problems(entry)]
        non_clueweb += sum(not _CLUEWEB.match(d) for d in entry.references)
    want = set(expected)
    missing = [t for t in expected if t not in seen]
    extra = [t for t in seen if t not in want]
    if missing:
        check.errors.append(f"{len(missing)} turn(s) of the topic file have no line (first: {missing[0]})")
    if extra:
        check.errors.append(f"{len(extra)} line(s) name turns not in the topic file (first: {extra[0]})")
    if non_clueweb:
        check.warnings.append(f"{non_clueweb} reference id(s) are not ClueWeb22 segment ids "
                              "(the organisers' validator warns; passed through as the index has them)")
    return check


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]


# ----------------------------------------------------------------------------- building
def expected_turn_ids(sources: dict[str, Persona]) -> list[str]:
    """``"<number>_<turn_id>"`` for every turn of the replayed topic file, in file order."""
    return [f"{t.id}_{g.turn_id}" for p in sources.values() for t in p.topics for g in t.gold_turns]


@dataclass
class _Notes:
    trimmed: int = 0
    rescored: int = 0
    cut_refs: int = 0

    def lines(self) -> list[str]:
        out = []
        if self.trimmed:
            out.append(f"trimmed {self.trimmed} response(s) from the end to {MAX_WORDS} words")
        if self.rescored:
            out.append(f"{self.rescored} turn(s) had passage scores out of rank order; wrote 1/rank as the score")
        if self.cut_refs:
            out.append(f"kept the best {MAX_REFERENCES} references of {self.cut_refs} turn(s)")
        return out


def _references(x: Turn, notes: _Notes) -> dict[str, float]:
    ranked = sorted(x.assistant.passages, key=lambda p: p.rank)
    by_id: dict[str, Passage] = {}
    for p in ranked:
        by_id.setdefault(p.docid, p)  # a repeated id keeps its best rank
    first = list(by_id.values())
    if len(first) > MAX_REFERENCES:
        notes.cut_refs += 1
        first = first[:MAX_REFERENCES]
    scores = [p.score for p in first]
    if any(not math.isfinite(s) for s in scores) or any(a < b for a, b in zip(scores, scores[1:])):
        # Fused or re-ranked lists can carry scores out of rank order; the rank is the truth.
        notes.rescored += 1
        scores = [round(1.0 / r, 6) for r in range(1, len(first) + 1)]
    return {p.docid: s for p, s in zip(first, scores)}


def _used_statements(x: Turn) -> list[str]:
    used = [p.statement for p in x.assistant.ptkb_provenance if p.used]
    return list(dict.fromkeys(used))


def _entry(meta: Ikat25Metadata, turn_id: str, x: Turn, notes: _Notes) -> Ikat25Entry:
    refs = _references(x, notes)
    cited = {p.docid: refs[p.docid] for p in sorted(x.assistant.passages, key=lambda p: p.rank)
             if p.used and p.docid in refs}
    text = trim_words(x.assistant.response)
    notes.trimmed += text != x.assistant.response
    response = Ikat25Response(rank=1, text=text, citations=cited, ptkb_provenance=_used_statements(x))
    return Ikat25Entry(metadata=meta, turn_id=turn_id, responses=[response], references=refs)


def _by_turn_id(ts: Sequence[Transcript], source: str) -> dict[str, tuple[Transcript, Turn]]:
    out: dict[str, tuple[Transcript, Turn]] = {}
    for t in ts:
        for x in t.turns:
            if x.gold is None:
                raise BadInputError(f"{source}: dialogue {t.dialogue_id} turn {x.index} has no iKAT turn id: "
                                    "ikat25-run needs a replay (`simloop run --simulator replay --topics FILE`)")
            tid = f"{t.scenario.topic_id}_{x.gold.turn_id}"
            if tid in out:
                raise BadInputError(f"turn {tid} occurs in {out[tid][0].dialogue_id} and {t.dialogue_id} "
                                    "(the run repeats topics); pick one with --repeat K")
            out[tid] = (t, x)
    return out


def _why_missing(ts: Sequence[Transcript], turn_id: str, topics: int, limit: int | None, filtered: bool) -> str:
    """Why the first missing turn has no answer, and the one thing that brings it: resuming
    helps a dialogue that failed or never ran, not a run limited to part of the topic file."""
    topic = turn_id.rsplit("_", 1)[0]
    t = next((t for t in ts if t.scenario.topic_id == topic), None)
    if t is not None:
        why = f"its dialogue ended early: {t.stop.reason}" + (f", {t.error.type}" if t.error is not None else "")
        return f"{why}); finish the run (`simloop run --resume RUN --retry-errors`)"
    if filtered:
        return f"no dialogue of topic {topic} in the export); export without --persona, --topic and the other filters"
    ran = len({t.scenario.topic_id for t in ts})
    if limit is not None:
        return (f"topic {topic} was not run); the run covers only {ran} of the topic file's {topics} conversations "
                f"(it was limited: scenarios.limit = {limit} in run.json): ikat25-run needs a full replay, "
                "without --limit")
    return (f"topic {topic} has no dialogue in the run); the run covers {ran} of the topic file's {topics} "
            "conversations: finish it (`simloop run --resume RUN`) or replay the whole file")


def _metadata(tag: RunTag, default_run_id: str) -> Ikat25Metadata:
    """The ``metadata`` of every line: the submitter's tag, checked (bad flags are bad input)."""
    if tag.run_type not in RUN_TYPES:
        raise BadInputError(f"unknown --run-type {tag.run_type!r} (known: {', '.join(RUN_TYPES)})")
    run_id = (tag.run_id or default_run_id).strip()
    if not tag.team_id.strip() or not run_id:
        raise BadInputError("--team-id and --run-id must not be empty")
    return Ikat25Metadata(team_id=tag.team_id.strip(), run_id=run_id, run_type=cast(RunType, tag.run_type))


def ikat25_run(ts: Sequence[Transcript], topics: dict[str, Persona], tag: RunTag, default_run_id: str, source: str,
               notes_out: list[str], limit: int | None = None, filtered: bool = False) -> list[str]:
    """The run's lines in topic-file order (``topics``: the replayed file's conversations),
    checked by ``validate_ikat25`` before they are returned.  ``limit`` (the run's
    ``scenarios.limit``) and ``filtered`` (export filters were given) say why turns may be missing."""
    meta = _metadata(tag, default_run_id)
    expected = expected_turn_ids(topics)
    answered = _by_turn_id(ts, source)
    missing = [tid for tid in expected if tid not in answered]
    if missing:
        raise BadInputError(f"{source}: {len(missing)} of {len(expected)} turns of the topic file have no answer "
                            f"in the run (first: {missing[0]}, "
                            f"{_why_missing(ts, missing[0], len(topics), limit, filtered)}")
    extra = sorted(set(answered) - set(expected))
    if extra:
        raise BadInputError(f"{source}: the run answers {len(extra)} turn(s) that are not in the topic file "
                            f"(first: {extra[0]}); pass the topic file it replayed with --topics FILE")
    notes = _Notes()
    lines = [_entry(meta, tid, answered[tid][1], notes).model_dump_json() for tid in expected]
    check = validate_ikat25(lines, expected)
    if not check.ok:  # a bug here, not the user's input: say what broke
        raise SimloopError(f"ikat25-run export failed its own validation: {check.errors[0]}")
    notes_out += notes.lines() + check.warnings
    return lines


def _write(job: ExportJob, out: Path) -> int:
    return write_lines(out, ikat25_run(job.transcripts, job.replayed_topics(), job.tag, job.run_id, str(job.run_dir),
                                       job.notes, limit=job.limit, filtered=job.filt.drops_topics()))


IKAT25_RUN = ExportFormat("ikat25-run", "ikat25.jsonl", "turns", _write)
