"""Figure — PTKB ranking without an LLM (issue 12, item 2): ``simloop.parts.ptkb_rank`` on iKAT.

Every turn of a topic file is ranked the way a replay shows it to the assistant: the raw
utterance and the earlier raw user utterances (no gold response, no rewrite).  Scored by
``simloop.evaluate.provenance.ptkb_scores``, the code behind ``simloop eval``, on
transcripts built from the rankings: ranked metrics (nDCG@k, P@k, R@k) from the full
ranking, set metrics (P, R, F1) from the ``used`` statements only.  All are means over
the turns with at least one relevant statement.

Sets: ``train23`` (2023 train topics, their gold: the ONLY set parameters are chosen on),
``ikat23`` (2023 test topics vs NIST ``ptkb_rel_nist``) and ``ikat24`` (2024 test topics vs
their gold); the last two are report sets, never tuned on.  Next to the ranker, the old
query (utterance + previous utterance embedded together, ranked in full) is scored as
``baseline`` (its ``used``: the top 3, no threshold) with ``--baseline``.

    .venv/bin/python scripts/bench_ptkb.py            # the figures (what scripts/bench runs)
    .venv/bin/python scripts/bench_ptkb.py --baseline # and the old query's
    .venv/bin/python scripts/bench_ptkb.py --tune     # the train-only parameter search
    .venv/bin/python scripts/bench_ptkb.py --tune --cv --encoder minilm  # the same on MiniLM's vectors

The data folder is ``$SIMLOOP_IKAT_DATA`` or ``shared/data/ikat`` next to the checkout (or further up).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from bench_common import IKAT_ENV, ROOT, figure, ikat_dir, info  # noqa: E402

from simloop.evaluate import ptkb_scores, read_ptkb_qrels  # noqa: E402
from simloop.inputs import load_ikat_topics  # noqa: E402
from simloop.parts import (  # noqa: E402
    DEFAULT_PARAMS,
    ENCODER_DEFAULTS,
    MINILM_PARAMS,
    RankParams,
    as_uses,
    lexical_matrix,
    order_scores,
    query_texts,
    rank_ptkb,
    rank_ptkb_by_embedding,
    score_statements,
    select_used,
    similarities,
)
from simloop.schema import (  # noqa: E402
    AssistantTurn,
    Behaviour,
    PluginRef,
    ScenarioRef,
    Stop,
    Transcript,
    Turn,
    UserTurn,
)
from simloop.search import open_embedder  # noqa: E402

SETS = {  # name -> (topic file, PTKB qrels or None for the topic file's own gold)
    "train23": ("2023/2023_train_topics.json", None),
    "ikat23": ("2023/2023_test_topics.json", "2023/ptkb_rel_nist"),
    "ikat24": ("2024/2024_test_topics.json", None),
}
TARGETS = {"ptkb_ndcg3_ikat23": 0.7254, "ptkb_f1_ikat23": 0.50, "ptkb_ndcg5_ikat24": 0.50}
TUNE_HISTORY = 50  # similarities kept per turn for the search: every earlier utterance


def data_dir() -> Path:
    """``$SIMLOOP_IKAT_DATA``, else ``shared/data/ikat`` next to the checkout or further up
    (a git worktree sits one level deeper), as the tests find it."""
    wanted = tuple(rel for pair in SETS.values() for rel in pair if rel)
    return ikat_dir(wanted) or Path(os.environ.get(IKAT_ENV) or ROOT.parent / "shared" / "data" / "ikat")


def missing_data(root: Path) -> str | None:
    for topics, qrels in SETS.values():
        for rel in (topics, qrels):
            if rel and not (root / rel).is_file():
                return f"iKAT data not found: {root / rel} (set SIMLOOP_IKAT_DATA)"
    return None


class TopicSet:
    """One topic file: its conversations, the qrels to score against, transcripts to fill."""

    def __init__(self, name: str, root: Path):
        topics, qrels = SETS[name]
        self.name = name
        self.personas = load_ikat_topics(root / topics)
        self.qrels = read_ptkb_qrels(root / qrels) if qrels else None
        self.transcripts = [_transcript(p) for p in self.personas]

    def turns(self) -> list[tuple[Any, list[str], str, list[str]]]:
        """(turn record, PTKB, utterance, earlier utterances) for every turn, in order."""
        out = []
        for persona, t in zip(self.personas, self.transcripts):
            said = [g.utterance for g in persona.topics[0].gold_turns]
            out += [(turn, persona.ptkb, said[k], said[:k]) for k, turn in enumerate(t.turns)]
        return out

    def score(self, rankings: Sequence[Sequence[tuple[int, float]]], used: Sequence[Sequence[int]] | None = None,
              only: set[str] | None = None) -> dict[str, Any]:
        """Ranked metrics from ``rankings``, set metrics from ``used`` (one entry per turn, in
        ``turns()`` order); ``only`` limits scoring to some conversations.  Each turn's
        ``ptkb_provenance`` becomes the ranking with ``used`` flags, exactly what an agent
        records, and ``ptkb_scores`` (``simloop eval``) scores it."""
        for k, ((turn, ptkb, _, _), ranking) in enumerate(zip(self.turns(), rankings)):
            turn.assistant.ptkb_provenance = as_uses(ranking, ptkb, used[k] if used is not None else [])
        chosen = [t for t in self.transcripts if only is None or t.dialogue_id in only]
        out = ptkb_scores(chosen, self.qrels).summary
        if out is None:
            raise ValueError(f"{self.name}: no turn with gold PTKB provenance to score")
        keep = ["nDCG@3", "nDCG@5", "P@3", "R@3", "P@5", "R@5"]
        if used is not None:
            keep += ["P", "R", "F1", "turns", "judged_turns", "overuse_turns"]
        return {k: out[k] for k in keep}


def _transcript(persona: Any) -> Any:
    """A replay transcript of one conversation (the fields ``ptkb_scores`` reads, the rest minimal)."""
    now = datetime.now(UTC)
    gold = persona.topics[0].gold_turns
    turns = [Turn(index=k + 1, user=UserTurn(utterance=g.utterance), assistant=AssistantTurn(response=""), gold=g)
             for k, g in enumerate(gold)]
    return Transcript(run_id="bench-ptkb", dialogue_id=persona.id,
                      scenario=ScenarioRef(persona_id=persona.id, topic_id=persona.topics[0].id,
                                           behaviour=Behaviour(), seed=0),
                      simulator=PluginRef(name="replay"), assistant=PluginRef(name="ptkb_rank"),
                      started_at=now, ended_at=now, stop=Stop(reason="user_satisfied", by="simulator"), turns=turns)


# ----------------------------------------------------------------------------- figures
async def rank_all(ts: TopicSet, embedder: Any, params: Any) -> tuple[list, list]:
    rankings = await asyncio.gather(*(rank_ptkb(embedder, u, h, ptkb, params) for _, ptkb, u, h in ts.turns()))
    return rankings, [select_used(r, params) for r in rankings]


async def baseline(ts: TopicSet, embedder: Any) -> dict[str, Any]:
    """The old ranker's query (utterance + previous user utterance), ranked in full."""
    async def one(ptkb: list[str], u: str, h: list[str]) -> list[tuple[int, float]]:
        uses = await rank_ptkb_by_embedding(embedder, " ".join([u, *h[-1:]]), ptkb, -2.0, len(ptkb))
        return [(p.index, p.score or 0.0) for p in uses]  # the embedding ranker scores every statement

    rankings = await asyncio.gather(*(one(ptkb, u, h) for _, ptkb, u, h in ts.turns()))
    return ts.score(rankings, [[i for i, _ in r[:3]] for r in rankings])


