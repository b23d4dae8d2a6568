"""PTKB and passage provenance metrics on hand-made gold, with values worked out by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from simloop.errors import DataFileError
from simloop.evaluate.provenance import passage_scores, ptkb_scores, read_passage_qrels, read_ptkb_qrels
from simloop.evaluate.summary import EvalOptions, evaluate_run, write_evaluation
from simloop.schema import GoldTurn
from tests.helpers.runs import read_json, transcript, turn, write_run

# gold {1, 3}, ranking [3, 2, 1]: relevant at ranks 1 and 3.
NDCG3_13 = (1 / math.log2(2) + 1 / math.log2(4)) / (1 / math.log2(2) + 1 / math.log2(3))


def gold(turn_id: int, ptkb: list[int], passages: list[str] = ()) -> GoldTurn:
    return GoldTurn(turn_id=turn_id, utterance="u", ptkb_provenance=ptkb, response_provenance=list(passages))


def test_one_turn_by_hand():
    t = transcript([turn(1, ptkb=[3, 2, 1], gold=gold(1, [1, 3]))])
    s = ptkb_scores([t]).summary
    assert s["P@3"] == pytest.approx(2 / 3, abs=1e-4)
    assert s["R@3"] == pytest.approx(1.0)
    assert s["nDCG@3"] == pytest.approx(NDCG3_13, abs=1e-4)  # 1.5 / 1.6309 = 0.9197
    assert s["P@5"] == pytest.approx(2 / 5, abs=1e-4)  # trec_eval divides by the cutoff
    assert s["R@5"] == pytest.approx(1.0)
    assert s["nDCG@5"] == pytest.approx(NDCG3_13, abs=1e-4)
    # set-based over the three selected statements: 2 of 3 right, both gold found
    assert s["P"] == pytest.approx(2 / 3, abs=1e-4)
    assert s["R"] == pytest.approx(1.0)
    assert s["F1"] == pytest.approx(0.8, abs=1e-4)
    assert s["turns"] == 1


def test_order_matters_not_scores():
    # Same set, relevant first: perfect ranking.  (Scores in PtkbUse decrease anyway; the
    # order of ptkb_provenance is what counts.)
    t = transcript([turn(1, ptkb=[1, 3, 2], gold=gold(1, [1, 3]))])
    assert ptkb_scores([t]).summary["nDCG@3"] == pytest.approx(1.0)


def test_turns_without_relevant_statements_are_excluded_and_counted():
    t = transcript([
        turn(1, ptkb=[3, 2, 1], gold=gold(1, [1, 3])),
        turn(2, ptkb=[2], gold=gold(2, [])),        # no gold: excluded, but it cited one (overuse)
        turn(3, ptkb=[], gold=gold(3, [])),         # no gold, nothing cited
        turn(4, ptkb=[], gold=gold(4, [4])),        # gold but nothing cited: counts as 0
    ])
    res = ptkb_scores([t])
    s = res.summary
    assert s["turns"] == 2 and s["judged_turns"] == 4 and s["overuse_turns"] == 1
    assert s["P@3"] == pytest.approx((2 / 3 + 0) / 2, abs=1e-4)
    assert s["R@3"] == pytest.approx(0.5, abs=1e-4)
    assert s["nDCG@3"] == pytest.approx(NDCG3_13 / 2, abs=1e-4)
    assert set(res.per_turn) == {"p1--t1--0#1", "p1--t1--0#4"}
    assert res.per_turn["p1--t1--0#4"]["R@3"] == 0.0


def test_ranked_metrics_read_the_ranking_and_set_metrics_read_used():
    # gold {1, 3}; the ranking [3, 2, 1, 4] relies on 3 only
    t = transcript([
        turn(1, ptkb=[3, 2, 1, 4], ptkb_used=[3], gold=gold(1, [1, 3])),
        turn(2, ptkb=[2, 1, 4], ptkb_used=[], gold=gold(2, [])),  # ranked but nothing used: no overuse
        turn(3, ptkb=[4, 1], ptkb_used=[4], gold=gold(3, [])),    # used one without gold: overuse
    ])
    res = ptkb_scores([t])
    s = res.summary
    assert s["nDCG@3"] == pytest.approx(NDCG3_13, abs=1e-4)  # the ranking, not the one used
    assert s["R@3"] == pytest.approx(1.0) and s["P@5"] == pytest.approx(2 / 5, abs=1e-4)
    assert s["P"] == pytest.approx(1.0) and s["R"] == pytest.approx(0.5)
    assert s["F1"] == pytest.approx(2 / 3, abs=1e-4)
    assert s["turns"] == 1 and s["overuse_turns"] == 1
    assert res.per_turn["p1--t1--0#1"]["F1"] == pytest.approx(2 / 3, abs=1e-4)
    assert res.per_turn["p1--t1--0#1"]["nDCG@3"] == pytest.approx(NDCG3_13, abs=1e-4)


def test_nothing_used_scores_zero_on_set_metrics_only():
    s = ptkb_scores([transcript([turn(1, ptkb=[1, 3], ptkb_used=[], gold=gold(1, [1]))])]).summary
    assert s["nDCG@3"] == pytest.approx(1.0) and s["F1"] == 0.0 and s["R"] == 0.0


def test_no_gold_means_no_block():
    assert ptkb_scores([transcript([turn(1, ptkb=[1])])]).summary is None


def test_only_empty_gold_gives_zero_turns_not_a_crash():
    s = ptkb_scores([transcript([turn(1, ptkb=[1], gold=gold(1, []))])]).summary
    assert s["turns"] == 0 and s["nDCG@3"] is None


def test_repeats_are_scored_as_separate_turns():
    a = transcript([turn(1, ptkb=[3, 2, 1], gold=gold(1, [1, 3]))], repeat=0)
    b = transcript([turn(1, ptkb=[2], gold=gold(1, [1, 3]))], repeat=1)
    s = ptkb_scores([a, b]).summary
    assert s["turns"] == 2
    assert s["R@3"] == pytest.approx(0.5)


@pytest.mark.parametrize("key", ["{k}", "ptkb-9-1-{k0}"])
def test_ptkb_qrels_2023_and_2025_formats(tmp_path: Path, key: str):
    # qid 9-1_2 (gold turn id 2, not the index 1): keys 1 and 3 relevant, 2 judged not.
    lines = [f"9-1_2 0 {key.format(k=k, k0=k - 1)} {g}" for k, g in ((1, 1), (2, 0), (3, 1))]
    path = tmp_path / "ptkb.qrels"
    path.write_text("\n".join(lines))  # no final newline, like ptkb_rel_nist
    qrels = read_ptkb_qrels(path)
    assert qrels == {"9-1_2": {"1": 1, "2": 0, "3": 1}}
    t = transcript([turn(1, ptkb=[3, 2, 1], gold=gold(2, [4]))], persona="9-1", topic="9-1")
    s = ptkb_scores([t], qrels).summary  # the qrels file wins over the topic file's gold
    assert s["P@3"] == pytest.approx(2 / 3, abs=1e-4) and s["source"] == "ptkb-qrels"


def test_bad_qrels_lines_name_file_and_line(tmp_path: Path):
    path = tmp_path / "bad.qrels"
    path.write_text("9-1_1 0 1 1\n9-1_1 0 oops\n")
    with pytest.raises(DataFileError, match=r"bad.qrels:2"):
        read_ptkb_qrels(path)
    path.write_text("9-1_1 0 banana 1\n")
    with pytest.raises(DataFileError, match="PTKB key"):
        read_ptkb_qrels(path)
    with pytest.raises(DataFileError, match="not found"):
        read_passage_qrels(tmp_path / "missing.trec")


def _passage_qrels(tmp_path: Path) -> Path:
    path = tmp_path / "qrels.trec"
    path.write_text("t1_1 0 d1 3\nt1_1 0 d2 1\nt1_1 0 d3 2\nt1_1 0 d9 0\nother_1 0 d1 4\n")
    return path


def test_passage_metrics_by_hand(tmp_path: Path):
    t = transcript([turn(1, passages=["d2", "d3", "d4", "d1"]), turn(2, passages=["d1"])])
    s = passage_scores([t], read_passage_qrels(_passage_qrels(tmp_path))).summary
    # gains 1, 2, 0 at ranks 1-3; ideal 3, 2, 1
    dcg = 1 + 2 / math.log2(3)
    idcg = 3 + 2 / math.log2(3) + 1 / 2
    assert s["nDCG@3"] == pytest.approx(dcg / idcg, abs=1e-4)
    # rel >= 2 (iKAT): d3 at rank 2 and d1 at rank 4
    assert s["P@5"] == pytest.approx(2 / 5)
    assert s["P@10"] == pytest.approx(2 / 10)
    assert s["MAP"] == pytest.approx((1 / 2 + 2 / 4) / 2)
    assert s["Recall@100"] == pytest.approx(1.0)
    # turn 2 (qid t1_2) is not in the qrels: not averaged in, but counted in the total
    assert (s["turns"], s["turns_total"], s["matched_turns"]) == (1, 2, 1)


def test_passages_of_another_collection_report_zero_matched(tmp_path: Path):
    t = transcript([turn(1, passages=["wiki-1", "wiki-2"])])
    s = passage_scores([t], read_passage_qrels(_passage_qrels(tmp_path))).summary
    assert s["matched_turns"] == 0 and s["turns"] == 1 and s["nDCG@3"] == 0.0
    assert "no retrieved passage is judged" in s["note"]
    t2 = transcript([turn(1, passages=["d1"])], topic="unjudged")
    s2 = passage_scores([t2], read_passage_qrels(_passage_qrels(tmp_path))).summary
    assert s2["turns"] == 0 and s2["nDCG@3"] is None and "no turn" in s2["note"]


def test_eval_writes_summary_and_scores(tmp_path: Path):
    ts = [transcript([turn(1, ptkb=[3, 2, 1], passages=["d2", "d3", "d4", "d1"], gold=gold(1, [1, 3]), grade=4),
                      turn(2, ptkb=[], gold=gold(2, []), grade=2)], persona="9-1", topic="9-1")]
    run = write_run(tmp_path / "run-a", ts)
    qrels = tmp_path / "q.trec"
    qrels.write_text("9-1_1 0 d1 3\n9-1_1 0 d3 2\n")
    ev = evaluate_run(run, EvalOptions(qrels=qrels))
    scores_path, summary_path = write_evaluation(run, ev)
    summary = read_json(summary_path)
    assert set(summary["ptkb"]) >= {"P@3", "R@3", "nDCG@3", "nDCG@5", "P@5", "R@5", "P", "R", "F1", "turns"}
    assert summary["ptkb"]["turns"] == 1
    assert summary["passages"]["turns"] == 1 and "stats" in summary and "judge" not in summary
    # replayed 2023-style topic ids: the official baseline/best are attached for comparison
    assert summary["ptkb_reference"]["baseline"]["nDCG@3"] == 0.3434
    lines = [json.loads(x) for x in scores_path.read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["dialogue_id"] == "9-1--9-1--0"
    t1, t2 = lines[0]["turns"]
    assert t1["qid"] == "9-1_1" and t1["ptkb"]["P@3"] == pytest.approx(0.6667, abs=1e-4)
    assert "ptkb" not in t2 and lines[0]["mean_grade"] == 3.0


def test_eval_cli_bad_qrels_exit_2_one_line(tmp_path: Path, capsys):
    from simloop.cli import main

    run = write_run(tmp_path / "run-a", [transcript([turn(1)])])
    bad = tmp_path / "bad.trec"
    bad.write_text("only three fields\n")
    assert main(["eval", str(run), "--qrels", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.trec:1" in err
    assert main(["eval", str(tmp_path / "nope")]) == 2


def test_eval_cli_prints_tables(tmp_path: Path, capsys):
    from simloop.cli import main

    run = write_run(tmp_path / "run-a",
                    [transcript([turn(1, ptkb=[1], gold=gold(1, [1]))], persona="9-1", topic="9-1")])
    assert main(["eval", str(run)]) == 0
    out = capsys.readouterr().out
    assert "PTKB provenance" in out and "2023 baseline" in out and "0.3434" in out
    assert (run / "summary.json").exists() and (run / "scores.jsonl").exists()


def test_2023_reference_only_for_2023_topic_files(tmp_path: Path):
    from tests.helpers.data import ikat_file

    ts = [transcript([turn(1, ptkb=[1], gold=gold(1, [1]))], persona="9-1", topic="9-1")]
    y2025 = tmp_path / "2025.json"  # 2025 topics are numbered like 2023 ones ("9-1"): the file's shape decides
    y2025.write_text(json.dumps([{"number": "9-1", "title": "x", "ptkb": ["a"], "responses": []}]))
    for source, expected in ((ikat_file("2023", "2023_test_topics.json"), True), (y2025, False)):
        run = write_run(tmp_path / source.stem, ts, config={"scenarios": {"topics": str(source)}})
        summary = evaluate_run(run, EvalOptions()).summary
        assert (summary.ptkb_reference is not None) is expected
    plain = write_run(tmp_path / "personas-run", [transcript([turn(1, ptkb=[1], gold=gold(1, [1]))])])
    assert evaluate_run(plain, EvalOptions()).summary.ptkb_reference is None


def test_summary_and_scores_read_back_as_their_models(tmp_path: Path):
    from simloop.errors import BadInputError
    from simloop.evaluate.summary import load_scores, load_summary

    ts = [transcript([turn(1, ptkb=[1, 2], gold=gold(1, [1]), grade=4)], persona="9-1", topic="9-1")]
    run = write_run(tmp_path / "run-m", ts)
    scores_path, summary_path = write_evaluation(run, evaluate_run(run, EvalOptions()))
    summary, scores = load_summary(run), load_scores(run)
    assert read_json(summary_path)["schema_version"] == "1.0" == summary.schema_version
    assert summary.ptkb.ndcg_at_3 == summary.lookup("ptkb", "nDCG@3") == pytest.approx(1.0)
    assert summary.stats.dialogues == 1 and scores[0].turns[0].ptkb["P@3"] == pytest.approx(1 / 3, abs=1e-4)
    old = read_json(summary_path)
    del old["schema_version"]  # written before the field existed
    summary_path.write_text(json.dumps(old))
    assert load_summary(run).ptkb.turns == 1
    summary_path.write_text(json.dumps({**old, "stats": {"dialogues": "many"}}))
    with pytest.raises(BadInputError, match=r"stats\.dialogues"):
        load_summary(run)
