"""Reusable assistant parts (DESIGN §6): PTKB selection, query rewriting, retrieval, generation, stages.

Agents in ``agents/`` compose these; each module is small and free of side effects at
import, so LLM-based agents can import one part without paying for the others.
"""

from __future__ import annotations

__all__ = ["ptkb", "ptkb_llm", "rewrite", "rewrite_llm", "retrieve", "generate", "generate_focus", "generate_llm", "prompts",
           "reply", "stages"]
