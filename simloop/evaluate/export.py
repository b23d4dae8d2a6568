"""`simloop export`: a run's dialogues in another tool's format.

Formats are small self-describing objects (``ExportFormat``: name, default file suffix,
what a row is, how to write it), one module per family: iKAT topic files
(export_ikat.py), the iKAT 2025 run format (export_ikat25.py), TREC runs
(export_trec.py), chat fine-tuning data (export_chat.py) and parquet (export_parquet.py).
This module checks the input, selects the dialogues (export_select.py) and hands the
format an ``ExportJob`` (export_job.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BadInputError
from ..files import check_out_file, check_run_dir
from .export_chat import OPENAI_CHAT, SHAREGPT
from .export_ikat import IKAT
from .export_ikat25 import IKAT25_RUN
from .export_job import ExportFormat, ExportJob, RunTag
from .export_parquet import PARQUET
from .export_select import ExportFilter, check_filter, judge_scores, select
from .export_trec import PTKB_RUN, TREC_RUN
from .summary import load_run

__all__ = ["FORMATS", "ExportResult", "export_run"]

# --format name -> format, in the order `simloop export --help` lists them
FORMATS: dict[str, ExportFormat] = {f.name: f for f in (IKAT, IKAT25_RUN, TREC_RUN, PTKB_RUN, OPENAI_CHAT, SHAREGPT,
                                                        PARQUET)}


@dataclass
class ExportResult:
    """What an export wrote: ``rows`` of ``unit`` from ``dialogues`` (the ones the filters
    kept) of the run's ``read`` dialogues; ``filtered`` counts what each filter flag left
    out (``read == dialogues + sum(filtered.values())``); ``skipped`` rows the format
    could not write (each with a note)."""

    path: Path
    rows: int
    unit: str
    dialogues: int
    skipped: int = 0
    notes: list[str] = field(default_factory=list)
    read: int = 0
    filtered: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        """One line: ``120 turns from 30 of the run's 41 dialogues (11 filtered out: 7 by --stop-reason, ...)``."""
        source = f"{self.dialogues} of the run's {self.read}" if self.filtered else str(self.dialogues)
        parts = []
        if self.filtered:
            by = ", ".join(f"{n} by {flag}" for flag, n in self.filtered.items())
            parts.append(f"{sum(self.filtered.values())} filtered out: {by}")
        if self.skipped:
            parts.append(f"{self.skipped} skipped")
        return f"{self.rows} {self.unit} from {source} dialogues" + (f" ({'; '.join(parts)})" if parts else "")


def export_run(run_dir: Path, fmt: str, out: Path | None = None, filt: ExportFilter | None = None,
               personas_dir: Path | None = None, topics: Path | None = None, tag: RunTag | None = None
               ) -> ExportResult:
    form = FORMATS.get(fmt)
    if form is None:
        raise BadInputError(f"unknown export format {fmt!r} (choose from {', '.join(FORMATS)})")
    run_dir = check_run_dir(run_dir)
    out = check_out_file(out if out is not None else run_dir / f"export.{form.suffix}")
    manifest, transcripts, _ = load_run(run_dir)
    filt = filt or ExportFilter()
    check_filter(transcripts, filt)
    judge = judge_scores(run_dir, transcripts) if filt.min_judge is not None else None
    kept, dropped = select(transcripts, filt, judge)
    job = ExportJob(run_dir, manifest, kept, filt, tag or RunTag(), personas_dir, topics)
    rows = form.write(job, out)
    skipped = sum(n.startswith("skipped ") for n in job.notes)
    return ExportResult(out, rows, form.unit, len(job.transcripts), skipped, job.notes, read=len(transcripts),
                        filtered=dict(dropped))
