"""Capability negotiation (llm/capabilities.py, ChatModel) against every mock-llm server profile:
the roles' structured calls work on each, refusals are never retried as transient, ``n`` > 1
and ``seed`` degrade, a prompt too long is a named error that halts new dialogues, and cut
JSON is never taken for an answer.  What the mock saw is counted request by request."""

from __future__ import annotations

import asyncio
import json

import pytest

from simloop.config import RunConfig
from simloop.errors import ContextOverflowError, StructuredOutputError
from simloop.fakes.mockllm import MockLLM
from simloop.fakes.seams import HashEmbedder
from simloop.llm import LLMConfig, LLMRole
from simloop.llm.capabilities import Negotiated
from simloop.llm.structured import response_format_for
from simloop.parts import classify_ptkb_llm, queries_per_ptkb
from simloop.run import Context
from simloop.schema import LLMCapabilities, RubricQuestion
from simloop.simulators import LLMGrader
from tests.helpers.llm import MSGS, Answer

pytestmark = pytest.mark.timeout(90)

SERVERS = ["llama-cpp-python", "llama-server", "llama-server-legacy", "vllm", "ollama", "openai"]
QUESTION = RubricQuestion(id="r1", question="What are the side effects of ibuprofen?", keywords=["stomach"])
PTKB = ["I am vegetarian.", "My sister lives in Porto.", "I have a kidney problem."]


def context(url: str, **role) -> Context:
    settings = LLMRole(base_url=url, model="mock-model", max_attempts=3, backoff_base_s=0.0, backoff_cap_s=0.0,
                       **role)
    return Context(config=RunConfig(llm=LLMConfig(default=settings)), overrides={"embedder": HashEmbedder()})


def outcomes(mock: MockLLM) -> list[str]:
    return [o for _, o in mock.log]


def record(ctx: Context) -> LLMCapabilities:
    [caps] = ctx.llm_capabilities  # one endpoint and model: one record, shared by every role
    return caps


@pytest.mark.parametrize("profile", ["stub", *SERVERS])
async def test_every_structured_role_works_on_each_server(profile):
    async with MockLLM(profile=profile, seed=1) as mock:
        ctx = context(mock.url)
        try:
            grade, [first] = await LLMGrader(ctx).grade(QUESTION, "Ibuprofen can upset the stomach.")
            uses, ptkb_stage = await classify_ptkb_llm(ctx.chat("assistant.ptkb"), PTKB, "Where can I eat in Porto?")
            queries, query_stages = await queries_per_ptkb(ctx.chat("assistant.rewrite"), "vegetarian Porto", PTKB[:2])
        finally:
            await ctx.aclose()
        seen = outcomes(mock)
    assert grade is not None and 0 <= grade <= 5
    assert [u.statement for u in uses] and set(u.statement for u in uses) == set(PTKB) and queries
    stages = [first, ptkb_stage, *query_stages]
    caps = record(ctx)
    if profile == "llama-cpp-python":  # json_schema refused once (a 500), then json_object + schema
        assert seen == ["500"] + ["200"] * len(stages)
        assert (caps.structured, caps.learnt.structured) == ("json_object", "refusal")
        assert first.retries == 1 and all(s.retries == 0 for s in stages[1:])  # the re-send, counted once
    else:
        assert seen == ["200"] * len(stages)
        assert (caps.structured, caps.learnt.structured) == ("json_schema", "response")
    assert caps.usage and caps.learnt.usage == "response"


async def test_concurrent_first_calls_learn_once():
    async with MockLLM(profile="llama-cpp-python") as mock:
        ctx = context(mock.url)
        grader = LLMGrader(ctx)
        try:
            results = await asyncio.gather(*(grader.grade(QUESTION, f"Answer number {i}.") for i in range(20)))
        finally:
            await ctx.aclose()
    assert len(results) == 20 and sorted(outcomes(mock)) == ["200"] * 20 + ["500"]


@pytest.mark.parametrize("profile, temperature, sent", [
    ("stub", 0.7, ["200"]),
    ("openai", 0.7, ["200"]),
    ("vllm", 0.7, ["200"]),
    ("llama-server", 0.7, ["200"]),
    ("llama-cpp-python", 0.7, ["200"] * 3),  # one choice back: two more asked one by one
    ("ollama", 0.7, ["200"] * 3),
    ("llama-server-legacy", 0.7, ["500"] + ["200"] * 3),  # "Only one completion choice is allowed"
    ("vllm", 0.0, ["400"] + ["200"] * 3),  # "n must be 1 when using greedy sampling"
])
async def test_n_choices_degrade_to_single_requests(profile, temperature, sent):
    async with MockLLM(profile=profile, seed=2) as mock:
        ctx = context(mock.url)
        try:
            model = ctx.chat("simulator")
            result = await model.chat(MSGS, stage="voice", n=3, temperature=temperature, seed=11)
            first = outcomes(mock)
            mock.reset_stats()
            again = await model.chat(MSGS, stage="voice", n=3, temperature=temperature, seed=40)
        finally:
            await ctx.aclose()
        billed = mock.stats()["billed"]
    assert first == sent and len(result.texts) == 3 and len(set(result.texts)) == 3
    assert result.stage.retries == len(sent) - 1  # every request the call sent is counted
    caps = record(ctx)
    honoured = sent == ["200"]
    assert caps.n is honoured and caps.learnt.n == ("response" if len(sent) == 3 or honoured else "refusal")
    # once learnt, the next call goes straight to the form that works, billed request by request
    assert len(again.texts) == 3 and outcomes(mock) == ["200"] * (1 if honoured else 3)
    assert (again.stage.prompt_tokens, again.stage.completion_tokens) == tuple(billed.values())


