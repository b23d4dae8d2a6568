"""The report's plots: PNG data URIs drawn with matplotlib's Agg renderer (no pyplot, no
global state, no GUI backend).

Every series gets its own line style, marker and hatch, not only a colour, so lines that
coincide (a ``summary`` memory recalling exactly what ``full`` recalls) stay visible and
the plots read in greyscale; points of coinciding lines are dodged sideways a little.
"""

from __future__ import annotations

import base64
import io
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..memorytest import MemoryResults
from ..schema import Transcript
from .diagnostics import RunDiagnostics
from .formats import RunSummary
from .outliers import DEFAULT_THRESHOLD
from .stats import percentiles

__all__ = ["Plot", "run_plots", "memory_plot"]

Plot = tuple[str, str]  # (title, data URI)

# (line style, marker, marker size, hatch) per series, in order
_STYLES = [("-", "o", 9, ""), ("--", "s", 7, "//"), (":", "^", 7, ".."), ("-.", "D", 5, "xx"),
           ((0, (5, 1, 1, 1)), "v", 6, "\\\\"), ((0, (1, 1)), "P", 6, "++")]
_LATENCY_PCTS = (1, 5, 10, 25, 50, 75, 90, 95, 99)


def _style(i: int) -> tuple[Any, str, int, str]:
    return _STYLES[i % len(_STYLES)]


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _figure(width: float = 7.0, height: float = 3.2, cols: int = 1):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    axes = fig.subplots(1, cols)
    return fig, axes


def _bars(ax, names: Sequence[str], labels: Sequence[str], values: Sequence[Sequence[float]]) -> None:
    """Grouped bars, one hatch per run, each bar labelled with its value."""
    width = 0.8 / len(names)
    for i, (name, vals) in enumerate(zip(names, values)):
        xs = [x + i * width for x in range(len(labels))]
        bars = ax.bar(xs, vals, width, label=name, hatch=_style(i)[3], edgecolor="black", linewidth=0.5)
        ax.bar_label(bars, labels=[f"{v:.3g}" for v in vals], fontsize=6, padding=1)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(labels))], labels, rotation=15, fontsize=8)
    ax.legend(fontsize=7)


def _score_plot(names: Sequence[str], summaries: Sequence[RunSummary]) -> str | None:
    keys = [("ptkb", "nDCG@3"), ("ptkb", "P@3"), ("ptkb", "R@3"), ("ptkb", "F1"),
            ("passages", "nDCG@3"), ("passages", "P@5"), ("judge", "overall")]
    present = [(s, m) for s, m in keys if any(isinstance(x.lookup(s, m), (int, float)) for x in summaries)]
    if not present:
        return None
    fig, ax = _figure()
    _bars(ax, names, [f"{s} {m}" for s, m in present], [[x.lookup(s, m) or 0.0 for s, m in present] for x in summaries])
    ax.set_ylim(0, 1.1)
    ax.set_title("scores")
    return _png(fig)


def _stop_plot(names: Sequence[str], runs: Sequence[Sequence[Transcript]]) -> str | None:
    reasons = sorted({t.stop.reason for ts in runs for t in ts})
    if not reasons:
        return None
    fig, ax = _figure()
    counts = [Counter(t.stop.reason for t in ts) for ts in runs]
    _bars(ax, names, reasons, [[c[r] for r in reasons] for c in counts])
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_title("how dialogues ended")
    ax.set_ylabel("dialogues")
    return _png(fig)


def _boxplot(title: str, ylabel: str, names: Sequence[str], data: Sequence[list[float]]) -> str | None:
    if not any(v for d in data for v in d):  # nothing but zeros: no plot
        return None
    fig, ax = _figure()
    ax.boxplot([d or [0.0] for d in data], showfliers=True)
    ax.set_xticks(range(1, len(names) + 1), names, rotation=15, fontsize=8)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    return _png(fig)


_GRADE_BINS = [i / 2 for i in range(11)]  # 0, 0.5, ... 5: iKAT's 0-5 scale in half steps


def _turn_grades(runs: Sequence[Sequence[Transcript]]) -> list[list[float]]:
    return [[x.user.grade for t in ts for x in t.turns if x.user.grade is not None] for ts in runs]


def _grade_histogram(names: Sequence[str], runs: Sequence[Sequence[Transcript]]) -> str | None:
    """How the answers' grades spread, per run as shares of its graded turns (runs of
    different sizes compare), a step outline of its own style each."""
    grades = _turn_grades(runs)
    if not any(grades):
        return None
    fig, ax = _figure()
    for i, (name, gs) in enumerate(zip(names, grades)):
        if not gs:
            continue
        ls, _, _, hatch = _style(i)
        ax.hist(gs, bins=_GRADE_BINS, weights=[1 / len(gs)] * len(gs), histtype="step", linestyle=ls,
                linewidth=1.6, hatch=hatch, label=f"{name} ({len(gs)} turns)")
    ax.axvline(DEFAULT_THRESHOLD, color="grey", linewidth=0.8, linestyle=":", label="pass threshold (default)")
    ax.set_xticks(range(6))
    ax.set_xlabel("grade of the answer (0-5)")
    ax.set_ylabel("share of graded turns")
    ax.set_title("grades")
    ax.legend(fontsize=7)
    return _png(fig)


