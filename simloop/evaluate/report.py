"""`simloop report`: one self-contained HTML file comparing runs side by side.

Self-contained means one file a reviewer can mail around: CSS inline, plots as base64
PNG data URIs drawn with matplotlib's Agg renderer, no script and no external asset.
Scores come from each run's summary.json; a run not yet evaluated is evaluated on the
fly (without the judge, which costs money) and nothing is written into its directory.
"""

from __future__ import annotations

import asyncio
import base64
import html
import io
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from pydantic import ValidationError

from ..errors import first_error
from ..files import atomic_write
from ..memorytest.formats import MemoryResults
from ..schema import Transcript
from .formats import RunSummary
from .summary import EvalOptions, evaluate_transcripts, load_run, load_summary
from .tables import compare_rows, fmt, memory_rows, reference_rows

__all__ = ["RunView", "load_view", "load_views", "render_html", "write_report", "MEMORY"]

MEMORY = "memory.json"


@dataclass
class RunView:
    name: str
    run_dir: Path
    summary: RunSummary
    transcripts: list[Transcript]
    memory: MemoryResults | None
    memory_note: str | None = None
    evaluated_now: bool = False


def _read_memory(run_dir: Path) -> tuple[MemoryResults | None, str | None]:
    """memory.json from `simloop memory`, if any; a malformed one is noted, not fatal."""
    path = run_dir / MEMORY
    if not path.exists():
        return None, None
    try:
        data = MemoryResults.model_validate_json(path.read_bytes())
        for s in data.strategies.values():  # distances must be numbers, or plotting would fail later
            [float(k) for k in s.recall_by_distance]
        return data, None
    except (ValidationError, ValueError) as exc:
        return None, f"{path.name} could not be read ({_one_line(exc)}); memory plots skipped"


def _one_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        where, msg = first_error(exc)
        return f"{where}: {msg}"
    return f"{type(exc).__name__}: {exc}"


def load_view(run_dir: Path) -> RunView:
    run_dir = Path(run_dir)
    manifest, transcripts, _ = load_run(run_dir)
    summary = load_summary(run_dir)
    evaluated_now = summary is None
    if summary is None:
        summary = asyncio.run(evaluate_transcripts(transcripts, EvalOptions(), manifest, run_dir=run_dir)).summary
    name = manifest.run_id if manifest is not None else run_dir.name
    memory, note = _read_memory(run_dir)
    return RunView(name, run_dir, summary, transcripts, memory, note, evaluated_now)


def load_views(run_dirs: Sequence[Path]) -> list[RunView]:
    views = [load_view(d) for d in run_dirs]
    # Two dirs holding the same run id (a copy, a rerun) still need distinct columns.
    seen: Counter[str] = Counter(v.name for v in views)
    for v in views:
        if seen[v.name] > 1:
            v.name = f"{v.name} ({v.run_dir})"
    return views


# ----------------------------------------------------------------------------- plots
def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _figure(width: float = 7.0, height: float = 3.2):
    # Figure without pyplot: no global state, no GUI backend, Agg picked for PNG output.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    return fig, fig.add_subplot()


def _boxplot(title: str, ylabel: str, names: Sequence[str], data: Sequence[list[float]]) -> str | None:
    if not any(v for d in data for v in d):  # all zero (e.g. an offline run has no tokens): no plot
        return None
    fig, ax = _figure()
    ax.boxplot([d or [0.0] for d in data], showfliers=True)
    ax.set_xticks(range(1, len(names) + 1), names, rotation=15, fontsize=8)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    return _png(fig)


def _stop_plot(views: Sequence[RunView]) -> str | None:
    reasons = sorted({t.stop.reason for v in views for t in v.transcripts})
    if not reasons:
        return None
    fig, ax = _figure()
    width = 0.8 / len(views)
    for i, v in enumerate(views):
        counts = Counter(t.stop.reason for t in v.transcripts)
        ax.bar([r + i * width for r in range(len(reasons))], [counts[r] for r in reasons], width, label=v.name)
    ax.set_xticks([r + 0.4 - width / 2 for r in range(len(reasons))], reasons, fontsize=8)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_title("stop reasons")
    ax.set_ylabel("dialogues")
    ax.legend(fontsize=7)
    return _png(fig)


