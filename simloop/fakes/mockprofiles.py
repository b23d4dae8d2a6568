"""``mock-llm --profile``: the HTTP contracts of real OpenAI-compatible servers, reproduced.

This module holds what every profile shares and the ``stub``; the servers are in
``mockservers.py``.

Each profile answers as that server does (from its source, and where the server could be
run, from its observed answers) for what a client meets in practice: which
``response_format`` forms it takes and how it refuses the others (status and body), ``n``
(honoured, ignored or refused), ``seed``, its usage block,
where it reports the context window (``GET /v1/models`` fields, ``GET /props``), what an
over-long prompt gets (a refusal's exact wording, or silent truncation), an unknown model
name (ignored or 404), and its error envelope.  Refusal bodies are verbatim where they
were observed (llama-cpp-python 0.3.36; llama.cpp's llama-server at commits 0c1e57098 and,
for ``llama-server-legacy``, 4227c9be) and follow the source or public reports elsewhere
(vLLM 0.33, Ollama's ``openai/openai.go``, OpenAI's published errors).  What is unverified
says so where it is reproduced.

``stub`` is the mock's own behaviour (any ``response_format``, ``n`` honoured, no window)
plus two switches for tests: ``refuse`` (parameters it answers with OpenAI's "Unrecognized
request argument supplied", e.g. a server with no ``response_format`` at all) and
``no_json`` (a model that writes prose whatever it is asked: a server that cannot produce
JSON).  Every profile's model follows a JSON schema written into the prompt, as a capable
model asked in plain text would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..text import count_tokens

__all__ = ["Plan", "Refused", "Profile", "prompt_tokens", "openai_error", "llamacpp_error", "format_of",
           "inner_schema", "positive_int", "first_choice_usage", "timings"]


@dataclass(frozen=True)
class Refused:
    status: int
    payload: dict[str, Any]


@dataclass
class Plan:
    """How an admitted request is answered: ``n`` choices; JSON following ``schema`` (any
    JSON object when None) if ``json``, else prose; cut at ``max_tokens`` (finish_reason
    "length"); ``prompt_tokens`` reported; ``messages`` as the model saw them (truncation)."""

    n: int
    json: bool
    schema: dict[str, Any] | None
    max_tokens: int | None
    prompt_tokens: int
    messages: list[Any]


def prompt_tokens(messages: list[Any]) -> int:
    """The prompt's tokens as the mock counts them (text estimate + 3 per message)."""
    text = "\n".join(str(m.get("content") or "") for m in messages if isinstance(m, dict))
    return count_tokens(text) + 3 * len(messages)


def openai_error(message: str, kind: str = "invalid_request_error", param: str | None = None,
         code: str | int | None = None, **extra: Any) -> dict[str, Any]:
    """OpenAI's error envelope (vLLM, Ollama and llama-cpp-python use it too)."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code, **extra}}


def llamacpp_error(status: int, message: str, kind: str, **extra: Any) -> dict[str, Any]:
    """llama.cpp's envelope: ``code`` is the HTTP status, no ``param``."""
    return {"error": {"code": status, "message": message, "type": kind, **extra}}


def format_of(body: dict[str, Any]) -> dict[str, Any]:
    """The request's ``response_format`` ({} when absent or not an object)."""
    fmt = body.get("response_format")
    return fmt if isinstance(fmt, dict) else {}


def inner_schema(fmt: dict[str, Any]) -> dict[str, Any] | None:
    """``json_schema.schema`` of a response format, or None."""
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    return schema if isinstance(schema, dict) else None


def positive_int(value: Any) -> int | None:
    """``value`` when it is a positive int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class Profile:
    """The ``stub``: the mock's own contract (OpenAI's, lenient).  Subclasses are servers."""

    name = "stub"
    default_window: int | None = None
    object_schema = True  # ``json_object`` + ``schema`` constrains the answer
    cuts = False  # an answer longer than max_tokens is cut (finish_reason "length")
    refuses_at_window = False  # a prompt of exactly the window's size is refused too (llama.cpp)

    def __init__(self, model: str, window: int | None = None, refuse: tuple[str, ...] = (), no_json: bool = False):
        self.model = model
        self.window = window if window is not None else self.default_window
        self.refuse = refuse
        self.no_json = no_json

    @property
    def plain(self) -> bool:
        """Nothing to check: the stub as it always was (its hot path in benchmarks)."""
        return type(self) is Profile and self.window is None and not self.refuse and not self.no_json

    # -- GET routes ---------------------------------------------------------------------------

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.model, "object": "model", "created": 0,
                                            "owned_by": "simloop-mock"}]}

    def props(self) -> dict[str, Any] | None:
        return None

    # -- a chat request -----------------------------------------------------------------------

    def admit(self, body: dict[str, Any]) -> Plan | Refused:
        refused = self.check(body)
        if refused is not None:
            return refused
        messages = body["messages"]
        tokens = prompt_tokens(messages)
        asked = self.max_tokens(body)
        if self.window is not None and (tokens >= self.window if self.refuses_at_window else tokens > self.window):
            over = self.overflow(body, tokens, asked)
            if isinstance(over, Refused):
                return over
            messages, tokens = over
        room = None if self.window is None else max(1, self.window - tokens)
        limit = asked if room is None else min(asked or room, room)
        json_wanted, schema = self.format(body, messages)
        return Plan(self.choices(body), json_wanted and not self.no_json, schema,
                    limit if self.cuts else None, tokens, messages)

    def check(self, body: dict[str, Any]) -> Refused | None:
        for name in self.refuse:
            if name in body:
                return Refused(400, openai_error(f"Unrecognized request argument supplied: {name}"))
        return None

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return positive_int(body.get("max_completion_tokens")) or positive_int(body.get("max_tokens"))

    def overflow(self, body: dict[str, Any], tokens: int, asked: int | None) -> Refused | tuple[list[Any], int]:
        return Refused(400, openai_error(f"This model's maximum context length is {self.window} tokens. However, your "
                                 f"messages resulted in {tokens} tokens. Please reduce the length of the messages.",
                                 param="messages", code="context_length_exceeded"))

    def choices(self, body: dict[str, Any]) -> int:
        return max(1, min(int(body.get("n") or 1), 16))

    def format(self, body: dict[str, Any], messages: list[Any]) -> tuple[bool, dict[str, Any] | None]:
        """(answer in JSON?, the schema it follows or None)."""
        fmt = format_of(body)
        kind = fmt.get("type")
        if kind == "json_schema":
            return True, inner_schema(fmt)
        if kind == "json_object":
            schema = fmt.get("schema")
            return True, schema if self.object_schema and isinstance(schema, dict) else None
        return False, None

    def decorate(self, out: dict[str, Any], body: dict[str, Any]) -> None:
        """The server's own touches on a 200 body (model name, fingerprint, usage extras)."""
        out["model"] = body.get("model") or self.model


def first_choice_usage(out: dict[str, Any]) -> dict[str, int]:
    """The usage of an answer's first choice only (what llama-server reports for n > 1)."""
    usage = out["usage"]
    first = math.ceil(usage["completion_tokens"] / max(1, len(out["choices"])))
    return {"completion_tokens": first, "prompt_tokens": usage["prompt_tokens"],
            "total_tokens": usage["prompt_tokens"] + first}


def timings(usage: dict[str, int]) -> dict[str, Any]:
    """llama-server's ``timings`` block."""
    return {"cache_n": 0, "prompt_n": usage["prompt_tokens"], "prompt_ms": 1.0,
            "predicted_n": usage["completion_tokens"], "predicted_ms": 1.0}
