"""Run statistics read off hand-made transcripts."""

from __future__ import annotations

import pytest

from simloop.evaluate.stats import percentiles, run_stats, stage_role
from simloop.schema import Stage
from tests.helpers.runs import transcript, turn


def st(name: str, model: str | None = "m1", p: int = 10, c: int = 5, cached: bool = False, retries: int = 0,
       cost: float | None = None, role: str | None = None, error: str | None = None) -> Stage:
    return Stage(name=name, model=model, prompt_tokens=p, completion_tokens=c, cached=cached, retries=retries,
                 cost_usd=cost, role=role, error=error)


def test_percentiles_nearest_rank():
    values = list(range(1, 101))  # 1..100
    assert percentiles(values) == {"p50": 50.0, "p90": 90.0, "p99": 99.0}
    assert percentiles([7.0]) == {"p50": 7.0, "p90": 7.0, "p99": 7.0}
    assert percentiles([]) == {"p50": None, "p90": None, "p99": None}
    assert percentiles([3, 1, 2])["p50"] == 2.0


def test_stage_role_falls_back_to_name_prefix():
    assert stage_role(st("simulator.voice")) == "simulator"
    assert stage_role(st("rewrite", role="assistant.rewrite")) == "assistant.rewrite"


@pytest.fixture
def runs():
    a = transcript([
        turn(1, latency_ms=100, grade=4, stages=[st("assistant.generate", p=100, c=20, cost=0.01, role="assistant"),
                                                 st("simulator.voice", model="m2", p=50, c=10, retries=2)]),
        turn(2, latency_ms=300, grade=2, stages=[st("assistant.generate", p=100, c=20, cached=True, cost=0.0,
                                                    role="assistant")]),
    ], persona="p1", seconds=4.0)
    b = transcript([turn(1, latency_ms=200, stages=[st("retrieval", model=None, p=0, c=0, error="RetrievalError")])],
                   persona="p2", reason="error", by="engine", seconds=1.0, error=("TimeoutError", "slow"))
    c = transcript([], persona="p3", reason="user_gave_up", seconds=0.5)
    return [a, b, c]


def test_counts_and_reasons(runs):
    s = run_stats(runs).model_dump()
    assert s["dialogues"] == 3
    assert s["turns"] == {"total": 3, "mean": 1.0, "max": 2, "min": 0}
    assert s["stop_reasons"] == {"user_satisfied": 1, "error": 1, "user_gave_up": 1}
    assert s["stopped_by"] == {"simulator": 2, "engine": 1}
    assert s["errors"] == {"TimeoutError": 1}
    assert s["stage_errors"] == {"RetrievalError": 1}
    assert s["grades"] == {"dialogues_graded": 1, "mean": 3.0}


def test_latency_percentiles(runs):
    lat = run_stats(runs).model_dump()["latency_ms"]
    assert lat["turn"] == {"p50": 200.0, "p90": 300.0, "p99": 300.0}
    assert lat["dialogue"] == {"p50": 1000.0, "p90": 4000.0, "p99": 4000.0}


def test_tokens_cost_calls_by_role_and_model(runs):
    s = run_stats(runs).model_dump()
    assert s["llm_calls"] == 2          # the cached answer and the retrieval stage sent no request
    assert s["cached_calls"] == 1
    assert s["retries"] == 2
    # Billed tokens only: the cached answer's (an old run recorded them on the hit) were not sent.
    assert s["tokens"] == {"prompt": 150, "completion": 30, "total": 180}
    assert s["cost_usd"] == pytest.approx(0.01)
    asst = s["by_role"]["assistant"]
    assert (asst["calls"], asst["cached"], asst["tokens"], asst["cost_usd"]) == (1, 1, 120, 0.01)
    sim = s["by_role"]["simulator"]
    assert sim["calls"] == 1 and sim["cost_usd"] is None  # unpriced is unknown, not free
    assert s["by_model"]["m1"]["tokens"] == 120 and s["by_model"]["m2"]["tokens"] == 60
    assert "retrieval" not in s["by_role"] and None not in s["by_model"]


def test_stages_on_no_turn_are_counted(runs):
    """A failed dialogue's billed stages sit in loose_stages (no answered turn): still usage."""
    failed = runs[2].model_copy(update={"loose_stages": [
        st("simulator.voice", model="m2", p=40, c=4),
        st("assistant.ptkb", p=30, c=0, retries=1, error="LLMStatusError: HTTP 500", role="assistant")]})
    s = run_stats([runs[0], runs[1], failed]).model_dump()
    assert (s["llm_calls"], s["retries"]) == (4, 3)
    assert s["tokens"] == {"prompt": 220, "completion": 34, "total": 254}
    assert s["stage_errors"] == {"RetrievalError": 1, "LLMStatusError: HTTP 500": 1}


def test_empty_run():
    s = run_stats([]).model_dump()
    assert s["dialogues"] == 0 and s["turns"]["mean"] == 0.0 and s["latency_ms"]["turn"]["p50"] is None
