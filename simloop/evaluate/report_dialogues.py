"""The report's per-dialogue view: one row per dialogue that opens (``<details>``, no
script) onto its turns — utterance, rubric question, grade, answer, rewritten query,
passages (cited ones marked), the PTKB ranking (used statements marked), stages — and the
closing line or the error that ended it."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from urllib.parse import quote

from ..schema import Transcript, Turn
from .stats import dialogue_latency_ms, mean_grade
from .tables import cell_html as _e
from .tables import fmt

__all__ = ["MAX_DIALOGUES", "dialogues_html", "dialogue_anchor"]

MAX_DIALOGUES = 200  # per run: beyond that the file gets heavy; `simloop show` reads the rest
_PASSAGES_SHOWN = 10
_PTKB_SHOWN = 6


def _grade(g: float | None) -> str:
    if g is None:
        return '<span class="grade">no grade</span>'
    return f'<span class="grade {"pass" if g > 3 else "fail"}">grade {g:.2f}</span>'


def _passages(x: Turn) -> str:
    ps = sorted(x.assistant.passages, key=lambda p: p.rank)
    if not ps:
        return ""
    items = "".join(f'<li class="{"cited" if p.used else ""}">{p.rank}. {_e(p.docid)} '
                    f'<span class="dim">{p.score:.3g}</span>{" ✓" if p.used else ""}</li>'
                    for p in ps[:_PASSAGES_SHOWN])
    more = f'<li class="dim">… {len(ps) - _PASSAGES_SHOWN} more</li>' if len(ps) > _PASSAGES_SHOWN else ""
    return (f'<div class="kv"><b>passages</b> <span class="dim">(✓ cited)</span>'
            f'<ul class="inline">{items}{more}</ul></div>')


def _ptkb(x: Turn) -> str:
    ranked = x.assistant.ptkb_provenance
    gold = f' <span class="dim">gold: {", ".join(map(str, x.gold.ptkb_provenance)) or "none"}</span>' \
        if x.gold is not None else ""
    if not ranked:
        return f'<div class="kv"><b>PTKB</b> none ranked{gold}</div>'
    items = "".join(
        f'<li class="{"used" if p.used else "dim"}">#{p.index} '
        f'<span class="dim">{fmt(p.score)}</span> {_e(p.statement)}</li>' for p in ranked[:_PTKB_SHOWN])
    more = f'<li class="dim">… {len(ranked) - _PTKB_SHOWN} more</li>' if len(ranked) > _PTKB_SHOWN else ""
    return f'<div class="kv"><b>PTKB</b> (bold = used){gold}<ol>{items}{more}</ol></div>'


def _turn(x: Turn) -> str:
    u, a = x.user, x.assistant
    tags = " · ".join(_e(v) for v in (f"rubric {u.rubric_id}" if u.rubric_id else None, u.intent) if v)
    stages = ", ".join(f"{_e(s.name)} {s.latency_ms:,.0f} ms" + (f" ({_e(s.model)})" if s.model else "")
                       for s in x.stages)
    query = f'<div class="kv"><b>query</b> {_e(a.rewritten_query)}</div>' if a.rewritten_query else ""
    return (f'<div class="turn"><div class="user"><span class="who">user {x.index}</span> {_e(u.utterance)}'
            f' <span class="tags">{tags}</span> {_grade(u.grade)}</div>'
            f'<div class="asst"><span class="who">assistant</span> {_e(a.response)}</div>'
            f'<div class="meta">{query}{_passages(x)}{_ptkb(x)}'
            f'<div class="kv dim">{_e(fmt(x.latency_ms))} ms: {stages}</div></div></div>')


def _ending(t: Transcript) -> str:
    closing = f'<div class="user closing"><span class="who">user</span> {_e(t.stop.utterance)}' \
              f' <span class="tags">closing line</span></div>' if t.stop.utterance else ""
    error = f'<div class="error">{_e(t.error.type)} ({_e(t.error.source or "?")}): {_e(t.error.message)}</div>' \
        if t.error is not None else ""
    return f'{closing}{error}<div class="stop">stop: {_e(t.stop.reason)} by {_e(t.stop.by)} — {_e(t.stop.detail)}</div>'


def dialogue_anchor(run: int, dialogue_id: str) -> str:
    """The fragment id of a dialogue's row (the ``run``-th run's), safe in an attribute and a link."""
    return f"dlg-{run}-{quote(dialogue_id, safe='')}"


def _row(t: Transcript, run: int) -> str:
    g = mean_grade(t)
    cells = [_e(t.dialogue_id), _e(t.scenario.persona_id), _e(t.scenario.topic_id),
             f'<span class="badge {_e(t.stop.reason)}">{_e(t.stop.reason)}</span>', str(len(t.turns)),
             "-" if g is None else f"{g:.2f}", f"{dialogue_latency_ms(t) / 1000:,.1f}"]
    summary = "".join(f"<span>{c}</span>" for c in cells)  # every cell escaped above
    return (f'<details class="dlg" id="{_e(dialogue_anchor(run, t.dialogue_id))}"><summary>{summary}</summary>'
            f'<div class="body">{"".join(_turn(x) for x in t.turns)}{_ending(t)}</div></details>')


def dialogues_html(name: str, transcripts: Sequence[Transcript], run: int = 0, also: Collection[str] = ()) -> str:
    """The ``run``-th run's dialogues, the first ``MAX_DIALOGUES`` and any named in ``also``
    (the outliers the report links to), each row with its ``dialogue_anchor``."""
    shown = [t for i, t in enumerate(transcripts) if i < MAX_DIALOGUES or t.dialogue_id in also]
    head = "".join(f"<span>{h}</span>"
                   for h in ("dialogue", "persona", "topic", "ended", "turns", "mean grade", "wall s"))
    more = "" if len(transcripts) <= len(shown) else (
        f'<p class="note">{len(transcripts) - len(shown)} more dialogues not shown; '
        "read them with <code>simloop show RUN_DIR --dialogue ID</code>.</p>")
    return (f'<h3>{_e(name)}: {len(transcripts)} dialogues (click one to read it)</h3>'
            f'<div class="dlgs"><div class="dlghead">{head}</div>{"".join(_row(t, run) for t in shown)}</div>{more}')
