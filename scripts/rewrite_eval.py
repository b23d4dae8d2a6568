#!/usr/bin/env python3
"""Does the heuristic query rewrite help BM25 on real iKAT turns?  (issue 34)

For one topic file: BM25 over that file's provenance passages (``*_psg_text.jsonl``, one
Lucene document per passage), one query per turn with a non-empty ``response_provenance``
(those passages are the relevant ones), the earlier turns of the conversation as the
history (the user's utterances and the canonical responses, what iKAT's offline task gave
every system).  Reported per query form: MRR (first relevant passage in the top 100),
recall@5 and recall@10, over the judged turns.

Forms: ``bare`` (the utterance), ``manual`` (the resolved utterance: the ceiling),
``rewrite`` (``simloop.parts.rewrite.heuristic_rewrite``, what the agents send: context
words spelt as the earlier answers spell them) and ``rewrite_unchecked`` (the same without
the answers, so no spelling check).  Only
``2023_train_topics.json`` is used to choose anything; ``--topics`` on the test file
reports (2024 has no passage file).

    scripts/rewrite_eval.py [--topics 2023/2023_train_topics.json]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_VENV_PY = ROOT / ".venv" / "bin" / "python"
if __name__ == "__main__" and _VENV_PY.exists() and Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
    os.execv(str(_VENV_PY), [str(_VENV_PY), __file__, *sys.argv[1:]])  # run under the project venv
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from typing import Any  # noqa: E402

from bench_common import ikat_dir  # noqa: E402

DEPTH = 100


def _corpus(psg_file: Path, out: Path) -> None:
    with out.open("w", encoding="utf-8") as fh:
        for line in psg_file.read_text(encoding="utf-8").splitlines():
            if line.strip():
                p = json.loads(line)
                fh.write(json.dumps({"id": f"{p['doc_id']}:{p['passage_id']}", "contents": p["passage_text"]}) + "\n")


def _turns(topics_file: Path) -> list[dict[str, Any]]:
    """Judged turns with their history: [(utterance, canonical response)] of the earlier turns."""
    out = []
    for conv in json.loads(topics_file.read_text()):
        history: list[tuple[str, str]] = []
        for t in conv["turns"]:
            if t["response_provenance"]:
                out.append({"utterance": t["utterance"], "resolved": t["resolved_utterance"],
                            "history": list(history), "relevant": set(t["response_provenance"])})
            history.append((t["utterance"], t["response"]))
    return out


def _scores(ranked: list[list[str]], turns: list[dict[str, Any]]) -> dict[str, float]:
    rr, r5, r10 = [], [], []
    for docs, t in zip(ranked, turns):
        rank = next((i for i, d in enumerate(docs, 1) if d in t["relevant"]), None)
        rr.append(1.0 / rank if rank else 0.0)
        r5.append(len(set(docs[:5]) & t["relevant"]) / len(t["relevant"]))
        r10.append(len(set(docs[:10]) & t["relevant"]) / len(t["relevant"]))
    n = len(turns)
    return {"MRR": round(sum(rr) / n, 4), "R@5": round(sum(r5) / n, 4), "R@10": round(sum(r10) / n, 4)}


def forms() -> dict[str, Callable[[dict[str, Any]], str]]:
    from simloop.parts import heuristic_rewrite

    return {
        "bare": lambda t: t["utterance"],
        "manual": lambda t: t["resolved"],
        "rewrite": lambda t: heuristic_rewrite(t["utterance"], t["history"]),
        "rewrite_unchecked": lambda t: heuristic_rewrite(t["utterance"], [(u, "") for u, _ in t["history"]]),
    }


async def evaluate(topics: str, only: Sequence[str] = ()) -> dict[str, Any]:
    from simloop.search import RetrievalConfig, build_index, open_retriever

    folder = ikat_dir((topics, topics.replace("_topics.json", "_topics_psg_text.jsonl")))
    if folder is None:
        raise SystemExit(f"{topics} or its passage file not found (set SIMLOOP_IKAT_DATA)")
    turns = _turns(folder / topics)
    with tempfile.TemporaryDirectory(prefix="simloop-rewrite-") as tmp:
        corpus, index = Path(tmp) / "corpus.jsonl", Path(tmp) / "index"
        _corpus(folder / topics.replace("_topics.json", "_topics_psg_text.jsonl"), corpus)
        build_index(corpus, index, threads=1)
        retriever = await open_retriever(RetrievalConfig(index=index))
        try:
            out: dict[str, Any] = {"topics": topics, "turns": len(turns)}
            for name, make in forms().items():
                if only and name not in only:
                    continue
                queries = [make(t) for t in turns]
                hits = await retriever.search_many(queries, DEPTH)
                out[name] = _scores([[h.docid for h in hs] for hs in hits], turns)
            return out
        finally:
            await retriever.aclose()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topics", default="2023/2023_train_topics.json", help="topic file under the iKAT data folder")
    p.add_argument("--only", default="", help="comma-separated query forms")
    a = p.parse_args()
    from simloop.loop import run as run_loop
    from simloop.search import prepare_environment

    prepare_environment()
    result = run_loop(evaluate(a.topics, [x for x in a.only.split(",") if x]))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