def _grade_by_turn(names: Sequence[str], runs: Sequence[Sequence[Transcript]]) -> str | None:
    """Mean grade at each turn index, per run: does the assistant get better or worse as a
    dialogue goes on?  A point needs 3 graded turns; fewer are too noisy to draw."""
    series = []
    for ts in runs:
        at: dict[int, list[float]] = {}
        for x in (x for t in ts for x in t.turns):
            if x.user.grade is not None:
                at.setdefault(x.index, []).append(x.user.grade)
        series.append(sorted((k, sum(v) / len(v)) for k, v in at.items() if len(v) >= 3))
    if not any(series):
        return None
    fig, ax = _figure()
    for i, (name, pts) in enumerate(zip(names, series)):
        if pts:
            ls, marker, size, _ = _style(i)
            ax.plot([k for k, _ in pts], [m for _, m in pts], linestyle=ls, marker=marker, markersize=size,
                    markerfacecolor="none" if i % 2 else None, label=name)
    ax.axhline(DEFAULT_THRESHOLD, color="grey", linewidth=0.8, linestyle=":", label="pass threshold (default)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("turn")
    ax.set_ylabel("mean grade")
    ax.set_ylim(0, 5.2)
    ax.set_title("grade per turn")
    ax.legend(fontsize=7)
    return _png(fig)


def _latency_plot(names: Sequence[str], diags: Sequence[RunDiagnostics]) -> str | None:
    """Turn latency percentiles per run, start-up turns left out (they are tens of seconds
    and would flatten everything else)."""
    if not any(d.warm_turns for d in diags):
        return None
    fig, ax = _figure()
    for i, (name, d) in enumerate(zip(names, diags)):
        if not d.warm_turns:
            continue
        ls, marker, size, _ = _style(i)
        pcts = percentiles(d.warm_turns, _LATENCY_PCTS)
        ax.plot(range(len(_LATENCY_PCTS)), [pcts[f"p{p}"] for p in _LATENCY_PCTS], linestyle=ls, marker=marker,
                markersize=size, markerfacecolor="none" if i % 2 else None, label=name)
    excluded = sum(len(d.startup_turns) for d in diags)
    # evenly spaced: the tail matters
    ax.set_xticks(range(len(_LATENCY_PCTS)), [f"p{p}" for p in _LATENCY_PCTS], fontsize=8)
    ax.set_ylabel("ms per turn")
    ax.set_title(f"turn latency percentiles ({excluded} start-up turns excluded)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    return _png(fig)


def run_plots(names: Sequence[str], summaries: Sequence[RunSummary], runs: Sequence[Sequence[Transcript]],
              diags: Sequence[RunDiagnostics]) -> list[Plot]:
    turns = [[float(len(t.turns)) for t in ts] for ts in runs]
    tokens = [[float(sum(s.prompt_tokens + s.completion_tokens for s in x.stages if s.is_llm_call()))
               for t in ts for x in t.turns] for ts in runs]
    cold = [x for d in diags for x in d.startup_turns]
    latency = "ms per answered turn, by percentile" + (
        f"; {len(cold)} start-up turns left out (up to {max(cold) / 1000:,.1f} s)" if cold else "")
    plots = [("PTKB, passage and judge scores, each in [0, 1]", _score_plot(names, summaries)),
             ("dialogues per stop reason", _stop_plot(names, runs)),
             ("grades of the answers, as shares of each run's graded turns", _grade_histogram(names, runs)),
             ("mean grade at each turn (turns graded in at least 3 dialogues)", _grade_by_turn(names, runs)),
             (latency, _latency_plot(names, diags)),
             ("user turns per dialogue", _boxplot("turns per dialogue", "turns", names, turns)),
             ("tokens of real LLM calls per turn", _boxplot("LLM tokens per turn", "tokens", names, tokens))]
    return [(title, uri) for title, uri in plots if uri]


def _dodged(xs: list[float], i: int, n: int, span: float) -> list[float]:
    return [x + (i - (n - 1) / 2) * 0.012 * span for x in xs]


def memory_plot(name: str, memory: MemoryResults) -> str:
    """Recall and "fact kept in query" against the distance between fact and probe."""
    strategies = list(memory.strategies.items())
    panels = [("recall_by_distance", "recall")]
    if any(v is not None for _, s in strategies for v in s.query_recall_by_distance.values()):
        panels.append(("query_recall_by_distance", "fact kept in query"))
    fig, axes = _figure(5.0 * len(panels), 3.4, cols=len(panels))
    axes = list(axes) if len(panels) > 1 else [axes]
    dists = sorted({float(d) for _, s in strategies for d in s.recall_by_distance})
    span = (max(dists) - min(dists)) or 1.0
    for ax, (field, title) in zip(axes, panels):
        for i, (strategy, s) in enumerate(strategies):
            pts = sorted((float(d), v) for d, v in getattr(s, field).items() if v is not None)
            if not pts:
                continue
            ls, marker, size, _ = _style(i)
            ax.plot(_dodged([p[0] for p in pts], i, len(strategies), span), [p[1] for p in pts], linestyle=ls,
                    marker=marker, markersize=size, markerfacecolor="none" if i % 2 else None, linewidth=1.6,
                    label=strategy)
        ax.set_xticks(dists, [f"{d:g}" for d in dists])
        ax.set_xlabel("turns between fact and probe")
        ax.set_ylim(-0.05, 1.08)
        ax.set_title(f"{title} — {name}", fontsize=10)
        ax.legend(fontsize=7)
    return _png(fig)
