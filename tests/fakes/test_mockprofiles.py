"""mock-llm's server profiles (fakes/mockprofiles.py, mockservers.py) over HTTP: each answers as
the server it stands for does (status codes and bodies as those servers send them)."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from pydantic import BaseModel

from simloop.errors import BadInputError
from simloop.fakes.mockllm import MockLLM, MockOptions
from simloop.llm.structured import response_format_for
from tests.helpers.cli import free_port, mock_llm, simloop_cli

pytestmark = pytest.mark.timeout(60)

SERVERS = ["stub", "llama-cpp-python", "llama-server", "llama-server-legacy", "vllm", "ollama", "openai"]
ASK = [{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": "Porto restaurants? [doc_A]"}]


class Pick(BaseModel):
    choice: int
    reason: str


def body(**extra) -> dict:
    return {"model": "mock-model", "messages": ASK, "max_tokens": 200, "temperature": 0.7, **extra}


async def post(profile: str, payload: dict, **options) -> httpx.Response:
    async with MockLLM(profile=profile, **options) as mock, httpx.AsyncClient() as client:
        return await client.post(mock.url + "/chat/completions", json=payload)


def content(r: httpx.Response) -> str:
    return r.json()["choices"][0]["message"]["content"]


@pytest.mark.parametrize("profile, window_field", [
    ("stub", None), ("llama-cpp-python", None), ("llama-server", "meta.n_ctx"), ("llama-server-legacy", None),
    ("vllm", "max_model_len"), ("ollama", None), ("openai", None)])
async def test_where_each_server_reports_its_context_window(profile, window_field):
    async with MockLLM(profile=profile, context_window=512) as mock, httpx.AsyncClient() as client:
        listing = (await client.get(mock.url + "/models")).json()
        props = await client.get(mock.url.removesuffix("/v1") + "/props")
    [entry] = listing["data"]
    assert entry["id"] == "mock-model"
    shown = {"meta.n_ctx": (entry.get("meta") or {}).get("n_ctx"), "max_model_len": entry.get("max_model_len")}
    assert {k: v for k, v in shown.items() if v is not None} == ({window_field: 512} if window_field else {})
    if profile.startswith("llama-server"):
        assert props.status_code == 200 and props.json()["default_generation_settings"]["n_ctx"] == 512
    else:
        assert props.status_code == 404


@pytest.mark.parametrize("profile", SERVERS)
async def test_json_schema_and_json_object_with_its_schema(profile):
    strict = await post(profile, body(response_format=response_format_for(Pick)))
    with_schema = await post(profile, body(response_format={"type": "json_object",
                                                            "schema": Pick.model_json_schema()}))
    if profile == "llama-cpp-python":  # observed on 0.3.36: a pydantic literal_error, as a 500
        error = strict.json()["error"]
        assert strict.status_code == 500 and error["type"] == "internal_server_error"
        assert "Input should be 'text' or 'json_object'" in error["message"] and "'input': 'json_schema'" in \
            error["message"]
    else:
        assert strict.status_code == 200 and Pick.model_validate_json(content(strict))
    if profile == "openai":
        assert with_schema.status_code == 400
    elif profile in ("vllm", "ollama"):  # json_object: any JSON, the schema ignored
        assert with_schema.status_code == 200 and set(json.loads(content(with_schema))) == {"response", "references"}
    else:  # a grammar from the schema
        assert with_schema.status_code == 200 and Pick.model_validate_json(content(with_schema))


@pytest.mark.parametrize("profile, n, status, choices, said", [
    ("stub", 2, 200, 2, None), ("openai", 2, 200, 2, None), ("vllm", 2, 200, 2, None),
    ("llama-server", 2, 200, 2, None), ("llama-cpp-python", 2, 200, 1, None), ("ollama", 2, 200, 1, None),
    ("llama-server", 5, 400, 0, "Field 'n': Value must be between 1 <= value <= 4, but got 5"),
    ("llama-server-legacy", 2, 500, 0, "Only one completion choice is allowed"),
])
async def test_n_honoured_ignored_or_refused(profile, n, status, choices, said):
    r = await post(profile, body(n=n))
    assert r.status_code == status
    if said:
        error = r.json()["error"]
        assert error["message"] == said and error["code"] == status  # llama.cpp: code is the HTTP status
        assert error["type"] == ("server_error" if status == 500 else "invalid_request_error")
    else:
        assert len(r.json()["choices"]) == choices


async def test_vllm_refuses_several_greedy_choices():
    r = await post("vllm", body(n=2, temperature=0.0))
    assert r.status_code == 400 and r.json()["error"] == {
        "message": "n must be 1 when using greedy sampling, got 2.", "type": "BadRequestError", "param": None,
        "code": 400}


LONG = [{"role": "user", "content": "ibuprofen " * 100}]  # 133 tokens: 100 words x 1.3, and 3 for the message


@pytest.mark.parametrize("profile, max_tokens, status, expect", [
    ("llama-cpp-python", 10, 400, {"message": "This model's maximum context length is 64 tokens. However, you "
                                   "requested 143 tokens (133 in the messages, 10 in the completion). Please reduce "
                                   "the length of the messages or completion.", "type": "invalid_request_error",
                                   "param": "messages", "code": "context_length_exceeded"}),
    ("llama-cpp-python", None, 400, {"message": "This model's maximum context length is 64 tokens. However, you "
                                     "requested 133 tokens (133 in the messages, None in the completion). Please "
                                     "reduce the length of the messages or completion.",
                                     "type": "invalid_request_error", "param": "messages",
                                     "code": "context_length_exceeded"}),
    ("llama-server", 10, 400, {"code": 400, "message": "request (133 tokens) exceeds the available context size "
                               "(64 tokens), try increasing it", "type": "exceed_context_size_error",
                               "n_prompt_tokens": 133, "n_ctx": 64}),
    ("vllm", 10, 400, {"message": "This model's maximum context length is 64 tokens. However, your prompt contains 133 "
                       "input tokens, which exceeds this limit even without any output tokens. Please reduce the "
                       "length of the input prompt. (parameter=input_tokens, value=133)", "type": "BadRequestError",
                       "param": "input_tokens", "code": 400}),
    ("openai", 10, 400, {"message": "This model's maximum context length is 64 tokens. However, your messages "
                         "resulted in 133 tokens. Please reduce the length of the messages.",
                         "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}),
    ("ollama", 10, 200, None),
    ("llama-server-legacy", 10, 200, None),
])
async def test_a_prompt_longer_than_the_window(profile, max_tokens, status, expect):
    payload = {"model": "mock-model", "messages": LONG, **({"max_tokens": max_tokens} if max_tokens else {})}
    r = await post(profile, payload, context_window=64)
    assert r.status_code == status
    if expect is not None:
        assert r.json()["error"] == expect
    else:  # cut silently: fewer prompt tokens than were sent
        assert r.json()["usage"]["prompt_tokens"] <= 64


@pytest.mark.parametrize("profile, status, message", [
    ("vllm", 404, "The model `other` does not exist. Valid aliases: mock-model."),
    ("ollama", 404, "model 'other' not found"),
    ("openai", 404, "The model `other` does not exist or you do not have access to it."),
    ("llama-cpp-python", 200, None), ("llama-server", 200, None), ("stub", 200, None)])
async def test_an_unknown_model_name(profile, status, message):
    r = await post(profile, body(model="other"))
    assert r.status_code == status
    if message:
        assert r.json()["error"]["message"] == message
    else:  # served all the same: llama-server answers with its own name, llama-cpp-python echoes it
        assert r.json()["model"] == ("mock-model" if profile == "llama-server" else "other")


async def test_each_server_dresses_its_answer_its_own_way():
    cpp, server, ollama, vllm = [(await post(p, body())).json() for p in ("llama-cpp-python", "llama-server",
                                                                          "ollama", "vllm")]
    assert re.fullmatch(r"chatcmpl-[0-9a-f-]{36}", cpp["id"]) and "system_fingerprint" not in cpp
    assert set(cpp["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert server["system_fingerprint"] == "b1-0c1e570" and "timings" in server
    assert server["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    assert ollama["system_fingerprint"] == "fp_ollama" and re.fullmatch(r"chatcmpl-\d+", ollama["id"])
    assert vllm["system_fingerprint"] is None and vllm["choices"][0]["stop_reason"] is None
    unknown = await post("openai", body(top_k=3))
    assert unknown.status_code == 400 and unknown.json()["error"]["message"] == \
        "Unrecognized request argument supplied: top_k"


async def test_an_answer_longer_than_max_tokens_is_cut():
    r = await post("llama-cpp-python", body(max_tokens=3, response_format={"type": "json_object",
                                                                           "schema": Pick.model_json_schema()}))
    assert r.json()["choices"][0]["finish_reason"] == "length"
    with pytest.raises(ValueError):
        json.loads(content(r))


async def test_the_stub_refuses_what_it_is_told_to_and_can_write_prose_only():
    refused = await post("stub", body(seed=1), refuse="seed")
    assert refused.status_code == 400 and refused.json()["error"]["message"] == \
        "Unrecognized request argument supplied: seed"
    prose = await post("stub", body(response_format=response_format_for(Pick)), no_json=True)
    with pytest.raises(ValueError):
        json.loads(content(prose))
    schema = json.dumps(Pick.model_json_schema())
    asked = [{"role": "user", "content": f"Pick one. Reply with JSON following this schema: {schema}"}]
    follows = await post("stub", {"model": "m", "messages": asked})  # a schema in the prompt is followed
    assert Pick.model_validate_json(content(follows))


def test_profile_options_are_validated():
    with pytest.raises(BadInputError, match="unknown profile 'lmstudio'"):
        MockOptions(profile="lmstudio")
    with pytest.raises(BadInputError, match="stub only|shape the stub"):
        MockOptions(profile="vllm", refuse="seed")
    with pytest.raises(BadInputError, match="--context-window"):
        MockOptions(context_window=3)


def test_the_command_serves_a_profile_and_documents_them():
    with mock_llm(free_port(), "--profile", "llama-server", "--context-window", "777") as url:
        props = httpx.get(url.removesuffix("/v1") + "/props").json()
    assert props["default_generation_settings"]["n_ctx"] == 777
    text = simloop_cli("mock-llm", "--help", timeout=60).stdout
    for name in SERVERS:
        assert name in text
    assert "Input should be 'text' or 'json_object'" in text and "exceed_context_size_error" in text
