"""`--format ikat`: a run's dialogues as an iKAT topic file (the 2023/2024 schema).

One conversation per dialogue: its ``number``, the topic's title, the persona's PTKB
(``{"1": statement, ...}``) and its turns as a topic file holds them (``GoldTurn``), the
assistant's answer as the response and its used PTKB statements and cited passages as the
provenance.  ``simloop run --simulator replay --topics FILE`` replays such a file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..errors import DataFileError
from ..schema import GoldTurn, Persona, Transcript
from .export_job import ExportFormat, ExportJob, write_json

__all__ = ["IKAT", "IkatConversation", "ikat_topics"]


class IkatConversation(BaseModel):
    """One conversation of an iKAT topic file, as the export writes it."""

    model_config = ConfigDict(extra="forbid")

    number: str | int  # an int when the id is a number, as in the 2024 files
    title: str
    ptkb: dict[str, str]
    turns: list[GoldTurn]


def _numbers(ts: Sequence[Transcript]) -> dict[str, str | int]:
    """iKAT ``number`` per dialogue: the topic id when unique in the export, else the
    dialogue id (repeats and personas sharing a topic must stay apart)."""
    counts: dict[str, int] = {}
    for t in ts:
        counts[t.scenario.topic_id] = counts.get(t.scenario.topic_id, 0) + 1
    out: dict[str, str | int] = {}
    for t in ts:
        tid = t.scenario.topic_id
        number = tid if counts[tid] == 1 else t.dialogue_id
        out[t.dialogue_id] = int(number) if number.isdigit() else number
    return out


def _persona(sources: dict[str, Persona], t: Transcript) -> Persona:
    p = sources.get(t.scenario.persona_id)
    if p is None:
        raise DataFileError(f"persona {t.scenario.persona_id!r} of {t.dialogue_id} is not in the scenario source; "
                            "pass --personas DIR or --topics FILE")
    return p


def ikat_topics(ts: Sequence[Transcript], sources: dict[str, Persona]) -> list[IkatConversation]:
    numbers = _numbers(ts)
    topics = []
    for t in ts:
        persona = _persona(sources, t)
        topic = next((x for x in persona.topics if x.id == t.scenario.topic_id), None)
        turns = [GoldTurn(
            turn_id=x.gold.turn_id if x.gold is not None else x.index,
            utterance=x.user.utterance,
            resolved_utterance=x.assistant.rewritten_query or x.user.utterance,
            response=x.assistant.response,
            # a topic file's provenance is a set: the statements the answer used
            ptkb_provenance=list(dict.fromkeys(p.index for p in x.assistant.ptkb_provenance if p.used)),
            response_provenance=[p.docid for p in sorted(x.assistant.passages, key=lambda p: p.rank) if p.used],
        ) for x in t.turns]
        topics.append(IkatConversation(number=numbers[t.dialogue_id],
                                       title=topic.title if topic else t.scenario.topic_id,
                                       ptkb={str(i): s for i, s in enumerate(persona.ptkb, start=1)}, turns=turns))
    return topics


def _write(job: ExportJob, out: Path) -> int:
    return write_json(out, [c.model_dump() for c in ikat_topics(job.transcripts, job.sources())])


IKAT = ExportFormat("ikat", "json", "topics", _write)
