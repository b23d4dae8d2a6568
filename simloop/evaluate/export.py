"""`simloop export`: a run's dialogues as iKAT topics, the iKAT 2025 run format (export_ikat25.py),
TREC runs, chat fine-tuning data or parquet.

Every format is built in memory, checked, then written to a temp file and renamed, so a
failure never leaves half a file where a training job or trec_eval would pick it up.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, get_args

from ..errors import BadInputError, DataFileError, check_known
from ..files import atomic_open, atomic_write, check_out_file, check_run_dir
from ..schema import Persona, RunManifest, StopReason, Transcript
from .export_chat import chats, validate_chat
from .export_ikat25 import RunTag, ikat25_run
from .provenance import ikat_qid
from .stats import mean_grade
from .summary import load_run, load_scores, load_summary, resolve_source, stale_reason

__all__ = ["FORMATS", "ExportFilter", "ExportResult", "RunTag", "export_run", "validate_chat", "select",
           "check_filter", "scenario_sources", "trec_scores"]

# The simulator's grade of an answer (schema.UserTurn.grade).
GRADE_SCALE = (0.0, 5.0)
# format -> default file suffix (trec-run and ptkb-run differ so both fit in one run dir)
FORMATS = {
    "ikat": "json", "ikat25-run": "ikat25.jsonl", "trec-run": "run", "ptkb-run": "ptkb.run",
    "openai-chat": "openai.jsonl", "sharegpt": "sharegpt.jsonl", "parquet": "parquet",
}


@dataclass
class ExportFilter:
    stop_reasons: list[str] = field(default_factory=list)
    min_grade: float | None = None
    min_turns: int | None = None
    personas: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    min_judge: float | None = None
    repeat: int | None = None


@dataclass
class ExportResult:
    path: Path
    rows: int
    unit: str
    dialogues: int
    skipped: int = 0
    notes: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- selection
def _judge_scores(run_dir: Path, transcripts: Sequence[Transcript]) -> dict[str, float | None]:
    scores = load_scores(run_dir)
    if not scores or not any(line.judge is not None for line in scores):
        raise BadInputError(f"--min-judge needs judge scores: run `simloop eval {run_dir} --judge` first")
    judged = {line.dialogue_id: line.judge.overall if line.judge else None for line in scores}
    summary = load_summary(run_dir)
    stale = stale_reason(run_dir, summary, transcripts) if summary is not None else None
    missing = [t.dialogue_id for t in transcripts if t.dialogue_id not in judged]  # one set, not one per dialogue
    if stale is None and missing:  # scores.jsonl without its summary.json: its dialogues tell
        stale = f"{len(missing)} dialogue(s) of the run have no scores, e.g. {missing[0]}"
    if stale:  # filtering on another run's scores would silently drop or keep the wrong dialogues
        raise BadInputError(f"--min-judge: scores.jsonl is out of date ({stale}); "
                            f"re-run `simloop eval {run_dir} --judge`")
    return judged


def _repeat_of(t: Transcript) -> int | None:
    tail = t.dialogue_id.rsplit("--", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _passes(judge: dict[str, float | None] | None, dialogue_id: str, threshold: float) -> bool:
    score = (judge or {}).get(dialogue_id)
    return score is not None and score >= threshold  # unjudged (a failed judge call) never passes


def check_filter(transcripts: Sequence[Transcript], f: ExportFilter) -> None:
    """A filter value that can never match is a typo, not an empty selection: say so."""
    check_known("--stop-reason", f.stop_reasons, list(get_args(StopReason)))
    check_known("--persona", f.personas, sorted({t.scenario.persona_id for t in transcripts}, key=_natural))
    check_known("--topic", f.topics, sorted({t.scenario.topic_id for t in transcripts}, key=_natural))
    repeats = sorted({r for t in transcripts if (r := _repeat_of(t)) is not None})
    check_known("--repeat", [] if f.repeat is None else [str(f.repeat)], [str(r) for r in repeats])
    _on_scale("--min-grade", f.min_grade, GRADE_SCALE, "user grades")
    _on_scale("--min-judge", f.min_judge, (0.0, 1.0), "normalised judge scores")
    if f.min_grade is not None and not any(mean_grade(t) is not None for t in transcripts):
        raise BadInputError(f"--min-grade {f.min_grade:g}: no dialogue of this run has a user grade")


def _on_scale(flag: str, value: float | None, scale: tuple[float, float], what: str) -> None:
    """A threshold off the scale can match no dialogue of any run: a typo, not a filter."""
    low, high = scale
    if value is not None and not low <= value <= high:
        raise BadInputError(f"{flag} {value:g}: {what} are {low:g}-{high:g}")


def _natural(value: str) -> list:
    """Sort key that puts "9-1" before "10-1" (iKAT numbers are numbers)."""
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", value)]


def select(transcripts: Sequence[Transcript], f: ExportFilter, judge: dict[str, float | None] | None = None
           ) -> list[Transcript]:
    def keep(t: Transcript) -> bool:
        grade = mean_grade(t)
        return all((
            not f.stop_reasons or t.stop.reason in f.stop_reasons,
            f.min_grade is None or (grade is not None and grade >= f.min_grade),
            f.min_turns is None or len(t.turns) >= f.min_turns,
            not f.personas or t.scenario.persona_id in f.personas,
            not f.topics or t.scenario.topic_id in f.topics,
            f.repeat is None or _repeat_of(t) == f.repeat,
            f.min_judge is None or _passes(judge, t.dialogue_id, f.min_judge),
        ))

    return [t for t in transcripts if keep(t)]


# ----------------------------------------------------------------------------- sources
def scenario_sources(run_dir: Path, manifest: RunManifest | None, personas_dir: Path | None = None,
                     topics: Path | None = None) -> dict[str, Persona]:
    """Personas (PTKB, topic titles) of a run: flags first, else what run.json recorded."""
    scen = (manifest.config.get("scenarios") or {}) if manifest is not None else {}
    topics = topics or (scen.get("topics") and resolve_source(scen["topics"], run_dir))
    if topics:
        from ..inputs import load_ikat_topics

        return {p.id: p for p in load_ikat_topics(Path(topics))}
    personas_dir = personas_dir or (scen.get("personas_dir") and resolve_source(scen["personas_dir"], run_dir))
    if not personas_dir:
        raise DataFileError(f"{run_dir}: cannot find the run's personas or topic file; pass --personas DIR or --topics FILE")
    from ..inputs import load_personas

    return {p.id: p for p in load_personas(Path(personas_dir))}


def _persona(sources: dict[str, Persona] | None, t: Transcript) -> Persona:
    p = (sources or {}).get(t.scenario.persona_id)
    if p is None:
        raise DataFileError(f"persona {t.scenario.persona_id!r} of {t.dialogue_id} is not in the scenario source; "
                            "pass --personas DIR or --topics FILE")
    return p


# ----------------------------------------------------------------------------- formats
def _numbers(ts: Sequence[Transcript]) -> dict[str, str | int]:
    """iKAT ``number`` per dialogue: the topic id when unique in the export, else the
    dialogue id (repeats and personas sharing a topic must stay apart)."""
    counts: dict[str, int] = {}
    for t in ts:
        counts[t.scenario.topic_id] = counts.get(t.scenario.topic_id, 0) + 1
    out: dict[str, str | int] = {}
    for t in ts:
        tid = t.scenario.topic_id
        number: str | int = tid if counts[tid] == 1 else t.dialogue_id
        out[t.dialogue_id] = int(number) if isinstance(number, str) and number.isdigit() else number
    return out


def _ikat(ts: Sequence[Transcript], sources: dict[str, Persona] | None) -> list[dict]:
    numbers = _numbers(ts)
    topics = []
    for t in ts:
        persona = _persona(sources, t)
        topic = next((x for x in persona.topics if x.id == t.scenario.topic_id), None)
        turns = [{
            "turn_id": x.gold.turn_id if x.gold is not None else x.index,
            "utterance": x.user.utterance,
            "resolved_utterance": x.assistant.rewritten_query or x.user.utterance,
            "response": x.assistant.response,
            # a topic file's provenance is a set: the statements the answer used
            "ptkb_provenance": list(dict.fromkeys(p.index for p in x.assistant.ptkb_provenance if p.used)),
            "response_provenance": [p.docid for p in sorted(x.assistant.passages, key=lambda p: p.rank) if p.used],
        } for x in t.turns]
        topics.append({"number": numbers[t.dialogue_id], "title": topic.title if topic else t.scenario.topic_id,
                       "ptkb": {str(i): s for i, s in enumerate(persona.ptkb, start=1)}, "turns": turns})
    return topics


def _first_of_each(items: Sequence[Any], key: Callable[[Any], Any]) -> list[Any]:
    """Drop repeats, keeping first occurrences in order (trec_eval rejects duplicate docids)."""
    seen: set = set()
    return [x for x in items if not (key(x) in seen or seen.add(key(x)))]


def trec_scores(scores: Sequence[float | None]) -> list[float]:
    """Scores under which trec_eval reads a ranking in the given order.

    trec_eval sorts a query's lines by score, then by docid descending (form_res_rels.c),
    so scores that tie or rise with the rank would reorder it: those lists get rank-based
    scores (n, n-1, ..., 1); lists whose scores strictly fall keep them.
    """
    if any(s is None or not math.isfinite(s) for s in scores) or any(a <= b for a, b in zip(scores, scores[1:])):
        return [float(len(scores) - i) for i in range(len(scores))]
    return [float(s) for s in scores]


def _trec_run(ts: Sequence[Transcript], ptkb: bool, notes: list[str]) -> list[str]:
    lines = []
    owner: dict[str, str] = {}  # qid -> dialogue id: trec_eval would merge two dialogues' rankings
    rescored = 0
    for t in ts:
        for x in t.turns:
            qid = ikat_qid(t, x)
            if owner.setdefault(qid, t.dialogue_id) != t.dialogue_id:
                raise BadInputError(f"qid {qid} occurs in {owner[qid]} and {t.dialogue_id} (the run repeats topics); "
                                    "pick one with --repeat K or --persona ID")
            if ptkb:  # the whole ranking
                ranked = _first_of_each(x.assistant.ptkb_provenance, lambda p: p.index)
                items = [(str(p.index), p.score) for p in ranked]
            else:
                ranked = _first_of_each(sorted(x.assistant.passages, key=lambda p: p.rank), lambda p: p.docid)
                items = [(p.docid, p.score) for p in ranked]
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


def _parquet_table(ts: Sequence[Transcript]):
    import pyarrow as pa

    passage = pa.struct([("rank", pa.int32()), ("docid", pa.string()), ("score", pa.float64()), ("used", pa.bool_())])
    schema = pa.schema([
        ("run_id", pa.string()), ("dialogue_id", pa.string()), ("persona_id", pa.string()), ("topic_id", pa.string()),
        ("turn_index", pa.int32()), ("qid", pa.string()), ("utterance", pa.string()), ("response", pa.string()),
        ("rewritten_query", pa.string()), ("rubric_id", pa.string()), ("grade", pa.float64()),
        ("passages", pa.list_(passage)), ("ptkb_indices", pa.list_(pa.int32())), ("latency_ms", pa.float64()),
        ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()), ("stop_reason", pa.string()),
    ])
    rows = [{
        "run_id": t.run_id, "dialogue_id": t.dialogue_id, "persona_id": t.scenario.persona_id,
        "topic_id": t.scenario.topic_id, "turn_index": x.index, "qid": ikat_qid(t, x),
        "utterance": x.user.utterance, "response": x.assistant.response,
        "rewritten_query": x.assistant.rewritten_query, "rubric_id": x.user.rubric_id, "grade": x.user.grade,
        "passages": [{"rank": p.rank, "docid": p.docid, "score": p.score, "used": p.used} for p in x.assistant.passages],
        "ptkb_indices": [p.index for p in x.assistant.ptkb_provenance if p.used], "latency_ms": x.latency_ms,
        "prompt_tokens": sum(s.prompt_tokens for s in x.stages),
        "completion_tokens": sum(s.completion_tokens for s in x.stages), "stop_reason": t.stop.reason,
    } for t in ts for x in t.turns]
    return pa.Table.from_pylist(rows, schema=schema)


def _write_parquet(table, out: Path) -> None:
    import pyarrow.parquet as pq

    with atomic_open(out, "wb") as fh:
        pq.write_table(table, fh)


# ----------------------------------------------------------------------------- entry point
def _text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _replayed_topics(run_dir: Path, manifest: RunManifest | None, topics: Path | None) -> dict[str, Persona]:
    """The topic file a run replayed; a run of personas is bad input for the formats that
    are keyed by the topic file's turns."""
    scen = (manifest.config.get("scenarios") or {}) if manifest is not None else {}
    if topics is None and not scen.get("topics"):
        raise BadInputError(f"{run_dir}: not a replay of an iKAT topic file (it ran personas); this format needs "
                            "a run of `simloop run --simulator replay --topics FILE`")
    return scenario_sources(run_dir, manifest, None, topics)


