"""Read TREC iKAT topic files (2023, 2024 and 2025 schemas) into personas and topics.

Each conversation becomes one ``Persona`` (its PTKB, in key order, default behaviour) with
one ``Topic`` whose ``gold_turns`` carry the user utterances and the gold provenance, for
the replay simulator and for scoring.  The schema is detected per conversation:

* 2023 / 2024: ``ptkb`` is an object keyed "1", "2", ...; ``turns`` hold ``utterance``,
  ``resolved_utterance``, ``response``, ``ptkb_provenance`` (keys as ints) and
  ``response_provenance``.  ``number`` is a string in 2023 ("9-1"), an int in 2024.
* 2025: ``ptkb`` is a list; ``responses`` hold ``user_utterance`` and ``relevant_ptkbs`` as
  statement *texts* (converted here to 1-based indices) and ``citations``.

Anything malformed raises ``DataFileError`` naming the file, the conversation and the field.

Evidence: a turn's reference is its gold response and the texts of its
provenance passages, where the topic file has a ``<stem>_psg_text.jsonl`` beside it
(2023 does; 2024 ships none): ``load_passage_texts`` and ``turn_reference``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import DataFileError, first_error
from ..files import read_text
from ..schema import GoldTurn, Persona, Topic

__all__ = ["load_ikat_topics", "parse_ikat_topics", "load_passage_texts", "turn_reference", "passage_evidence",
           "REFERENCE_PASSAGE_WORDS"]

# At most this many words of passage text go into one reference: 2023 train's turns cite
# 394 words of passages at the median and 1,028 at the 90th percentile, and the reference is
# stored in every converted persona file and encoded sentence by sentence by the grader.
REFERENCE_PASSAGE_WORDS = 1000


class _Where:
    """Builds error messages that point at the offending field."""

    def __init__(self, path: Path):
        self.path = path
        self.conv = ""

    def fail(self, field: str, problem: str) -> DataFileError:
        where = f"{self.path}: {self.conv}" if self.conv else f"{self.path}:"
        return DataFileError(f"{where} field {field!r} {problem}")


def load_ikat_topics(path: str | Path) -> list[Persona]:
    """Personas (one per conversation, with one topic each) from an iKAT topic file."""
    path = Path(path)
    text = read_text(path, "iKAT topic file", error=DataFileError)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFileError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
    return parse_ikat_topics(data, path)


def parse_ikat_topics(data: Any, path: str | Path = "<topics>") -> list[Persona]:
    """Like ``load_ikat_topics`` for already-decoded JSON."""
    where = _Where(Path(path))
    if not isinstance(data, list) or not data:
        kind = "an empty array" if data == [] else f"a JSON {type(data).__name__}".replace("dict", "object")
        raise DataFileError(f"{path}: top level: expected a non-empty JSON array of iKAT conversations, not {kind}")
    personas: list[Persona] = []
    seen: set[str] = set()
    for i, conv in enumerate(data):
        where.conv = f"conversation {i}"
        if not isinstance(conv, dict):
            raise where.fail(f"[{i}]", "is not an object")
        number = _number(conv, where)
        where.conv = f"conversation {i} (number {number})"
        if number in seen:
            raise where.fail("number", f"repeats conversation {number!r}")
        seen.add(number)
        personas.append(_conversation(conv, number, where))
    return personas


def _conversation(conv: dict[str, Any], number: str, where: _Where) -> Persona:
    title = _get(conv, "title", str, where)
    if "responses" in conv:
        ptkb, turns = _schema_2025(conv, where)
    elif "turns" in conv:
        ptkb, turns = _schema_2023(conv, where)
    else:
        raise where.fail("turns", "is missing (and no 2025 'responses' either)")
    if not turns:
        raise where.fail("turns", "is empty")
    try:
        topic = Topic(id=number, title=title, gold_turns=turns)
        return Persona(id=number, ptkb=ptkb, topics=[topic])
    except ValidationError as exc:
        field, msg = first_error(exc)
        raise where.fail(field or "ptkb", f"is invalid: {msg}") from None


def _number(conv: dict[str, Any], where: _Where) -> str:
    value = conv.get("number", conv.get("conv_id"))  # conv_id: the 2025 guidelines' sample
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
        raise where.fail("number", "is missing or not a string/int")
    return str(value).strip()


def _schema_2023(conv: dict[str, Any], where: _Where) -> tuple[list[str], list[GoldTurn]]:
    raw = _get(conv, "ptkb", dict, where)
    if not raw:
        raise where.fail("ptkb", "is empty")
    try:
        keys = sorted(raw, key=int)
    except ValueError:
        raise where.fail("ptkb", "has a key that is not a number") from None
    ptkb = []
    for k in keys:
        if not isinstance(raw[k], str):
            raise where.fail(f"ptkb.{k}", "is not a string")
        ptkb.append(raw[k])
    # Provenance names PTKB keys; map them to 1-based positions (the same when keys are 1..n).
    position = {int(k): i + 1 for i, k in enumerate(keys)}
    turns = []
    for j, t in enumerate(_get(conv, "turns", list, where)):
        f = f"turns[{j}]"
        if not isinstance(t, dict):
            raise where.fail(f, "is not an object")
        prov = []
        for p in _get(t, "ptkb_provenance", list, where, f, default=[]):
            if isinstance(p, bool) or not isinstance(p, (int, str)) or not str(p).isdigit() or int(p) not in position:
                raise where.fail(f"{f}.ptkb_provenance", f"names PTKB key {p!r}, which does not exist")
            prov.append(position[int(p)])
        turns.append(
            _gold(
                t, where, f,
                utterance=_get(t, "utterance", str, where, f),
                provenance=prov,
                passages=_strings(t, "response_provenance", where, f),
            )
        )
    return ptkb, turns


def _schema_2025(conv: dict[str, Any], where: _Where) -> tuple[list[str], list[GoldTurn]]:
    ptkb = _get(conv, "ptkb", list, where)
    if not ptkb:
        raise where.fail("ptkb", "is empty")
    for k, s in enumerate(ptkb):
        if not isinstance(s, str):
            raise where.fail(f"ptkb[{k}]", "is not a string")
    exact = {s: i + 1 for i, s in reversed(list(enumerate(ptkb)))}  # first occurrence wins
    loose = {_norm(s): i + 1 for i, s in reversed(list(enumerate(ptkb)))}
    turns = []
    for j, t in enumerate(_get(conv, "responses", list, where)):
        f = f"responses[{j}]"
        if not isinstance(t, dict):
            raise where.fail(f, "is not an object")
        prov = []
        for s in _strings(t, "relevant_ptkbs", where, f):
            index = exact.get(s) or loose.get(_norm(s))
            if index is None:
                raise where.fail(f"{f}.relevant_ptkbs", f"has a statement not in the PTKB: {s[:60]!r}")
            prov.append(index)
        turns.append(
            _gold(
                t, where, f,
                utterance=_get(t, "user_utterance", str, where, f),
                provenance=prov,
                passages=_strings(t, "citations", where, f),
            )
        )
    return ptkb, turns


def _gold(t: dict[str, Any], where: _Where, f: str, utterance: str, provenance: list[int],
          passages: list[str]) -> GoldTurn:
    turn_id = t.get("turn_id")
    if isinstance(turn_id, bool) or not isinstance(turn_id, int):
        raise where.fail(f"{f}.turn_id", "is missing or not an int")
    if not utterance.strip():
        raise where.fail(f"{f}.utterance", "is empty")
    return GoldTurn(
        turn_id=turn_id,
        utterance=utterance,
        resolved_utterance=_get(t, "resolved_utterance", str, where, f, default=""),
        response=_get(t, "response", str, where, f, default=""),
        ptkb_provenance=provenance,
        response_provenance=passages,
    )


_MISSING = object()


def _get(obj: dict[str, Any], key: str, kind: type, where: _Where, prefix: str = "", default: Any = _MISSING) -> Any:
    name = f"{prefix}.{key}" if prefix else key
    if key not in obj or obj[key] is None:
        if default is not _MISSING:
            return default
        raise where.fail(name, "is missing")
    value = obj[key]
    if not isinstance(value, kind):
        raise where.fail(name, f"should be {kind.__name__}, not {type(value).__name__}")
    return value


def _strings(obj: dict[str, Any], key: str, where: _Where, prefix: str) -> list[str]:
    values = _get(obj, key, list, where, prefix, default=[])
    if not all(isinstance(v, str) for v in values):
        raise where.fail(f"{prefix}.{key}", "should be a list of strings")
    return list(values)


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".")


def load_passage_texts(topics: str | Path) -> dict[str, str]:
    """Passage texts by id (``doc_id:passage_id``) from the ``<stem>_psg_text.jsonl`` beside
    the topic file ``topics``; empty when there is none (2024)."""
    topics = Path(topics)
    path = topics.with_name(f"{topics.stem}_psg_text.jsonl")
    if not path.is_file():
        return {}
    out: dict[str, str] = {}
    for n, line in enumerate(read_text(path, "iKAT passage file", error=DataFileError).splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            out[f"{obj['doc_id']}:{obj['passage_id']}"] = str(obj["passage_text"])
        except (ValueError, KeyError, TypeError):
            raise DataFileError(f"{path}: line {n}: expected {{doc_id, passage_id, passage_text}}") from None
    return out


def turn_reference(turn: GoldTurn, passages: dict[str, str], gold: bool = True,
                   max_words: int = REFERENCE_PASSAGE_WORDS) -> str | None:
    """What a user holding the evidence of ``turn`` knows: its gold response (unless
    ``gold`` is False) and the texts of its provenance passages (``passage_evidence``)."""
    parts = [turn.response.strip()] if gold and turn.response.strip() else []
    parts.append(passage_evidence(turn.response_provenance, passages, max_words))
    return " ".join(p for p in parts if p) or None


def passage_evidence(ids: list[str], passages: dict[str, str], max_words: int = REFERENCE_PASSAGE_WORDS) -> str:
    """The texts of the passages ``ids`` found in ``passages``, in that order, cut after
    ``max_words`` words (at a sentence end when one is near); "" when none is found."""
    parts: list[str] = []
    budget = max_words
    for pid in dict.fromkeys(ids):
        text = " ".join(passages.get(pid, "").split())
        if not text or budget <= 0:
            continue
        tokens = text.split()
        if len(tokens) > budget:
            cut = " ".join(tokens[:budget])
            end = cut.rfind(". ")
            text = cut[:end + 1] if end > len(cut) // 2 else cut
        parts.append(text)
        budget -= len(text.split())
    return " ".join(parts)
