"""`simloop report`: one self-contained HTML file to diagnose runs, side by side.

Self-contained: CSS inline, plots as base64 PNG data URIs (report_plots.py), no script and
no external asset, so it can be mailed around and opened anywhere.  Scores come from each
run's summary.json; a run not yet evaluated, or whose summary.json is older than its
transcripts (a ``--resume`` since `simloop eval`), is evaluated on the fly with the gold
files its last evaluation used (without the judge, which costs money), and nothing is
written into its directory.

Sections (each an ``id`` the browser test checks): runs, side by side (differences to
the first run with their sign), PTKB against the official 2023 runs, passage coverage,
stop reasons per persona and topic, outliers (each linked to its dialogue), the memory
test, plots, and every dialogue.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import first_error
from ..files import atomic_write
from ..loop import run as run_loop
from ..memorytest import MemoryResults
from ..schema import Transcript, ValiditySummary
from .diagnostics import RunDiagnostics, diagnose
from .formats import RunSummary
from .report_dialogues import dialogue_anchor, dialogues_html
from .report_plots import memory_plot, run_plots
from .summary import evaluate_transcripts, load_run, load_summary, reeval_options, stale_reason
from .tables import cell_html as _e
from .tables import compare_header, compare_rows, memory_rows, reference_rows, reference_title, stop_rows

__all__ = ["RunView", "load_view", "load_views", "render_html", "write_report", "scenario_warning", "validity_line",
           "MEMORY", "SECTIONS"]

MEMORY = "memory.json"
# Section ids in page order; "reference", "passages", "outliers" and "memory" appear only when a run has them.
SECTIONS = ("runs", "compare", "reference", "passages", "stops", "outliers", "memory", "plots", "dialogues")


@dataclass
class RunView:
    name: str
    run_dir: Path
    summary: RunSummary
    transcripts: list[Transcript]
    memory: MemoryResults | None
    memory_note: str | None = None
    evaluated_now: bool = False
    stale: str | None = None  # why summary.json was not used, when it was out of date
    validity: ValiditySummary | None = None  # the simulator configuration's validity card (run.json)
    diag: RunDiagnostics = field(init=False)  # read off the transcripts

    def __post_init__(self) -> None:
        self.diag = diagnose(self.transcripts)


def _read_memory(run_dir: Path) -> tuple[MemoryResults | None, str | None]:
    """memory.json from `simloop memory`, if any; a malformed one is noted, not fatal."""
    path = run_dir / MEMORY
    if not path.exists():
        return None, None
    try:
        data = MemoryResults.model_validate_json(path.read_bytes())
        for s in data.strategies.values():  # distances must be numbers, or plotting would fail later
            [float(k) for k in s.recall_by_distance]
        if not data.strategies:  # `simloop memory` stopped before its first strategy finished
            return None, f"{path.name} has no results: the memory test was {data.status} before a strategy finished"
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
    stale = stale_reason(run_dir, summary, transcripts) if summary is not None else None
    evaluated_now = summary is None or stale is not None
    if summary is None or stale is not None:
        opts, notes = reeval_options(summary)
        stale = "; ".join([f"summary.json is out of date ({stale}): scored again now", *notes]) if stale else None
        summary = run_loop(evaluate_transcripts(transcripts, opts, manifest, run_dir=run_dir)).summary
    if manifest is not None and summary.assistant is None:  # evaluated now: no header yet
        summary = summary.model_copy(update={"assistant": manifest.assistant.name,
                                             "simulator": manifest.simulator.name})
    name = manifest.run_id if manifest is not None else run_dir.name
    memory, note = _read_memory(run_dir)
    return RunView(name, run_dir, summary, transcripts, memory, note, evaluated_now, stale=stale,
                   validity=manifest.validity if manifest is not None else None)


def load_views(run_dirs: Sequence[Path]) -> list[RunView]:
    views = [load_view(d) for d in run_dirs]
    # Two dirs holding the same run id (a copy, a rerun) still need distinct columns.
    seen: Counter[str] = Counter(v.name for v in views)
    for v in views:
        if seen[v.name] > 1:
            v.name = f"{v.name} ({v.run_dir})"
    return views


# ----------------------------------------------------------------------------- HTML pieces
def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><tr>{head}</tr>{body}</table>'


def _section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{_e(title)}</h2>{body}</section>'


def _runs_html(views: Sequence[RunView]) -> str:
    rows = [[v.name, v.summary.assistant or "-", v.summary.simulator or "-", len(v.transcripts), str(v.run_dir),
             _scores_from(v)] for v in views]
    notes = "".join(f'<p class="note">{_e(v.name)}: {_e(n)}</p>' for v in views for n in (v.stale, v.memory_note) if n)
    validity = "".join(f'<p class="note">{_e(v.name)}: {_e(validity_line(v.validity))}</p>' for v in views)
    return _table(["run", "assistant", "simulator", "dialogues", "directory", "scores from"], rows) + notes + validity


def validity_line(card: ValiditySummary | None) -> str:
    """The simulator's validity beside a run: the overall verdicts and the failing criteria."""
    if card is None:
        return "simulator validity: no card for this simulator configuration (measure it: simloop validate)"
    failing = f"; failing: {', '.join(card.failing)}" if card.failing else ""
    sample = f"; sample {card.sample} per criterion" if card.sample else ""
    return (f"simulator validity: grader {card.grader}, voice {card.voice}{failing}{sample} "
            f"(card {card.path}, {card.created_at:%Y-%m-%d %H:%M} UTC)")