def _ikat25(run_dir: Path, manifest: RunManifest | None, ts: Sequence[Transcript], topics: Path | None,
            tag: RunTag, notes: list[str], filt: ExportFilter) -> list[str]:
    replayed = _replayed_topics(run_dir, manifest, topics)
    limit = ((manifest.config.get("scenarios") or {}).get("limit")) if manifest is not None else None
    return ikat25_run(ts, replayed, tag, manifest.run_id if manifest else run_dir.name, str(run_dir), notes,
                      limit=limit, filtered=replace(filt, repeat=None) != ExportFilter())  # --repeat drops no topic


def export_run(run_dir: Path, fmt: str, out: Path | None = None, filt: ExportFilter | None = None,
               personas_dir: Path | None = None, topics: Path | None = None, tag: RunTag | None = None
               ) -> ExportResult:
    if fmt not in FORMATS:
        raise BadInputError(f"unknown export format {fmt!r} (choose from {', '.join(FORMATS)})")
    run_dir = check_run_dir(run_dir)
    out = check_out_file(out if out is not None else run_dir / f"export.{FORMATS[fmt]}")
    manifest, transcripts, _ = load_run(run_dir)
    filt = filt or ExportFilter()
    check_filter(transcripts, filt)
    judge = _judge_scores(run_dir, transcripts) if filt.min_judge is not None else None
    ts = select(transcripts, filt, judge)
    notes: list[str] = []
    writers: dict[str, Callable[[], tuple[int, str]]] = {
        "ikat": lambda: _write_json(_ikat(ts, scenario_sources(run_dir, manifest, personas_dir, topics)), out),
        "ikat25-run": lambda: _write_lines(_ikat25(run_dir, manifest, ts, topics, tag or RunTag(), notes, filt),
                                            out, "turns"),
        "trec-run": lambda: _write_lines(_trec_run(ts, False, notes), out, "lines"),
        "ptkb-run": lambda: _write_lines(_trec_run(ts, True, notes), out, "lines"),
        "openai-chat": lambda: _write_lines(chats(ts, _soft_sources(run_dir, manifest, personas_dir, topics, notes),
                                                   False, notes), out, "dialogues"),
        "sharegpt": lambda: _write_lines(chats(ts, _soft_sources(run_dir, manifest, personas_dir, topics, notes),
                                                True, notes), out, "dialogues"),
        "parquet": lambda: _write_table(_parquet_table(ts), out),
    }
    rows, unit = writers[fmt]()
    skipped = sum(n.startswith("skipped ") for n in notes)
    return ExportResult(out, rows, unit, len(ts), skipped, notes)


