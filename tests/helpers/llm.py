"""The request and the reply model the LLM client's tests send and parse."""

from __future__ import annotations

from pydantic import BaseModel, Field

MSGS = [{"role": "user", "content": "Which vegetarian restaurants in Porto? Passages: [doc_A] [doc_B]"}]


class Answer(BaseModel):
    response: str
    references: list[str]
    grade: int = Field(ge=0, le=5)