async def run(quick: bool, out_dir: Path, with_baseline: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """The figures (``scripts/bench`` section ``ptkb``): the default ranker (all-mpnet-base-v2),
    the issue's figures, then the fast MiniLM ranker (``_minilm`` figures); the old query's
    scores (MiniLM's) only on request: they add encoding work to a section with a time limit."""
    root = data_dir()
    why = missing_data(root)
    if why:
        info(f"ptkb: skipped: {why}")
        return {}, {"skipped": why}
    figures: dict[str, Any] = {}
    details: dict[str, Any] = {"data": str(root)}
    for suffix, params in (("", DEFAULT_PARAMS), ("_minilm", MINILM_PARAMS)):
        embedder = await open_embedder(encoder=params.encoder)
        try:
            found, details[params.encoder] = await _measure(root, embedder, params, with_baseline and not quick
                                                            and params.encoder == "minilm")
        finally:
            await embedder.aclose()
        figures.update({k + suffix: v for k, v in found.items()})
    return figures, details


async def _measure(root: Path, embedder: Any, params: Any,
                   with_baseline: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    details: dict[str, Any] = {"params": asdict(params), "sets": {}}
    for name in SETS:
        ts = TopicSet(name, root)
        rankings, used = await rank_all(ts, embedder, params)
        details["sets"][name] = {"ranker": ts.score(rankings, used)}
        if with_baseline:  # the old query: MiniLM's
            details["sets"][name]["baseline"] = await baseline(ts, embedder)
        info(f"ptkb {params.encoder} {name}: {details['sets'][name]}")
    s23, s24, tr = (details["sets"][k]["ranker"] for k in ("ikat23", "ikat24", "train23"))
    targets = TARGETS if params == DEFAULT_PARAMS else {}  # the figures are the default's
    figures = {
        "ptkb_ndcg3_ikat23": figure(s23["nDCG@3"], targets.get("ptkb_ndcg3_ikat23"), better="higher"),
        "ptkb_p3_ikat23": figure(s23["P@3"], None),
        "ptkb_r3_ikat23": figure(s23["R@3"], None),
        "ptkb_f1_ikat23": figure(s23["F1"], targets.get("ptkb_f1_ikat23"), better="higher"),
        "ptkb_ndcg5_ikat24": figure(s24["nDCG@5"], targets.get("ptkb_ndcg5_ikat24"), better="higher"),
        "ptkb_ndcg3_ikat24": figure(s24["nDCG@3"], None),
        "ptkb_ndcg3_train23": figure(tr["nDCG@3"], None),
        "ptkb_f1_train23": figure(tr["F1"], None),
    }
    return figures, details


# ----------------------------------------------------------------------------- --tune (train only)
async def similarities_per_turn(ts: TopicSet, embedder: Any) -> list[np.ndarray]:
    """Per turn: the ranker encoder's cosines and content-word overlap of every earlier utterance, stacked (2, h, n)."""
    async def one(ptkb: list[str], u: str, h: list[str]) -> np.ndarray:
        texts = query_texts(u, h, TUNE_HISTORY)
        return np.stack([await similarities(embedder, texts, ptkb), lexical_matrix(texts, ptkb)])

    return list(await asyncio.gather(*(one(ptkb, u, h) for _, ptkb, u, h in ts.turns())))


def _rank_with(sims: list[np.ndarray], params: Any) -> list[list[tuple[int, float]]]:
    return [order_scores(score_statements(s[0] + params.lexical_weight * s[1], params).tolist()) for s in sims]


def _ranking_objective(r: dict[str, Any]) -> float:
    return (r["nDCG@3"] + r["nDCG@5"]) / 2  # the two ranked figures the issue reports


def _tied_centre(scored: list[tuple[float, dict[str, float]]], axes: Sequence[str]) -> dict[str, float]:
    """Of the configurations sharing the best score, the one nearest their centroid
    (in grid-range units): the middle of the plateau, not whichever came first."""
    best = max(s for s, _ in scored)
    tied = [p for s, p in scored if s >= best - 1e-9]
    span = {a: (max(p[a] for _, p in scored) - min(p[a] for _, p in scored)) or 1.0 for a in axes}
    centre = {a: float(np.mean([p[a] for p in tied])) for a in axes}
    return min(tied, key=lambda p: sum(((p[a] - centre[a]) / span[a]) ** 2 for a in axes))


RANK_GRID: dict[str, list[float]] = {"history_weight": [round(x, 2) for x in np.arange(0.0, 1.001, 0.05)],
             "decay": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
             "lexical_weight": [0.0, 0.1, 0.2, 0.3, 0.5]}
USED_GRID: dict[str, list[Any]] = {"used_threshold": [round(x, 3) for x in np.arange(-0.2, 0.501, 0.05)],
             "used_top_k": [1, 2, 3, 4, 5], "used_min": [0, 1],
             "used_gap": [0.05, 0.1, 0.15, 0.175, 0.2, 0.25, 0.3, 2.0]}


def tune_ranking(ts: TopicSet, sims: list[np.ndarray], only: set[str] | None = None) -> tuple[Any, list]:
    """Grid search of the ranking parameters (max_history large: decay decides)."""
    base = RankParams(max_history=TUNE_HISTORY)
    scored = []
    for values in itertools.product(*RANK_GRID.values()):
        chosen: dict[str, Any] = dict(zip(RANK_GRID, values))
        params = replace(base, **chosen)
        r = ts.score(_rank_with(sims, params), only=only)
        scored.append((_ranking_objective(r), dict(zip(RANK_GRID, values))))
    centre: dict[str, Any] = _tied_centre(scored, list(RANK_GRID))
    return replace(base, **centre), scored


def tune_used(ts: TopicSet, rankings: list, only: set[str] | None = None,
              grid: dict[str, list] | None = None) -> tuple[dict[str, Any], list]:
    """Set F1 over the ``used`` grid, smoothed over neighbouring thresholds and gaps (42 turns
    are few: a lone spike is noise)."""
    grid = grid or USED_GRID
    f1: dict[tuple, float] = {}
    for th, k, m, gap in itertools.product(*grid.values()):
        if m <= k:
            params = RankParams(used_threshold=th, used_top_k=k, used_min=m, used_gap=gap)
            f1[(th, k, m, gap)] = ts.score(rankings, [select_used(r, params) for r in rankings], only=only)["F1"]
    ths, gaps = grid["used_threshold"], grid["used_gap"]

    def near(values: list, v: Any) -> list:
        i = values.index(v)
        return values[max(0, i - 1): i + 2]

    def smoothed(key: tuple) -> float:
        th, k, m, gap = key
        return float(np.mean([f1[(t, k, m, g)] for t in near(ths, th) for g in near(gaps, gap)]))

    best = max(f1, key=lambda key: (round(smoothed(key), 6), -key[0]))
    table = sorted(((round(smoothed(k), 4), f1[k], k) for k in f1), reverse=True)
    return dict(zip(grid, best)), table


def loo_cv_used(ts: TopicSet, rankings: list) -> dict[str, Any]:
    """Leave one conversation out for the ``used`` rule: chosen on the others with and
    without the gap rule, set F1 of the held-out one."""
    everyone = {t.dialogue_id for t in ts.transcripts}
    no_gap = {**USED_GRID, "used_gap": [2.0]}
    rows: dict[str, Any] = {}
    for held in sorted(everyone):
        if not any(g.ptkb_provenance for p in ts.personas if p.id == held for g in p.topics[0].gold_turns):
            continue
        row = {}
        for name, grid in (("with_gap", USED_GRID), ("without_gap", no_gap)):
            params = RankParams(**tune_used(ts, rankings, everyone - {held}, grid)[0])
            row[name] = ts.score(rankings, [select_used(r, params) for r in rankings], only={held})["F1"]
        rows[held] = row
    return rows


def loo_cv(ts: TopicSet, sims: list[np.ndarray]) -> dict[str, Any]:
    """Leave one conversation out: choose on the others, score the held-out one (ranking)."""
    rows: dict[str, Any] = {}
    everyone = {t.dialogue_id for t in ts.transcripts}
    for held in sorted(everyone):
        if not any(g.ptkb_provenance for p in ts.personas if p.id == held for g in p.topics[0].gold_turns):
            continue  # nothing to score in this conversation
        params, _ = tune_ranking(ts, sims, only=everyone - {held})
        alone = replace(params, history_weight=0.0, lexical_weight=0.0)
        rows[held] = {"params": [getattr(params, k) for k in RANK_GRID],
                      "chosen": _ranking_objective(ts.score(_rank_with(sims, params), only={held})),
                      "current_only": _ranking_objective(ts.score(_rank_with(sims, alone), only={held}))}
    return rows


async def tune(root: Path, cv: bool, encoder: str = DEFAULT_PARAMS.encoder) -> dict[str, Any]:
    """The train-only search that chose ``RankParams``' defaults (for ``encoder``'s vectors);
    prints what it finds."""
    ts = TopicSet("train23", root)
    embedder = await open_embedder(encoder=encoder)
    try:
        sims = await similarities_per_turn(ts, embedder)
    finally:
        await embedder.aclose()
    chosen, scored = tune_ranking(ts, sims)
    current_only = next(s for s, p in scored if p["history_weight"] == 0 and p["lexical_weight"] == 0)
    rankings = _rank_with(sims, chosen)
    used, used_table = tune_used(ts, rankings)
    final = replace(RankParams(), **{k: getattr(chosen, k) for k in RANK_GRID}, **used)
    report: dict[str, Any] = {
        "objective": "ranking: mean(nDCG@3, nDCG@5); used: set F1 (smoothed over neighbouring thresholds)",
        "ranking_top10": sorted(scored, key=lambda x: -x[0])[:10], "current_utterance_only": current_only,
        "chosen": {k: getattr(final, k) for k in (*RANK_GRID, *USED_GRID)},
        "train": ts.score(_rank_with(sims, final), [select_used(r, final) for r in _rank_with(sims, final)]),
        "used_top10": used_table[:10]}
    if cv:
        rows = loo_cv(ts, sims)
        report["loo_cv"] = rows
        report["loo_cv_mean"] = {k: round(float(np.mean([r[k] for r in rows.values()])), 4)
                                 for k in ("chosen", "current_only")}
        used_rows = loo_cv_used(ts, rankings)
        report["loo_cv_used_f1"] = used_rows
        report["loo_cv_used_f1_mean"] = {k: round(float(np.mean([r[k] for r in used_rows.values()])), 4)
                                         for k in ("with_gap", "without_gap")}
    for key, value in report.items():  # one line per entry: the tables stay readable
        print(f"{key}: {json.dumps(value, default=str)}")
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/bench_ptkb.py", description=__doc__.splitlines()[0])
    p.add_argument("--tune", action="store_true", help="rerun the train-only parameter search")
    p.add_argument("--cv", action="store_true", help="with --tune: also leave-one-conversation-out (slow)")
    p.add_argument("--encoder", choices=tuple(ENCODER_DEFAULTS), default=DEFAULT_PARAMS.encoder,
                   help="with --tune: whose vectors")
    p.add_argument("--quick", action="store_true", help="as scripts/bench --quick (same figures)")
    p.add_argument("--baseline", action="store_true", help="also score the old query (utterance + previous one)")
    a = p.parse_args(argv)
    root = data_dir()
    why = missing_data(root)
    if why:
        print(f"bench_ptkb: {why}", file=sys.stderr)
        return 2
    if a.tune:
        asyncio.run(tune(root, a.cv, a.encoder))
        return 0
    figures, details = asyncio.run(run(a.quick, ROOT / "bench", a.baseline))
    print(json.dumps({"figures": figures, "details": details}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
