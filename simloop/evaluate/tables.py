"""Rows of a summary.json as plain (label, value) tables, rendered by rich or as HTML.

One source of rows for the terminal and the HTML report, so both always show the same
numbers under the same names.
"""

from __future__ import annotations

from typing import Any, Sequence

from pydantic import BaseModel
from rich.table import Table

from ..memorytest.formats import MemoryResults
from .formats import JudgeSummary, RunStats, RunSummary

__all__ = [
    "fmt", "sections", "compare_rows", "rich_summary", "rich_compare", "rich_reference", "reference_rows",
    "memory_rows", "rich_memory",
]

Row = tuple[str, Any]


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        # metrics in [0, 1] keep 4 decimals (the precision papers report); counts and ms fewer
        return f"{value:.4f}" if abs(value) <= 1 else f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={fmt(v)}" for k, v in value.items()) or "none"
    return str(value)


def _stats_rows(s: RunStats) -> list[Row]:
    lat = s.latency_ms
    rows: list[Row] = [
        ("dialogues", s.dialogues),
        ("turns total", s.turns.total),
        ("turns mean", s.turns.mean),
        ("turns max", s.turns.max),
        ("stop reasons", s.stop_reasons),
        ("stopped by", s.stopped_by),
        ("mean user grade", s.grades.mean),
        ("turn latency ms p50/p90/p99", " / ".join(fmt(v) for v in (lat.turn.p50, lat.turn.p90, lat.turn.p99))),
        ("dialogue latency ms p50/p90/p99",
         " / ".join(fmt(v) for v in (lat.dialogue.p50, lat.dialogue.p90, lat.dialogue.p99))),
        ("tokens per turn (mean)", s.tokens_per_turn.mean),
        ("LLM calls", s.llm_calls),
        ("cached calls", s.cached_calls),
        ("retries", s.retries),
        ("tokens", s.tokens.total),
        ("cost USD", s.cost_usd),
        ("errors", s.errors or "none"),
    ]
    for kind, buckets in (("role", s.by_role), ("model", s.by_model)):
        for name, b in buckets.items():
            rows.append((f"{kind} {name}", f"{b.calls} calls, {b.tokens} tok, ${fmt(b.cost_usd)}"))
    return rows


def _metric_rows(block: BaseModel, skip: Sequence[str] = ()) -> list[Row]:
    """Every scalar of a metrics block under its name in summary.json."""
    data = block.model_dump(by_alias=True)
    return [(k, v) for k, v in data.items() if k not in skip and not isinstance(v, (dict, list))]


_NOT_ROWS = ("note",)  # printed on its own line by the CLI


def _judge_rows(j: JudgeSummary) -> list[Row]:
    rows: list[Row] = [(f"{level} {k}", v) for level, scores in (("rubric", j.rubric), ("dialogue", j.dialogue))
                       for k, v in scores.items()]
    rows += [("overall (mean of dialogue HMs)", j.overall), ("overall (HM of level means)", j.overall_of_means),
             ("judge model", j.model), ("judge calls", j.usage.calls), ("judge errors", j.errors or "none")]
    return rows


def sections(summary: RunSummary) -> list[tuple[str, list[Row]]]:
    """Titled groups of rows for one run's summary."""
    out = [("run statistics", _stats_rows(summary.stats))]
    if summary.ptkb is not None:
        out.append(("PTKB provenance", _metric_rows(summary.ptkb, _NOT_ROWS)))
    if summary.passages is not None:
        out.append(("passage ranking", _metric_rows(summary.passages, _NOT_ROWS)))
    if summary.judge is not None:
        out.append(("LLM judge (iKAT-25 rubric, [0,1])", _judge_rows(summary.judge)))
    return out


def reference_rows(summary: RunSummary) -> list[tuple[str, Any, Any, Any]] | None:
    """(metric, this run, 2023 baseline, 2023 best) when the run replayed iKAT 2023 topics."""
    ref = summary.ptkb_reference
    if ref is None or summary.ptkb is None:
        return None
    return [(m, summary.lookup("ptkb", m), ref.baseline[m], ref.best[m]) for m in ("nDCG@3", "P@3", "R@3")]


