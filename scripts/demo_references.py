#!/usr/bin/env python3
"""Set the evidence of the demo personas: each rubric question's ``reference`` and
``reference_doc``, the demo corpus summary that answers it (simloop/inputs/references.py).

Usage:
    scripts/demo_references.py [--personas DIR] [--check]

Rewrites the persona files in place (only the ``reference``/``reference_doc`` lines of the
rubric tables) and prints one line per question: question -> picked title (cosine), so the
picks can be read and checked.  ``--check`` prints the picks and writes nothing; it exits 1
when a file's stored references differ from the picks (e.g. after its questions changed).
Re-run it whenever rubric questions change.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_VENV_PY = ROOT / ".venv" / "bin" / "python"

if __name__ == "__main__" and _VENV_PY.exists() and Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
    os.execv(str(_VENV_PY), [str(_VENV_PY), __file__, *sys.argv[1:]])  # run under the project venv

sys.path[:0] = [str(ROOT)]

import argparse  # noqa: E402
import asyncio  # noqa: E402

# Picks made by reading where the automatic rule picks wrong (question text -> corpus docid);
# a pin applies only while the question reads exactly so.
PINNED = {
    "What is the board game Go and how do you win it?": "Go_(game)",  # the rule: "Board game"
    "What is a lake and how are lakes formed?": "Lake",  # the rule: a particular lake
    # No summary is about Polynesian navigation; "Polynesia" is the nearest subject.
    "How did Polynesian navigators find islands using the stars?": "Polynesia",
    # No summary is about the Moriori; "Māori people" is the one that mentions them.
    "Who were the Moriori?": "Māori_people",
    "How many players are on a rugby union team and how do you score?": "Rugby_union",  # the rule: "Rugby league"
}


async def main(folder: Path, check: bool) -> int:
    from simloop.inputs import load_persona_file, pick_references, set_references
    from simloop.search import open_embedder, open_retriever

    files = sorted(folder.glob("*.toml"))
    retriever, embedder = await open_retriever(), await open_embedder()
    stale = 0
    try:
        for f in files:
            persona = load_persona_file(f)
            questions = [(t.id, q.id, q.question, t.title) for t in persona.topics for q in t.rubric]
            picks = await pick_references(questions, retriever, embedder, pinned=PINNED)
            for p in picks:
                print(f"{p.topic}/{p.rubric}: {p.question}\n    -> {p.title} ({p.docid}, cosine {p.cosine})")
            text = f.read_text(encoding="utf-8")
            new = set_references(text, picks)
            if new != text:
                stale += 1
                if not check:
                    f.write_text(new, encoding="utf-8")
                    load_persona_file(f)  # still a valid persona file
    finally:
        await retriever.aclose()
        await embedder.aclose()
    verb = "differ from the picks" if check else "rewritten"
    print(f"{stale} of {len(files)} persona files {verb}", file=sys.stderr)
    return 1 if check and stale else 0


if __name__ == "__main__":
    from simloop.search import prepare_environment

    prepare_environment()  # before any thread: pyserini's import-time needs (search/jvm.py)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--personas", type=Path, default=ROOT / "personas")
    parser.add_argument("--check", action="store_true", help="print the picks, write nothing")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.personas, args.check)))
