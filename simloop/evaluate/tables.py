"""Rows of a summary.json as plain (label, value) tables, rendered by rich or as HTML.

One source of rows for the terminal and the HTML report, so both always show the same
numbers under the same names.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import BaseModel
from rich.table import Table
from rich.text import Text

from ..memorytest import MemoryResults
from ..schema import OFFLINE_MODEL_PREFIX, StopReason
from .diagnostics import Group, RunDiagnostics
from .formats import JudgeSummary, RunStats, RunSummary

__all__ = [
    "fmt", "cell_html", "signed", "sections", "CompareRow", "compare_rows", "compare_header", "rich_summary",
    "rich_compare", "rich_reference", "reference_rows", "reference_title", "memory_rows", "rich_memory", "stop_rows",
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


def cell_html(value: Any) -> str:
    """A value as HTML text: strings as they are, anything else as ``fmt`` shows it; escaped."""
    return html.escape(value if isinstance(value, str) else fmt(value))


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
    ]
    # LLM rows only when the run made LLM calls: an offline run has no tokens to report.
    if s.llm_calls or s.cached_calls:
        rows += [("LLM tokens per turn (mean)", s.tokens_per_turn.mean), ("LLM calls", s.llm_calls),
                 ("cached calls", s.cached_calls), ("tokens", s.tokens.total), ("cost USD", s.cost_usd)]
    if s.retries:
        rows.append(("retries", s.retries))
    rows.append(("errors", s.errors or "none"))
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
    """(metric, this run, 2023 baseline, 2023 best) when the run replayed iKAT 2023 topics,
    and how many conversations each was scored over (the official runs: all of them)."""
    ref = summary.ptkb_reference
    if ref is None or summary.ptkb is None:
        return None
    rows: list[tuple[str, Any, Any, Any]] = [(m, summary.lookup("ptkb", m), ref.baseline[m], ref.best[m])
                                             for m in ("nDCG@3", "P@3", "R@3")]
    if ref.conversations is not None:
        total = ref.conversations_total
        ours = f"{ref.conversations} of {total}" if total is not None else f"{ref.conversations} (topic file unread)"
        rows.append(("conversations scored", ours, "all", "all"))
    return rows


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


def reference_title(summary: RunSummary) -> str:
    """The reference table's title, naming both golds: the official runs were scored against
    NIST's PTKB qrels, which a replay's topic file need not equal."""
    gold = summary.ptkb.gold_label() if summary.ptkb is not None else None
    partial = summary.ptkb_reference.partial() if summary.ptkb_reference is not None else None
    return ((f"{partial.upper()}. " if partial else "")
            + f"PTKB vs official iKAT 2023 runs (NII paper, Table II; they were scored against the NIST PTKB qrels, "
            f"this run against {gold or 'unknown gold'})")


def rich_reference(summary: RunSummary) -> Table | None:
    ref = reference_rows(summary)
    if not ref:
        return None
    t = Table(title=reference_title(summary), title_justify="left")
    for col in ("metric", "this run", "2023 baseline", "2023 best"):
        t.add_column(col)
    for metric, ours, base, best in ref:
        t.add_row(metric, fmt(ours), fmt(base), fmt(best))
    return t


def memory_rows(memory: MemoryResults, kept: bool = True) -> tuple[list[str], list[list[Any]]]:
    """memory.json (`simloop memory`) as a table: per strategy its context tokens per turn,
    recall per distance, and "fact kept in query" per distance (the share of probes whose
    rewritten query still carried the planted fact: the clean signal of what memory kept)."""
    strategies = memory.strategies
    dists = sorted({float(d) for s in strategies.values() for d in s.recall_by_distance})
    kept_any = kept and any(v is not None for s in strategies.values() for v in s.query_recall_by_distance.values())
    rows = []
    for name, s in strategies.items():
        rec = {float(d): r for d, r in s.recall_by_distance.items()}
        kept_at = {float(d): r for d, r in s.query_recall_by_distance.items()}
        stand_in = any(m.startswith(OFFLINE_MODEL_PREFIX) for m in s.memory_models)
        label = f"{name} (offline stand-in)" if stand_in else name
        kept_cells = [kept_at.get(d) for d in dists] if kept_any else []
        rows.append([label, s.tokens_per_turn, *(rec.get(d) for d in dists), *kept_cells])
    header = ["strategy", "tokens per turn", *[f"recall @ {d:g}" for d in dists]]
    header += [f"fact kept in query @ {d:g}" for d in dists] if kept_any else []
    return header, rows


def rich_memory(name: str, memory: MemoryResults, kept: bool = False) -> Table:
    """The memory table for a terminal; ``kept`` adds the "fact kept in query" columns
    (`simloop memory` prints those in a table of their own)."""
    header, rows = memory_rows(memory, kept)
    t = Table(title=f"memory stress test — {name}", title_justify="left")
    for col in header:
        t.add_column(col)
    for row in rows:
        t.add_row(*(fmt(c) for c in row))
    return t


# ----------------------------------------------------------------------------- side by side
@dataclass
class CompareRow:
    """One row of the side-by-side table: a value per run and which direction is better
    (+1 higher, -1 lower, 0 neither), so a difference can be read as a gain or a loss.

    Only values that compare between runs of different sizes have a direction: shares,
    means, rates and metrics.  Counts (dialogues, turns, calls) have none: more dialogues
    is neither better nor worse, so a share stands in for each count that would read as
    one (``counts`` keeps the count, shown beside the share: ``40.0% (4)``)."""

    label: str
    values: list[Any]
    better: int = 0
    counts: list[int] | None = None  # the values are shares of the run's dialogues; these their counts

    def deltas(self) -> list[float | None]:
        """Each later run minus the first (None where either is not a number)."""
        base = self.values[0]
        return [v - base if _number(v) and _number(base) else None for v in self.values[1:]]

    def cells(self) -> list[str]:
        """The values as the tables show them."""
        if self.counts is None:
            return [fmt(v) for v in self.values]
        return [f"{v:.1%} ({n})" if _number(v) else "-" for v, n in zip(self.values, self.counts)]

    def delta_cells(self) -> list[str]:
        """The differences as the tables show them: shares in percentage points."""
        if self.counts is None:
            return [signed(d) for d in self.deltas()]
        return [_points(d) for d in self.deltas()]

    def tones(self) -> list[str | None]:
        """Per difference "gain", "loss" or None (no direction, no difference, no number)."""
        return [None if d in (None, 0) or not self.better else "gain" if (d > 0) == (self.better > 0) else "loss"
                for d in self.deltas()]


def _points(delta: float | None) -> str:
    """A difference of shares in percentage points: +12.5 pp, −3.0 pp, ±0."""
    if delta is None:
        return "-"
    if round(delta * 100, 1) == 0:
        return "±0"
    return ("+" if delta > 0 else "\u2212") + f"{abs(delta) * 100:.1f} pp"


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def signed(delta: float | None) -> str:
    """A difference with its sign: +0.0123, −3, ±0."""
    if delta is None:
        return "-"
    if delta == 0:
        return "±0"
    return ("+" if delta > 0 else "\u2212") + fmt(abs(delta) if isinstance(delta, float) else abs(int(delta)))


_STOP_BETTER = {"user_satisfied": 1, "user_gave_up": -1, "max_turns": -1, "timeout": -1, "error": -1}
_REASONS = list(get_args(StopReason))


def _reason_order(reason: str) -> tuple[int, str]:
    """Stop reasons in the order the transcript format lists them (unknown ones last)."""
    return (_REASONS.index(reason) if reason in _REASONS else len(_REASONS), reason)


# Turn counts under summary.json's meanings (README): PTKB "judged" turns have gold, the
# ranked means are over the "scored" ones (gold with a relevant statement); passage
# "judged" turns are the ones the qrels name.
_COUNTS = {
    "ptkb": [("ptkb judged turns", "judged_turns"), ("ptkb scored turns (a relevant statement)", "turns")],
    "passages": [("passages judged turns", "turns"), ("passages qrels", "qrels")],
}
_METRICS: list[tuple[str, list[str]]] = [
    ("ptkb", ["nDCG@3", "P@3", "R@3", "nDCG@5", "P", "R", "F1"]),
    ("passages", ["nDCG@3", "nDCG@5", "nDCG@10", "P@5", "P@10", "MAP", "Recall@100"]),
]


def _share(label: str, counts: list[int], totals: list[int], better: int) -> CompareRow:
    return CompareRow(label, [n / t if t else None for n, t in zip(counts, totals)], better, counts=counts)


def _per(numerators: Sequence[float | None], denominators: Sequence[int]) -> list[float | None]:
    return [n / d if n is not None and d else None for n, d in zip(numerators, denominators)]


def _stat_rows(summaries: Sequence[RunSummary], diags: Sequence[RunDiagnostics] | None) -> list[CompareRow]:
    st = [s.stats for s in summaries]
    totals = [s.dialogues for s in st]
    rows = [CompareRow("dialogues", totals), CompareRow("turns mean", [s.turns.mean for s in st]),
            CompareRow("mean user grade", [s.grades.mean for s in st], 1)]
    reasons = sorted({r for s in st for r in s.stop_reasons}, key=_reason_order)
    rows += [_share(f"stopped: {r}", [s.stop_reasons.get(r, 0) for s in st], totals, _STOP_BETTER.get(r, 0))
             for r in reasons]
    if diags is not None:  # start-up excluded (the report reads the transcripts)
        rows += [CompareRow(f"turn latency {p} ms (start-up excluded)", [d.turn_latency[p] for d in diags], -1)
                 for p in ("p50", "p90", "p99")]
        rows += [CompareRow("start-up turns (excluded)", [len(d.startup_turns) for d in diags]),
                 CompareRow("dialogue latency p50 ms (start-up wait excluded)",
                            [d.dialogue_latency["p50"] for d in diags], -1)]
    else:
        rows += [CompareRow(f"turn latency {p} ms", [getattr(s.latency_ms.turn, p) for s in st], -1)
                 for p in ("p50", "p90", "p99")]
    if any(s.llm_calls or s.cached_calls for s in st):  # an offline run has no LLM rows at all
        rows += [CompareRow("LLM tokens per turn", [s.tokens_per_turn.mean for s in st], -1),
                 CompareRow("LLM calls", [s.llm_calls for s in st]),
                 CompareRow("cached calls", [s.cached_calls for s in st])]
    if any(s.retries for s in st):
        rows += [CompareRow("retries", [s.retries for s in st]),
                 CompareRow("retries per LLM call", _per([s.retries for s in st], [s.llm_calls for s in st]), -1)]
    if any(s.cost_usd is not None for s in st):
        rows += [CompareRow("cost USD", [s.cost_usd for s in st]),
                 CompareRow("cost USD per dialogue", _per([s.cost_usd for s in st], totals), -1)]
    rows.append(_share("dialogues with errors", [sum(s.errors.values()) for s in st], totals, -1))
    return rows


def compare_rows(summaries: Sequence[RunSummary], diags: Sequence[RunDiagnostics] | None = None) -> list[CompareRow]:
    """The rows of the side-by-side table that at least one run has a value for."""
    rows = _stat_rows(summaries, diags)
    for block, metrics in _METRICS:
        if any(getattr(s, block) is not None for s in summaries):
            rows += [CompareRow(f"{block} {m}", [s.lookup(block, m) for s in summaries], 1) for m in metrics]
            rows += [CompareRow(label, [s.lookup(block, key) for s in summaries]) for label, key in _COUNTS[block]]
    if any(s.ptkb is not None for s in summaries):  # runs scored against different gold do not compare
        rows.append(CompareRow("ptkb gold", [s.ptkb.gold_label() if s.ptkb else None for s in summaries]))
    if any(s.passages is not None for s in summaries):
        rows.append(CompareRow("passages matched turns", [s.lookup("passages", "matched_turns") for s in summaries]))
    if any(s.judge is not None for s in summaries):
        rows += [CompareRow("judge rubric score", [s.lookup("judge", "rubric", "score") for s in summaries], 1),
                 CompareRow("judge dialogue score", [s.lookup("judge", "dialogue", "score") for s in summaries], 1),
                 CompareRow("judge overall", [s.lookup("judge", "overall") for s in summaries], 1)]
    return [r for r in rows if any(v is not None for v in r.values)]


def compare_header(names: Sequence[str]) -> list[str]:
    return ["", *names, *(f"\u0394 {n} \u2212 {names[0]}" for n in names[1:])]


_TONE_STYLE = {"gain": "green", "loss": "red", None: ""}


def rich_compare(names: Sequence[str], summaries: Sequence[RunSummary],
                 diags: Sequence[RunDiagnostics] | None = None, *, colour: bool = True) -> Table:
    """The side-by-side table for a terminal; ``colour`` False leaves every difference
    plain (runs over different scenarios: a difference is not the runs' alone)."""
    t = Table(title="runs side by side", title_justify="left")
    for col in compare_header(names):
        t.add_column(col)
    for row in compare_rows(summaries, diags):
        deltas = [Text(d, style=_TONE_STYLE[tone] if colour else "")
                  for d, tone in zip(row.delta_cells(), row.tones())]
        t.add_row(row.label, *row.cells(), *deltas)
    return t


# ----------------------------------------------------------------------------- stop reasons
def stop_rows(by_key: dict[str, Group]) -> tuple[list[str], list[list[Any]]]:
    """(header, rows): per persona (or topic) its dialogues, mean turns and grade, and how
    many ended each way; the least satisfied first."""
    reasons = sorted({r for g in by_key.values() for r in g.stops}, key=_reason_order)

    def satisfied(item: tuple[str, Group]) -> tuple[float, str]:
        return item[1].stops.get("user_satisfied", 0) / max(1, len(item[1].turns)), item[0]

    rows = [[key, len(g.turns), f"{sum(g.turns) / len(g.turns):.1f}" if g.turns else None,
             f"{sum(g.grades) / len(g.grades):.2f}" if g.grades else None, *(g.stops.get(r, 0) for r in reasons)]
            for key, g in sorted(by_key.items(), key=satisfied)]
    return ["", "dialogues", "mean turns", "mean grade", *reasons], rows