async def test_a_refused_seed_is_dropped_and_the_request_sent_again():
    async with MockLLM(refuse="seed") as mock:
        ctx = context(mock.url)
        try:
            first = await ctx.chat("simulator").chat(MSGS, stage="voice", seed=3)
            second = await ctx.chat("assistant").chat(MSGS, stage="answer", seed=4)
        finally:
            await ctx.aclose()
    assert outcomes(mock) == ["400", "200", "200"]
    assert (first.stage.retries, second.stage.retries) == (1, 0)
    caps = record(ctx)
    assert (caps.seed, caps.learnt.seed) == (False, "refusal")


async def test_a_server_without_response_format_gets_the_schema_in_the_prompt():
    async with MockLLM(refuse="response_format") as mock:
        ctx = context(mock.url)
        try:
            obj, stage = await ctx.chat("assistant").structured(MSGS, Answer, stage="answer")
        finally:
            await ctx.aclose()
    assert isinstance(obj, Answer) and outcomes(mock) == ["400", "200"] and stage.retries == 1
    caps = record(ctx)
    assert (caps.structured, caps.learnt.structured) == ("text", "refusal")


@pytest.mark.parametrize("profile", ["stub", "llama-cpp-python", "llama-server", "vllm", "openai"])
async def test_a_prompt_too_long_is_a_named_error_never_retried(profile):
    async with MockLLM(profile=profile, context_window=200) as mock:
        ctx = context(mock.url, max_tokens=64)
        try:
            assert ctx.llm_halted() is None
            with pytest.raises(ContextOverflowError) as info:
                await LLMGrader(ctx).grade(QUESTION, "Ibuprofen " * 300)
            halted = ctx.llm_halted()
        finally:
            await ctx.aclose()
    err = info.value
    # once: the same prompt is as long the next time (llama-cpp-python refuses json_schema first)
    assert outcomes(mock) == (["500", "400"] if profile == "llama-cpp-python" else ["400"])
    assert err.role == "simulator" and err.window == 200 and err.prompt_tokens and err.prompt_tokens > 200
    message = str(err)
    assert "simulator" in message and f"{err.prompt_tokens} tokens" in message and "200 tokens" in message
    assert err.stage is not None and err.stage.error and err.stage.retries == len(outcomes(mock)) - 1
    caps = record(ctx)
    assert (caps.context_window, caps.learnt.context_window) == (200, "refusal")
    assert caps.overflows == {"simulator": err.prompt_tokens}
    assert halted and "'simulator'" in halted and "200 tokens" in halted


@pytest.mark.parametrize("profile", ["ollama", "llama-server-legacy"])
async def test_servers_that_cut_a_long_prompt_silently_still_answer(profile):
    # Nothing tells the client: the answer comes back with fewer prompt tokens than were sent.
    async with MockLLM(profile=profile, context_window=200) as mock:
        ctx = context(mock.url, max_tokens=64)
        try:
            grade, [stage] = await LLMGrader(ctx).grade(QUESTION, "Ibuprofen " * 300)
            halted = ctx.llm_halted()
        finally:
            await ctx.aclose()
    assert grade is not None and outcomes(mock) == ["200"] and stage.prompt_tokens <= 200 and halted is None


async def test_json_cut_at_max_tokens_is_never_taken_for_an_answer():
    async with MockLLM(profile="vllm") as mock:
        ctx = context(mock.url)
        try:
            with pytest.raises(StructuredOutputError) as info:
                await ctx.chat("assistant").structured(MSGS, Answer, stage="answer", max_tokens=6)
        finally:
            await ctx.aclose()
    assert outcomes(mock) == ["200", "200"]  # the answer, then its one repair: both cut
    assert "cut off at the token limit (max_tokens 6)" in str(info.value)


def test_requests_are_shaped_to_what_the_server_takes():
    fmt = response_format_for(Answer)
    schema = fmt["json_schema"]["schema"]
    request = {"model": "m", "messages": MSGS, "temperature": 0.0, "max_tokens": 10, "n": 2, "response_format": fmt,
               "seed": 3}
    caps = Negotiated(LLMCapabilities(endpoint="e", model="m"))
    assert caps.shape(request) == request and caps.unsettled == {"structured", "n", "seed"}
    caps.record.structured, caps.record.seed, caps.record.n = "json_object", False, False
    shaped = caps.shape(request)
    assert shaped["response_format"] == {"type": "json_object", "schema": schema}
    assert "seed" not in shaped and "n" not in shaped and shaped["messages"] == MSGS
    caps.record.structured = "text"
    for form in (fmt, {"type": "json_object", "schema": schema}):  # a caller's own json_object form too
        shaped = caps.shape({**request, "response_format": form})
        assert "response_format" not in shaped and MSGS[-1]["content"] == request["messages"][-1]["content"]
        said = shaped["messages"][-1]["content"]
        assert said.startswith(MSGS[-1]["content"]) and json.dumps(schema, separators=(",", ":")) in said
