"""The mock LLM over real HTTP: routes, content, determinism, every fault kind, stats, limits."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Literal

import httpx
import pytest
from pydantic import BaseModel, Field

from simloop.errors import BadInputError
from simloop.fakes.mockllm import FAULT_KINDS, MockLLM, MockOptions
from simloop.llm.structured import response_format_for
from simloop.text import looks_like_language

pytestmark = pytest.mark.timeout(60)

PROMPT = [
    {"role": "system", "content": "Answer from the passages and cite their ids."},
    {"role": "user", "content": "Passages: [clueweb22-en0001-01-00001] Porto has vegetarian restaurants. "
                                "[MARCO_42_123] Lisbon trams. Question: where can a vegetarian eat in Porto?"},
]


class Grounded(BaseModel):
    response: str
    references: list[str]
    grade: int = Field(ge=1, le=5)
    confidence: float = Field(ge=0, le=1)
    tone: str = Field(json_schema_extra={"enum": ["formal", "casual"]})
    ptkb_ids: list[int]
    done: bool


class Item(BaseModel):
    docid: str
    score: float = Field(ge=0, le=1)


class Nested(BaseModel):
    items: list[Item] = Field(min_length=1, max_length=2)
    note: str | None = None
    kind: Literal["a", "b"]


def chat_body(**extra) -> dict:
    return {"model": "m", "messages": PROMPT, **extra}


async def post(client: httpx.AsyncClient, url: str, body: dict, path: str = "/chat/completions") -> httpx.Response:
    return await client.post(url + path, json=body)


async def test_routes_models_stats_and_404():
    async with MockLLM() as mock, httpx.AsyncClient() as client:
        assert mock.url == f"http://127.0.0.1:{mock.port}/v1" and mock.port > 0
        models = (await client.get(mock.url + "/models")).json()
        assert models["data"][0]["id"] == "mock-model"
        root = mock.url.removesuffix("/v1")
        r = await post(client, root, chat_body())  # also without /v1
        assert r.status_code == 200 and r.json()["object"] == "chat.completion"
        assert (await client.get(root + "/nope")).status_code == 404
        stats = (await client.get(root + "/stats")).json()
        assert stats["requests"] == 1 and stats["by_status"] == {"200": 1} and stats["peak_rpm"] == 1
        assert sum(stats["rps"]) == 1 and stats["started"] <= time.time()
        assert (await client.post(root + "/stats/reset")).json() == {"ok": True}
        assert mock.stats()["requests"] == 0
        bad = await client.post(mock.url + "/chat/completions", content=b"{not json")
        assert bad.status_code == 400 and "error" in bad.json()


async def test_keep_alive_serves_many_requests_on_one_connection():
    async with MockLLM() as mock, httpx.AsyncClient() as client:
        for _ in range(5):
            assert (await post(client, mock.url, chat_body())).status_code == 200
        assert len(mock._connections) == 1


async def test_content_is_deterministic_per_seed_and_body():
    async with MockLLM(seed=1) as a, MockLLM(seed=2) as b, httpx.AsyncClient() as client:
        body = chat_body(n=3, max_tokens=64)
        r1, r2, r3 = [await post(client, m.url, body) for m in (a, a, b)]
        texts = [[c["message"]["content"] for c in r.json()["choices"]] for r in (r1, r2, r3)]
        assert texts[0] == texts[1] and texts[0] != texts[2]
        assert len(texts[0]) == 3 and all(t.strip() for t in texts[0])
        usage = r1.json()["usage"]
        assert usage["prompt_tokens"] > 10
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


async def test_a_kept_answer_is_the_composed_one_and_faults_are_never_kept():
    # the mock keeps fault-free answers per body (it answers the same prompts thousands of
    # times in a benchmark): what it sends again must be what a fresh mock composes
    body = chat_body(response_format={"type": "json_object"})
    async with MockLLM(seed=3) as mock, MockLLM(seed=3) as fresh, httpx.AsyncClient() as client:
        first = (await post(client, mock.url, body)).json()
        mock.inject("badjson", "empty")
        bad = (await post(client, mock.url, body)).json()["choices"][0]["message"]["content"]
        with pytest.raises(json.JSONDecodeError):
            json.loads(bad)
        assert (await post(client, mock.url, body)).json()["choices"][0]["message"]["content"] == ""
        again = (await post(client, mock.url, body)).json()
        other = (await post(client, fresh.url, body)).json()
    for r in (again, other):
        assert r["choices"] == first["choices"] and r["usage"] == first["usage"] and r["id"] == first["id"]
    assert len(mock._composed) == 1


async def test_question_prompts_get_a_short_question():
    msgs = [{"role": "system", "content": "You are a simulated user. Write the next question you would ask."},
            {"role": "user", "content": "Topic: vegetarian restaurants in Porto on a budget"}]
    async with MockLLM() as mock, httpx.AsyncClient() as client:
        r = await post(client, mock.url, {"model": "m", "messages": msgs})
    text = r.json()["choices"][0]["message"]["content"]
    assert text.endswith("?") and len(text.split()) < 15


async def test_json_schema_answers_validate_and_cite_prompt_ids():
    async with MockLLM() as mock, httpx.AsyncClient() as client:
        body = chat_body(response_format=response_format_for(Grounded))
        r1, r2 = await post(client, mock.url, body), await post(client, mock.url, body)
        obj = Grounded.model_validate_json(r1.json()["choices"][0]["message"]["content"])
        assert set(obj.references) <= {"clueweb22-en0001-01-00001", "MARCO_42_123"} and obj.references
        assert 1 <= obj.grade <= 5 and obj.tone in ("formal", "casual")
        assert r1.json()["choices"] == r2.json()["choices"]  # the grade is derived from the prompt
        generic = await post(client, mock.url, chat_body(response_format={"type": "json_object"}))
        data = json.loads(generic.json()["choices"][0]["message"]["content"])
        assert set(data) == {"response", "references"} and "MARCO_42_123" in data["references"]


async def test_nested_schemas_with_refs_validate():
    async with MockLLM() as mock, httpx.AsyncClient() as client:
        r = await post(client, mock.url, chat_body(response_format=response_format_for(Nested)))
    obj = Nested.model_validate_json(r.json()["choices"][0]["message"]["content"])
    assert obj.items[0].docid in {"clueweb22-en0001-01-00001", "MARCO_42_123"}


async def test_each_fault_kind_over_http():
    async with MockLLM(retry_after_s=0.25, hang_s=30) as mock, httpx.AsyncClient(timeout=0.5) as client:
        mock.inject(*FAULT_KINDS)
        r = await post(client, mock.url, chat_body())
        assert r.status_code == 429 and r.headers["retry-after"] == "0.25"
        assert (await post(client, mock.url, chat_body())).status_code == 500
        with pytest.raises(httpx.ReadTimeout):
            await post(client, mock.url, chat_body())
        with pytest.raises(httpx.RemoteProtocolError):
            await post(client, mock.url, chat_body())
        bad = await post(client, mock.url, chat_body(response_format={"type": "json_object"}))
        with pytest.raises(json.JSONDecodeError):
            json.loads(bad.json()["choices"][0]["message"]["content"])
        garbage = (await post(client, mock.url, chat_body())).json()["choices"][0]["message"]["content"]
        assert garbage.strip() and not looks_like_language(garbage), garbage
        empty = await post(client, mock.url, chat_body())
        assert empty.status_code == 200 and empty.json()["choices"][0]["message"]["content"] == ""
        stats = mock.stats()
    assert stats["faults"] == {k: 1 for k in FAULT_KINDS}
    assert stats["requests"] == 7 and stats["by_status"] == {"429": 1, "500": 1, "200": 3}


async def test_fault_rate_draws_from_the_chosen_kinds_reproducibly():
    outcomes = []
    for _ in range(2):
        async with MockLLM(seed=7, fault_rate=0.5, faults="500,empty") as mock, httpx.AsyncClient() as client:
            for _ in range(40):
                await post(client, mock.url, chat_body())
            outcomes.append([o for _, o in mock.log])
    assert outcomes[0] == outcomes[1]
    assert set(outcomes[0]) == {"200", "500", "empty"} and 8 < outcomes[0].count("200") < 32


async def test_shutdown_releases_hanging_requests():
    mock = MockLLM(fault_rate=1.0, faults="timeout")
    url = await mock.start()
    async with httpx.AsyncClient(timeout=30) as client:
        pending = asyncio.create_task(post(client, url, chat_body()))
        await asyncio.sleep(0.2)
        await mock.aclose()
        with pytest.raises(httpx.HTTPError) as cut:
            await pending
    assert not isinstance(cut.value, httpx.TimeoutException)  # released by the shutdown, not by the client giving up


async def test_rpm_limit_answers_429_with_retry_after():
    async with MockLLM(rpm_limit=120, rpm_window_s=1.0) as mock, httpx.AsyncClient() as client:
        codes = [(await post(client, mock.url, chat_body())).status_code for _ in range(3)]
        last = await post(client, mock.url, chat_body())
    assert codes == [200, 200, 429] and last.status_code == 429
    assert 0 < float(last.headers["retry-after"]) <= 1.0


def test_options_are_validated():
    with pytest.raises(BadInputError, match="unknown fault 'slow'"):
        MockOptions(faults="429,slow")
    with pytest.raises(BadInputError):
        MockOptions(fault_rate=1.5)
    assert MockOptions(faults="429, cut").faults == ("429", "cut")


def test_cli_prints_its_url_and_serves():
    cmd = [sys.executable, "-m", "simloop", "mock-llm", "--port", "0", "--latency-ms", "1"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
        try:
            line = proc.stdout.readline().strip()
            assert line.startswith("mock-llm listening on http://127.0.0.1:") and line.endswith("/v1")
            url = line.rsplit(" ", 1)[1]
            r = httpx.post(url + "/chat/completions", json=chat_body(), timeout=10)
            assert r.status_code == 200
        finally:
            proc.terminate()
            assert proc.wait(10) == 0  # SIGTERM is a clean shutdown


async def test_malformed_request_head_gets_400_not_a_crash():
    import asyncio

    from simloop.fakes.mockllm import MockLLM

    async with MockLLM() as m:
        reader, writer = await asyncio.open_connection("127.0.0.1", m.port)
        writer.write(b"GARBAGE\r\n\r\n")
        await writer.drain()
        head = await asyncio.wait_for(reader.read(64), 5)
        writer.close()
        assert head.startswith(b"HTTP/1.1 400")
