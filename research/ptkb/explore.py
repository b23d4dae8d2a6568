"""The alternatives tried against the MiniLM PTKB ranker (its values; the default until MPNet)
(issue 12 item 4), on 2023 train ONLY.

Prints, best first, the ranking objective (mean of nDCG@3 and nDCG@5, as ``--tune`` uses)
and nDCG@3 of each variant, then the best ``used`` rules with a threshold relative to the
turn's best score.  Numbers quoted in README.md come from here.

``--context`` measures the context sources issue 12 left untried (``context_cv.py``):
the previous turns' canonical responses, the assistant's own earlier answers (bm25_extractive
replayed on the demo index) and the top BM25 passages of the turn (pseudo relevance
feedback), each alone and fused, with leave-one-conversation-out cross-validation.

``--signals`` measures signals issue 12 left untried (``signals_cv.py``): late
interaction on MiniLM's token vectors and clause-level matching, the same way.

``--mpnet`` re-runs the single-row terms (``features.py``) and ``--signals``' sentence-level signals
against the default ranker, all-mpnet-base-v2 (``mpnet_cv.py``), the same way.

    .venv/bin/python research/ptkb/explore.py
    .venv/bin/python research/ptkb/explore.py --signals
    .venv/bin/python research/ptkb/explore.py --mpnet
    SIMLOOP_CACHE=.pytest_cache/simloop-cache .venv/bin/python research/ptkb/explore.py --context
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

# The checkout (simloop) and scripts/ (bench_ptkb: the data, the scoring, the ranker's grid).
ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import bench_ptkb as B  # noqa: E402
from features import features  # noqa: E402

from simloop.parts import RankParams, order_scores, score_statements  # noqa: E402


def rrf(*vectors: np.ndarray, k: int = 60) -> np.ndarray:
    out = np.zeros(len(vectors[0]))
    for v in vectors:
        for rank, i in enumerate(np.argsort(-v, kind="stable")):
            out[i] += 1 / (k + rank + 1)
    return out


def generic_cv(ts: B.TopicSet, feats: list, ranker: Callable[[dict], np.ndarray]) -> None:
    """Leave one conversation out: the penalty's weight chosen on the other conversations
    (objective as ``--tune``), the held-out one scored; against the weight 0 (the defaults)."""
    everyone = {t.dialogue_id for t in ts.transcripts}
    judged = sorted(h for h in everyone if any(g.ptkb_provenance for p in ts.personas if p.id == h
                                                 for g in p.topics[0].gold_turns))
    weights = (0, 0.5, 1.0, 1.5, 1.75, 2.0, 2.5)
    ranked = {w: [order_scores((ranker(f) - w * f["generic"]).tolist()) for f in feats] for w in weights}

    def objective(w: float, only: set[str]) -> float:
        r = ts.score(ranked[w], only=only)
        return (r["nDCG@3"] + r["nDCG@5"]) / 2

    chosen = [objective(max(ranked, key=lambda w: objective(w, everyone - {h})), {h}) for h in judged]
    print(f"generic penalty, leave-one-conversation-out: {np.mean(chosen):.4f} "
          f"(weight 0, the defaults: {np.mean([objective(0, {h}) for h in judged]):.4f})")


def main(argv: list[str] | None = None) -> int:
    root = B.data_dir()
    why = B.missing_data(root)
    if why:
        print(f"research/ptkb/explore.py: {why}", file=sys.stderr)
        return 2
    ts = B.TopicSet("train23", root)
    if "--context" in (sys.argv[1:] if argv is None else argv):
        from context_cv import explore_context  # needs the demo index and the JVM
        return explore_context(ts)
    if "--signals" in (sys.argv[1:] if argv is None else argv):
        from signals_cv import explore_signals  # MiniLM's token vectors, clauses
        return explore_signals(ts)
    if "--mpnet" in (sys.argv[1:] if argv is None else argv):
        from mpnet_cv import explore_mpnet  # the families above and --signals' on MPNet
        return explore_mpnet(ts)
    feats = asyncio.run(features(ts))
    # the MiniLM ranker, on its vectors
    base = RankParams.from_mapping({"encoder": "minilm", "max_history": B.TUNE_HISTORY})

    def ranker(f: dict, row0: np.ndarray | None = None) -> np.ndarray:
        sims = f["S"] if row0 is None else np.vstack([row0, f["S"][1:]])
        return score_statements(sims, base)

    variants: dict[str, Callable[[dict], np.ndarray]] = {
                "defaults": lambda f: ranker(f), "current utterance only": lambda f: f["S"][0],
                "joined query alone": lambda f: f["joined"],
                "rrf(ranker, bm25)": lambda f: rrf(ranker(f), f["bm25"]),
                "rrf(ranker, bm25 joined)": lambda f: rrf(ranker(f), f["bm25_joined"]),
                "rrf(ranker, joined)": lambda f: rrf(ranker(f), f["joined"]),
                "rewrite as the utterance": lambda f: ranker(f, f["rewrite"]),
                "max(utterance, rewrite)": lambda f: ranker(f, np.maximum(f["S"][0], f["rewrite"]))}

    def plus(w: float, key: str) -> Callable[[dict], np.ndarray]:
        return lambda f: ranker(f) + w * f[key]

    def max_joined(w: float) -> Callable[[dict], np.ndarray]:
        return lambda f: np.maximum(ranker(f), (1 - w) * f["joined"])

    for w in (0.1, 0.2, 0.3, 0.5):
        for key in ("bm25", "bm25_joined", "joined", "first"):
            variants[f"ranker + {w} * {key}"] = plus(w, key)
        variants[f"max(ranker, {1 - w:.1f} * joined)"] = max_joined(w)
    for w in (0.5, 1.0, 1.5, 2.0, 2.5):
        variants[f"ranker - {w} * generic"] = plus(-w, "generic")
    rows = []
    for name, fn in variants.items():
        r = ts.score([order_scores(fn(f).tolist()) for f in feats])
        rows.append((round((r["nDCG@3"] + r["nDCG@5"]) / 2, 4), r["nDCG@3"], name))
    for row in sorted(rows, reverse=True):
        print(f"ranking {row[0]:.4f} (nDCG@3 {row[1]:.4f})  {row[2]}")

    generic_cv(ts, feats, ranker)
    rankings = [order_scores(ranker(f).tolist()) for f in feats]
    used_rows = []
    grid = itertools.product(np.arange(0, 0.51, 0.05), (0, 0.5, 0.6, 0.7, 0.8, 0.9), (1, 2, 3, 4), (0, 1))
    for th, rel, k, m in grid:
        if m <= k:
            def used(r: list, th=th, rel=rel, k=k, m=m) -> list[int]:
                head = r[:k]
                out = [i for i, s in head if s >= max(th, rel * (r[0][1] if r else 0))]
                return out if len(out) >= m else [i for i, _ in head[:m]]
            f1 = ts.score(rankings, [used(r) for r in rankings])["F1"]
            used_rows.append((f1, round(float(th), 2), rel, k, m))
    for rule in sorted(used_rows, reverse=True)[:10]:
        print(f"used F1 {rule[0]:.4f}  threshold {rule[1]} relative {rule[2]} top_k {rule[3]} min {rule[4]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
