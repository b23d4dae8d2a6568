"""The LLM judge against the real MockLLM over HTTP, plus the arithmetic with a scripted model."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from simloop.evaluate.judge import (
    harmonic_mean,
    judge_transcripts,
    normalise,
    rubric_groups,
)
from simloop.fakes.mockllm import MockLLM
from simloop.llm import LLMPool
from simloop.llm.config import LLMConfig
from tests.helpers.models import ScriptedJudge
from tests.helpers.runs import read_json, transcript, turn, write_run


def _runs():
    a = transcript([turn(1, rubric_id="q1", ptkb=[1]), turn(2, rubric_id="q1"), turn(3, rubric_id="q2")], persona="p1")
    b = transcript([turn(1), turn(2)], persona="p2")  # no rubric ids: one group per turn
    return [a, b]


def _in_unit(x) -> bool:
    return x is not None and 0.0 <= x <= 1.0


def test_rubric_groups():
    a, b = _runs()
    assert [(rid, [t.index for t in ts]) for rid, ts in rubric_groups(a)] == [("q1", [1, 2]), ("q2", [3])]
    assert [rid for rid, _ in rubric_groups(b)] == ["turn-1", "turn-2"]


def test_normalise_and_harmonic_mean():
    assert (normalise(1, 5), normalise(3, 5), normalise(5, 5), normalise(2, 3)) == (0.0, 0.5, 1.0, 0.5)
    assert harmonic_mean(1.0, 0.5) == pytest.approx(2 / 3)
    assert harmonic_mean(0.0, 0.0) == 0.0 and harmonic_mean(None, 0.5) is None


async def test_judge_over_http_with_mockllm():
    async with MockLLM(seed=3) as mock:
        pool = LLMPool(LLMConfig.model_validate({"default": {"base_url": mock.url, "model": "mock-model"}}))
        try:
            result = await judge_transcripts(_runs(), pool.model("judge"), concurrency=2, model="mock-model")
        finally:
            await pool.aclose()
        requests = mock.stats()["requests"]
    s = result.summary.model_dump()  # as summary.json holds it
    assert s["rubric"]["n"] == 4 and s["dialogue"]["n"] == 2 and s["errors"] == {}
    for level, keys in (("rubric", ["engagement", "relevance", "quality", "confidence", "score"]),
                        ("dialogue", ["mixed_initiative", "personalization", "flow", "trustworthiness",
                                      "satisfaction", "confidence", "score"])):
        assert all(_in_unit(s[level][k]) for k in keys), s[level]
    assert _in_unit(s["overall"]) and _in_unit(s["overall_of_means"])
    per = {did: d.model_dump() for did, d in result.per_dialogue.items()}  # as scores.jsonl holds them
    for d in per.values():
        # each dialogue's overall is the harmonic mean of its two level scores
        r = sum(g["score"] for g in d["rubric_groups"]) / len(d["rubric_groups"])
        assert d["rubric"] == pytest.approx(r, abs=1e-4)
        assert d["overall"] == pytest.approx(harmonic_mean(d["rubric"], d["dialogue"]), abs=1e-3)
        # stages recorded: one per rubric group plus the dialogue call, as the judge role
        names = sorted(st["name"] for st in d["stages"])
        assert names == ["judge.dialogue"] + ["judge.rubric"] * len(d["rubric_groups"])
        assert all(st["role"] == "judge" and st["model"] == "mock-model" for st in d["stages"])
    assert s["overall"] == pytest.approx(sum(d["overall"] for d in per.values()) / 2, abs=1e-4)
    assert s["usage"]["calls"] == 6 == requests


async def test_failed_judge_calls_are_recorded_not_fatal():
    async with MockLLM(fault_rate=1.0, faults="500") as mock:
        cfg = {"default": {"base_url": mock.url, "model": "mock-model", "max_attempts": 1}}
        pool = LLMPool(LLMConfig.model_validate(cfg))
        try:
            result = await judge_transcripts(_runs()[:1], pool.model("judge"))
        finally:
            await pool.aclose()
    s = result.summary.model_dump()  # as summary.json holds it
    assert s["overall"] is None and s["rubric"]["n"] == 0 and sum(s["errors"].values()) == 3
    assert len(result.per_dialogue["p1--t1--0"].errors) == 3


async def test_scores_by_hand_with_a_scripted_judge():
    chat = ScriptedJudge()
    result = await judge_transcripts(_runs(), chat)
    s = result.summary.model_dump()  # as summary.json holds it
    assert s["rubric"]["score"] == 1.0 and s["dialogue"]["score"] == 0.5 and s["dialogue"]["confidence"] == 0.5
    assert s["overall"] == pytest.approx(2 * 1.0 * 0.5 / 1.5, abs=1e-4)  # 0.6667
    assert sorted(chat.calls).count("judge.dialogue") == 2 and len(chat.calls) == 6
    assert s["usage"]["prompt_tokens"] == 60
    # prompts show the PTKB statements the assistant cited and the transcript as user:/system: lines
    assert any("I am vegetarian." in p and "user: question 1?\nsystem: answer 1." in p for p in chat.prompts)


@pytest.fixture
def mock_in_thread():
    """MockLLM on its own loop in a thread, so the synchronous CLI (asyncio.run) can call it."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    mock = MockLLM(seed=1)
    url = asyncio.run_coroutine_threadsafe(mock.start(), loop).result(10)
    yield url, mock
    asyncio.run_coroutine_threadsafe(mock.aclose(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_eval_cli_judge_uses_run_config_and_flags(tmp_path: Path, mock_in_thread, capsys):
    from simloop.cli import main

    url, mock = mock_in_thread
    # The run's own config names the judge endpoint; the model flag overrides the name.
    config = {"llm": {"default": {"base_url": "http://127.0.0.1:9/v1", "model": "x"},
                      "roles": {"judge": {"base_url": url}}}}
    run = write_run(tmp_path / "run-j", _runs(), config=config)
    assert main(["eval", str(run), "--judge", "--judge-model", "judge-model-1", "--judge-concurrency", "3"]) == 0
    summary = read_json(run / "summary.json")
    assert summary["judge"]["model"] == "judge-model-1" and summary["judge"]["usage"]["calls"] == 6
    lines = [json.loads(x) for x in (run / "scores.jsonl").read_text().splitlines()]
    assert all(_in_unit(x["judge"]["overall"]) for x in lines)
    assert all(st["model"] == "judge-model-1" for x in lines for st in x["judge"]["stages"])
    assert "LLM judge" in capsys.readouterr().out
    # --judge-base-url wins over the config
    run2 = write_run(tmp_path / "run-k", _runs()[:1], config={"llm": {"default": {"base_url": "http://127.0.0.1:9/v1"}}})
    assert main(["eval", str(run2), "--judge", "--judge-base-url", url]) == 0
    assert read_json(run2 / "summary.json")["judge"]["dialogue"]["n"] == 1


def test_eval_cli_warns_when_every_judge_call_fails(tmp_path: Path, mock_in_thread, capsys):
    from simloop.cli import main

    url, mock = mock_in_thread
    mock.inject("500", "500", "500", "500")  # the preflight probe, then the three calls of the dialogue below
    config = {"llm": {"roles": {"judge": {"base_url": url, "max_attempts": 1}}}}
    run = write_run(tmp_path / "run-f", _runs()[1:], config=config)
    assert main(["eval", str(run), "--judge"]) == 0
    err = capsys.readouterr().err
    assert "every call failed" in err and "LLMStatusError" in err
    assert read_json(run / "summary.json")["judge"]["overall"] is None