def _scores_from(v: RunView) -> str:
    if v.stale:
        return "evaluated now (summary.json out of date; no judge)"
    return "evaluated now (no judge)" if v.evaluated_now else "summary.json"


def _delta_cell(shown: str, tone: str | None) -> str:
    return f'<td class="delta {tone or ""}">{_e(shown)}</td>'


# Why the report's latency differs from summary.json's (which counts every turn as it was).
_STARTUP = ("Start-up turns (the first turns of each session, waiting for the index and models to load) are left "
            "out of turn latency, and their wait out of dialogue latency (the first turn counts as a typical turn); "
            "summary.json and `simloop eval` count every turn as it was.")


def scenario_warning(views: Sequence[RunView]) -> str | None:
    """One line when the runs cover different scenarios (persona x topic pairs, repeats
    aside): their differences are then not the runs' alone, and none is coloured."""
    pairs = [{(t.scenario.persona_id, t.scenario.topic_id) for t in v.transcripts} for v in views]
    if all(p == pairs[0] for p in pairs[1:]):
        return None
    first = views[0].name
    others = "; ".join(f"{v.name}: {len(p)}, {len(p & pairs[0])} of them in {first}"
                       for v, p in zip(views[1:], pairs[1:]) if p != pairs[0])
    return (f"the runs cover different scenarios ({first}: {len(pairs[0])} persona x topic pairs; {others}): "
            "their differences are not the runs' alone, so none is coloured; compare runs over the same "
            "scenarios (the same --limit, --persona, --topic)")


def _compare_html(views: Sequence[RunView]) -> str:
    names = [v.name for v in views]
    rows = compare_rows([v.summary for v in views], [v.diag for v in views])
    differ = scenario_warning(views)
    head = "".join(f"<th>{_e(h)}</th>" for h in compare_header(names))
    body = "".join(
        f"<tr><td>{_e(r.label)}</td>{''.join(f'<td class=num>{_e(v)}</td>' for v in r.cells())}"
        f"{''.join(_delta_cell(d, None if differ else t) for d, t in zip(r.delta_cells(), r.tones()))}</tr>"
        for r in rows)
    colours = ("" if differ else "green is better, red is worse (counts have no colour: a share of the "
               "dialogues stands beside each one that would); ")
    note = (f'<p class="note">Differences are each run minus the first; {colours}shares differ in '
            f"percentage points (pp). {_STARTUP}</p>" if len(views) > 1 else f'<p class="note">{_STARTUP}</p>')
    if differ:
        note = f'<p class="note warn">{_e(differ[0].upper() + differ[1:])}.</p>' + note
    golds = {v.name: v.summary.ptkb.gold_label() for v in views if v.summary.ptkb is not None}
    if len(set(golds.values())) > 1:
        note += ('<p class="note">PTKB metrics were scored against different gold ('
                 + _e(", ".join(f"{n}: {g}" for n, g in golds.items())) + "), so their differences are not "
                 "the runs' alone; `simloop eval RUN --ptkb-qrels FILE` scores each against the same file.</p>")
    return f'<table class="compare"><tr>{head}</tr>{body}</table>{note}'


