"""Reusable assistant parts: PTKB selection, query rewriting, retrieval, generation, stages.

Agents in ``agents/`` compose these; each module is small and free of side effects at
import, so LLM-based agents can import one part without paying for the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .generate import NO_ANSWER, NOTHING_NEW
    from .generate_focus import focused_answer
    from .generate_llm import MAX_WORDS, draft_answer, suggest_elements
    from .ptkb import DEFAULT_THRESHOLD, rank_ptkb_by_embedding
    from .ptkb_llm import classify_ptkb_llm, lexical_scores, score_ptkb_llm, union_ptkb, used_only, vote_ptkb
    from .ptkb_rank import (
        DEFAULT_PARAMS,
        ENCODER_DEFAULTS,
        MINILM_PARAMS,
        RankParams,
        as_uses,
        lexical_matrix,
        order_scores,
        query_texts,
        rank_ptkb,
        rank_ptkb_uses,
        ranker_embedder,
        score_statements,
        select_used,
        similarities,
    )
    from .reply import current_utterance, grounded_reply
    from .retrieve import embedding_rerank, fit_passages, format_passage, multi_query, rrf_fuse
    from .rewrite import heuristic_rewrite, is_dependent, question_part, request_text, turns_down
    from .rewrite_llm import iterative_rewrite, llm_rewrite, queries_from_answer, queries_per_ptkb
    from .spelling import respell
    from .stages import stage_note, timed_stage
else:
    from ..lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        "generate_focus": ("focused_answer",),
        "generate_llm": ("MAX_WORDS", "draft_answer", "suggest_elements",),
        "ptkb": ("DEFAULT_THRESHOLD", "rank_ptkb_by_embedding",),
        "ptkb_llm": ("classify_ptkb_llm", "lexical_scores", "score_ptkb_llm", "union_ptkb", "used_only", "vote_ptkb",),
        "ptkb_rank": (
            "DEFAULT_PARAMS", "ENCODER_DEFAULTS", "MINILM_PARAMS", "RankParams", "as_uses", "lexical_matrix",
            "order_scores", "query_texts", "rank_ptkb", "rank_ptkb_uses", "ranker_embedder", "score_statements",
            "select_used", "similarities",
        ),
        "reply": ("current_utterance", "grounded_reply",),
        "retrieve": ("embedding_rerank", "fit_passages", "format_passage", "multi_query", "rrf_fuse",),
        "rewrite": ("heuristic_rewrite", "is_dependent", "question_part", "request_text", "turns_down",),
        "spelling": ("respell",),
        "rewrite_llm": ("iterative_rewrite", "llm_rewrite", "queries_from_answer", "queries_per_ptkb",),
        "stages": ("stage_note", "timed_stage",),
        "generate": ("NO_ANSWER", "NOTHING_NEW"),
    })

__all__ = [
    "DEFAULT_PARAMS", "DEFAULT_THRESHOLD", "ENCODER_DEFAULTS", "MAX_WORDS", "MINILM_PARAMS", "NO_ANSWER",
    "NOTHING_NEW", "RankParams", "as_uses", "classify_ptkb_llm", "current_utterance", "draft_answer",
    "embedding_rerank", "fit_passages", "focused_answer", "format_passage", "grounded_reply", "heuristic_rewrite",
    "is_dependent", "iterative_rewrite", "lexical_matrix", "lexical_scores", "llm_rewrite", "multi_query",
    "order_scores", "queries_from_answer", "queries_per_ptkb", "query_texts", "question_part", "rank_ptkb",
    "rank_ptkb_by_embedding", "rank_ptkb_uses", "ranker_embedder", "request_text", "respell", "rrf_fuse",
    "score_ptkb_llm", "score_statements", "select_used", "similarities", "stage_note", "suggest_elements",
    "timed_stage", "turns_down", "union_ptkb", "used_only", "vote_ptkb",
]
