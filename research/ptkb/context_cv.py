"""PTKB ranking with more context than the user's utterances, on 2023 train ONLY (issue 12).

``explore.py --context`` runs this.  Three sources the ranker does not read
yet, each scored as an extra term on top of the MiniLM ranker (``score_statements``):

- ``canonical``: MiniLM cosine of each statement to the previous turns' canonical responses
  (the topic file's ``response``; what iKAT's offline task gave every run), newest first,
  pooled like the utterances (``max_j decay**(j-1) * c_j`` over the last ``resp_n``);
- ``own``: the same with the assistant's OWN earlier answers: bm25_extractive replayed on the
  demo index with the gold utterances in order, exactly what it sees in any dialogue;
- ``prf``: pseudo relevance feedback: the best cosine of each statement to the top
  ``prf_k`` BM25 passages (demo index) of the PTKB-free heuristic rewrite of the turn.

A term joins by ``max`` (a discounted claim, like the history) or ``add``.  Each family is
judged by leave-one-conversation-out: every configuration of the family, the plain ranker
included (with its own history weight and decay), is scored per turn once; for each
held-out conversation the configuration best on the other ten (mean over their judged
turns, as ``--tune``) is scored on it; the mean over the 11 held-out conversations is the
figure, as ``bench_ptkb.py --tune --cv`` reports it.  A family whose CV figure does not
clearly beat the plain ranker's is not adopted, whatever it reaches on all of train.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_ptkb as B
import numpy as np

from simloop.evaluate import ptkb_scores, turn_key
from simloop.parts import RankParams, as_uses, order_scores, query_texts, score_statements, similarities

PRF_DEPTH = 10  # passages kept per turn; prf_k <= this


@dataclass(frozen=True)
class Variant:
    """The shipped ranker (``history_weight``, ``decay``) plus at most one response term and one
    passage term."""

    history_weight: float = 0.5
    decay: float = 0.2
    source: str = ""  # "", "canonical" or "own": which earlier responses
    resp_weight: float = 0.0
    resp_decay: float = 1.0
    resp_n: int = 1
    resp_mode: str = "max"
    prf_weight: float = 0.0
    prf_k: int = 3

    def scores(self, f: Mapping[str, np.ndarray]) -> np.ndarray:
        """Scores of one turn's statements from its features (``S`` utterances, ``canonical`` /
        ``own`` earlier responses newest first, ``prf`` passages best first)."""
        s = score_statements(f["S"], RankParams(history_weight=self.history_weight, decay=self.decay,
                                                max_history=B.TUNE_HISTORY))
        back = f[self.source][: self.resp_n] if self.source and self.resp_weight else f["S"][:0]
        if len(back):
            claim = self.resp_weight * pooled(back, self.resp_decay)
            s = np.maximum(s, claim) if self.resp_mode == "max" else s + claim
        if self.prf_weight and len(f["prf"]):
            s = s + self.prf_weight * f["prf"][: self.prf_k].max(axis=0)
        return s


def pooled(rows: np.ndarray, decay: float) -> np.ndarray:
    """``max_j decay**j * rows[j]`` per statement (row 0 the newest)."""
    return (decay ** np.arange(len(rows), dtype=np.float64)[:, None] * rows).max(axis=0)


def loo_cv(table: Mapping[Any, Mapping[str, float]], conversation: Mapping[str, str],
           family: Sequence[Any]) -> tuple[float, list[Any], list[float]]:
    """Leave one conversation out over per-turn objectives ``table[config][turn]``: for each
    conversation the config with the best mean over the OTHER conversations' turns (ties: the
    earlier in ``family``) is scored on the held-out one.  (mean over held-out conversations,
    the config chosen for each, the held-out figure of each, conversations sorted)."""
    held_out, chosen = [], []
    for conv in sorted(set(conversation.values())):
        inside = [t for t, c in conversation.items() if c == conv]
        others = [t for t, c in conversation.items() if c != conv]
        best = max(family, key=lambda k: (np.mean([table[k][t] for t in others]), -family.index(k)))
        held_out.append(float(np.mean([table[best][t] for t in inside])))
        chosen.append(best)
    return float(np.mean(held_out)), chosen, held_out


def objective_per_turn(ts: B.TopicSet, rankings: Sequence[Sequence[tuple[int, float]]]) -> dict[str, float]:
    """mean(nDCG@3, nDCG@5) of every turn with a relevant statement, keyed by ``turn_key``, from
    ``ptkb_scores`` (the code behind ``simloop eval``)."""
    for (turn, ptkb, _, _), ranking in zip(ts.turns(), rankings):
        turn.assistant.ptkb_provenance = as_uses(ranking, ptkb, [])
    per = ptkb_scores(ts.transcripts, ts.qrels).per_turn
    return {k: (v["nDCG@3"] + v["nDCG@5"]) / 2 for k, v in per.items()}


# ----------------------------------------------------------------------------- features
async def features(ts: B.TopicSet, index: Path) -> list[dict[str, np.ndarray]]:
    """Per turn, in ``ts.turns()`` order: ``S``, ``canonical``, ``own`` and ``prf`` cosines."""
    from agents.bm25_extractive import BM25Extractive
    from simloop.config import RunConfig
    from simloop.parts import heuristic_rewrite
    from simloop.run import Context
    from simloop.schema import DialogueState, Scenario, UserTurn
    from simloop.search import BM25Retriever, RetrievalConfig, open_embedder

    retriever, embedder = BM25Retriever(index), await open_embedder()
    agent = BM25Extractive(Context(RunConfig(retrieval=RetrievalConfig(index=index)),
                                   overrides={"retriever": retriever, "embedder": embedder}))

    async def back(texts: list[str], ptkb: list[str]) -> np.ndarray:
        return await similarities(embedder, texts[::-1], ptkb) if texts else np.zeros((0, len(ptkb)))

    async def conversation(persona: Any, t: Any) -> list[dict[str, np.ndarray]]:
        scenario = Scenario(dialogue_id=t.dialogue_id, persona=persona, topic=persona.topics[0],
                            behaviour=persona.behaviour, seed=0)
        state = DialogueState(dialogue_id=t.dialogue_id, scenario=scenario)
        gold, rows = persona.topics[0].gold_turns, []
        for k, turn in enumerate(t.turns):  # the replay: gold utterances in order, the agent's own answers
            said = [g.utterance for g in gold]
            hits = await retriever.search(heuristic_rewrite(said[k], [(u, "") for u in said[:k]]), PRF_DEPTH)
            queries = query_texts(said[k], said[:k], B.TUNE_HISTORY)
            rows.append({"S": await similarities(embedder, queries, persona.ptkb),
                         "canonical": await back([g.response for g in gold[:k]], persona.ptkb),
                         "own": await back([r for _, r in state.history()], persona.ptkb),
                         "prf": await similarities(embedder, [h.text for h in hits], persona.ptkb)})
            state.user = UserTurn(utterance=said[k])
            state.turns.append(turn.model_copy(update={"assistant": (await agent.respond(state)).to_turn()}))
        return rows

    try:
        done = await asyncio.gather(*(conversation(p, t) for p, t in zip(ts.personas, ts.transcripts)))
    finally:
        await embedder.aclose()
        await retriever.aclose()
    return [row for rows in done for row in rows]


# ----------------------------------------------------------------------------- the families
BASE = [Variant(history_weight=hw, decay=d)
        for hw, d in itertools.product((0.3, 0.4, 0.5, 0.6, 0.7), (0.1, 0.2, 0.3, 0.5))]
RESP = [dict(resp_weight=w, resp_decay=rd, resp_n=n, resp_mode=m)
        for w, (rd, n), m in itertools.product((0.1, 0.2, 0.3, 0.5, 0.7, 0.9), ((1.0, 1), (0.3, 50), (0.7, 50)),
                                               ("max", "add"))]
PRF = [dict(prf_weight=w, prf_k=k) for w, k in itertools.product((0.2, 0.4, 0.6, 0.8, 1.0, 1.5, 2.0), (1, 2, 3, 5))]
FUSED_BASE = [Variant(history_weight=hw, decay=d) for hw, d in itertools.product((0.3, 0.5, 0.7), (0.1, 0.3))]


def families() -> dict[str, list[Variant]]:
    """Each family starts with the plain ranker's grid, so it can always choose "no term"."""
    def with_(extra: Iterable[dict], base: list[Variant] = BASE, **fixed: Any) -> list[Variant]:
        return base + [Variant(history_weight=v.history_weight, decay=v.decay, **fixed, **e)
                       for v in base for e in extra]

    fused = [dict(resp_weight=w, resp_mode="max", prf_weight=p, prf_k=k)
             for w, p, k in itertools.product((0.3, 0.5, 0.7, 0.9), (0.2, 0.4, 0.6, 0.8, 1.0), (2, 3, 5))]
    return {"plain ranker": BASE, "canonical responses": with_(RESP, source="canonical"),
            "own answers": with_(RESP, source="own"), "prf passages": with_(PRF),
            "canonical + prf": with_(fused, FUSED_BASE, source="canonical"),
            "own + prf": with_(fused, FUSED_BASE, source="own")}