def _reference_html(views: Sequence[RunView]) -> str:
    parts = []
    for v in views:
        ref = reference_rows(v.summary)
        if ref:
            parts.append(f"<h3>{_e(v.name)}: {_e(reference_title(v.summary))}</h3>"
                         + _table(["metric", "this run", "2023 baseline", "2023 best"], ref))
    return "".join(parts)


def _passages_html(views: Sequence[RunView]) -> str:
    parts = []
    for v in views:
        p = v.summary.passages
        if p is None:
            continue
        cover = (f"{p.turns} of the run's {p.turns_total} turns are in the qrels; {p.matched_turns} of those "
                 "retrieved at least one judged passage")
        note = f'<p class="note">{_e(p.note)}</p>' if p.note else ""
        parts.append(f"<p><b>{_e(v.name)}</b>: {_e(cover)}.</p>{note}")
    return "".join(parts)


def _stops_html(views: Sequence[RunView]) -> str:
    parts = []
    for v in views:
        pairs = {(t.scenario.persona_id, t.scenario.topic_id) for t in v.transcripts}
        one_to_one = len(pairs) == len(v.diag.by_persona) == len(v.diag.by_topic)
        for label, by in (("persona", v.diag.by_persona), ("topic", v.diag.by_topic)):
            if label == "topic" and one_to_one:
                continue  # one topic per persona (an iKAT run): the persona table says it all
            header, rows = stop_rows(by)
            parts.append(f'<h3>{_e(v.name)}: by {label} (least satisfied first)</h3>'
                         f'<div class="scroll">{_table([label, *header[1:]], rows, "stops")}</div>')
    return "".join(parts)


def _outliers_html(views: Sequence[RunView]) -> str:
    parts = []
    for run, v in enumerate(views):
        for title, items in v.diag.outliers.lists():
            links = "".join(f'<li><a href="#{_e(dialogue_anchor(run, o.dialogue_id))}">{_e(o.dialogue_id)}</a> '
                            f'<span class="dim">{_e(o.why)}</span></li>' for o in items)
            parts.append(f"<h3>{_e(v.name)}: {_e(title)}</h3><ul>{links}</ul>")
    return "".join(parts)


def _memory_html(views: Sequence[RunView]) -> str:
    parts = []
    for v in views:
        if not v.memory:
            continue
        header, rows = memory_rows(v.memory)
        parts.append(f"<h3>memory stress test — {_e(v.name)}</h3>{_table(header, rows)}"
                     f'<img alt="memory recall and fact kept in query — {_e(v.name)}"'
                     f' src="{memory_plot(v.name, v.memory)}">'
                     '<p class="note">"Fact kept in query": the share of probes whose rewritten query still carried '
                     "the planted fact — what the memory kept, whatever the corpus can answer.</p>")
    return "".join(parts)


def _plots_html(views: Sequence[RunView]) -> str:
    plots = run_plots([v.name for v in views], [v.summary for v in views], [v.transcripts for v in views],
                      [v.diag for v in views])
    return "".join(f'<figure><img alt="{_e(t)}" src="{uri}"><figcaption>{_e(t)}</figcaption></figure>'
                   for t, uri in plots) or "<p>nothing to plot</p>"