def _score_plot(views: Sequence[RunView]) -> str | None:
    """Bars of the headline scores each run has (PTKB, passages, judge)."""
    keys = [("ptkb", "nDCG@3"), ("ptkb", "P@3"), ("ptkb", "R@3"), ("ptkb", "F1"),
            ("passages", "nDCG@3"), ("passages", "P@5"), ("judge", "overall")]
    present = [(s, m) for s, m in keys if any(isinstance(v.summary.lookup(s, m), (int, float)) for v in views)]
    if not present:
        return None
    fig, ax = _figure()
    width = 0.8 / len(views)
    for i, v in enumerate(views):
        vals = [v.summary.lookup(s, m) or 0.0 for s, m in present]
        ax.bar([x + i * width for x in range(len(present))], vals, width, label=v.name)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(present))], [f"{s} {m}" for s, m in present],
                  rotation=15, fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_title("scores")
    ax.legend(fontsize=7)
    return _png(fig)


def _memory_plot(v: RunView) -> str | None:
    fig, ax = _figure()
    for name, s in v.memory.strategies.items():
        pts = sorted((float(d), float(r)) for d, r in s.recall_by_distance.items())
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xlabel("distance (turns between fact and probe)")
    ax.set_ylabel("recall")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"memory recall vs distance — {v.name}")
    ax.legend(fontsize=7)
    return _png(fig)


def _plots(views: Sequence[RunView]) -> list[tuple[str, str]]:
    names = [v.name for v in views]
    turns = [[float(len(t.turns)) for t in v.transcripts] for v in views]
    tokens = [[float(sum(s.prompt_tokens + s.completion_tokens for s in x.stages)) for t in v.transcripts for x in t.turns]
              for v in views]
    latency = [[x.latency_ms for t in v.transcripts for x in t.turns] for v in views]
    plots = [("scores", _score_plot(views)), ("stop reasons", _stop_plot(views)),
             ("turns", _boxplot("turns per dialogue", "turns", names, turns)),
             ("tokens", _boxplot("LLM tokens per turn", "tokens", names, tokens)),
             ("latency", _boxplot("turn latency", "ms", names, latency))]
    plots += [(f"memory {v.name}", _memory_plot(v)) for v in views if v.memory]
    return [(title, uri) for title, uri in plots if uri]


# ----------------------------------------------------------------------------- HTML
_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:14px}
th{background:#f0f0f0}img{max-width:100%;display:block;margin:1em 0}.note{color:#8a5a00}"""


def _e(value: Any) -> str:
    return html.escape(fmt(value) if not isinstance(value, str) else value)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _memory_table(v: RunView) -> str:
    header, rows = memory_rows(v.memory)
    return _table(header, rows)


def _reference_html(views: Sequence[RunView]) -> str:
    parts = []
    for v in views:
        ref = reference_rows(v.summary)
        if ref:
            parts.append(f"<h3>{_e(v.name)}: PTKB vs official iKAT 2023 runs (NII paper, Table II)</h3>"
                         + _table(["metric", "this run", "2023 baseline", "2023 best"], ref))
    return "".join(parts)


def render_html(views: Sequence[RunView]) -> str:
    names = [v.name for v in views]
    sources = [[v.name, str(v.run_dir), "evaluated now (no judge)" if v.evaluated_now else "summary.json"]
               for v in views]
    notes = "".join(f'<p class="note">{_e(v.memory_note)}</p>' for v in views if v.memory_note)
    memory = "".join(f"<h3>memory stress test — {_e(v.name)}</h3>{_memory_table(v)}" for v in views if v.memory)
    plots = "".join(f'<h3>{_e(title)}</h3><img alt="{_e(title)}" src="{uri}">' for title, uri in _plots(views))
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>simloop report: {_e(', '.join(names))}</title><style>{_CSS}</style></head><body>"
        f"<h1>simloop report</h1><p>{len(views)} run(s), generated {stamp}</p>"
        f"<h2>runs</h2>{_table(['run', 'directory', 'scores from'], sources)}"
        f"<h2>side by side</h2>{_table(['', *names], [[label, *vals] for label, vals in compare_rows([v.summary for v in views])])}"
        f"{_reference_html(views)}{notes}"
        f"{'<h2>memory</h2>' + memory if memory else ''}"
        f"<h2>plots</h2>{plots or '<p>nothing to plot</p>'}</body></html>"
    )


def write_report(views: Sequence[RunView], out: Path) -> Path:
    atomic_write(Path(out), render_html(views))
    return Path(out)
