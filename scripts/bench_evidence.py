"""The tuning tables of the grader's evidence constants: ``scripts/bench_evidence.py --tune``.

The evidence sets themselves (the human answer against its negation, its names swapped,
and neighbour padding, in two reference modes) are ``simloop/validity/evidence.py``, which
the ``grader`` section (bench_grader.py) and ``simloop validate`` measure.  This script
prints the tables the constants of ``EmbeddingGrader`` were read off: 2023 train, honest
mode, the ``tune`` generators.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

TRAIN = "2023/2023_train_topics.json"


async def tune(data: Path, embedder: Any) -> dict[str, Any]:
    """The tables the evidence constants of ``EmbeddingGrader`` were read off: 2023 train,
    honest mode, the ``tune`` generators (``scripts/bench_evidence.py --tune``)."""
    import itertools

    from simloop.schema import RubricQuestion
    from simloop.simulators import EmbeddingGrader, Thresholds, check_evidence, pieces_of, prepare
    from simloop.validity import auc, build_evidence, earlier_cases, earlier_questions, load_turns, passage_pool

    path = data / TRAIN
    turns = [t for t in load_turns(path) if t.refs["honest"]]
    cases, _ = await build_evidence(turns, passage_pool(path), embedder)
    cases = [c for c in cases if c.generator in ("", "tune")]
    by = {t.key: t for t in turns}
    texts = list(dict.fromkeys(p for c in cases for p in [*pieces_of(c.response),
                                                          *prepare(by[c.turn].refs["honest"], c.question).pieces]))
    vec = dict(zip(texts, np.asarray(await embedder.encode(texts))))
    pre = []
    for c in cases:
        ref = prepare(by[c.turn].refs["honest"], c.question)
        ans = pieces_of(c.response)
        pre.append((c, ans, np.stack([vec[p] for p in ans]), ref, np.stack([vec[p] for p in ref.pieces])))
    grid = []
    for th in itertools.product((0.4, 0.5, 0.6), (0.2, 0.3, 0.4), (0.5, 0.6, 0.7, 0.8), (0.5, 0.6, 0.7)):
        shares: dict[str, list[float]] = {}
        for c, ans, av, ref, rv in pre:
            shares.setdefault(c.kind, []).append(check_evidence(ans, av, ref, rv, Thresholds(*th)).share)
        true = [-x for x in shares["true"]]
        row: dict[str, Any] = {"thresholds": th, "true_any": round(float(np.mean([x > 0 for x in shares["true"]])), 3),
               "auc_negated": auc(true, [-x for x in shares["negated"]]),
               "auc_entity": auc(true, [-x for x in shares["entity_swapped"]])}
        row["score"] = round(row["auc_negated"] + row["auc_entity"] - row["true_any"], 4)
        grid.append(row)
    grid.sort(key=lambda r: -r["score"])
    g = EmbeddingGrader(embedder=embedder)
    parts = [(c, await g.explain(_question(c, by), c.response)) for c, *_ in pre]
    wrong = {tau: {k: round(float(np.mean([p.contradicts >= tau for c, p in parts if c.kind == k])), 3)
                   for k in ("true", "negated", "entity_swapped")} for tau in (0.15, 0.2, 0.25, 0.34, 0.5)}
    drift: dict[str, list[float]] = {"true": [], "earlier": []}
    for c in [*(c for c in cases if c.kind == "true"), *earlier_cases(turns)]:
        before = earlier_questions(turns, c.turn, "honest")
        if before:
            drift[c.kind].append((await g.explain(_question(c, by), c.response, earlier=before)).earlier)
    margins = {m: {k: round(float(np.mean(np.array(v) >= m)), 3) for k, v in drift.items()}
               for m in (0.0, 0.05, 0.1, 0.15)}
    bare = [(await g.explain(RubricQuestion(id=c.turn, question=c.question), c.response)).grade
            for c, *_ in pre if c.kind == "true"]
    weights = []
    for w_ref, focus in itertools.product((0.5, 0.7), (1.0, 1.5, 2.0)):
        gw = EmbeddingGrader(embedder=embedder, w_reference=w_ref, focus_weight=focus)
        grades = [(c.kind, (await gw.explain(_question(c, by), c.response)).grade) for c, *_ in pre]
        true = [x for k, x in grades if k == "true"]
        weights.append({"w_reference": w_ref, "focus_weight": focus,
                        "true_pass": round(float(np.mean([x > 3 for x in true])), 3),
                        "auc_padded": auc(true, [x for k, x in grades if k == "padded_neighbour"])})
    return {"turns": len(turns), "alignment_grid_best": grid[:10], "wrong_share": wrong, "earlier_margin": margins,
            "true_pass_without_reference": round(float(np.mean([x > 3 for x in bare])), 3), "weights": weights}


def _question(c: Any, by: dict[str, Any]) -> Any:
    from simloop.schema import RubricQuestion

    return RubricQuestion(id=c.turn, question=c.question, reference=by[c.turn].refs["honest"])


if __name__ == "__main__":  # scripts/bench_evidence.py --tune: the tables above, printed
    import asyncio
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench_common import ikat_dir

    async def _main() -> dict[str, Any]:
        from simloop.search import open_embedder

        folder = ikat_dir((TRAIN,))
        if folder is None:
            raise SystemExit("iKAT 2023 train topics not found (set SIMLOOP_IKAT_DATA)")
        embedder = await open_embedder()
        try:
            return await tune(folder, embedder)
        finally:
            await embedder.aclose()

    if "--tune" not in sys.argv:
        raise SystemExit("usage: scripts/bench_evidence.py --tune (the evidence constants' tables, 2023 train)")
    print(json.dumps(asyncio.run(_main()), indent=1))
