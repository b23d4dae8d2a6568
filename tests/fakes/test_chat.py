"""The scripted ChatModel (simloop/fakes/chat.py): what tests script and read back, and what
the benchmarks set (a canned answer, fixed usage, a CPU meter, nothing recorded)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from simloop.errors import LLMTimeoutError
from simloop.fakes import CpuMeter, ScriptedChat
from simloop.text import count_tokens

MSGS = [{"role": "user", "content": "How do I tune a cello?"}]


class Grade(BaseModel):
    grade: int


async def test_replies_in_order_with_counted_usage_and_every_request_recorded():
    chat = ScriptedChat(["Tune it in fifths.", '{"grade": 4}'])
    first = await chat.chat(MSGS, stage="generate", max_tokens=50)
    assert first.text == "Tune it in fifths." and first.texts == [first.text]
    assert first.stage.name == "generate" and first.stage.model == "scripted" and first.stage.role is None
    assert (first.stage.prompt_tokens, first.stage.completion_tokens) == (count_tokens(MSGS[0]["content"]),
                                                                          count_tokens(first.text))
    obj, stage = await chat.structured(MSGS, Grade, stage="grade")
    assert obj == Grade(grade=4) and stage.name == "grade"
    assert [c["stage"] for c in chat.calls] == ["generate", "grade"]
    assert chat.calls[0]["max_tokens"] == 50 and chat.calls[1]["schema"] == "Grade"
    assert chat.prompt(0) == "How do I tune a cello?"
    with pytest.raises(AssertionError, match="ran out of replies"):
        await chat.chat(MSGS, stage="generate")


async def test_a_scripted_error_is_raised_with_its_stage_and_a_function_answers_from_the_messages():
    chat = ScriptedChat([LLMTimeoutError("slow")])
    with pytest.raises(LLMTimeoutError) as err:
        await chat.chat(MSGS, stage="rewrite")
    assert err.value.stage.name == "rewrite" and err.value.stage.error == "LLMTimeoutError: slow"
    echo = ScriptedChat(lambda messages: messages[-1]["content"].upper())
    assert (await echo.chat(MSGS, stage="s")).text == "HOW DO I TUNE A CELLO?"


async def test_the_benchmarks_canned_answer_fixed_usage_meter_and_no_record():
    meter = CpuMeter()
    chat = ScriptedChat(role="assistant", usage=(120, 20), meter=meter, record=False, latency_s=0.001)
    texts = [(await chat.chat(MSGS, stage="generate")).text for _ in range(3)]
    assert [t.split(":")[0] for t in texts] == [f"Scripted assistant reply number {n}" for n in (1, 2, 3)]
    result = await chat.chat(MSGS, stage="generate")
    assert (result.stage.prompt_tokens, result.stage.completion_tokens, result.stage.role) == (120, 20, "assistant")
    assert result.stage.latency_ms == 1.0  # the latency it waited
    assert meter.calls == 4 and meter.seconds > 0 and chat.calls == []
