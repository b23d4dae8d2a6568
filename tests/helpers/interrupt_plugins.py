"""Plugins for tests/run/test_interrupt.py, imported by the CLI subprocess (the checkout on PYTHONPATH)."""

from __future__ import annotations

from agents.genaius import GenAIus
from simloop.fakes.seams import MemoryRetriever
from simloop.inputs.personas import load_personas
from tests.helpers.data import ROOT

__all__ = ["GenAIusInMemory"]


class GenAIusInMemory(GenAIus):
    """genaius with every LLM call it makes, over an in-memory BM25 (the Context seam) of the
    demo personas' rubric questions instead of the pyserini index.  The LLM interrupt chain
    is about signals in the middle of HTTP calls: a JVM boot in each of its runs cost ~9 s
    of CPU apiece and checked nothing that the offline chain (the real index and MiniLM,
    both signals) does not."""

    needs = ()  # nothing to warm up: the run is ready as soon as its LLM endpoint answered

    def __init__(self, ctx, **params):
        super().__init__(ctx, **params)
        if ctx is not None:
            docs = [(f"{t.id}-{q.id}", f"{t.title}. {q.question} {q.reference or ''}")
                    for p in load_personas(ROOT / "personas") for t in p.topics for q in t.rubric]
            ctx.overrides.setdefault("retriever", MemoryRetriever(docs))