def explore_context(ts: B.TopicSet) -> int:
    from simloop.search import demo_index_path, is_lucene_index, prepare_environment

    index = demo_index_path()
    if not is_lucene_index(index):
        print(f"no demo index at {index} (set SIMLOOP_CACHE, or run ./scripts/demo once)")
        return 2
    prepare_environment()
    feats = asyncio.run(features(ts, index))
    judge_families(ts, feats, families(), lambda v: v.resp_weight > 0 or v.prf_weight > 0)
    return 0


def judge_families(ts: B.TopicSet, feats: Sequence[Mapping[str, np.ndarray]], fams: Mapping[str, Sequence[Any]],
                   has_term: Callable[[Any], bool]) -> None:
    """Print each family's leave-one-conversation-out figure against the first family's (the
    plain ranker's), the held-out conversations it wins and loses, how many folds chose a
    configuration with its term (``has_term``) and its best configuration on all of train.
    A configuration is anything hashable with ``scores(features) -> per-statement scores``."""
    conversation = {turn_key(t, turn): t.dialogue_id for t in ts.transcripts for turn in t.turns}
    table: dict[Any, dict[str, float]] = {}
    plain: list[float] = []
    for name, family in fams.items():
        for v in family:
            if v not in table:
                table[v] = objective_per_turn(ts, [order_scores(v.scores(f)) for f in feats])
        judged = {t: c for t, c in conversation.items() if t in table[family[0]]}
        cv, chosen, held_out = loo_cv(table, judged, family)
        plain = plain or held_out
        best = max(family, key=lambda v: np.mean(list(table[v].values())))
        diff = np.subtract(held_out, plain)
        print(f"{name:20s} CV {cv:.4f}  held-out conversations vs plain ranker: {sum(diff > 1e-9)} better, "
              f"{sum(diff < -1e-9)} worse; folds choosing a term {sum(map(has_term, chosen))}"
              f"/{len(chosen)}; all of train: best {np.mean(list(table[best].values())):.4f} ({best})")
