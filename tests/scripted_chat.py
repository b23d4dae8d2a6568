"""A scripted ChatModel for unit tests of LLM parts: the ChatModel seam, not its internals.

It answers from a list (or a function of the messages), records every request, and
returns real ``ChatResult``/``Stage`` objects, so parts are tested exactly as they run.
Errors in the script (an ``LLMError`` instance) are raised with a ``.stage`` like the
real model does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from simloop.llm.client import ChatResult
from simloop.schema import Stage
from simloop.text import count_tokens

Reply = str | Exception


class ScriptedChat:
    def __init__(self, replies: Sequence[Reply] | Callable[[list[dict[str, Any]]], Reply], model: str = "scripted"):
        self.replies = replies if callable(replies) else list(replies)
        self.model = model
        self.calls: list[dict[str, Any]] = []

    def _next(self, messages: list[dict[str, Any]]) -> Reply:
        if callable(self.replies):
            return self.replies(messages)
        if not self.replies:
            raise AssertionError("the scripted model ran out of replies")
        return self.replies.pop(0)

    def _answer(self, messages: Sequence[dict[str, Any]], stage: str, **kw: Any) -> tuple[str, Stage]:
        messages = [dict(m) for m in messages]
        self.calls.append({"messages": messages, "stage": stage, **kw})
        reply = self._next(messages)
        prompt = count_tokens(" ".join(str(m["content"]) for m in messages))
        if isinstance(reply, Exception):
            reply.stage = Stage(name=stage, model=self.model, error=f"{type(reply).__name__}: {reply}")  # type: ignore[attr-defined]
            raise reply
        return reply, Stage(name=stage, model=self.model, prompt_tokens=prompt, completion_tokens=count_tokens(reply))

    async def chat(self, messages: Sequence[dict[str, Any]], *, stage: str, **kw: Any) -> ChatResult:
        text, st = self._answer(messages, stage, **kw)
        return ChatResult(text, [text], st)

    async def structured(self, messages: Sequence[dict[str, Any]], schema: type, *, stage: str, **kw: Any):
        text, st = self._answer(messages, stage, schema=schema.__name__, **kw)
        return schema.model_validate_json(text), st

    def prompt(self, i: int = -1) -> str:
        """All message contents of call ``i``, joined."""
        return "\n".join(str(m["content"]) for m in self.calls[i]["messages"])
