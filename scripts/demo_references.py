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
    # the rule: "Board game", then "Old Chosŏn"; the Go summary says how to win and where it began
    "How do I explain to my grandson how you win the board game Go?": "Go_(game)",
    "Ren asked me how old Go is; where was it invented?": "Go_(game)",
    # the rule: "Rugby league"
    "How many players does a rugby union side field, and how do we score points?": "Rugby_union",
    # the rule: "Gout" (q1's pick too); the question and its keywords are on what arthritis does to a joint
    "Is gout a kind of arthritis, and what does arthritis do to a joint?": "Arthritis",
    # the rule: "Cologne"; the Western Roman Empire's summary dates its collapse (476)
    "Cologne began as a Roman town; when did the Western Roman Empire come to an end?": "Western_Roman_Empire",
    # the rule: "Lionel Messi"; the football summary says "two teams of 11 players"
    "My son Karim plays youth football; how many players are on each team?": "Association_football",
    # the rule: "Blood pressure"; the heart attack summary names its symptoms
    "What are the signs of a heart attack, should I worry with my blood pressure?": "Myocardial_infarction",
    # the rule: "Placenta"; the pregnancy summary says where the offspring grows (the uterus)
    "My daughter keeps asking: where does a baby grow during pregnancy?": "Pregnancy",
    # the rule: "Polish–Lithuanian–Teutonic War" (1409); no summary is about the 1939 invasion, and
    # Hitler's is the one that states it ("Germany's invasion of Poland on 1 September 1939 ...")
    "How did the war start in 1939 with the invasion of Poland?": "Adolf_Hitler",
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
