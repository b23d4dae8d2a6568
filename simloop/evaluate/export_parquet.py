"""`--format parquet`: one row per turn, for dataframe tools (pyarrow, imported on use)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..files import atomic_open
from ..schema import Transcript
from .export_job import ExportFormat, ExportJob
from .provenance import ikat_qid

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["PARQUET", "parquet_table"]


def parquet_table(ts: Sequence[Transcript]) -> pa.Table:
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
        "passages": [{"rank": p.rank, "docid": p.docid, "score": p.score, "used": p.used}
                     for p in x.assistant.passages],
        "ptkb_indices": [p.index for p in x.assistant.ptkb_provenance if p.used], "latency_ms": x.latency_ms,
        "prompt_tokens": sum(s.prompt_tokens for s in x.stages),
        "completion_tokens": sum(s.completion_tokens for s in x.stages), "stop_reason": t.stop.reason,
    } for t in ts for x in t.turns]
    return pa.Table.from_pylist(rows, schema=schema)


def _write(job: ExportJob, out: Path) -> int:
    import pyarrow.parquet as pq

    table = parquet_table(job.transcripts)
    with atomic_open(out, "wb") as fh:
        pq.write_table(table, fh)
    return int(table.num_rows)


PARQUET = ExportFormat("parquet", "parquet", "turns", _write)