def rich_summary(summary: RunSummary) -> list[Table]:
    tables = []
    for title, rows in sections(summary):
        t = Table(title=title, show_header=False, title_justify="left")
        t.add_column(style="bold")
        t.add_column()
        for label, value in rows:
            t.add_row(label, fmt(value))
        tables.append(t)
    ref = rich_reference(summary)
    if ref is not None:
        tables.append(ref)
    return tables


def rich_reference(summary: RunSummary) -> Table | None:
    ref = reference_rows(summary)
    if not ref:
        return None
    t = Table(title="PTKB vs official iKAT 2023 runs (NII paper, Table II)", title_justify="left")
    for col in ("metric", "this run", "2023 baseline", "2023 best"):
        t.add_column(col)
    for metric, ours, base, best in ref:
        t.add_row(metric, fmt(ours), fmt(base), fmt(best))
    return t


def memory_rows(memory: MemoryResults) -> tuple[list[str], list[list[Any]]]:
    """memory.json (`simloop memory`) as a table: strategy, tokens per turn, recall per distance."""
    strategies = memory.strategies
    dists = sorted({float(d) for s in strategies.values() for d in s.recall_by_distance})
    rows = []
    for name, s in strategies.items():
        rec = {float(d): r for d, r in s.recall_by_distance.items()}
        rows.append([name, s.tokens_per_turn, *(rec.get(d) for d in dists)])
    return ["strategy", "tokens per turn", *[f"recall @ {d:g}" for d in dists]], rows


def rich_memory(name: str, memory: MemoryResults) -> Table:
    header, rows = memory_rows(memory)
    t = Table(title=f"memory stress test — {name}", title_justify="left")
    for col in header:
        t.add_column(col)
    for row in rows:
        t.add_row(*(fmt(c) for c in row))
    return t


# Rows of the side-by-side comparison: (section, label, path into summary.json).
_COMPARE: list[tuple[str, str, tuple[str, ...]]] = [
    ("stats", "dialogues", ("stats", "dialogues")),
    ("stats", "turns mean", ("stats", "turns", "mean")),
    ("stats", "turns max", ("stats", "turns", "max")),
    ("stats", "mean user grade", ("stats", "grades", "mean")),
    ("stats", "stop reasons", ("stats", "stop_reasons")),
    ("stats", "tokens per turn", ("stats", "tokens_per_turn", "mean")),
    ("stats", "turn latency p50 ms", ("stats", "latency_ms", "turn", "p50")),
    ("stats", "turn latency p90 ms", ("stats", "latency_ms", "turn", "p90")),
    ("stats", "dialogue latency p50 ms", ("stats", "latency_ms", "dialogue", "p50")),
    ("stats", "LLM calls", ("stats", "llm_calls")),
    ("stats", "cost USD", ("stats", "cost_usd")),
    ("stats", "errors", ("stats", "errors")),
    *[("ptkb", f"PTKB {m}", ("ptkb", m)) for m in ("nDCG@3", "P@3", "R@3", "nDCG@5", "P", "R", "F1", "turns")],
    *[("passages", f"passages {m}", ("passages", m))
      for m in ("nDCG@3", "nDCG@5", "nDCG@10", "P@5", "P@10", "MAP", "Recall@100", "turns", "matched_turns")],
    ("judge", "judge rubric score", ("judge", "rubric", "score")),
    ("judge", "judge dialogue score", ("judge", "dialogue", "score")),
    ("judge", "judge overall", ("judge", "overall")),
]


def compare_rows(summaries: Sequence[RunSummary]) -> list[tuple[str, list[Any]]]:
    """(label, value per run) for every row at least one run has."""
    rows = []
    for section, label, path in _COMPARE:
        if not any(getattr(s, section) is not None for s in summaries):
            continue
        rows.append((label, [s.lookup(*path) for s in summaries]))
    return rows


def rich_compare(names: Sequence[str], summaries: Sequence[RunSummary]) -> Table:
    t = Table(title="runs side by side", title_justify="left")
    t.add_column("")
    for n in names:
        t.add_column(n)
    for label, values in compare_rows(summaries):
        t.add_row(label, *(fmt(v) for v in values))
    return t