def _soft_sources(run_dir: Path, manifest, personas_dir, topics, notes: list[str]) -> dict[str, Persona] | None:
    """Chat formats can live without the source: the system prompt then lists only cited
    facts.  Only when the run's own record leads nowhere: a ``--personas`` or ``--topics``
    the user gave must load (a typo would otherwise quietly drop the PTKB from every prompt)."""
    try:
        return scenario_sources(run_dir, manifest, personas_dir, topics)
    except DataFileError as exc:
        if topics or personas_dir:  # the topic file wins when both are given (scenario_sources)
            flag, path = ("--topics", topics) if topics else ("--personas", personas_dir)
            named = str(exc) if str(path) in str(exc) else f"{path}: {exc}"  # the path once
            raise DataFileError(f"{flag} {named}") from None
        notes.append(f"PTKB from cited statements only ({exc})")
        return None


def _write_json(obj: list[dict], out: Path) -> tuple[int, str]:
    atomic_write(out, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
    return len(obj), "topics"


def _write_lines(lines: list[str], out: Path, unit: str) -> tuple[int, str]:
    atomic_write(out, _text(lines))
    return len(lines), unit


def _write_table(table, out: Path) -> tuple[int, str]:
    _write_parquet(table, out)
    return table.num_rows, "turns"
