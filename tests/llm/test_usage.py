"""What the LLM layer bills: every request sent and every token the server reported, counted
once (calls + retries = requests; tokens = the sum over all attempts; a cache hit bills nothing).

Against the real mock server over HTTP with the real openai client; the mock's ``billed``
stats are what its 200 answers reported as usage."""

from __future__ import annotations

import asyncio

import pytest

from simloop.errors import EmptyCompletionError, LLMError, StructuredOutputError
from simloop.fakes.mockllm import MockLLM
from simloop.llm import LLMConfig, LLMPool
from simloop.schema import Stage, Usage
from simloop.text import looks_like_language
from tests.helpers.llm import MSGS, Answer  # the same request and reply model as the client's own tests

pytestmark = pytest.mark.timeout(90)



@pytest.fixture
async def pool_for():
    made: list[LLMPool] = []

    def make(mock: MockLLM, cache=None, **role) -> LLMPool:
        default = {"base_url": mock.url, "model": "mock", "backoff_base_s": 0.0, "backoff_cap_s": 0.0,
                   "retry_after_cap_s": 0.0, "timeout_s": 5, **role}
        made.append(LLMPool(LLMConfig(default=default, cache=cache)))
        return made[-1]

    yield make
    for pool in made:
        await pool.aclose()


def billed(mock: MockLLM) -> tuple[int, int]:
    b = mock.stats()["billed"]
    return b["prompt_tokens"], b["completion_tokens"]


def tokens(stage: Stage) -> tuple[int, int]:
    return stage.prompt_tokens, stage.completion_tokens


async def test_rejected_answers_bill_their_tokens_too(pool_for):
    # Two empty 200s with usage, then an answer: the stage bills all three, not the last one.
    async with MockLLM() as mock:
        mock.inject("empty", "empty")
        r = await pool_for(mock).model("simulator").chat(MSGS, stage="simulator.voice")
        assert [o for _, o in mock.log] == ["empty", "empty", "200"]
        sent = billed(mock)
    assert r.stage.retries == 2 and tokens(r.stage) == sent
    assert sent[0] > 3 * 10  # three prompts were billed, not one


async def test_output_a_check_rejects_is_billed(pool_for):
    async with MockLLM() as mock:
        mock.inject("garbage")
        r = await pool_for(mock).model("simulator").chat(
            MSGS, stage="simulator.voice", check=lambda t: None if looks_like_language(t) else "no language")
        assert [o for _, o in mock.log] == ["garbage", "200"]
        sent = billed(mock)
    assert r.stage.retries == 1 and tokens(r.stage) == sent


async def test_a_call_that_runs_out_of_attempts_bills_what_was_sent(pool_for):
    async with MockLLM() as mock:
        mock.inject("empty", "500", "empty")
        with pytest.raises(EmptyCompletionError) as info:
            await pool_for(mock, max_attempts=3).model("assistant").chat(MSGS, stage="generate")
        sent = billed(mock)
    stage = info.value.stage
    assert stage.retries == 2 and tokens(stage) == sent and sent[0] > 0  # the 500 billed nothing


async def test_a_json_repair_is_one_more_request_counted_as_a_retry(pool_for):
    async with MockLLM() as mock:
        mock.inject("badjson")
        _, stage = await pool_for(mock).model("assistant.ptkb").structured(MSGS, Answer, stage="ptkb.classify")
        assert mock.stats()["requests"] == 2
        sent = billed(mock)
    assert stage.retries == 1 and tokens(stage) == sent
    usage = Usage.from_stages([stage])
    assert usage.calls + usage.retries == 2


async def test_a_failed_repair_counts_both_requests(pool_for):
    async with MockLLM(fault_rate=1.0, faults="badjson") as mock:
        with pytest.raises(StructuredOutputError) as info:
            await pool_for(mock).model("judge").structured(MSGS, Answer, stage="judge")
        sent = billed(mock)
    assert info.value.stage.retries == 1 and tokens(info.value.stage) == sent


async def test_under_random_faults_stages_add_up_to_what_the_server_saw(pool_for):
    async with MockLLM(seed=3, fault_rate=0.3, faults="429,500,badjson,garbage,empty", retry_after_s=0.0) as mock:
        model = pool_for(mock, max_attempts=3).model("assistant")
        calls = [model.chat(MSGS + [{"role": "user", "content": f"q{i}"}], stage="chat") for i in range(12)]
        calls += [model.structured(MSGS + [{"role": "user", "content": f"s{i}"}], Answer, stage="json")
                  for i in range(12)]
        results = await asyncio.gather(*calls, return_exceptions=True)
        stats, sent = mock.stats(), billed(mock)
    stages = [r.stage if isinstance(r, LLMError) else r[1] if isinstance(r, tuple) else r.stage for r in results]
    assert sum(s.retries for s in stages) > 0 and stats["faults"]  # faults happened
    usage = Usage.from_stages(stages)
    assert usage.calls + usage.retries == stats["requests"]
    assert (usage.prompt_tokens, usage.completion_tokens) == sent


async def test_a_cached_answer_bills_nothing(pool_for, tmp_path):
    cache = tmp_path / "llm.sqlite"
    async with MockLLM() as mock:
        first = await pool_for(mock, cache=cache).model("assistant").chat(MSGS, stage="s")
        second = await pool_for(mock, cache=cache).model("assistant").chat(MSGS, stage="s")
        assert mock.stats()["requests"] == 1
    assert first.stage.prompt_tokens > 0 and second.stage.cached and second.text == first.text
    assert tokens(second.stage) == (0, 0) and not second.stage.cost_usd
    usage = Usage.from_stages([first.stage, second.stage])
    assert (usage.calls, usage.prompt_tokens) == (1, first.stage.prompt_tokens)
