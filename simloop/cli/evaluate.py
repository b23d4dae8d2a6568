"""`simloop eval`, `simloop report`, `simloop export`.

Flags are parsed here and the library does the work.  Choices such as ``--format`` are
checked in the handlers, not by argparse, so a wrong value is one ``BadInputError`` line
and exit 2 like every other bad input (argparse would print the usage block too).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from ..errors import BadInputError
from ..files import check_out_file, check_run_dir

if TYPE_CHECKING:
    from ..evaluate import DialogueScores

__all__ = ["add_commands", "cmd_eval", "cmd_report", "cmd_export"]


def _console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def _positive(name: str, value: int | float | None) -> None:
    if value is not None and value < 0:
        raise BadInputError(f"{name} must not be negative (got {value})")


# ----------------------------------------------------------------------------- eval
def cmd_eval(a: argparse.Namespace) -> int:
    from ..evaluate import EvalOptions, check_options, evaluate_run, rich_summary, write_evaluation
    from .console import CountingBar, live

    opts = EvalOptions(qrels=a.qrels, ptkb_qrels=a.ptkb_qrels, judge=a.judge, judge_base_url=a.judge_base_url,
                       judge_model=a.judge_model, judge_concurrency=a.judge_concurrency)
    check_options(opts)
    bar = CountingBar()  # judge calls take minutes: counted on a terminal; without --judge, no bar
    with live(bar.progress):
        ev = evaluate_run(a.run_dir, opts, progress=bar)
    scores, summary = write_evaluation(a.run_dir, ev)
    out = _console()
    for table in rich_summary(ev.summary):
        out.print(table)
    if ev.summary.passages is not None and ev.summary.passages.note:
        out.print(f"[yellow]passages:[/] {ev.summary.passages.note}")
    partial = ev.summary.ptkb_reference.partial() if ev.summary.ptkb_reference is not None else None
    if partial:  # beside the official figures, a run over part of the topic file reads as a finding
        out.print(f"[yellow]PTKB vs the official 2023 runs:[/] {partial}")
    out.print(f"wrote {scores} and {summary}")
    return _judge_code(ev.scores, a.run_dir)


def _judge_code(scores: list[DialogueScores], run_dir: Path) -> int:
    """1 when --judge was asked for and every judge call failed (one line on stderr, after
    the files: they record each failure); the scores then have no judge in them."""
    from .outcome import LLMCalls, llm_failed_code, say_plain

    calls = LLMCalls()
    for line in scores:
        if line.judge is not None:  # a failed call's stage carries its error; a verdict's has none
            calls.add_stages(line.judge.stages)
    return llm_failed_code(calls, f"run: simloop eval {run_dir} --judge", say_plain, what="judge",
                           flags="--judge-base-url/--judge-model")


# ----------------------------------------------------------------------------- report
def cmd_report(a: argparse.Namespace) -> int:
    from ..evaluate import (
        load_views,
        rich_compare,
        rich_memory,
        rich_outliers,
        rich_reference,
        scenario_warning,
        validity_line,
        write_report,
    )

    for d in a.run_dirs:
        check_run_dir(d)
    out_path = check_out_file(a.out or Path(a.run_dirs[0]) / "report.html")
    views = load_views(a.run_dirs)
    warn = _console(stderr=True)
    for v in views:  # a warning, so stderr: the scores shown are not the ones in summary.json
        if v.stale:
            warn.print(f"[yellow]{v.name}:[/] {v.stale}")
    differ = scenario_warning(views)
    if differ:
        warn.print(f"simloop: warning: {differ}", style="yellow", markup=False)
    out = _console()
    diags = [v.diag for v in views if v.diag is not None]  # each view diagnoses its run when made
    out.print(rich_compare([v.name for v in views], [v.summary for v in views], diags, colour=differ is None))
    for v in views:  # what the means hide, a few lines each (the HTML links each to its dialogue)
        table = rich_outliers(v.name, v.diag.outliers)
        if table is not None:
            out.print(table)
    for v in views:
        ref = rich_reference(v.summary)
        if ref is not None:
            ref.title = f"{v.name}: {ref.title}"
            out.print(ref)
        if v.memory:
            out.print(rich_memory(v.name, v.memory, kept=True))
        if v.memory_note:
            out.print(f"[yellow]{v.name}:[/] {v.memory_note}")
        out.print(f"{v.name}: {validity_line(v.validity)}", markup=False)
    path = write_report(views, out_path)
    out.print(f"wrote {path}")
    return 0


# ----------------------------------------------------------------------------- export
def cmd_export(a: argparse.Namespace) -> int:
    from ..evaluate import FORMATS, ExportFilter, RunTag, export_run

    if a.format not in FORMATS:
        raise BadInputError(f"unknown export format {a.format!r} (choose from {', '.join(FORMATS)})")
    check_run_dir(a.run_dir)
    _positive("--min-turns", a.min_turns)
    _positive("--repeat", a.repeat)
    filt = ExportFilter(stop_reasons=a.stop_reason or [], min_grade=a.min_grade, min_turns=a.min_turns,
                        personas=a.persona or [], topics=a.topic or [], min_judge=a.min_judge, repeat=a.repeat)
    tag = RunTag(team_id=a.team_id, run_id=a.ikat_run_id, run_type=a.run_type)
    res = export_run(a.run_dir, a.format, a.out, filt, personas_dir=a.personas, topics=a.topics, tag=tag)
    out, err = _console(), _console(stderr=True)
    for note in res.notes:  # notes are logs: stderr (stdout keeps the count and, last, the file)
        err.print(f"[yellow]note:[/] {note}")
    out.print(res.summary())
    print(res.path)  # last line: the file, for scripts (tail -n 1)
    return 0


# ----------------------------------------------------------------------------- parsers
def _add_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="score a run: stats, PTKB and passage provenance, LLM judge")
    p.add_argument("run_dir", type=Path, help="the run directory to score (summary.json and scores.jsonl go there)")
    p.add_argument("--qrels", type=Path, help="iKAT passage qrels (qid 0 docid grade)")
    p.add_argument("--ptkb-qrels", type=Path,
                   help="PTKB qrels (2023: qid 0 <1-based key> grade; 2025: ptkb-<topic>-<i>)")
    p.add_argument("--judge", action="store_true", help="score with the LLM judge (iKAT-25 rubric)")
    p.add_argument("--judge-base-url", help="judge endpoint (default: the run's llm config, role 'judge')")
    p.add_argument("--judge-model", help="judge model name (default: the run's llm config, role 'judge')")
    p.add_argument("--judge-concurrency", type=int, default=8, help="judge calls at once (default 8)")
    p.set_defaults(func=cmd_eval)


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="one self-contained HTML file comparing runs")
    p.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR",
                   help="one run directory, or several to compare with the first")
    p.add_argument("--out", type=Path, help="HTML file (default RUN_DIR/report.html of the first run)")
    p.set_defaults(func=cmd_report)


def _add_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="iKAT topics, the iKAT 2025 run format, TREC runs, chat fine-tuning JSONL, "
                                      "ShareGPT or parquet")
    p.add_argument("run_dir", type=Path, help="the run directory to export")
    p.add_argument("--format", required=True, metavar="FORMAT",
                   help="ikat | ikat25-run | trec-run | ptkb-run | openai-chat | sharegpt | parquet")
    p.add_argument("--out", type=Path, help="output file (default RUN_DIR/export.<ext>)")
    p.add_argument("--stop-reason", action="append", metavar="R", help="only dialogues that ended so (repeatable)")
    p.add_argument("--min-grade", type=float, metavar="X", help="only dialogues whose mean user grade is >= X")
    p.add_argument("--min-turns", type=int, metavar="N", help="only dialogues with at least N turns")
    p.add_argument("--persona", action="append", metavar="ID", help="only this persona (repeatable)")
    p.add_argument("--topic", action="append", metavar="ID", help="only this topic (repeatable)")
    p.add_argument("--min-judge", type=float, metavar="X",
                   help="only dialogues whose judge overall is >= X (needs eval --judge)")
    p.add_argument("--repeat", type=int, metavar="K",
                   help="only repeat K of each scenario, counted from 0 (run --repeat 3 makes repeats 0, 1 and 2: "
                        "the last number of a dialogue id)")
    p.add_argument("--personas", type=Path, metavar="DIR", help="persona folder (default: the one in run.json)")
    p.add_argument("--topics", type=Path, metavar="FILE", help="iKAT topic file (default: the one in run.json)")
    p.add_argument("--team-id", default="simloop", help="ikat25-run metadata.team_id (default simloop)")
    p.add_argument("--run-id", dest="ikat_run_id", metavar="ID",
                   help="ikat25-run metadata.run_id (default: the run's id)")
    p.add_argument("--run-type", default="automatic",
                   help="ikat25-run metadata.run_type: automatic | manual | generation-only")
    p.set_defaults(func=cmd_export)


def add_commands(sub: argparse._SubParsersAction) -> None:
    _add_eval(sub)
    _add_report(sub)
    _add_export(sub)