# ----------------------------------------------------------------------------- the page
_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
main{max-width:1200px;margin:0 auto;padding:1.5em 2em;background:#fff;min-height:100vh}
h1{margin:0 0 .2em}h2{border-bottom:2px solid #d0d7de;padding-bottom:.2em;margin-top:1.6em}h3{margin:1.2em 0 .4em}
nav{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #d0d7de;font-size:14px;z-index:1}
nav a{margin-right:1em;color:#0969da;text-decoration:none}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}
td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left}th{background:#f0f3f6}tr:nth-child(even) td{background:#fafbfc}
td.num,td.delta{text-align:right;font-variant-numeric:tabular-nums}
td.gain{color:#1a7f37;font-weight:600}td.loss{color:#cf222e;font-weight:600}
.note{color:#7d4e00;background:#fff8c5;padding:.3em .6em;border-radius:4px;font-size:13px}
.note.warn{color:#82071e;background:#ffebe9;font-weight:600}
figure{display:inline-block;margin:.5em 1em .5em 0;vertical-align:top}figcaption{font-size:12px;color:#57606a}
img{max-width:100%}.scroll{max-height:26em;overflow:auto;display:inline-block}
.dlgs{font-size:13px;border:1px solid #d0d7de;border-radius:6px}
.dlghead,.dlg>summary{display:grid;grid-template-columns:3fr 1.2fr 1.2fr 1.4fr .6fr .8fr .7fr;gap:.5em;padding:4px 8px}
.dlghead{font-weight:600;background:#f0f3f6}.dlg>summary{cursor:pointer;border-top:1px solid #eaeef2}
.dlg>summary:hover{background:#f6f8fa}.dlg[open]>summary{background:#ddf4ff}
.body{padding:.5em 1em 1em 2em;border-top:1px solid #d0d7de;background:#fcfcfd}
.turn{margin:.6em 0;padding-bottom:.5em;border-bottom:1px dashed #d0d7de}
.user,.asst{margin:.2em 0}.who{font-weight:600;display:inline-block;min-width:5.5em}.asst .who{color:#0969da}
.meta{margin-left:5.5em;font-size:12px}.kv{margin:.2em 0}.kv ol{margin:.1em 0 .1em 1.2em;padding:0}
ul.inline{display:inline;padding:0;margin:0 0 0 .5em}ul.inline li{display:inline-block;margin:0 .9em 0 0}
.dim{color:#6e7781}.used{font-weight:600}.cited{font-weight:600}.tags{color:#6e7781;font-size:12px}
.grade{font-size:11px;padding:0 5px;border-radius:8px;background:#eaeef2}.grade.pass{background:#dafbe1}
.grade.fail{background:#ffebe9}.badge{padding:0 6px;border-radius:8px;background:#eaeef2}
.badge.user_satisfied{background:#dafbe1}.badge.user_gave_up{background:#fff1e5}.badge.error,.badge.timeout,
.badge.max_turns{background:#ffebe9}.closing{font-style:italic}.error{color:#cf222e}.stop{color:#57606a;font-size:12px}
"""  # noqa: E501 (one CSS rule set per line)
_TITLES = {"runs": "runs", "compare": "side by side", "reference": "PTKB against the official 2023 runs",
           "passages": "passage metrics coverage", "stops": "how dialogues ended, per persona and topic",
           "outliers": "outliers: what the means hide",
           "memory": "memory stress test", "plots": "plots", "dialogues": "dialogues"}


def _bodies(views: Sequence[RunView]) -> dict[str, str]:
    return {"runs": _runs_html(views), "compare": _compare_html(views), "reference": _reference_html(views),
            "passages": _passages_html(views), "stops": _stops_html(views), "outliers": _outliers_html(views),
            "memory": _memory_html(views), "plots": _plots_html(views),
            "dialogues": "".join(dialogues_html(v.name, v.transcripts, run, _linked(v)) for run, v in enumerate(views))}


def _linked(v: RunView) -> set[str]:
    """The dialogues the outliers section links to: shown even past ``MAX_DIALOGUES``."""
    return {o.dialogue_id for _, items in v.diag.outliers.lists() for o in items}


def render_html(views: Sequence[RunView]) -> str:
    names = [v.name for v in views]
    bodies = {sid: body for sid, body in _bodies(views).items() if body}
    nav = "".join(f'<a href="#{sid}">{_e(_TITLES[sid])}</a>' for sid in SECTIONS if sid in bodies)
    sections = "".join(_section(sid, _TITLES[sid], bodies[sid]) for sid in SECTIONS if sid in bodies)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>simloop report: {_e(', '.join(names))}</title><style>{_CSS}</style></head><body><main>"
        f"<h1>simloop report</h1><p class='dim'>{_e(', '.join(names))} — {len(views)} run(s), generated {stamp}</p>"
        f"<nav>{nav}</nav>{sections}</main></body></html>"
    )


def write_report(views: Sequence[RunView], out: Path) -> Path:
    atomic_write(Path(out), render_html(views))
    return Path(out)
