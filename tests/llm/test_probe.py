"""The preflight probe (llm/probe.py, through check_endpoints) against each mock-llm server
profile: what it learns, with how many requests, and what it refuses as bad input."""

from __future__ import annotations

import asyncio

import pytest

from simloop.errors import ConfigError
from simloop.fakes.mockllm import MockLLM
from simloop.llm import LLMConfig, check_endpoints
from simloop.llm.probe import window_of

pytestmark = pytest.mark.timeout(60)


def config(url: str, **role) -> LLMConfig:
    return LLMConfig.model_validate({"default": {"base_url": url, "model": "mock-model", "max_tokens": 256, **role}})


async def preflight(mock: MockLLM, roles=("simulator", "assistant"), **kw):
    return await asyncio.to_thread(check_endpoints, config(mock.url), list(roles), **kw)


@pytest.mark.parametrize("options, structured, window, sent", [
    ({"profile": "stub"}, "json_schema", None, ["200"]),
    ({"profile": "llama-cpp-python"}, "json_object", None, ["500", "200"]),
    ({"profile": "llama-server"}, "json_schema", 4096, ["200"]),  # from /v1/models meta.n_ctx
    ({"profile": "llama-server-legacy"}, "json_schema", 4096, ["200"]),  # from /props
    ({"profile": "vllm"}, "json_schema", 8192, ["200"]),  # from max_model_len
    ({"profile": "ollama"}, "json_schema", None, ["200"]),
    ({"profile": "openai"}, "json_schema", None, ["200"]),
    ({"refuse": "response_format"}, "text", None, ["400", "200"]),  # no json_object tried: it knows none
    ({"refuse": "seed"}, "json_schema", None, ["400", "200"]),
])
async def test_the_probe_learns_each_server_once_for_every_role(options, structured, window, sent):
    async with MockLLM(**options) as mock:
        [caps] = await preflight(mock)  # two roles, one endpoint and model: one probe
        seen = [o for _, o in mock.log]
    assert seen == sent and caps.probe_requests == len(sent)
    assert (caps.structured, caps.learnt.structured) == (structured, "probe")
    assert (caps.context_window, caps.learnt.context_window) == (window, "probe" if window else "assumed")
    assert caps.seed is (options != {"refuse": "seed"}) and caps.learnt.seed == "probe"
    assert caps.usage and caps.learnt.usage == "probe" and caps.learnt.n == "assumed"


@pytest.mark.parametrize("profile", ["vllm", "ollama", "openai"])
async def test_an_unknown_model_is_bad_input_naming_what_the_server_offers(profile):
    async with MockLLM(profile=profile, model="served-model") as mock:
        with pytest.raises(ConfigError) as info:
            await preflight(mock)
    message = str(info.value)
    assert "no model 'mock-model'" in message and "it offers: served-model" in message and "--model" in message


async def test_servers_that_ignore_the_model_name_are_used_as_they_are():
    async with MockLLM(profile="llama-server", model="served-model") as mock:
        [caps] = await preflight(mock)
    assert caps.answers_as == "served-model" and caps.context_window == 4096  # the one model listed


async def test_a_server_that_cannot_produce_json_is_bad_input():
    async with MockLLM(refuse="response_format", no_json=True) as mock:
        with pytest.raises(ConfigError) as info:
            await preflight(mock)
        seen = [o for _, o in mock.log]
    message = str(info.value)
    assert "cannot produce JSON" in message and "'simulator', 'assistant'" in message
    assert "Unrecognized request argument supplied: response_format" in message and "not a JSON object" in message
    assert seen == ["400", "200", "200"]  # json_schema refused; plain text asked, then repaired once


async def test_broken_json_is_a_bad_sample_not_a_server_without_json(caplog):
    async with MockLLM(fault_rate=1.0, faults="badjson") as mock:  # every answer a JSON object cut short
        [caps] = await preflight(mock)
        seen = [o for _, o in mock.log]
    assert (caps.structured, caps.learnt.structured) == ("json_schema", "probe")  # the first form taken
    assert seen == ["badjson"] * 4 and "no valid JSON object in the probe's answers" in caplog.text


@pytest.mark.parametrize("profile", ["llama-server", "vllm"])
async def test_a_window_too_small_for_max_tokens_is_bad_input(profile):
    async with MockLLM(profile=profile, context_window=200) as mock:
        with pytest.raises(ConfigError) as info:
            await preflight(mock)  # max_tokens 256
    assert "max_tokens 256 leaves no room" in str(info.value) and "window of 200 tokens" in str(info.value)


async def test_a_role_may_declare_the_smallest_prompt_it_sends():
    async with MockLLM(profile="vllm", context_window=600) as mock:
        await preflight(mock, min_prompt={"simulator": 300})  # 256 + 300 fit in 600
        with pytest.raises(ConfigError, match=r"'simulator'.*max_tokens 256 \+ its smallest prompt, 400 tokens"):
            await preflight(mock, min_prompt={"simulator": 400})


async def test_a_transient_failure_leaves_the_rest_to_the_run():
    async with MockLLM() as mock:
        mock.inject("500")  # a server error, not a refusal
        [caps] = await preflight(mock)
    assert caps.learnt.structured == "assumed" and caps.probe_requests == 1


def test_window_of_reads_the_fields_servers_report():
    assert window_of({"data": [{"id": "a", "max_model_len": 8192}]}, "a") == 8192
    assert window_of({"data": [{"id": "a", "meta": {"n_ctx": 512, "n_ctx_train": 8192}}]}, "other") == 512
    assert window_of({"data": [{"id": "a", "aliases": ["b"], "meta": {"n_ctx": 512}}, {"id": "c"}]}, "b") == 512
    assert window_of({"data": [{"id": "a", "max_model_len": 1}, {"id": "c", "max_model_len": 2}]}, "x") is None
    assert window_of({"data": [{"id": "a", "owned_by": "me"}]}, "a") is None and window_of("<html>", "a") is None
