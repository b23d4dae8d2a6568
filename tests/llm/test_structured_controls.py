"""Structured output read from JSON with raw control characters in its strings (llm/structured.py):
llama.cpp's JSON grammar lets a model write a newline inside a string, which strict JSON forbids."""

from __future__ import annotations

from pydantic import BaseModel

from simloop.llm.structured import validate_json


class Answer(BaseModel):
    text: str
    score: int


def test_a_raw_newline_inside_a_string_is_read():
    obj, problem = validate_json(Answer, '{"text": "first line\nsecond line", "score": 3}')
    assert problem == "" and obj is not None and obj.text == "first line\nsecond line"


def test_prose_around_it_still_works_and_bad_values_still_fail():
    obj, _ = validate_json(Answer, 'Here:\n{"text": "a\tb", "score": 1}\nDone.')
    assert obj is not None and obj.text == "a\tb"
    obj, problem = validate_json(Answer, '{"text": "a\nb", "score": "many"}')
    assert obj is None and "score" in problem
