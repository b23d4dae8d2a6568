"""Evidence for hand-written personas: each rubric question's reference from the corpus.

A demo persona's rubric question gets as ``reference`` the corpus document that answers it
(for the demo corpus: one Wikipedia summary), and as ``reference_doc`` that document's id,
so a reader can check the pick and a rerun can tell what changed.  ``scripts/demo_references``
runs this over ``personas/`` and rewrites the files in place.

The pick: BM25 proposes documents, MiniLM ranks them against the question, the first is
kept (``pick_references``); a reader checks the picks and pins the few it gets wrong.
Only a document's body is stored (the title line of a Wikipedia summary is left out; its
first sentence names the subject anyway).

The persona files are edited as text, not re-serialised: comments, order and layout stay
as their authors wrote them; only ``reference`` and ``reference_doc`` lines of the rubric
tables are replaced (or added after the table's last key).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..text import sentences

__all__ = ["Pick", "pick_references", "set_references", "K"]

K = 50  # BM25 candidates per query MiniLM chooses from (the demo corpus is 10,033 summaries of ~80 words)


@dataclass(frozen=True)
class Pick:
    topic: str
    rubric: str
    question: str
    docid: str
    title: str
    cosine: float
    text: str


async def pick_references(questions: Sequence[tuple[str, str, str, str]], retriever: Any, embedder: Any,
                          k: int = K, pinned: dict[str, str] | None = None) -> list[Pick]:
    """``questions``: (topic id, rubric id, question, topic title); one pick per question
    that BM25 finds anything for.  ``pinned``: question text -> docid, picks a reader made
    where the rule below picks wrong (used while the question reads exactly so).

    Candidates: BM25's ``k`` best for the question, and for the question with the topic
    title.  Score: MiniLM cosine of the question with the document's body plus with its
    title and first sentence (what the document is about: "Volcano" before "Lava" for
    "What is a volcano and how does lava erupt?")."""
    pinned = pinned or {}
    found = await retriever.search_many([f"{q} {title}" for _, _, q, title in questions]
                                        + [q for _, _, q, _ in questions], k)
    n = len(questions)
    picks: list[Pick] = []
    for i, (topic, rubric, question, _) in enumerate(questions):
        hits = list({h.docid: h for h in [*found[i], *found[n + i]]}.values())
        if question in pinned:
            doc = await retriever.doc(pinned[question])
            if doc is None:  # a pin names a document the corpus lacks: the reader's pick is lost
                raise ValueError(f"pinned document {pinned[question]!r} (for {question!r}) is not in the corpus")
            hits = [doc]
        if not hits:
            continue
        bodies = [_body(h.text) for h in hits]
        heads = [f"{_title(h.text)}. {(sentences(b) or [''])[0]}" for h, b in zip(hits, bodies)]
        vecs = np.asarray(await embedder.encode([question, *bodies, *heads]))
        sims = vecs[1:len(hits) + 1] @ vecs[0] + vecs[len(hits) + 1:] @ vecs[0]
        best = int(np.argmax(sims))
        picks.append(Pick(topic, rubric, question, hits[best].docid, _title(hits[best].text),
                          round(float(sims[best]) / 2, 4), bodies[best]))
    return picks


def _title(text: str) -> str:
    return text.split("\n", 1)[0].strip()


def _body(text: str) -> str:
    """A corpus document without its title line."""
    head, _, rest = text.partition("\n")
    return " ".join((rest or head).split())


_TABLE = re.compile(r"^\s*\[\[?\s*([\w.]+)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*=\s*(.*)$")


def _brackets(value: str) -> int:
    """Open minus closed brackets of a TOML value, strings and comment aside."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'', "", value).split("#", 1)[0]
    return bare.count("[") - bare.count("]")


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def set_references(toml_text: str, picks: Sequence[Pick]) -> str:
    """``toml_text`` (one persona file) with each picked rubric question's ``reference`` and
    ``reference_doc`` set; everything else is left as it was."""
    wanted = {(p.topic, p.rubric): p for p in picks}
    lines = toml_text.splitlines()
    out: list[str] = []
    table, topic, rubric_id, last_key, depth = "", "", "", -1, 0
    pending: Pick | None = None

    def flush() -> None:
        nonlocal pending
        if pending is not None and last_key >= 0:
            out[last_key + 1:last_key + 1] = [f"reference = {_toml_string(pending.text)}",
                                              f"reference_doc = {_toml_string(pending.docid)}"]
        pending = None

    for line in lines:
        header = _TABLE.match(line)
        if header:
            flush()
            table, rubric_id, last_key = header.group(1), "", -1
            out.append(line)
            continue
        key = _KEY.match(line) if depth == 0 else None
        if key and table == "topics.rubric" and key.group(1) in ("reference", "reference_doc"):
            continue  # replaced below (one-line strings, as this function writes them)
        out.append(line)
        if depth:  # inside a value spanning lines (an array)
            depth = max(0, depth + _brackets(line))
            last_key = len(out) - 1 if table == "topics.rubric" else last_key
            continue
        if key:
            depth = max(0, _brackets(key.group(2)))
            name, value = key.group(1), key.group(2).strip()
            if table == "topics" and name == "id":
                topic = json.loads(value) if value.startswith('"') else value
            if table == "topics.rubric":
                last_key = len(out) - 1
                if name == "id":
                    rubric_id = json.loads(value) if value.startswith('"') else value
                    pending = wanted.get((topic, rubric_id))
    flush()
    return "\n".join(out) + ("\n" if toml_text.endswith("\n") else "")
